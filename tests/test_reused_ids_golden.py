"""A ledger main wrote before session 45 reopens as stored and meets the new rule only
in what comes next.

Session 45 made a call still unanswered when a user message came before its id's
re-use lost (README, orphan section). ``tests/golden/ledger_reused_ids.db`` was written
by main before that (recipe: ``tests/golden/make_reused_ids_ledger.py``): one session
whose result with the re-used id went to the earlier call, then compacted, and one
stored with both calls and no result yet (in flight at the upgrade).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from helpers.ledger_helpers import make_ledger

from ctxledger.analysis.replay import rebuild_check, verify_compactions
from ctxledger.ledger.facade import Ledger

GOLDEN = Path(__file__).parent / "golden" / "ledger_reused_ids.db"
FACTS = json.loads((Path(__file__).parent / "golden" / "ledger_reused_ids.json").read_text())


def reopened(tmp_path: Path) -> Ledger:
    path = tmp_path / "old.db"
    shutil.copyfile(GOLDEN, path)
    return make_ledger(path, namespace="u")


def result(text: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": "call_0", "content": text}


def test_the_old_pairing_replays_as_stored(tmp_path: Path) -> None:
    with reopened(tmp_path) as ledger:
        assert ledger.store.verify().ok
        for facts in FACTS.values():
            assert ledger.api_messages(facts["tip"]) == facts["view"]  # nothing re-derived
            assert rebuild_check(ledger, facts["tip"]).equal
        assert not verify_compactions(ledger, FACTS["ses_answered"]["tip"]).drifted
    first = FACTS["ses_answered"]["view"]
    assert first[1]["tool_calls"][0]["id"] == "call_0" == first[4]["tool_call_id"]  # A's


def test_a_ledger_in_flight_at_the_upgrade_follows_the_new_rule(tmp_path: Path) -> None:
    """A(call_0), user, B(call_0) stored: the first result now goes to B (main before
    session 45: to A), and a second one answers the lost A (session 45 refused it)."""
    sid = FACTS["ses_pending"]["tip"]
    with reopened(tmp_path) as ledger:
        ledger.append_messages(sid, [result("first")])
        view = ledger.api_messages(sid)
        assert view[-1]["tool_call_id"] == view[-2]["tool_calls"][0]["id"] != "call_0"
        ledger.append_messages(sid, [result("second")])
        late = ledger.api_messages(sid)
        assert late[:-1] == view and late[-1]["tool_call_id"] == "call_0"
        assert next(m["tool_calls"][0]["id"] for m in view if m.get("tool_calls")) == "call_0"
        assert rebuild_check(ledger, sid).equal
