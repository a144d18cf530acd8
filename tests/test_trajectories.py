"""Batch trajectory compression (HERMES_SPEC §8): the greedy plan, its guarantees
(target or still_over_limit, tool calls kept with their responses, untouched records
under target) and the batch runner (order, metrics, retries, timeouts, resume)."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxledger.compressor.summarizers.base import SummaryRequest, SummaryResult
from ctxledger.compressor.summarizers.offline import OfflineSummarizer
from ctxledger.errors import ImportFormatError, InvalidConfig, InvalidInput, SummarizerError
from ctxledger.importers.sharegpt import has_tool_call
from ctxledger.messages import content_text
from ctxledger.tokens import count_text
from ctxledger.trajectories import (
    TrajectoryConfig,
    backoff_delay,
    clip_to_tokens,
    compress_file,
    compress_trajectory,
    metrics_path_for,
    plan_trajectory,
    protected_bounds,
    report_path_for,
)

WORDS = [
    "alpha",
    "beta",
    "gamma",
    "delta",
    "build",
    "test",
    "passed",
    "failed",
    "error",
    "path",
    "file",
    "src",
    "main",
    "run",
]


class EchoSummarizer:
    """Deterministic test summarizer: the first words of every turn (may exceed the budget)."""

    kind = "echo"

    def __init__(self) -> None:
        self.calls = 0
        self.active = 0
        self.max_active = 0

    async def summarize(self, request: SummaryRequest) -> SummaryResult:
        self.calls += 1
        self.active += 1
        self.max_active = max(self.max_active, self.active)
        await anyio.sleep(0)
        self.active -= 1
        text = "\n".join(f"{m['role']}: {content_text(m)[:60]}" for m in request.turns)
        return SummaryResult(text=text or "nothing happened", summarizer=self.kind)


def text(n_words: int, seed: int) -> str:
    rng = random.Random(seed)
    return " ".join(rng.choices(WORDS, k=n_words))


def gpt_call(i: int, n_words: int = 5) -> dict[str, str]:
    payload = json.dumps({"name": "terminal", "arguments": {"command": f"run {i}"}})
    return {"from": "gpt", "value": f"{text(n_words, i)}\n<tool_call>\n{payload}\n</tool_call>"}


def tool(i: int, n_words: int) -> dict[str, str]:
    return {
        "from": "tool",
        "value": f"<tool_response>\n{json.dumps({'name': 'terminal', 'content': text(n_words, 1000 + i)})}\n</tool_response>",
    }


def trajectory(pairs: int, words: int = 200, rid: Any = "t") -> dict[str, Any]:
    turns = [
        {"from": "system", "value": "You are an agent."},
        {"from": "human", "value": "Fix it."},
    ]
    for i in range(pairs):
        turns += [gpt_call(i), tool(i, words)]
    turns.append({"from": "gpt", "value": "Done."})
    return {"id": rid, "source": "unit", "conversations": turns}


def tokens_of(turns: list[dict[str, Any]]) -> list[int]:
    return [count_text(t["value"]) for t in turns]


def run(coro_fn: Any, *args: Any, **kwargs: Any) -> Any:
    async def main() -> Any:
        return await coro_fn(*args, **kwargs)

    return anyio.run(main)


def tool_pairs_intact(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> bool:
    """Every tool turn follows its caller (or another response); no caller lost its responses."""
    for i, turn in enumerate(after):
        if turn["from"] == "tool":
            j = i - 1
            while j >= 0 and after[j]["from"] == "tool":
                j -= 1
            if j < 0 or after[j]["from"] != "gpt" or not has_tool_call(after[j]["value"]):
                return False
    answered = {
        t["value"]
        for i, t in enumerate(before[:-1])
        if t["from"] == "gpt" and before[i + 1]["from"] == "tool"
    }
    return all(
        after[i + 1]["from"] == "tool" for i, t in enumerate(after[:-1]) if t["value"] in answered
    ) and not (after and after[-1]["value"] in answered)


# --------------------------------------------------------------------------- examples


def test_under_target_record_is_left_unchanged() -> None:
    rec = trajectory(2, 20)
    out, m = run(compress_trajectory, rec, TrajectoryConfig(), EchoSummarizer())
    assert out == rec and m.skipped_under_target and not m.was_compressed
    assert m.compression_ratio == 1.0 and m.compressed_tokens == m.original_tokens == sum(
        tokens_of(rec["conversations"])
    )


def test_compresses_only_as_much_of_the_middle_as_needed() -> None:
    rec = trajectory(20, 200)
    turns = rec["conversations"]
    total = sum(tokens_of(turns))
    config = TrajectoryConfig(
        target_max_tokens=total - 1500, summary_target_tokens=300, add_notice=False
    )
    out, m = run(compress_trajectory, rec, config, EchoSummarizer())
    start, end = m.turns_compressed_start, m.turns_compressed_end
    assert start == 4  # system, human, first gpt and first tool are protected
    need = total - config.target_max_tokens + config.summary_target_tokens
    counts = tokens_of(turns)
    assert (
        sum(counts[start:end]) >= need > sum(counts[start : end - 2])
    )  # the last taken pair was needed
    assert out["conversations"][:4] == turns[:4]
    assert out["conversations"][4]["from"] == "human" and out["conversations"][4][
        "value"
    ].startswith("[CONTEXT SUMMARY]:")
    assert out["conversations"][5:] == turns[end:]
    assert out["id"] == "t" and out["source"] == "unit"
    assert m.compressed_tokens == sum(tokens_of(out["conversations"])) <= config.target_max_tokens
    assert not m.still_over_limit and m.summary_tokens <= config.summary_target_tokens


def test_last_turns_are_protected_and_whole_middle_is_taken_when_needed() -> None:
    rec = trajectory(10, 300)
    config = TrajectoryConfig(
        target_max_tokens=400, summary_target_tokens=100, protect_last_n_turns=4, add_notice=False
    )
    out, m = run(compress_trajectory, rec, config, EchoSummarizer())
    turns = rec["conversations"]
    assert out["conversations"][-4:] == turns[-4:]
    head_end, tail_start = protected_bounds(turns, 4)
    assert (m.turns_compressed_start, m.turns_compressed_end) == (head_end, tail_start)
    assert m.still_over_limit and m.compressed_tokens > config.target_max_tokens
    assert m.compressed_tokens < m.original_tokens


def test_notice_is_added_to_the_system_turn_and_counted() -> None:
    rec = trajectory(12, 200)
    config = TrajectoryConfig(target_max_tokens=2500, summary_target_tokens=200)
    out, m = run(compress_trajectory, rec, config, EchoSummarizer())
    system = out["conversations"][0]["value"]
    assert system == "You are an agent." + config.notice_text
    assert m.compressed_tokens == sum(tokens_of(out["conversations"]))
    assert rec["conversations"][0]["value"] == "You are an agent."  # the input is not mutated


def test_a_tail_starting_with_a_tool_response_keeps_its_call() -> None:
    turns = trajectory(8, 150)["conversations"][:-1]  # ends with a tool response
    head_end, tail_start = protected_bounds(turns, 3)
    assert turns[tail_start]["from"] == "gpt" and tail_start == len(turns) - 4
    assert head_end == 4


def test_a_late_first_tool_turn_is_protected_with_the_tail() -> None:
    chat = [
        {"from": f, "value": text(20, i)}
        for i, f in enumerate(
            ["system", "human", "gpt", "human", "gpt", "human", "gpt", "human", "gpt"]
        )
    ]
    turns = [*chat, gpt_call(9), tool(9, 20), {"from": "gpt", "value": "done"}]
    assert protected_bounds(turns, 1) == (3, 9)  # the first tool turn (10) is in the second half


def test_a_summary_that_saves_nothing_leaves_the_record_unchanged() -> None:
    values = [
        ("system", "s"),
        ("human", "h"),
        ("gpt", "g"),
        ("human", "ok"),
        ("gpt", "yes"),
        ("human", "go"),
    ]
    rec = {
        "conversations": [{"from": f, "value": v} for f, v in values]
        + [{"from": "gpt", "value": text(400, 1)}]
    }
    config = TrajectoryConfig(
        target_max_tokens=100, summary_target_tokens=50, protect_last_n_turns=1, add_notice=False
    )

    class Wordy(EchoSummarizer):
        async def summarize(self, request: SummaryRequest) -> SummaryResult:
            return SummaryResult(text=text(300, 2), summarizer="wordy")

    out, m = run(compress_trajectory, rec, config, Wordy())
    assert out == rec and m.skip_reason == "no_gain" and m.still_over_limit


def test_long_summaries_are_clipped_to_the_summary_target() -> None:
    long = "\n".join(text(30, i) for i in range(40))
    clipped = clip_to_tokens(long, 100)
    assert count_text(clipped) <= 100 and long.startswith(clipped)
    assert clip_to_tokens("short", 100) == "short" and clip_to_tokens("x", 0) == ""


def test_offline_summarizer_compresses_a_trajectory() -> None:
    rec = trajectory(30, 250)
    config = TrajectoryConfig(target_max_tokens=4000, summary_target_tokens=400)
    out, m = run(compress_trajectory, rec, config, OfflineSummarizer())
    assert m.was_compressed and not m.still_over_limit
    assert m.compressed_tokens == sum(tokens_of(out["conversations"])) <= 4000
    assert tool_pairs_intact(rec["conversations"], out["conversations"])
    assert "## Completed Actions" in next(
        t["value"] for t in out["conversations"] if t["value"].startswith("[CONTEXT SUMMARY]")
    )


def test_config_is_validated() -> None:
    with pytest.raises(InvalidConfig):
        TrajectoryConfig(target_max_tokens=0)
    with pytest.raises(InvalidConfig):
        TrajectoryConfig(summary_target_tokens=20_000)
    with pytest.raises(InvalidConfig):
        TrajectoryConfig(retries=-1)


def test_backoff_is_jittered_and_capped() -> None:
    config = TrajectoryConfig(backoff_base=1.0, backoff_max=5.0)
    rng = random.Random(3)
    delays = [backoff_delay(a, config, rng) for a in range(6)]
    for attempt, delay in enumerate(delays):
        cap = min(5.0, 2.0**attempt)
        assert cap / 2 <= delay <= cap
    assert len(set(delays)) == len(delays)


# --------------------------------------------------------------------------- properties

TURN = st.one_of(
    st.tuples(st.just("pair"), st.integers(1, 120)),
    st.tuples(st.just("pair2"), st.integers(1, 60)),
    st.tuples(st.just("human"), st.integers(1, 60)),
    st.tuples(st.just("gpt"), st.integers(1, 60)),
)


def build(shape: list[tuple[str, int]], with_system: bool) -> list[dict[str, Any]]:
    turns = [{"from": "system", "value": "You are an agent."}] if with_system else []
    turns.append({"from": "human", "value": "Start."})
    for i, (kind, n) in enumerate(shape):
        if kind == "pair":
            turns += [gpt_call(i), tool(i, n)]
        elif kind == "pair2":  # two calls answered by two consecutive tool turns
            turns += [gpt_call(i), tool(i, n), tool(i + 500, n)]
        else:
            turns.append({"from": kind, "value": text(n, i)})
    return turns


@given(
    shape=st.lists(TURN, min_size=0, max_size=30),
    with_system=st.booleans(),
    share=st.floats(0.05, 1.2),
    summary=st.integers(10, 80),
    last_n=st.integers(0, 6),
)
def test_output_meets_the_target_or_says_so_and_keeps_tool_pairs(
    shape: list[tuple[str, int]], with_system: bool, share: float, summary: int, last_n: int
) -> None:
    turns = build(shape, with_system)
    target = max(summary + 1, int(sum(tokens_of(turns)) * share))
    rec = {"conversations": turns}
    config = TrajectoryConfig(
        target_max_tokens=target, summary_target_tokens=summary, protect_last_n_turns=last_n
    )
    out, m = run(compress_trajectory, rec, config, EchoSummarizer())
    after = out["conversations"]
    recount = sum(tokens_of(after))
    assert recount == m.compressed_tokens
    assert (recount > target) == m.still_over_limit
    assert tool_pairs_intact(turns, after)
    if m.skipped_under_target or not m.was_compressed:
        assert out == rec
    else:
        assert m.compressed_tokens < m.original_tokens
        assert after[len(after) - last_n :] == turns[len(turns) - last_n :] if last_n else True
        summaries = [t for t in after if t["value"].startswith("[CONTEXT SUMMARY]:")]
        assert len(summaries) == 1 and summaries[0]["from"] == "human"
        assert count_text(summaries[0]["value"]) <= summary


@given(
    shape=st.lists(TURN, min_size=1, max_size=40),
    last_n=st.integers(0, 8),
    target=st.integers(50, 3000),
)
def test_plan_never_cuts_inside_a_tool_run(
    shape: list[tuple[str, int]], last_n: int, target: int
) -> None:
    turns = build(shape, True)
    config = TrajectoryConfig(
        target_max_tokens=target,
        summary_target_tokens=min(40, target - 1),
        protect_last_n_turns=last_n,
    )
    plan = plan_trajectory(turns, [len(t["value"]) // 4 + 1 for t in turns], config)
    for cut in (plan.head_end, plan.compress_until, plan.tail_start):
        assert cut >= len(turns) or turns[cut]["from"] != "tool" or cut == 0
    assert plan.head_end <= plan.compress_until <= max(plan.tail_start, plan.head_end)


# --------------------------------------------------------------------------- batch files


def write_input(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


BATCH = TrajectoryConfig(
    target_max_tokens=1500, summary_target_tokens=150, concurrency=4, max_concurrent_requests=2
)


def batch_records() -> list[dict[str, Any]]:
    records = [trajectory(10 + (i % 5) * 3, 120, rid=f"r{i}") for i in range(10)]
    records[3] = trajectory(1, 10, rid="small")
    del records[5]["id"]  # keyed by the sha1 of its line
    return records


def test_compress_file_writes_in_input_order_with_metrics_and_report(tmp_path: Path) -> None:
    records = batch_records()
    src, out = write_input(tmp_path / "in.jsonl", records), tmp_path / "out.jsonl"
    summarizer = EchoSummarizer()
    report = run(compress_file, src, out, BATCH, summarizer, progress=False)
    written = read_jsonl(out)
    assert [r.get("id") for r in written] == [r.get("id") for r in records]
    metrics = read_jsonl(metrics_path_for(out))
    assert [m["line"] for m in metrics] == list(range(1, 11))
    assert metrics[3]["skipped_under_target"] and written[3] == records[3]
    assert metrics[5]["key"].startswith("sha1:")
    assert report.total_records == 10 and report.processed == 10 and report.failed == 0
    assert report.compressed == 9 and report.skipped_under_target == 1
    assert report.tokens_before == sum(m["original_tokens"] for m in metrics)
    assert (
        report.tokens_after == sum(m["compressed_tokens"] for m in metrics) < report.tokens_before
    )
    assert report.still_over_limit == sum(m["still_over_limit"] for m in metrics)
    assert json.loads(report_path_for(out).read_text())["compressed"] == 9
    assert summarizer.max_active <= BATCH.max_concurrent_requests


@pytest.mark.parametrize("terminal", [False, True])
def test_the_progress_bar_is_drawn_only_on_a_terminal(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
    terminal: bool,
) -> None:  # fmt: skip
    """Session 36: with stderr a file or a pipe (a log, CI) `trajectories compress` wrote
    its finished bar there, though spinners are drawn only on a terminal (TTY_COMPATIBLE=1:
    rich 15 takes stderr for one; it no longer reads FORCE_TERMINAL)."""
    monkeypatch.delenv("FORCE_COLOR", raising=False)  # (set, rich takes it for a terminal)
    monkeypatch.setenv("TTY_COMPATIBLE", "1" if terminal else "")
    src, out = write_input(tmp_path / "in.jsonl", batch_records()[:2]), tmp_path / "out.jsonl"
    report = run(compress_file, src, out, BATCH, EchoSummarizer(), progress=True)
    assert report.processed == 2
    captured = capfd.readouterr()
    assert captured.out == ""
    assert ("compressing trajectories" in captured.err) is terminal, captured.err


def test_compress_file_resumes_after_an_interruption(tmp_path: Path) -> None:
    records = batch_records()
    src = write_input(tmp_path / "in.jsonl", records)
    full, partial = tmp_path / "full.jsonl", tmp_path / "part.jsonl"
    run(compress_file, src, full, BATCH, EchoSummarizer(), progress=False)
    lines = full.read_text().splitlines(keepends=True)
    mlines = metrics_path_for(full).read_text().splitlines(keepends=True)
    partial.write_text("".join(lines[:4]) + lines[4][:25])  # killed while writing record 5
    metrics_path_for(partial).write_text("".join(mlines[:5]))
    summarizer = EchoSummarizer()
    report = run(compress_file, src, partial, BATCH, summarizer, progress=False)
    assert report.resumed == 4 and report.processed == 6
    assert summarizer.calls == 6  # record 4 ("small") needs no summary, 6 others left
    assert partial.read_text() == full.read_text()
    assert report.compressed == 9
    again = run(compress_file, src, partial, BATCH, EchoSummarizer(), progress=False)
    assert again.processed == 0 and again.resumed == 10 and partial.read_text() == full.read_text()


def test_transient_failures_are_retried_with_backoff(tmp_path: Path) -> None:
    src, out = (
        write_input(tmp_path / "in.jsonl", [trajectory(10, 120, rid="a")]),
        tmp_path / "o.jsonl",
    )

    class Flaky(EchoSummarizer):
        async def summarize(self, request: SummaryRequest) -> SummaryResult:
            self.calls += 1
            if self.calls < 3:
                raise SummarizerError("slow down", failure_class="rate_limit", status=429)
            return await super().summarize(request)

    delays: list[float] = []

    async def sleep(seconds: float) -> None:
        delays.append(seconds)

    config = TrajectoryConfig(target_max_tokens=1500, summary_target_tokens=150, backoff_base=2.0)
    report = run(
        compress_file, src, out, config, Flaky(), progress=False, rng=random.Random(1), sleep=sleep
    )
    assert report.failed == 0 and report.compressed == 1
    assert read_jsonl(metrics_path_for(out))[0]["attempts"] == 3
    assert len(delays) == 2 and 1.0 <= delays[0] <= 2.0 and 2.0 <= delays[1] <= 4.0


def test_timeouts_are_reported_and_left_out_of_the_output(tmp_path: Path) -> None:
    records = [trajectory(10, 120, rid="slow"), trajectory(2, 10, rid="small")]
    src, out = write_input(tmp_path / "in.jsonl", records), tmp_path / "o.jsonl"

    class Hangs(EchoSummarizer):
        async def summarize(self, request: SummaryRequest) -> SummaryResult:
            self.calls += 1
            await anyio.sleep(5)
            return await super().summarize(request)

    hangs = Hangs()
    config = TrajectoryConfig(
        target_max_tokens=1500,
        summary_target_tokens=150,
        per_trajectory_timeout=0.2,
        retries=1,
        backoff_base=0,
    )
    report = run(compress_file, src, out, config, hangs, progress=False)
    assert report.failed == 1 and report.failures[0]["error"].startswith("TimeoutError")
    assert report.failures[0]["attempts"] == 2 and hangs.calls == 2
    assert [r["id"] for r in read_jsonl(out)] == ["small"]  # a rerun will retry "slow"


def test_a_summarizer_bug_fails_its_record_without_retries(tmp_path: Path) -> None:
    src, out = (
        write_input(tmp_path / "in.jsonl", [trajectory(10, 120, rid="a")]),
        tmp_path / "o.jsonl",
    )

    class Buggy(EchoSummarizer):
        async def summarize(self, request: SummaryRequest) -> SummaryResult:
            self.calls += 1
            raise KeyError("oops")

    buggy = Buggy()
    report = run(compress_file, src, out, BATCH, buggy, progress=False)
    assert report.failed == 1 and buggy.calls == 1
    assert report.failures[0]["error"] == "KeyError: 'oops'" and report.failures[0]["attempts"] == 1


def test_auth_failures_stop_the_batch(tmp_path: Path) -> None:
    src, out = (
        write_input(tmp_path / "in.jsonl", [trajectory(10, 120, rid="a")]),
        tmp_path / "o.jsonl",
    )

    class Denied(EchoSummarizer):
        async def summarize(self, request: SummaryRequest) -> SummaryResult:
            raise SummarizerError("bad key", failure_class="auth", status=401)

    with pytest.raises(SummarizerError, match="bad key"):
        run(compress_file, src, out, BATCH, Denied(), progress=False)


def test_malformed_input_is_rejected_before_anything_is_written(tmp_path: Path) -> None:
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps(trajectory(2)) + "\n" + '{"conversations": [{"from": "gpt"}]}\n')
    out = tmp_path / "o.jsonl"
    with pytest.raises(ImportFormatError, match="turn 0") as info:
        run(compress_file, src, out, BATCH, EchoSummarizer(), progress=False)
    assert info.value.line == 2 and not out.exists()
    src.write_text("{not json\n")
    with pytest.raises(ImportFormatError, match="invalid JSON"):
        run(compress_file, src, out, BATCH, EchoSummarizer(), progress=False)


def test_an_output_without_its_metrics_file_is_not_resumed_blindly(tmp_path: Path) -> None:
    src = write_input(tmp_path / "in.jsonl", [trajectory(2, rid="a")])
    out = tmp_path / "o.jsonl"
    out.write_text(json.dumps(trajectory(2, rid="a")) + "\n")
    with pytest.raises(InvalidInput, match="metrics file"):
        run(compress_file, src, out, BATCH, EchoSummarizer(), progress=False)


def test_progress_bar_and_offline_summarizer_in_a_batch(tmp_path: Path) -> None:
    src, out = write_input(tmp_path / "in.jsonl", batch_records()[:4]), tmp_path / "o.jsonl"
    report = run(compress_file, src, out, BATCH, OfflineSummarizer(), progress=True)
    assert report.processed == 4 and report.failed == 0 and report.compressed == 3
    for before, after in zip(batch_records()[:4], read_jsonl(out), strict=True):
        assert tool_pairs_intact(before["conversations"], after["conversations"])


def test_an_output_that_is_no_regular_file_is_refused_before_it_is_read_back(
    tmp_path: Path,
) -> None:
    # the output is read back to resume: /dev/zero was read until memory ran out; a
    # FIFO or /dev/null is written to and not read back (review R4: both were refused)
    from ctxledger.errors import InvalidInput
    from ctxledger.trajectories.batch import resume_state

    with pytest.raises(InvalidInput, match="/dev/zero is not a regular file"):
        resume_state(Path("/dev/zero"), tmp_path / "out.metrics.jsonl")
    assert resume_state(Path("/dev/null"), tmp_path / "out.metrics.jsonl") == []
    assert resume_state(tmp_path / "out.jsonl", tmp_path / "out.metrics.jsonl") == []


def test_a_fifo_output_gets_no_side_files_beside_it(tmp_path: Path) -> None:
    # session 31: `compress in.jsonl /dev/null` wrote /dev/null.metrics.jsonl and
    # /dev/null.report.json into /dev; a FIFO or /dev/null is not read back, so nothing
    # beside it could be resumed from: the records go to it, the figures only to the report
    import os
    import threading

    src = write_input(tmp_path / "in.jsonl", batch_records()[:3])
    fifo = tmp_path / "out.pipe"
    os.mkfifo(fifo)
    received: list[bytes] = []

    def drain() -> None:
        with open(fifo, "rb") as fh:
            received.append(fh.read())

    reader = threading.Thread(target=drain, daemon=True)  # (a failure must not block exit)
    reader.start()
    report = run(compress_file, src, fifo, BATCH, EchoSummarizer(), progress=False)
    reader.join(timeout=30)
    assert [json.loads(line)["id"] for line in received[0].splitlines()] == ["r0", "r1", "r2"]
    assert report.metrics_path is None and report.processed == 3
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl", "out.pipe"]
