"""A Hermes conversation with a session store, compacted, then resumed in a new process.

Run by ``tests/test_integration_hermes_resume.py`` with the python of ``.venv-hermes``:

    .venv-hermes/bin/python tests/hermes_resume.py WORKDIR PHASE

Phase ``1`` runs ``TURNS`` turns of a real ``AIAgent`` that keeps its ``state.db`` (as
the CLI and the gateway do), enough to compact; phase ``2`` is a new process resuming
the same Hermes session id from that store (as ``hermes --resume``) for one more turn.
Each phase ends the session as the CLI does and writes ``WORKDIR/phaseN.json``: the
host's history. The fake upstream is ``tests/hermes_scenario.py``'s, on 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import hermes_scenario

SESSION = "conv-1"
TURNS = 8


def main() -> None:
    workdir, phase = Path(sys.argv[1]), sys.argv[2]
    home = workdir / "home"
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.yaml").write_text(hermes_scenario.CONFIG)
    os.environ["HERMES_HOME"] = str(home)
    os.environ.pop("CTXLEDGER_DB", None)
    base_url = hermes_scenario.serve()

    from hermes_state import SessionDB
    from run_agent import AIAgent

    store = SessionDB()
    history = (
        store.get_messages_as_conversation(SESSION, repair_alternation=True)
        if phase == "2"
        else None
    )
    agent = AIAgent(
        base_url=base_url,
        api_key="sk-fake",
        model="fake-model",
        provider="custom",
        quiet_mode=True,
        skip_memory=True,
        skip_context_files=True,
        enabled_toolsets=["context_engine"],
        session_id=SESSION,
        session_db=store,
    )
    filler = " ".join(f"alpha{i} beta gamma delta" for i in range(1500))
    first = 0 if phase == "1" else TURNS
    for turn in range(first, TURNS if phase == "1" else TURNS + 1):
        result = agent.run_conversation(
            f"Turn {turn}: review part {turn} of the alpha module.\n{filler}",
            conversation_history=history,
        )
        history = result["messages"]
    agent.context_compressor.on_session_end(agent.session_id, history)
    (workdir / f"phase{phase}.json").write_text(json.dumps({"history": history}, default=str))


if __name__ == "__main__":
    main()
