"""A real Hermes Agent whose provider refuses a request with a context-length error
(``tests/hermes_overflow.py`` under ``.venv-hermes``): Hermes compacts without its check
having said yes, and the ledger records it as what it was, ``overflow`` (session 38;
``preflight`` before, which a what-if judged against the threshold and dropped)."""

from __future__ import annotations

import pytest
from helpers.hermes_run import script_ledger

from ctxledger.analysis.replay import verify_compactions
from ctxledger.analysis.whatif import whatif
from ctxledger.events import CompressionChecked, ContextLimitLearned, SessionSwitched


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    yield from script_ledger(tmp_path_factory, "hermes_overflow.py", "overflow.json")


def _said(message: dict) -> tuple:
    return (message["role"], message.get("content"))


def test_a_compaction_after_a_provider_refusal_is_recorded_as_overflow(run):
    result, ledger = run
    # the fifth turn's first request was refused; Hermes compacted and sent it again
    [refused] = result["refused"]
    assert result["counts"] == [0, 0, 0, 0, 1]
    again = result["requests"][refused + 1]
    assert len(again["messages"]) < len(result["requests"][refused]["messages"])
    tip = ledger.tip(result["root"])
    chain = set(ledger.chains.chain(tip))
    events = [r.event for r in ledger.store.read_all() if r.event.session_id in chain]
    [check] = [e for e in events if isinstance(e, CompressionChecked)]
    assert check.trigger == "overflow" and check.details["decided_by"] == "host"
    assert "refused" in check.source and check.tokens < result["threshold"]
    [switch] = [e for e in events if isinstance(e, SessionSwitched)]
    assert switch.trigger == "overflow" and not switch.plan["forced"]
    # the window the provider stated is learnt (its threshold: 85 % of 60,000)
    [learnt] = [e for e in events if isinstance(e, ContextLimitLearned)]
    assert (learnt.previous_context_length, learnt.context_length) == (64_000, 60_000)
    assert check.threshold_tokens == result["threshold"] == 51_000
    # what Hermes sent again is the continuation's view (the rest of its turn since)
    sent = [_said(m) for m in again["messages"] if m["role"] != "system"]
    view = [_said(m) for m in ledger.api_messages(switch.new_session_id)]
    assert view[: len(sent)] == sent and len(view) > len(sent)
    assert not verify_compactions(ledger, tip).drifted
    report = whatif(ledger, tip)
    assert report.reproduction is not None
    assert report.reproduction.compactions == [1, 1], report.reproduction.differences
    assert not any("overflow" in note for note in report.notes), report.notes


def test_a_compaction_that_answers_no_refusal_is_not_an_overflow(run):
    """Review 1: with its compression off Hermes gives a refused turn up ("Run
    /compress"); the TUI's ``/compress`` that follows (``force=False``) was recorded
    ``overflow``, the refusal still pending. It is Hermes's preflight-like decision."""
    result, ledger = run
    off = result["off"]
    assert "compression.enabled: false" in off["said"] and off["left"] == {}
    ledger.refresh()
    chain = set(ledger.chains.chain(ledger.tip(off["root"])))
    [check] = [
        r.event
        for r in ledger.store.read_all()
        if r.event.session_id in chain and isinstance(r.event, CompressionChecked)
    ]
    assert check.trigger == "preflight" and "refused" not in check.source
