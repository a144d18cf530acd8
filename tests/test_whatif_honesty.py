"""What-if says what it reproduced and what differs, with numbers (issue 17, point 3)."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import msgspec
import pytest
from click.testing import CliRunner
from helpers.ledger_helpers import SMALL, deterministic_ledger
from test_imported_compactions import claude_code_log

from ctxledger import OfflineSummarizer, compact
from ctxledger.analysis.history import history
from ctxledger.analysis.whatif import whatif
from ctxledger.analysis.whatif_warnings import threshold_notes
from ctxledger.cli.main import cli
from ctxledger.compressor.config import CompressionConfig
from ctxledger.demo.record import record_generated
from ctxledger.importers.detect import load
from ctxledger.ledger.facade import Ledger
from ctxledger.ledger.importing import import_sessions
from ctxledger.runtime.service import ContextService


def test_the_recorded_config_reproduces_a_recorded_chain_exactly_and_says_why(
    tmp_path: Path,
) -> None:
    ledger = deterministic_ledger(tmp_path / "l.db")
    tip = record_generated(ledger, seed=4, turns=10)
    report = whatif(ledger, tip)
    repro = report.reproduction
    assert repro is not None and repro.exact and report.reproduces_recorded
    assert repro.differences == [] and repro.warnings == []
    assert repro.matching_compactions == repro.compactions[0] == repro.compactions[1] >= 1
    assert repro.tokens_sent[0] == repro.tokens_sent[1] > 0 and repro.turns_differing == 0


def test_another_config_lists_each_difference_with_numbers(tmp_path: Path) -> None:
    ledger = deterministic_ledger(tmp_path / "l.db")
    tip = record_generated(ledger, seed=4, turns=10)
    report = whatif(ledger, tip, config=msgspec.structs.replace(SMALL, threshold=0.3))
    repro = report.reproduction
    assert repro is not None and not repro.exact and not report.reproduces_recorded
    assert any(
        d.startswith("tokens sent: recorded ") and f"{repro.tokens_sent[1]:,}" in d
        for d in repro.differences
    )
    assert repro.matching_compactions < max(repro.compactions)


def _chat(count: int) -> list[dict[str, str]]:
    """`count` long messages, user and assistant in turn (no model call, no usage)."""
    return [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i} " + "word " * 300}
        for i in range(count)
    ]


def _imported(tmp_path: Path, count: int) -> tuple[Ledger, str]:
    """A ledger holding one imported chat of `count` messages, and its session."""
    path = tmp_path / "chat.json"
    path.write_text(json.dumps(_chat(count)))
    ledger = deterministic_ledger(tmp_path / "l.db")
    [sid] = import_sessions(ledger, load(path), context_length=16_000)
    return ledger, sid


def test_an_import_without_usage_is_never_called_exact_and_says_why(tmp_path: Path) -> None:
    ledger, sid = _imported(tmp_path, 40)
    report = whatif(ledger, sid)
    repro = report.reproduction
    assert repro is not None and not repro.exact
    assert repro.tokens_sent[0] == 0
    assert any("carries no provider usage" in w for w in repro.warnings)


def test_an_imported_chain_with_source_compactions_is_compared_not_reproduced(
    tmp_path: Path,
) -> None:
    ledger = deterministic_ledger(tmp_path / "l.db")
    ids = import_sessions(ledger, load(claude_code_log(7, tmp_path / "cc.jsonl")))
    report = whatif(ledger, ids[-1])
    repro = report.reproduction
    assert repro is not None and not repro.exact and repro.compactions[0] == 2
    assert any("made by the source agent (imported:claude_code)" in w for w in repro.warnings)
    out = CliRunner().invoke(
        cli, ["--db", str(tmp_path / "l.db"), "replay", ids[-1], "--summarizer", "offline"]
    )
    assert out.exit_code == 0, out.output
    assert "exactly" not in out.output
    assert "reproduced: " in out.output and "warning:" in out.output


@pytest.mark.parametrize("flag", ["--json"])
def test_the_json_report_holds_the_reproduction(tmp_path: Path, flag: str) -> None:
    ledger = deterministic_ledger(tmp_path / "l.db")
    tip = record_generated(ledger, seed=5, turns=8)
    ledger.close()
    out = CliRunner().invoke(
        cli, ["--db", str(tmp_path / "l.db"), "replay", tip, "--summarizer", "offline", flag]
    )
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    assert data["reproduction"]["exact"] == data["reproduces_recorded"]


def test_an_import_compacted_by_hand_says_the_whatif_ran_the_loop_it_never_had(
    tmp_path: Path,
) -> None:
    """Imported messages saw no trigger; the what-if's loop compacts them on its own."""
    ledger, sid = _imported(tmp_path, 60)
    tip = anyio.run(compact, ledger, sid, OfflineSummarizer()).new_session_id
    repro = whatif(ledger, tip).reproduction
    assert repro is not None and not repro.exact and repro.compactions[0] == 1
    [warning] = [w for w in repro.warnings if w.startswith("the chain was imported (")]
    assert "no trigger ran as its messages arrived" in warning and "of its own (" in warning
    assert repro.compactions[1] > 1 and f"made {repro.compactions[1] - 1} compaction" in warning


def test_a_live_chain_without_usage_is_not_said_to_be_imported(tmp_path: Path) -> None:
    """The final review of session 36: a live agent whose model reports no usage records
    no model call either; its chain was not imported, and the warning must not say so."""
    ledger = deterministic_ledger(tmp_path / "l.db")
    sid = ledger.start_session(model="m", context_length=16_000)
    ledger.append_messages(sid, _chat(60))
    tip = anyio.run(compact, ledger, sid, OfflineSummarizer()).new_session_id
    repro = whatif(ledger, tip).reproduction
    assert repro is not None and repro.compactions[1] > 1  # (the loop compacted on its own)
    assert not any("trigger ran" in w or "import" in w for w in repro.warnings), repro.warnings


async def _host_decided(ledger: Ledger, *, requested: bool = False) -> str:
    """A chain whose host decides when to compact, as Hermes's context engine does: no
    trigger of the ledger runs; the host asks for a compaction (manual) after a user
    message that takes the live view to the threshold. `requested`: the user asks there
    without forcing it (Hermes's TUI ``/compress``), recorded ``requested``."""
    svc = ContextService(ledger, config=SMALL)
    sid = ledger.start_session(model="m", context_length=16_000)
    for turn in range(14):
        await svc.append(sid, [{"role": "user", "content": f"turn {turn} " + "word " * 900}])
        status = svc.status(sid)
        if status["tokens"] >= status["threshold_tokens"] and requested:
            asked = await svc.host_compress(
                sid, "the user's /compress", tokens=status["tokens"], agent="tui", requested=True
            )
            sid = asked.session_id
        elif status["tokens"] >= status["threshold_tokens"]:
            sid = (await svc.compress(sid)).session_id
        sid = (await svc.append(sid, [{"role": "assistant", "content": f"done {turn}"}])).session_id
    return svc.tip(sid)


def test_a_host_decided_compaction_the_whatif_doubles_is_said(tmp_path: Path) -> None:
    """Session 36 (a Hermes user's ledger): the what-if's preflight compacts at the point
    where the host asked for a compaction, then it replays the request: two compactions
    back to back where the recording made one, and the report said nothing of why."""
    ledger = deterministic_ledger(tmp_path / "l.db")
    tip = anyio.run(_host_decided, ledger)
    report = whatif(ledger, tip)
    repro = report.reproduction
    assert repro is not None and not repro.exact
    triggers = [c.trigger for c in report.whatif.compactions]
    assert "manual" in triggers and repro.compactions[1] > repro.compactions[0] >= 1
    [warning] = [w for w in repro.warnings if "compacted twice" in w]
    assert warning.startswith("1 compaction(s) the agent asked for (manual)")
    assert warning.endswith(
        "the recording has no automatic compaction at all (a host that "
        "decides when to compact, such as Hermes's context engine, asks "
        "for each one)"
    )
    # the recorded config's what-if of an ordinary chain gets no such warning
    plain = deterministic_ledger(tmp_path / "plain.db")
    plain_repro = whatif(plain, record_generated(plain, seed=4, turns=10)).reproduction
    assert plain_repro is not None and not any("twice" in w for w in plain_repro.warnings)


def test_a_requested_compaction_the_whatif_doubles_is_said(tmp_path: Path) -> None:
    """Session 40: a user's unforced ask (``requested``) is replayed whatever the size, as
    ``manual`` is; right after the what-if's own preflight at the same point it is a
    second compaction where the recording made one, and the warning counts and names it."""
    ledger = deterministic_ledger(tmp_path / "l.db")
    tip = anyio.run(lambda: _host_decided(ledger, requested=True))
    report = whatif(ledger, tip)
    repro = report.reproduction
    assert repro is not None and not repro.exact
    assert repro.compactions == [2, 3]
    triggers = [c.trigger for c in report.whatif.compactions]
    assert triggers == ["preflight", "requested", "requested"]
    [warning] = [w for w in repro.warnings if "compacted twice" in w]
    assert warning.startswith("1 compaction(s) the agent asked for (requested) came right after")


async def _checked_between_turns(ledger: Ledger, where: str) -> str:
    """A loop that runs preflight after each final answer (`where` "answer": as an Agents
    SDK session does when the next run reads its history) or after each turn's tool
    results ("tools": before the model call they go to, as the LangChain middleware and
    the proxy do), never right after the user message; "host": a host decides after the
    answer (``host_compress``, which a what-if replays)."""
    svc = ContextService(ledger, config=SMALL)
    sid = ledger.start_session(model="m", context_length=16_000)
    for turn in range(14):
        ask = {"role": "user", "content": f"turn {turn} " + "word " * 900}
        sid = (await svc.append(sid, [ask])).session_id
        if where == "tools":
            call = {
                "id": f"c{turn}",
                "type": "function",
                "function": {"name": "f", "arguments": "{}"},
            }
            batch = [
                {"role": "assistant", "content": None, "tool_calls": [call]},
                {"role": "tool", "tool_call_id": f"c{turn}", "content": f"result {turn}"},
            ]
            sid = (await svc.append(sid, batch)).session_id
            sid = (await svc.preflight(sid)).session_id
        sid = (await svc.append(sid, [{"role": "assistant", "content": f"done {turn}"}])).session_id
        if where == "host":
            sid = (await svc.host_compress(sid, "host", beyond=0, agent="h")).session_id
        elif where == "answer":
            sid = (await svc.preflight(sid)).session_id
    return svc.tip(sid)


@pytest.mark.parametrize("where", ["answer", "tools"])
def test_a_chain_checked_between_turns_says_why_the_whatif_cannot_match(
    tmp_path: Path, where: str
) -> None:
    """Session 38 (Agents SDK and LangChain ledgers): every recorded compaction came
    before the what-if's, '0 of N reproduced' and no word of why."""
    ledger = deterministic_ledger(tmp_path / "l.db")
    repro = whatif(ledger, anyio.run(_checked_between_turns, ledger, where)).reproduction
    assert repro is not None and not repro.exact and repro.compactions[0] >= 2
    [warning] = [w for w in repro.warnings if "ran preflight where" in w]
    n = repro.compactions[0]
    assert warning.startswith(f"{n} recorded compaction(s) ran preflight where the what-if")
    answered, tools = (n, 0) if where == "answer" else (0, n)
    assert f": {answered} after a final answer" in warning
    assert f", {tools} after tool results" in warning
    hosted = deterministic_ledger(tmp_path / "host.db")
    host_repro = whatif(hosted, anyio.run(_checked_between_turns, hosted, "host")).reproduction
    assert host_repro is not None and host_repro.compactions[0] >= 2
    assert not any("ran preflight where" in w for w in host_repro.warnings)  # (replayed)
    plain = deterministic_ledger(tmp_path / "plain.db")
    plain_repro = whatif(plain, record_generated(plain, seed=4, turns=10)).reproduction
    assert plain_repro is not None and not any("ran preflight" in w for w in plain_repro.warnings)


async def _no_hygiene(ledger: Ledger, uncounted_from: int = 40, long_answer: int = -1) -> str:
    """A loop without hygiene (as every adapter and the proxy): the provider counts far
    more than the view (a tool output sent whole in its run, kept as a preview). From
    turn `uncounted_from` on no call reports usage; the answer of turn `long_answer` is
    long."""
    svc = ContextService(ledger, config=SMALL)
    sid = ledger.start_session(model="m", context_length=16_000)
    for turn in range(40):
        ask = {"role": "user", "content": f"turn {turn} " + "word " * 200}
        sid = (await svc.append(sid, [ask])).session_id
        sid = (await svc.preflight(sid)).session_id
        counted = {"prompt_tokens": 14_500 if turn >= 30 else 2_000, "completion_tokens": 5}
        usage = counted if turn < uncounted_from else None
        sid = (await svc.report_usage(sid, usage, tool_calls=False)).session_id
        words = "fixed " * (9000 if turn == long_answer else 150)
        answer = {"role": "assistant", "content": f"done {turn} " + words}
        sid = (await svc.append(sid, [answer])).session_id
    return svc.tip(sid)


def test_hygiene_the_recording_never_ran_is_said(tmp_path: Path) -> None:
    """Session 38 (an Agents SDK session with big tool outputs): the what-if's hygiene
    compacted at most user turns, the recording never, and the report said nothing."""
    ledger = deterministic_ledger(tmp_path / "l.db")
    report = whatif(ledger, anyio.run(_no_hygiene, ledger))
    repro = report.reproduction
    assert repro is not None
    assert "hygiene" not in [c.trigger for c in report.recorded.compactions]
    hygiene = sum(c.trigger == "hygiene" for c in report.whatif.compactions)
    assert hygiene >= 1
    [warning] = [w for w in repro.warnings if "hygiene compaction" in w]
    assert warning.startswith(f"the what-if's loop made {hygiene} hygiene compaction(s)")


_FLOOR_NOTE = (
    "on the 16,000-token window the replay runs on: the threshold 0.2 x 16,000 = 3,200 tokens was "
    "raised to 13,600 because threshold_floor_tokens = 64,000 reaches the window, so "
    "85 % of it is used (set threshold_floor_tokens = 0 to turn the floor off)"
)


@pytest.mark.parametrize(
    ("recorded_floor", "floor", "said"),
    [
        (64_000, 64_000, [_FLOOR_NOTE + "; the recorded config's is 13,600 too: the change does nothing here"]),
        (0, 64_000, [_FLOOR_NOTE]),  # recorded at 8,000 (0.5 x 16,000)
        (64_000, 0, []),
    ],
)  # fmt: skip
def test_a_threshold_the_floor_overrides_on_the_window_is_said(
    tmp_path: Path, recorded_floor: int, floor: int, said: list[str]
) -> None:
    """On a 16,000-token window the default floor (64,000 tokens) puts the threshold at
    85 % of the window whatever `threshold` says: a what-if of `threshold = 0.2` listed
    "threshold: 0.5 → 0.2" as its change, and nothing said that it fired at 13,600
    tokens, as recorded."""
    path = tmp_path / "chat.json"
    path.write_text(json.dumps(_chat(12)))
    recorded = CompressionConfig(threshold_floor_tokens=recorded_floor)
    ledger = deterministic_ledger(tmp_path / "l.db", recorded)
    [sid] = import_sessions(ledger, load(path), context_length=16_000)
    config = CompressionConfig(threshold=0.2, threshold_floor_tokens=floor)
    report = whatif(ledger, sid, config=config)
    assert "threshold" in report.config_changes
    assert [n for n in report.notes if "threshold_floor_tokens" in n] == said


def test_the_floor_note_judges_the_window_the_replay_runs_on(tmp_path: Path) -> None:
    """Review 1, case (a): a what-if of `context_length = 200000, threshold = 0.2` on a
    16K chain was said to do nothing (13,600 tokens on 16K, as recorded); it replays on
    200K, where the floor gives 64,000."""
    ledger, sid = _imported(tmp_path, 12)
    report = whatif(ledger, sid, config=CompressionConfig(threshold=0.2, context_length=200_000))
    assert [n for n in report.notes if "threshold_floor_tokens" in n] == [
        "on the 200,000-token window the replay runs on: the threshold 0.2 x 200,000 = "
        "40,000 tokens was raised to 64,000 because threshold_floor_tokens = 64,000 (set "
        "threshold_floor_tokens = 0 to turn the floor off)"
    ]


async def _switched(ledger: Ledger, window: int, prompt: int) -> str:
    """A chain started on a 16K window that switches to `window`, then sends prompts
    of `prompt` tokens (2,000 before)."""
    svc = ContextService(ledger, summarizer=OfflineSummarizer(), config=CompressionConfig())
    sid = ledger.start_session(model="m", context_length=16_000)
    sid = (await svc.switch_model(sid, "big", window)).session_id
    for turn in range(22):
        ask = {"role": "user", "content": f"turn {turn} " + "word " * 1500}
        sid = (await svc.append(sid, [ask])).session_id
        sid = (await svc.preflight(sid)).session_id
        usage = {"prompt_tokens": prompt if turn >= 20 else 2_000, "completion_tokens": 5}
        sid = (await svc.report_usage(sid, usage, tool_calls=None)).session_id
        answer = {"role": "assistant", "content": f"done {turn} " + "x " * 150}
        sid = (await svc.append(sid, [answer])).session_id
    return svc.tip(sid)


def test_the_floor_note_judges_every_window_the_chain_switches_to(tmp_path: Path) -> None:
    """Review 1, case (b): a chain that starts on 16K and switches to 200K; `threshold =
    0.4` is floored on 16K only, and on 200K it compacts where the recording did not:
    the note names the 16K window and no longer says the change does nothing. Switched
    to 32K instead, 0.3 and 0.5 both give 85 % of each window: then it is said."""
    ledger = deterministic_ledger(tmp_path / "l.db")
    tip = anyio.run(_switched, ledger, 200_000, 90_000)
    report = whatif(ledger, tip, config=CompressionConfig(threshold=0.4))
    assert report.recorded.compactions == [] and len(report.whatif.compactions) >= 1
    [note] = [n for n in report.notes if "threshold_floor_tokens" in n]
    assert note.startswith("on the 16,000-token window the replay starts on: the threshold 0.4")
    assert "does nothing" not in note
    small = deterministic_ledger(tmp_path / "s.db")
    hist = history(small, anyio.run(_switched, small, 32_000, 2_000))
    notes = threshold_notes(hist, CompressionConfig(threshold=0.3), ["threshold"])
    assert [n.split(":")[0] for n in notes] == [
        "on the 16,000-token window the replay starts on",
        "on the 32,000-token window the chain switches to",
    ]
    assert notes[-1].endswith(
        "; the recorded config's threshold is the same on each window the chain runs on: "
        "the change does nothing here"
    )


def _tool_loop_import(tmp_path: Path) -> tuple[Ledger, str]:
    """An imported run: one ask, a long tool loop, then a second ask (no usage recorded)."""
    messages: list[dict[str, object]] = [{"role": "user", "content": "fix the parser"}]
    for i in range(40):
        call = {"id": f"c{i}", "type": "function", "function": {"name": "sh", "arguments": "{}"}}
        messages += [
            {"role": "assistant", "content": f"step {i}", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"c{i}", "content": f"line {i} " * 200},
        ]
    messages += [
        {"role": "user", "content": "now the tests"},
        {"role": "assistant", "content": "ok"},
    ]
    path = tmp_path / "run.json"
    path.write_text(json.dumps(messages))
    ledger = deterministic_ledger(tmp_path / "l.db")
    [sid] = import_sessions(ledger, load(path), context_length=16_000)
    return ledger, sid


def test_hygiene_on_a_log_without_usage_is_said_to_judge_the_views_count(tmp_path: Path) -> None:
    """The hygiene warning said the what-if's hygiene judged "the last prompt the provider
    counted" also for a chain whose log holds no usage at all (an import): there it judges
    the view's own token count."""
    ledger, sid = _tool_loop_import(tmp_path)
    report = whatif(ledger, sid)
    assert [c.trigger for c in report.whatif.compactions] == ["hygiene"]
    repro = report.reproduction
    assert repro is not None
    [warning] = [w for w in repro.warnings if "hygiene compaction" in w]
    assert "(before a user turn, on the view's own token count)" in warning
    assert "provider counted" not in warning
    counted = whatif(ledger, anyio.run(_no_hygiene, ledger)).reproduction
    assert counted is not None
    [warning] = [w for w in counted.warnings if "hygiene compaction" in w]
    assert "(before a user turn, on the last prompt the provider counted)" in warning


async def _uncounted_continuation(ledger: Ledger) -> str:
    """Counted calls, a /compress, then calls that report no usage (streamed without
    ``include_usage``) and one long answer: the continuation never gets a count."""
    svc = ContextService(ledger, summarizer=OfflineSummarizer(), config=SMALL)
    sid = ledger.start_session(model="m", context_length=16_000)
    for turn in range(12):
        if turn == 3:
            sid = (await svc.compress(sid)).session_id
        ask = {"role": "user", "content": f"turn {turn} " + "word " * 300}
        sid = (await svc.append(sid, [ask])).session_id
        sid = (await svc.preflight(sid)).session_id
        usage = {"prompt_tokens": 2_000, "completion_tokens": 5} if turn < 3 else None
        sid = (await svc.report_usage(sid, usage, tool_calls=False)).session_id
        answer = {
            "role": "assistant",
            "content": f"done {turn} " + "ok " * (9000 if turn == 8 else 300),
        }
        sid = (await svc.append(sid, [answer])).session_id
    return svc.tip(sid)


def test_the_hygiene_warning_words_what_each_hygiene_check_judged(tmp_path: Path) -> None:
    """Review 1, finding 3: a log with some usage got "on the last prompt the provider
    counted" although the what-if's hygiene judged the estimate (its continuation had no
    count); the wording now comes from each hygiene check's recorded source."""
    ledger = deterministic_ledger(tmp_path / "l.db")
    report = whatif(ledger, anyio.run(_uncounted_continuation, ledger))
    assert [c.trigger for c in report.whatif.compactions][:1] == ["hygiene"]
    assert report.reproduction is not None
    [warning] = [w for w in report.reproduction.warnings if "hygiene compaction" in w]
    assert "(before a user turn, on the view's own token count)" in warning


def test_hygiene_on_both_kinds_of_count_is_said_with_each_number(tmp_path: Path) -> None:
    """The mixed wording of review 1, finding 3: two counted 14,500-token prompts, then
    calls that report no usage and one long answer; the what-if's hygiene fires once on
    each kind of count."""
    ledger = deterministic_ledger(tmp_path / "l.db")
    report = whatif(ledger, anyio.run(_no_hygiene, ledger, 32, 36))
    assert [c.trigger for c in report.whatif.compactions].count("hygiene") == 2
    assert report.reproduction is not None
    [warning] = [w for w in report.reproduction.warnings if "hygiene compaction" in w]
    assert warning.startswith(
        "the what-if's loop made 2 hygiene compaction(s) (before a user turn: 1 on the last "
        "prompt the provider counted, 1 on the view's own token count) and"
    )
