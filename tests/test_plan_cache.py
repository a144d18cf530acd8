"""The planner's speed work (issue 14) changes no plan: today's planner against main's.

``helpers.reference_planner`` is main's planner as it was before the layout became
incremental and phase-1 rewrites were memoized per message. On random sessions,
planned whole, grown step by step through one :class:`PlanCache`, and grown along
two branches from a shared prefix, every plan (boundaries, prunes with their
replacement texts, estimates, orphans, notes) must equal the reference's.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from helpers import reference_layout, reference_planner
from helpers import strategies as S
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxledger.compressor.config import CompressionConfig
from ctxledger.compressor.layout import message_layout
from ctxledger.compressor.plancache import PlanCache
from ctxledger.compressor.planner import plan
from ctxledger.tokens import rough_message_tokens

Message = dict[str, Any]


def _both(
    messages: list[Message],
    config: CompressionConfig,
    window: int,
    cache: PlanCache | None,
    **kwargs: Any,
) -> None:
    counts = [rough_message_tokens(m) + (i % 3) for i, m in enumerate(messages)]
    expected = reference_planner.plan(messages, config, counts, context_length=window, **kwargs)
    got = plan(messages, config, counts, context_length=window, cache=cache, **kwargs)
    assert got == expected
    assert got.to_dict() == expected.to_dict()


@given(
    messages=S.planner_sessions(),
    config=S.planner_configs(),
    window=st.sampled_from([2_000, 5_000, 12_000]),
    cuts=st.lists(st.integers(0, 200), max_size=4),
    pinned=st.lists(st.integers(0, 60), max_size=3),
    count=st.integers(0, 2),
    force=st.booleans(),
)
def test_plans_of_a_growing_session_equal_the_reference(
    messages: list[Message],
    config: CompressionConfig,
    window: int,
    cuts: list[int],
    pinned: list[int],
    count: int,
    force: bool,
) -> None:
    cache = PlanCache()
    options = {"pinned": pinned, "compaction_count": count, "force": force}
    for end in [*sorted(c % (len(messages) + 1) for c in cuts), len(messages)]:
        _both(messages[:end], config, window, cache, **options)
    _both(messages, config, window, cache, **options)  # the same list again: reused as is
    _both(messages, config, window, None, **options)


@given(
    messages=S.transcripts(max_turns=6, allow_dangling=False),
    left=S.turns(id_prefix="left"),
    right=S.turns(id_prefix="right"),
    config=S.planner_configs(),
    window=st.sampled_from([2_000, 5_000]),
)
def test_two_branches_from_one_prefix_do_not_mix(
    messages: list[Message],
    left: list[Message],
    right: list[Message],
    config: CompressionConfig,
    window: int,
) -> None:
    cache = PlanCache()
    _both(messages, config, window, cache)
    for _ in range(2):  # back and forth: each branch extends the shared prefix's scan
        _both([*messages, *left], config, window, cache)
        _both([*messages, *right], config, window, cache)


@given(messages=S.planner_sessions(), config=S.planner_configs())
def test_layout_equals_the_reference_scan(
    messages: list[Message], config: CompressionConfig
) -> None:
    got = dataclasses.asdict(message_layout(messages, config))
    assert got == dataclasses.asdict(reference_layout.message_layout(messages, config))


@given(messages=S.transcripts(min_turns=3, max_turns=8), config=S.planner_configs())
def test_a_message_replaced_by_a_new_object_is_scanned_again(
    messages: list[Message], config: CompressionConfig
) -> None:
    cache = PlanCache()
    _both(messages, config, 2_000, cache)
    edited = list(messages)
    for i, m in enumerate(edited):
        if m["role"] == "tool":  # the same position, a new (longer) result: not the cached one
            edited[i] = {**m, "content": "changed output line\n" * 40}
    _both(edited, config, 2_000, cache)
    _both(messages, config, 2_000, cache)


def test_the_cache_is_bounded() -> None:
    cache = PlanCache(size=2)
    config = CompressionConfig()
    for n in range(5):
        messages = [{"role": "user", "content": f"ask {n}"}] * 8
        plan(messages, config, [5] * 8, context_length=2_000, cache=cache)
    assert len(cache._scans) == 2
    cache.clear()
    assert cache._scans == []


@st.composite
def tangled(draw: st.DrawFn) -> list[Message]:
    """Odd but scannable lists: results out of order, late, repeated or answering nothing."""
    messages: list[Message] = []
    issued: list[str] = []
    answered: set[str] = set()
    for n in range(draw(st.integers(1, 40))):
        kind = draw(st.sampled_from(["user", "calls", "result", "result", "reply"]))
        if kind == "calls":
            ids = [f"c{n}_{k}" for k in range(draw(st.integers(1, 3)))]
            issued.extend(ids)
            calls = [
                {"id": i, "type": "function", "function": {"name": "bash", "arguments": "{}"}}
                for i in ids
            ]
            messages.append({"role": "assistant", "content": None, "tool_calls": calls})
        elif kind == "result":  # mostly a call still waiting, oldest or newest first
            waiting = [i for i in issued if i not in answered] or issued or ["nobody"]
            call_id = draw(st.sampled_from([waiting[0], waiting[-1], *issued[-3:]]))
            answered.add(call_id)
            messages.append({"role": "tool", "tool_call_id": call_id, "content": "out " * 80})
        else:
            role = "user" if kind == "user" else "assistant"
            messages.append({"role": role, "content": f"{kind} {n}"})
    return messages


@settings(max_examples=200)  # small lists: cheap, and late answers need many draws
@given(messages=tangled(), step=st.integers(1, 3))
def test_spans_merged_incrementally_equal_the_reference(messages: list[Message], step: int) -> None:
    config = CompressionConfig()
    cache = PlanCache()
    for end in [*range(0, len(messages), step), len(messages)]:
        prefix = messages[:end]
        got = dataclasses.asdict(cache.scan(prefix, config).layout)
        assert got == dataclasses.asdict(reference_layout.message_layout(prefix, config))
