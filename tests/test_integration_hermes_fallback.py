"""A real Hermes Agent that activates its fallback provider in a turn whose requests
were refused for their size three times (``tests/hermes_fallback.py`` under
``.venv-hermes``): Hermes zeroes its turn's compression attempts with the fallback, and
answers a fourth refusal by compacting; the ledger records that compaction as
``overflow`` and the window the provider stated as learnt (session 39; before, the
fourth refusal was taken as one Hermes gives up on: ``preflight`` and a model switch)."""

from __future__ import annotations

import pytest
from helpers.hermes_run import script_ledger

from ctxledger.analysis.replay import verify_compactions
from ctxledger.events import (
    CompressionChecked,
    ContextLimitLearned,
    ModelSwitched,
    SessionSwitched,
)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    yield from script_ledger(tmp_path_factory, "hermes_fallback.py", "fallback.json")


def test_a_refusal_after_a_fallback_is_answered_and_recorded_as_overflow(run):
    out, ledger = run
    result = out["limit"]
    # Hermes: three refusals compacted, the 429 switched it to the fallback model, whose
    # refusal it compacted for too (attempts zeroed), and the turn was answered
    assert [d for _, d in result["done"]].count("refuse") == 4
    assert result["done"][-2:] == [["fallback-model", "refuse"], ["fallback-model", "answer"]]
    assert result["count"] == 4 and result["error"] is None
    tip = ledger.tip(result["root"])
    chain = set(ledger.chains.chain(tip))
    events = [r.event for r in ledger.store.read_all() if r.event.session_id in chain]
    checks = [e for e in events if isinstance(e, CompressionChecked)]
    assert [c.trigger for c in checks] == ["overflow"] * 4
    switches = [e for e in events if isinstance(e, SessionSwitched)]
    assert [s.trigger for s in switches] == ["overflow"] * 4
    # the fallback is a model switch; the window its provider stated then is learnt
    [switched] = [e for e in events if isinstance(e, ModelSwitched)]
    assert switched.model == "fallback-model"
    [learnt] = [e for e in events if isinstance(e, ContextLimitLearned)]
    assert learnt.context_length == 60_000
    assert not verify_compactions(ledger, tip).drifted


def test_a_fallback_for_empty_replies_renews_no_attempts(run):
    """Review 1: Hermes's fallback after three empty replies zeroes only its empty-reply
    count, not its compaction attempts: it gives the fourth refusal up. The engine keeps
    its count too (before, the refusal stayed pending, as one Hermes would answer: its
    next ``compress`` of the session, a TUI ``/compress``, would have been ``overflow``)."""
    out, _ = run
    result = out["empty"]
    done = [step for _, step in result["done"]]
    assert done.count("refuse") == 4 and done.count("empty") >= 4
    assert result["done"][-1] == ["fallback-model", "refuse"]
    assert result["count"] == 3 and "max compression attempts" in result["error"]
    assert result["pending"] is False


def test_pre_api_compactions_count_among_the_turn_s_attempts(run):
    """Session 40: Hermes's check before a model call compacts under the same count its
    size-refusal handlers keep (``compression_attempts``, three a turn). After one such
    compaction it answers two refusals and gives the third up; the engine follows its
    count (before, it counted refusals only and held the third as pending, so the TUI's
    ``/compress`` that followed was recorded ``overflow``, an answer to it)."""
    out, ledger = run
    result = out["pre_api"]
    done = [step for _, step in result["done"]]
    assert done == ["grow", "recall", "refuse", "recall", "refuse", "recall", "refuse"]
    assert result["count"] == 3 and "max compression attempts" in result["error"]
    assert result["pending"] is False
    chain = set(ledger.chains.chain(ledger.tip(result["root"])))
    events = [r.event for r in ledger.store.read_all() if r.event.session_id in chain]
    switches = [e.trigger for e in events if isinstance(e, SessionSwitched)]
    # the pre-API compaction, two refusals answered, then the TUI's /compress (session
    # 40: the user asked, not forcing it; ``preflight`` before, as Hermes's own decision)
    assert switches == ["preflight", "overflow", "overflow", "requested"]
