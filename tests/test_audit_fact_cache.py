"""The audit's fact cache changes nothing but speed.

Facts are a pure function of a message, so ``analysis.factviews.FACTS`` keeps them by
content across the compactions of a chain and across queries. On random generated
chains (single-task debugging sessions with the offline or a forgetful summarizer,
and multi-turn sessions recorded through the service), ``audit_chain``,
``audit_compaction`` and ``trace`` give the same results with the cache off, cold,
and warm (filled by another chain and by a first run).
"""

from __future__ import annotations

import random
from typing import Any

import msgspec
import pytest
from helpers.debug_sessions import ForgetfulSummarizer, drive
from helpers.ledger_helpers import deterministic_ledger, recorded_chain

from ctxledger.analysis.audit import audit_chain, audit_compaction, trace
from ctxledger.analysis.factviews import FACTS, FactCache, uncached
from ctxledger.ledger.facade import Ledger


def _debug_chain(seed: int) -> tuple[Ledger, str]:
    rng = random.Random(seed)
    ledger = deterministic_ledger()
    summarizer = ForgetfulSummarizer(seed) if rng.random() < 0.5 else None
    tip = drive(ledger, seed, turns=rng.randint(18, 30), summarizer=summarizer, every=6)
    return ledger, tip


def _results(ledger: Ledger, tip: str) -> dict[str, Any]:
    chain = audit_chain(ledger, tip)
    values = sorted({x.fact.value for x in chain.lost_now_at})[:4]
    values += sorted({f.value for a in chain.compactions for f in a.kept})[:2]
    return {
        "chain": msgspec.to_builtins(chain),
        "each": [
            msgspec.to_builtins(audit_compaction(ledger, a.compaction_id))
            for a in chain.compactions
        ],
        "traces": [msgspec.to_builtins(trace(ledger, tip, v)) for v in values],
    }


SEEDS = [7, 19, 31]


@pytest.mark.parametrize("seed", SEEDS)
def test_cached_and_uncached_audits_are_identical_on_random_chains(seed: int) -> None:
    for ledger, tip in (_debug_chain(seed), recorded_chain(None, seed, turns=14)):
        with uncached():
            fresh = _results(ledger, tip)
        FACTS.clear()
        cold = _results(ledger, tip)
        warm = _results(ledger, tip)
        assert len(fresh["chain"]["compactions"]) >= 2
        assert cold == fresh
        assert warm == fresh


def test_a_cache_warmed_by_another_chain_changes_nothing() -> None:
    first, second = _debug_chain(3), _debug_chain(4)
    with uncached():
        expected = _results(*second)
    FACTS.clear()
    _results(*first)  # the task wording and many commands are shared
    assert _results(*second) == expected


def test_the_cache_is_filled_once_per_content_and_bounded() -> None:
    ledger, tip = _debug_chain(11)
    FACTS.clear()
    audit_chain(ledger, tip)
    misses = FACTS.misses
    assert misses > 0
    audit_chain(ledger, tip)
    assert FACTS.misses == misses  # the second audit extracts nothing
    small = FactCache(limit=3)
    for i in range(10):
        facts = small.facts({"role": "assistant", "content": f"see src/mod{i}.py"})
        assert f"src/mod{i}.py" in {f.normalized for f in facts}
    assert len(small) == 3
    with uncached():
        assert FACTS.facts({"role": "user", "content": "x"}) is not None
    assert FACTS.enabled
