"""The summary request and the summarized ids built in one pass (session 42) are the
ones the per-message loop built: on random sessions, with and without an earlier
summary (standalone or merged, summarized or carried), pinned messages and prunes.

And what a compaction records is byte for byte what main's recording records (the
request built message by message, the summarized indices through a set, the pinned
indices looked up in the list, the summary's ids one by one: main's code, kept here as
the reference): two ledgers with the same clock and ids, one compacted with each,
hold the same rows, over two compactions (the second updating the first's summary),
pins and prunes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from helpers import strategies as S
from helpers.ledger_helpers import compact_now, deterministic_ledger, dump_log
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import ctxledger.compressor.recording as recording
import ctxledger.ledger.compaction as compaction
from ctxledger.compressor.config import CompressionConfig
from ctxledger.compressor.markers import split_merged
from ctxledger.compressor.planner import CompactionPlan, plan
from ctxledger.compressor.recording import CompactionInput, Prepared, summary_request
from ctxledger.compressor.summarizers.base import SummaryRequest
from ctxledger.demo.synth import SessionSynth
from ctxledger.errors import CompressionError
from ctxledger.tokens import rough_message_tokens

Message = dict[str, Any]


def _loop_request(
    inp: CompactionInput, the_plan: CompactionPlan, focus: str | None = None
) -> SummaryRequest:
    """The request as main built it, one message at a time (the reference)."""
    replaced = {p.index: p.replacement for p in the_plan.prunes}
    kept = set(the_plan.pinned) | set(the_plan.carried)
    indices = [i for i in range(the_plan.compress_start, the_plan.compress_end) if i not in kept]
    turns: list[Any] = []
    originals: list[Any] = []
    previous: str | None = None
    for i in indices:
        split = split_merged(inp.messages[i]) if i == the_plan.previous_summary_index else None
        if split is not None:
            previous, original = split
            if original is not None:
                turns.append(original)
                originals.append(original)
            continue
        turns.append(replaced.get(i, inp.messages[i]))
        originals.append(inp.messages[i])
    if previous is None and the_plan.previous_summary_index is not None:
        split = split_merged(inp.messages[the_plan.previous_summary_index])
        previous = split[0] if split is not None else None
    return SummaryRequest(
        turns=turns,
        budget_tokens=the_plan.summary_budget_tokens,
        previous_summary=previous,
        focus=focus,
        session_model=inp.model,
        originals=originals if replaced else None,
    )


def _input(messages: list[Message], pinned: list[int]) -> CompactionInput:
    ids = [None if m["role"] == "system" and i == 0 else f"m{i}" for i, m in enumerate(messages)]
    return CompactionInput(
        session_id="s",
        model="m",
        context_length=4_000,
        encoding="cl100k_base",
        messages=messages,
        message_ids=ids,
        exact_tokens=[rough_message_tokens(m) for m in messages],
        pinned_ids=[f"m{i}" for i in pinned if ids[i % len(ids)] is not None],
    )


@settings(max_examples=80, deadline=None)
@given(
    messages=S.planner_sessions(),
    config=S.planner_configs(),
    pinned=st.lists(st.integers(0, 60), max_size=3),
)
def test_the_request_is_the_one_the_loop_built(
    messages: list[Message], config: CompressionConfig, pinned: list[int]
) -> None:
    inp = _input(messages, [i % len(messages) for i in pinned])
    wanted = [i for i, mid in enumerate(inp.message_ids) if mid in inp.pinned_ids]
    the_plan = plan(
        messages,
        config,
        inp.exact_tokens,
        context_length=inp.context_length,
        pinned=wanted,
        force=True,
    )
    if the_plan.action != "compress":
        return
    at = the_plan.previous_summary_index
    event(
        f"previous summary {'summarized' if at in the_plan.summarized_indices() else at is not None}"
    )
    event(f"prunes: {bool(the_plan.prunes)}")
    assert summary_request(inp, the_plan, None) == _loop_request(inp, the_plan)
    kept = set(the_plan.pinned) | set(the_plan.carried)
    assert the_plan.summarized_indices() == [
        i for i in range(the_plan.compress_start, the_plan.compress_end) if i not in kept
    ]


def test_a_summarized_message_without_an_id_is_still_named() -> None:
    from ctxledger.compressor.recording import _ids

    inp = _input([{"role": "user", "content": "a"}, {"role": "user", "content": "b"}], [])
    inp.message_ids[1] = None
    with pytest.raises(CompressionError, match="message 1 has no id"):
        _ids(inp, [0, 1])
    assert _ids(inp, [0]) == ["m0"]


def _main_indices(self: CompactionPlan) -> list[int]:
    """main's ``summarized_indices``: the middle minus pinned and carried, through a set."""
    kept = set(self.pinned) | set(self.carried)
    return [i for i in range(self.compress_start, self.compress_end) if i not in kept]


def _main_prepare(
    inp: CompactionInput,
    config: CompressionConfig,
    *,
    focus: str | None = None,
    force: bool = False,
) -> Prepared:
    """main's ``prepare``: the pinned indices looked up in the list, the loop's request."""
    pinned = [
        i for i, mid in enumerate(inp.message_ids) if mid is not None and mid in inp.pinned_ids
    ]
    the_plan = plan(
        inp.messages,
        config,
        recording.token_counts(inp, config),
        context_length=inp.context_length,
        focus=focus,
        pinned=pinned,
        compaction_count=inp.compaction_count,
        force=force,
        cache=recording.PLAN_CACHE,
    )
    if the_plan.action != "compress":
        return Prepared(input=inp, config=config, plan=the_plan, request=None)
    at = the_plan.previous_summary_index
    return Prepared(
        input=inp,
        config=config,
        plan=the_plan,
        request=_loop_request(inp, the_plan, focus),
        previous_summary_id=inp.message_ids[at] if at is not None else None,
    )


def _compacted_twice(
    path: Path, seed: int, turns: tuple[int, int], pins: list[int], focus: str | None
) -> tuple[list[Any], list[Any]]:
    """A session compacted, grown and compacted again (its summary updated), with pins:
    the ledger's rows and the outcomes."""
    recording.PLAN_CACHE.clear()
    for stale in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        stale.unlink(missing_ok=True)  # hypothesis may draw the same example again
    synth = SessionSynth(seed, big_outputs=True)
    ledger = deterministic_ledger(path)
    outcomes: list[Any] = []
    try:
        sid = ledger.start_session(
            model="m", system_prompt=synth.system_prompt(), tools=synth.tools()
        )
        done = 0
        for count in turns:
            for i in range(done, done + count):
                ledger.append_messages(sid, synth.turn(i))
            done += count
            live = ledger.live_session(sid).live
            for pin in pins:
                ledger.pin(sid, live[pin % len(live)])
            outcome = compact_now(ledger, sid, trigger="manual", focus=focus)
            outcomes.append(outcome)
            sid = outcome.new_session_id or sid
    finally:
        ledger.close()
    return dump_log(path), outcomes


@settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    seed=st.integers(0, 10_000),
    turns=st.tuples(st.integers(3, 9), st.integers(2, 6)),
    pins=st.lists(st.integers(0, 200), max_size=3),
    focus=st.none() | st.just("the failing tests"),
)
def test_a_compaction_records_what_mains_recording_records_byte_for_byte(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    seed: int,
    turns: tuple[int, int],
    pins: list[int],
    focus: str | None,
) -> None:
    name = f"{seed}-{turns[0]}-{turns[1]}-{len(pins)}-{focus is None}"
    got, outcomes = _compacted_twice(tmp_path / f"onepass-{name}.db", seed, turns, pins, focus)
    with monkeypatch.context() as main:
        main.setattr(compaction, "prepare", _main_prepare)
        main.setattr(recording, "prepare", _main_prepare)
        main.setattr(CompactionPlan, "summarized_indices", _main_indices)
        main.setattr(
            recording, "_ids", lambda inp, indices: [recording._id(inp, i) for i in indices]
        )
        expected, main_outcomes = _compacted_twice(
            tmp_path / f"main-{name}.db", seed, turns, pins, focus
        )
    for outcome in outcomes:
        event(f"action {outcome.action}")
        event(f"prunes: {bool(outcome.plan and outcome.plan.get('prunes'))}")
    last = outcomes[-1].plan or {}
    at = last.get("previous_summary_index")
    middle = at is not None and last["compress_start"] <= at < last["compress_end"]
    event(f"second compaction: previous summary {'summarized' if middle else at is not None}")
    event(f"pinned in a plan: {any(o.plan and o.plan.get('pinned') for o in outcomes)}")
    assert got == expected
    assert outcomes == main_outcomes
