"""Hermes's gateway hygiene itself on the ctxledger engine (session 39).

Run by ``tests/test_integration_hermes_hygiene.py`` with the python of ``.venv-hermes``:

    .venv-hermes/bin/python tests/hermes_hygiene.py WORKDIR

A chat's agent handed its conversation to the ledger (its session's end); the next
inbound message goes through ``GatewayRunner._handle_message_with_agent``, whose hygiene
finds the transcript past 85 % of the 64,000-token window and compacts it on a fresh
``AIAgent`` (``_compress_context(..., approx_tokens=...)``, ``force=False``) before the
turn. The handler is stopped at the first call after its hygiene block. Only what lies
outside Hermes is stood in for, by ``hermes_compaction.gateway_hygiene`` (shared with its
``hygiene``): the session store (one session, in memory), the provider runtime (a local
address no call reaches: ctxledger summarizes offline), the runner's other attributes
(read as nothing).
Writes ``WORKDIR/hygiene.json``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import hermes_scenario
from hermes_compaction import gateway_hygiene

SID = "chat-session"


def _talk(turns: int) -> list[dict[str, Any]]:
    filler = " ".join(f"alpha{i} beta gamma delta" for i in range(600))
    out: list[dict[str, Any]] = []
    for turn in range(turns):
        out.append({"role": "user", "content": f"ask {turn}: part {turn}.\n{filler}"})
        out.append({"role": "assistant", "content": f"answer {turn}: done.\n{filler}"})
    return out


def main() -> None:
    workdir = Path(sys.argv[1])
    home = hermes_scenario.hermes_home(workdir)
    from ctxledger.integrations.hermes import CtxLedgerEngine

    db = home / "ctxledger.ledger.db"
    chat = CtxLedgerEngine(db_path=db)  # the chat's agent, as Hermes set it up
    chat.update_model("local-model", 64_000)
    chat.on_session_start(SID, platform="local")
    history = _talk(8)  # the ledger's estimate under the threshold, the gateway's past 85 %
    chat.on_session_end(SID, history)
    # the gateway's handler for the chat's next message, up to its hygiene's end
    if gateway_hygiene(home, history, compacts=True, session_id=SID) is not False:
        raise AssertionError("the handler did not reach the end of its hygiene block")
    out = {"db": str(db), "root": chat._root, "threshold": chat.threshold_tokens}
    (workdir / "hygiene.json").write_text(json.dumps(out))


if __name__ == "__main__":
    main()
