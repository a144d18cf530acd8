"""A first plan decides without building phase-1 rewrites; plans and events stay the same.

``planner.draft`` is the decision of :func:`~ctxledger.compressor.planner.plan` with
the replacement texts (one-liners, duplicate markers, shortened arguments) left for
:meth:`PlanDraft.complete`, which builds them when a request or an event needs them.
Checked here against ``helpers.reference_planner`` (main's planner before issue 14's
speed work, the oracle): every final field of a draft, cold (no plan cache) and
warm (a cache that saw a prefix), equals the reference plan's, its completion equals
the reference plan, and the events recorded from today's plan, cold or warm, are
byte-for-byte those recorded from the reference plan.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest
from helpers import reference_planner
from helpers import strategies as S
from helpers.ledger_helpers import deterministic_ledger, session_with_turns
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxledger.clock import SequentialIds, StepClock
from ctxledger.compressor import plancache
from ctxledger.compressor.config import CompressionConfig
from ctxledger.compressor.plancache import PlanCache
from ctxledger.compressor.planner import CompactionPlan, draft, plan
from ctxledger.compressor.recording import PLAN_CACHE, Prepared, prepare, record, summary_request
from ctxledger.compressor.summarizers.base import SummaryResult
from ctxledger.events import SessionSwitched
from ctxledger.ledger.compaction import compact, compaction_input
from ctxledger.tokens import rough_message_tokens

Message = dict[str, Any]
LAZY = [f for f in CompactionPlan.__struct_fields__ if f not in ("prunes", "middle_tokens")]


@given(
    messages=S.planner_sessions(),
    config=S.planner_configs(vary_summary_cap=True),
    window=st.sampled_from([2_000, 5_000, 12_000, 128_000]),
    pinned=st.lists(st.integers(0, 60), max_size=3),
    count=st.integers(0, 2),
    force=st.booleans(),
    seen=st.integers(0, 200),
)
def test_a_draft_cold_or_warm_decides_what_the_reference_plans(
    messages: list[Message],
    config: CompressionConfig,
    window: int,
    pinned: list[int],
    count: int,
    force: bool,
    seen: int,
) -> None:
    counts = [rough_message_tokens(m) + (i % 3) for i, m in enumerate(messages)]
    options: dict[str, Any] = {"pinned": pinned, "compaction_count": count, "force": force}
    expected = reference_planner.plan(messages, config, counts, context_length=window, **options)
    warm = PlanCache()
    k = seen % (len(messages) + 1)
    plan(messages[:k], config, counts[:k], context_length=window, cache=warm, **options)
    for cache in (None, warm):
        d = draft(messages, config, counts, context_length=window, cache=cache, **options)
        assert (d.action, d.skip_reason) == (expected.action, expected.skip_reason)
        for name in LAZY:
            assert d.field(name) == getattr(expected, name), name
        listed = d.listed()
        assert listed == sorted(listed)
        built = [(p.index, p.kind) for p in expected.prunes]
        assert set(built) <= set(listed)  # a rewrite not shorter than its original is dropped
        got = d.complete()
        assert got == expected
        assert got.to_dict() == expected.to_dict()
        assert d.complete() is got


def test_a_draft_builds_no_rewrite_while_the_budget_is_clamped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The summary budget sits at its cap whatever the rewrites save: none is built."""
    built: list[int] = []
    real = plancache.prune_one

    def counting(messages: Any, i: int, *args: Any) -> Any:
        built.append(i)
        return real(messages, i, *args)

    monkeypatch.setattr(plancache, "prune_one", counting)
    ledger = deterministic_ledger()
    sid = session_with_turns(ledger, 60, big=True)
    inp = compaction_input(ledger, sid)
    config = CompressionConfig(max_summary_tokens_cap=300, summary_min_tokens=100)
    d = draft(inp.messages, config, inp.exact_tokens, context_length=128_000, force=True)
    assert d.action == "compress" and d.listed()
    assert built == []
    assert d.field("summary_budget_tokens") == config.max_summary_tokens(128_000)
    the_plan = d.complete()
    assert built == [i for i, _ in d.listed()]
    assert the_plan.prunes
    assert the_plan == reference_planner.plan(
        inp.messages, config, inp.exact_tokens, context_length=128_000, force=True
    )


def _events(prepared: Prepared) -> bytes:
    result = SummaryResult(text="## Goal\nFix the tests.", summarizer="stub")
    recorded = record(prepared, result, trigger="manual", clock=StepClock(), ids=SequentialIds("r"))
    return msgspec.json.encode([*recorded.old_events, *recorded.new_events])


@settings(max_examples=8, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    turns=st.integers(8, 40),
    window=st.sampled_from([16_000, 128_000]),
    big=st.booleans(),
)
def test_recorded_events_are_those_of_the_reference_plan(
    seed: int, turns: int, window: int, big: bool
) -> None:
    ledger = deterministic_ledger()
    sid = session_with_turns(ledger, turns, seed=seed, big=big)
    inp = msgspec.structs.replace(compaction_input(ledger, sid), context_length=window)
    config = CompressionConfig(threshold_floor_tokens=0)
    ref_plan = reference_planner.plan(
        inp.messages, config, list(inp.exact_tokens), context_length=window, force=True
    )
    if ref_plan.action != "compress":
        return
    reference = Prepared(
        input=inp,
        config=config,
        plan=ref_plan,
        request=summary_request(inp, ref_plan, None),
        previous_summary_id=(
            inp.message_ids[ref_plan.previous_summary_index]
            if ref_plan.previous_summary_index is not None
            else None
        ),
    )
    PLAN_CACHE.clear()
    cold = prepare(inp, config, force=True)
    warm = prepare(inp, config, force=True)  # the same list again: the scan is reused
    assert cold.plan == warm.plan == ref_plan
    assert _events(cold) == _events(reference) == _events(warm)


def test_compact_reports_the_plan_it_recorded(tmp_path: Path) -> None:
    ledger = deterministic_ledger(tmp_path / "l.db")
    sid = session_with_turns(ledger, 30, big=True)
    inp = compaction_input(ledger, sid)
    ref_plan = reference_planner.plan(
        inp.messages, ledger.config, list(inp.exact_tokens), context_length=inp.context_length,
        force=True,
    )  # fmt: skip

    class Stub:
        kind = "stub"

        async def summarize(self, request: Any) -> SummaryResult:
            return SummaryResult(text="## Goal\nFix the tests.", summarizer=self.kind)

    PLAN_CACHE.clear()
    outcome = anyio.run(lambda: compact(ledger, sid, Stub(), trigger="manual"))
    assert outcome.action == "compressed"
    switches = [
        r.event for r in ledger.store.read_stream(sid) if isinstance(r.event, SessionSwitched)
    ]
    assert outcome.plan == switches[-1].plan == msgspec.to_builtins(ref_plan)
