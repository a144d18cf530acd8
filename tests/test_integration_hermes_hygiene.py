"""Hermes's gateway hygiene on the ctxledger engine (``tests/hermes_hygiene.py`` under
``.venv-hermes``: its own message handler, up to its hygiene's end): the compaction it
makes on a fresh agent before a turn is recorded as ``hygiene`` (session 39; ``preflight``
before: Hermes gives the engine no sign but its own call stack)."""

from __future__ import annotations

import pytest
from helpers.hermes_run import script_ledger

from ctxledger.analysis.replay import verify_compactions
from ctxledger.analysis.whatif import whatif
from ctxledger.events import CompressionChecked, SessionStarted, SessionSwitched


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    yield from script_ledger(tmp_path_factory, "hermes_hygiene.py", "hygiene.json")


def test_the_gateway_s_hygiene_is_recorded_as_hygiene(run):
    result, ledger = run
    events = [r.event for r in ledger.store.read_all()]
    roots = [e for e in events if isinstance(e, SessionStarted) and e.parent_session_id is None]
    assert [e.session_id for e in roots] == [result["root"]]  # the chat's chain went on
    [check] = [e for e in events if isinstance(e, CompressionChecked)]
    assert check.trigger == "hygiene" and check.details["decided_by"] == "host"
    assert check.details["hard_limit"] == 5000  # (Hermes's default: its config names none)
    assert "gateway's hygiene" in check.source
    # the gateway's own estimate of the transcript, past 85 % of the window
    assert check.tokens >= 0.85 * 64_000 and check.details["estimate"] < result["threshold"]
    [switch] = [e for e in events if isinstance(e, SessionSwitched)]
    assert switch.trigger == "hygiene" and not switch.plan["forced"]
    tip = ledger.tip(result["root"])
    assert tip == switch.new_session_id
    assert not verify_compactions(ledger, tip).drifted
    report = whatif(ledger, tip)
    assert report.reproduction is not None
    assert report.reproduction.compactions == [1, 1], report.reproduction.differences
    assert [c.trigger for c in report.whatif.compactions] == ["hygiene"]
