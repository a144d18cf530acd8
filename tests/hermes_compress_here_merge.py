"""``/compress here N`` after another writer's note was merged (session 46): Hermes's
split counts its own list, where the note and its next ask are one message; the
ledger holds them as two. The engine's check of whether the head would compact
(``head_compacts``) counted the head in the ledger's messages: it planned a prefix one
message short (the note and the ask apart, the head's last message missing), not the
head the branch then holds. Now it plans the head Hermes handed. ``/compress here 7``
leaves a head of seven messages, too few to compact (Hermes keeps its list, no branch);
``/compress here 6`` a head of nine, which compacts on a branch.

Run by ``tests/test_integration_hermes_compress_here_merge.py`` with the python of
``.venv-hermes``:

    .venv-hermes/bin/python tests/hermes_compress_here_merge.py WORKDIR

It writes ``WORKDIR/here.json``: what the engine handed back, what the planner was
given (a spy on ``hermes_host.plan``) and the ledger's path.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from hermes_cli.partial_compress import (
    rejoin_compressed_head_and_tail,
    split_history_for_partial_compress,
)
from hermes_engine_flows import a, begin, store, talk, u

from ctxledger.integrations import hermes_host

NOTE = "A note from a script: mind the beta module too."


def _calls(turn: int) -> list[dict[str, Any]]:
    """An assistant turn of two parallel recall calls and their results."""
    calls = [
        {"id": f"c{turn}{k}", "type": "function", "function": {"name": "recall", "arguments": "{}"}}
        for k in (1, 2)
    ]
    results = [{"role": "tool", "tool_call_id": c["id"], "content": "found"} for c in calls]
    return [a("", tool_calls=calls), *results]


def main() -> None:
    workdir = Path(sys.argv[1])
    db = workdir / "here.db"
    e = begin(db, store(workdir, "here"), "M")
    e.handle_tool_call("recall", {"query": "ask 0"}, messages=talk(0, 1))

    async def note(svc: Any) -> None:  # another writer, into the session Hermes holds
        await svc.append(svc.tip(str(e._root)), [u(NOTE)])

    e._shared.run(note)
    asked = [*talk(0, 1), u("ask 1")]
    moved = e.should_compress(100)
    view = e.compress(asked, current_tokens=100)  # Hermes takes the ledger's view
    history = [*view, *_calls(1), a("answer 1"), *talk(2, 7)]
    e.handle_tool_call("recall", {"query": "ask 8"}, messages=history)
    planned: list[list[Any]] = []
    plan = hermes_host.plan

    def spy(messages: list[Any], *args: Any, **kwargs: Any) -> Any:
        planned.append([m.get("content") for m in messages if m.get("role") != "system"])
        return plan(messages, *args, **kwargs)

    hermes_host.plan = spy
    heads, made = [], []
    for keep in (7, 6):  # /compress here 7, then /compress here 6
        head, tail = split_history_for_partial_compress(history, keep)
        compressed = e.compress(head, force=True)
        heads.append([m.get("content") for m in head])
        made.append([e._last_compression_made_progress, len(compressed)])
        history = rejoin_compressed_head_and_tail(compressed, tail)
    e.on_session_end("M", [*history, *talk(9, 1)])
    out = {"db": str(db), "root": e._root, "moved": moved, "view": view, "heads": heads}
    out |= {"made": made, "planned": planned, "history": history}
    (workdir / "here.json").write_text(json.dumps(out))


if __name__ == "__main__":
    main()
