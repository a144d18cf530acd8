"""The summary request and the summarized ids built in one pass (session 42) are the
ones the per-message loop built: on random sessions, with and without an earlier
summary (standalone or merged, summarized or carried), pinned messages and prunes."""

from __future__ import annotations

from typing import Any

import pytest
from helpers import strategies as S
from hypothesis import event, given, settings
from hypothesis import strategies as st

from ctxledger.compressor.config import CompressionConfig
from ctxledger.compressor.markers import split_merged
from ctxledger.compressor.planner import CompactionPlan, plan
from ctxledger.compressor.recording import CompactionInput, summary_request
from ctxledger.compressor.summarizers.base import SummaryRequest
from ctxledger.errors import CompressionError
from ctxledger.tokens import rough_message_tokens

Message = dict[str, Any]


def _loop_request(inp: CompactionInput, the_plan: CompactionPlan) -> SummaryRequest:
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
        focus=None,
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
