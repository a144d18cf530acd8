"""Hermes conversations with a session store, compacted, then resumed in a new process.

Run by ``tests/test_integration_hermes_resume.py`` with the python of ``.venv-hermes``:

    .venv-hermes/bin/python tests/hermes_resume.py WORKDIR PHASE

Phase ``1`` runs two conversations of a real ``AIAgent`` that keeps its ``state.db`` (as
the CLI and the gateway do), each long enough to compact: ``conv-1`` with Hermes's
default in-place compaction, ``conv-rot`` with rotation (``compression.in_place:
false``: each compaction ends the Hermes session and goes on under a new id, a child in
``state.db``). Phase ``2`` is a new process resuming both as ``hermes --resume`` does
(the id resolved to its compression tip, the history loaded from the store) for one
more turn each. Each phase ends the sessions as the CLI does and writes
``WORKDIR/phaseN.json``: each conversation's Hermes ids and host history. The fake
upstream is ``tests/hermes_scenario.py``'s, on 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import hermes_scenario

#: conversation id -> (turns in phase 1, Hermes compacts in place)
CONVERSATIONS = {"conv-1": (8, True), "conv-rot": (6, False)}


def _run(base_url: str, store: Any, name: str, phase: str) -> dict[str, Any]:
    turns, in_place = CONVERSATIONS[name]
    session = name if phase == "1" else store.resolve_resume_session_id(name)
    history = (
        store.get_messages_as_conversation(session, repair_alternation=True)
        if phase == "2"
        else None
    )
    agent = hermes_scenario.fake_agent(base_url, session_id=session, session_db=store)
    agent.compression_in_place = in_place  # what compression.in_place sets
    filler = " ".join(f"alpha{i} beta gamma delta" for i in range(1500))
    first = 0 if phase == "1" else turns
    for turn in range(first, turns if phase == "1" else turns + 1):
        result = agent.run_conversation(
            f"Turn {turn}: review part {turn} of the alpha module.\n{filler}",
            conversation_history=history,
        )
        history = result["messages"]
    agent.context_compressor.on_session_end(agent.session_id, history)
    return {"started": session, "ended": agent.session_id, "history": history}


def main() -> None:
    workdir, phase = Path(sys.argv[1]), sys.argv[2]
    hermes_scenario.hermes_home(workdir)
    os.environ.pop("CTXLEDGER_DB", None)
    base_url = hermes_scenario.serve()

    from hermes_state import SessionDB

    store = SessionDB()
    out = {name: _run(base_url, store, name, phase) for name in CONVERSATIONS}
    (workdir / f"phase{phase}.json").write_text(json.dumps(out, default=str))


if __name__ == "__main__":
    main()
