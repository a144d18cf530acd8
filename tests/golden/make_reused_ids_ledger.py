"""How ``ledger_reused_ids.db`` (and ``ledger_reused_ids.json``) were made: run with the
ctxledger of main before session 45 changed which call a result with a re-used id
answers (commit c2c7de50: first in, first out whatever the user turns between; now a
call still unanswered when a user message came before its id's re-use is lost).

Two sessions, each ``A(call_0)``, a user message, ``B(call_0)`` (repaired by the ledger:
``B`` got a synthesized id):

* ``ses_answered``: then one result with ``call_0``, which that main gave to ``A``; six
  long turns and a compaction (the tip is the compacted session).
* ``ses_pending``: stored without results (in flight when the code is upgraded).

The JSON records what that main stored: each tip and its API view.
``tests/test_reused_ids_golden.py`` checks that today's code reopens the file to the
same views (nothing re-derived), verifies and rebuilds it, and applies the new rule to
what comes next. Recipe (``old`` = a checkout of that main)::

    PYTHONPATH=old:old/tests python tests/golden/make_reused_ids_ledger.py out.db out.json
    python -c "import sqlite3; c = sqlite3.connect('out.db'); c.execute('VACUUM'); c.execute('PRAGMA journal_mode=DELETE')"
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from helpers.ledger_helpers import compact_now, make_ledger


def asks(text: str) -> dict[str, Any]:
    call = {"id": "call_0", "type": "function", "function": {"name": "terminal", "arguments": "{}"}}
    return {"role": "assistant", "content": text, "tool_calls": [call]}


def user(text: str = "again") -> dict[str, Any]:
    return {"role": "user", "content": text}


def turns(n: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for k in range(n):
        out += [user(f"ask {k} " + "u" * 3_000), {"role": "assistant", "content": "a" * 3_000}]
    return out


def main(path: str, facts: str) -> None:
    for suffix in ("", "-wal", "-shm", ".lock", ".head", ".leases"):
        if os.path.exists(path + suffix):
            os.remove(path + suffix)
    out: dict[str, Any] = {}
    with make_ledger(Path(path)) as ledger:
        for name in ("ses_answered", "ses_pending"):
            sid = ledger.start_session(model="m", context_length=16_000, session_id=name)
            ledger.append_messages(sid, [user("go"), asks("A"), user(), asks("B")])
            if name == "ses_answered":
                ledger.append_messages(
                    sid, [{"role": "tool", "tool_call_id": "call_0", "content": "r"}]
                )
                ledger.append_messages(sid, turns(6))
                outcome = compact_now(ledger, sid)
                assert outcome.action == "compressed" and outcome.new_session_id is not None
                sid = outcome.new_session_id
            out[name] = {"tip": sid, "view": ledger.api_messages(sid)}
    with open(facts, "w") as f:
        json.dump(out, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
