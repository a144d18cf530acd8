"""``ctxledger compress`` and ``undo`` run from a shell on a conversation a real Hermes
Agent is still running (session 37).

Run by ``tests/test_integration_hermes_outside.py`` with the python of ``.venv-hermes``:

    .venv-hermes/bin/python tests/hermes_outside_writer.py WORKDIR [state]

Hermes (the README's ``config.yaml``, the fake upstream of ``hermes_scenario.py``) runs
five small turns, none reaching its threshold; after turn 2 the CLI compacts the
conversation's chain, after turn 3 it undoes that compaction, each as a separate
process. After the last turn's hand-over the CLI compacts and undoes once more (the
chain's tip moved again, to a view Hermes holds) and Hermes's TUI's ``/compress``
(``force=False``) runs: the user asked, so the tip is compacted (session 40). ``WORKDIR/outside.json`` holds every chat request (with the turn it belongs
to), Hermes's compaction count after each turn and what the CLI printed; the test reads
the ledger with the project's ctxledger.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

from hermes_scenario import REQUESTS, fake_agent, hermes_home, serve, tui_compress


def _cli(db: Path, *args: str) -> str:
    proc = subprocess.run(
        [sys.executable, "-m", "ctxledger", "--db", str(db), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return proc.stdout


def _agent(home: Path, with_store: bool) -> tuple[Any, Any]:
    """Hermes's agent on the fake upstream, with its session store when `with_store`
    (as its CLI keeps it: a compaction, an adopt included, archives the list it held)."""
    from hermes_state import SessionDB

    store = SessionDB(home / "state.db") if with_store else None
    return fake_agent(serve(), session_db=store), store


def _archived(home: Path, session_id: str) -> int:
    """The rows Hermes's store set aside at a compaction made in place (its default)."""
    with sqlite3.connect(home / "state.db") as con:
        query = "SELECT count(*) FROM messages WHERE session_id = ? AND active = 0"
        return int(con.execute(query, (session_id,)).fetchone()[0])


def main() -> None:
    workdir = Path(sys.argv[1])
    home = hermes_home(workdir)
    db = home / "ctxledger.ledger.db"
    agent, store = _agent(home, sys.argv[2:] == ["state"])
    engine = agent.context_compressor
    filler = " ".join(f"alpha{i} beta gamma delta" for i in range(900))
    history: list[dict[str, Any]] = []
    turns: list[int] = []  # the turn of each request
    counts: list[int] = []
    ids: list[str] = []  # Hermes's session id after each turn
    said: dict[str, str] = {}
    for turn in range(5):
        if turn == 3:
            said["compress"] = _cli(db, "compress", str(engine._root), "--json")
        if turn == 4:
            said["undo"] = _cli(db, "undo", json.loads(said["compress"])["compaction_id"])
        before = len(REQUESTS)
        result = agent.run_conversation(
            f"Turn {turn}: review part {turn} of the alpha module.\n{filler}",
            conversation_history=history or None,
        )
        history = result["messages"]
        turns += [turn] * (len(REQUESTS) - before)
        counts.append(engine.compression_count)
        ids.append(agent.session_id)
    engine.on_session_end(agent.session_id, history)
    said["compress2"] = _cli(db, "compress", str(engine._root), "--json")
    said["undo2"] = _cli(db, "undo", json.loads(said["compress2"])["compaction_id"])
    tui = tui_compress(agent, history)  # on the moved tip: a user's request
    engine.on_session_end(agent.session_id, tui)
    out = {"tui": tui, "tui_count": engine.compression_count}
    out |= {"db": str(db), "root": engine._root, "requests": REQUESTS, "turns": turns}
    out |= {"counts": counts, "ids": ids, "said": said, "history": history}
    out["archived"] = _archived(home, agent.session_id) if store is not None else None
    (workdir / "outside.json").write_text(json.dumps(out))


if __name__ == "__main__":
    main()
