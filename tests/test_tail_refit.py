"""When everything after the head fits the tail's soft ceiling (Hermes #40803).

The tail is the longest valid suffix within 1.5x its budget. When that is everything
after the middle's first message, the compaction would summarize one message: a
``no_progress`` skip, or a manual ``/compress`` that does nothing useful (a short
session, or a trigger driven by a big system prompt or tools schema). As Hermes does,
the plain budget then decides (the message that crosses it kept, as in Hermes's
refit), and when even that holds everything, the tail's minimum count alone, leaving a
few messages to summarize.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from ctxledger.compressor.config import CompressionConfig
from ctxledger.compressor.planner import plan

CONFIG = CompressionConfig(threshold_floor_tokens=0, summary_min_tokens=100)
WINDOW = 200_000  # tail budget 20,000, soft ceiling 30,000


def _chat(turns: int, tokens: int) -> tuple[list[dict[str, Any]], list[int]]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You fix bugs."}]
    for k in range(turns):
        messages += [
            {"role": "user", "content": f"question {k}"},
            {"role": "assistant", "content": f"answer {k}"},
        ]
    return messages, [50] + [tokens] * (2 * turns)


def test_a_short_session_keeps_the_minimum_count_and_summarizes_the_rest() -> None:
    messages, counts = _chat(15, 350)  # 30 messages, 10,500 tokens: inside the plain budget
    for force in (False, True):
        p = plan(messages, CONFIG, counts, context_length=WINDOW, force=force)
        assert p.action == "compress", p.skip_reason
        assert p.head_end == 4
        assert p.tail_start == len(messages) - CONFIG.tail_min_count()


def test_between_the_budget_and_the_ceiling_the_plain_budget_decides() -> None:
    messages, counts = _chat(15, 900)  # 27,000 tokens after the head: over 20,000, under 30,000
    p = plan(messages, CONFIG, counts, context_length=WINDOW, force=True)
    assert p.action == "compress"
    tail = sum(counts[p.tail_start :])
    # the message that crosses the budget is kept too, as Hermes's refit keeps it (s30)
    assert tail - counts[p.tail_start] <= CONFIG.tail_token_budget(WINDOW) < tail


def test_a_tail_that_does_not_fit_the_ceiling_is_planned_as_before() -> None:
    messages, counts = _chat(15, 1_500)  # 42,000 tokens: the ceiling decides, no refit
    p = plan(messages, CONFIG, counts, context_length=WINDOW)
    ceiling = int(CONFIG.tail_token_budget(WINDOW) * CONFIG.tail_soft_ceiling)
    tail = sum(counts[p.tail_start :])
    assert tail <= ceiling < tail + counts[p.tail_start - 1]


def _with_tools(
    turns: int, tokens: int, calls: list[int]
) -> tuple[list[dict[str, Any]], list[int]]:
    """Turns of an ask, `calls[k % len(calls)]` tool calls with their results, a reply."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You fix bugs."}]
    for k in range(turns):
        messages.append({"role": "user", "content": f"question {k}"})
        n = calls[k % len(calls)]
        if n:
            ids = [f"c{k}_{j}" for j in range(n)]
            messages.append({
                "role": "assistant", "content": None,
                "tool_calls": [{"id": i, "type": "function",
                                "function": {"name": "ls", "arguments": "{}"}} for i in ids],
            })  # fmt: skip
            messages += [{"role": "tool", "tool_call_id": i, "content": "out"} for i in ids]
        messages.append({"role": "assistant", "content": f"answer {k}"})
    return messages, [50] + [tokens] * (len(messages) - 1)


@given(
    st.integers(2, 10),
    st.integers(1, 2_000),
    st.lists(st.integers(0, 3), min_size=1, max_size=4),
    st.booleans(),
)
def test_a_refit_leaves_something_to_summarize_and_never_splits_a_group(
    turns: int, tokens: int, calls: list[int], force: bool
) -> None:
    messages, counts = _with_tools(turns, tokens, calls)
    p = plan(messages, CONFIG, counts, context_length=WINDOW, force=force)
    if p.action != "compress":
        return
    assert p.head_end < p.tail_start < len(messages)
    # the tail never opens with a tool result: its call would be summarized away
    assert messages[p.tail_start]["role"] != "tool"
    tail_calls = {c["id"] for m in messages[p.tail_start :] for c in m.get("tool_calls") or ()}
    tail_results = {m["tool_call_id"] for m in messages[p.tail_start :] if m["role"] == "tool"}
    assert tail_calls == tail_results
