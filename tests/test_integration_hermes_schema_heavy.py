"""A real Hermes Agent whose requests carry a large part its rough estimate overcounts
(``tests/hermes_schema_heavy.py`` under ``.venv-hermes``: a long persona, a provider
counting 60 % of the estimate). After a compaction the estimate stays over the
threshold while the provider's count fits: Hermes 0.19.0 asks its engine's
``should_defer_preflight_to_real_usage`` and waits for the count (#36718). The engine
said no (the base class's answer) and Hermes compacted the compacted list twice more
before sending it (3 compactions in one turn); now once (session 38)."""

from __future__ import annotations

import pytest
from helpers.hermes_run import script_ledger

from ctxledger.analysis.replay import verify_compactions
from ctxledger.analysis.whatif import whatif
from ctxledger.events import SessionSwitched, UsageReported


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    yield from script_ledger(tmp_path_factory, "hermes_schema_heavy.py", "heavy.json")


def test_the_compacted_request_is_sent_before_its_estimate_compacts_it_again(run):
    result, ledger = run
    assert result["counts"] == [0] * 10 + [1, 1]  # the long ask's turn, once
    tip = ledger.tip(result["root"])
    chain = set(ledger.chains.chain(tip))  # (the no-usage agent's chain is another)
    events = [r.event for r in ledger.store.read_all() if r.event.session_id in chain]
    [switch] = [e for e in events if isinstance(e, SessionSwitched)]
    assert switch.trigger == "preflight"
    # the provider counted the compacted request under the threshold, and the one after
    after = [e.usage.prompt for e in events if isinstance(e, UsageReported)][10:]
    assert len(after) == 2 and max(after) < result["threshold"]
    assert not verify_compactions(ledger, tip).drifted
    repro = whatif(ledger, tip).reproduction
    assert repro is not None and repro.compactions == [1, 1], repro.differences


def test_compactions_go_on_when_the_provider_reports_no_usage(run):
    """Review 1: Hermes 0.19.0 ends the wait for the compacted request's count on a
    response without usage (``update_from_response({})``); the engine ignored the empty
    report and kept deferring: one compaction, then requests past the window."""
    result, _ = run
    said = result["no_usage"]
    assert said["counts"][-1] >= 2, said["counts"]
    # every request Hermes sent stayed under its threshold (by the same estimate)
    assert max(said["sizes"]) < said["threshold"], said["sizes"]
