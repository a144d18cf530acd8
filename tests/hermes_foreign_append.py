"""A Python caller writes into the ledger session a real Hermes Agent's ctxledger engine
holds (session 45): ``append(withdraw=…)`` takes Hermes's last reply out of the view
and adds a note, or a plain ``append`` adds the note. Hermes takes the ledger's view at
its next check, before its next model call, as after ``ctxledger compress`` from a
shell; before, the engine went on appending Hermes's list after the caller's messages,
and Hermes went on sending its own list (the withdrawn reply, no note), the ledger's
view and what it sent parting silently.

Run by ``tests/test_integration_hermes_foreign_append.py`` with the python of
``.venv-hermes``:

    .venv-hermes/bin/python tests/hermes_foreign_append.py WORKDIR MODE

MODE: withdraw, append, race, end (session 45), assistant, parted, unasked (session 46).

Hermes (the fake upstream of ``hermes_scenario.py``) runs two turns and hands its list
over (``on_session_end``, as its CLI does after a compaction); the caller writes; Hermes
runs two more turns and hands its list over again. In mode ``race`` the note lands
instead within the engine's hand-over, right after its own append. In mode ``end``
(an append) Hermes ends its session right after the write, two messages more in its
list and no check in between: it never takes the caller's view (session 39's rule).
In mode ``assistant`` the caller's note is an assistant message after Hermes's reply,
which Hermes's repair merges with it; in modes ``parted`` and ``unasked`` it writes
while Hermes's tool call runs (:func:`_inside_tool`), and Hermes's repair drops the
call's result (session 46: the engine hands Hermes its repair's form; before, the next
hand-over started a new root).
``WORKDIR/foreign.json`` holds every chat request with its turn, the ids and the
ledger's path.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from agent.agent_runtime_helpers import repair_message_sequence
from hermes_scenario import REQUESTS, fake_agent, hermes_home, serve

from ctxledger import ContextService, Ledger

NOTE = "A note from a script: the last answer was withdrawn, review part 1 again."
#: the note's ``api_content`` sidecar (as a Hermes with a memory provider stamps its user
#: turns): merged with Hermes's next ask, it must be dropped, not sent for the merge
SIDECAR = NOTE + " [as sent with memory]"
#: mode ``end``: what Hermes's list holds more when it ends right after the caller's write
ENDING = [
    {"role": "user", "content": "Turn 2: stop here."},
    {"role": "assistant", "content": "Stopped."},
]


async def _write(db: Path, root: str, withdraw: bool, aside: str = "") -> dict[str, Any]:
    """The caller's write, through its own service on the same ledger file (with
    `aside`: an assistant message, after Hermes's reply)."""
    svc = ContextService.open(db)
    try:
        tip = svc.tip(root)
        last = svc.ledger.transcript.live_ids(tip)[-1]
        (message,) = svc.ledger.transcript.messages_of([last])
        ids = [last] if withdraw else []
        note = {"role": "user", "content": NOTE, "api_content": SIDECAR}
        note = {"role": "assistant", "content": aside} if aside else note
        await svc.append(tip, [note], withdraw=ids)
        return {"tip": tip, "last": last, "last_content": message.get("content")}
    finally:
        await svc.aclose()


def _race(wrote: dict[str, Any]) -> None:
    """Mode ``race``: the caller's note lands right after the engine's append (of the
    list Hermes hands over at turn 2's start), before the engine reads the view's key:
    the engine must not take the note into the view it remembers as Hermes's (it did,
    and Hermes never saw the note)."""
    append = ContextService.append

    async def racing(self: ContextService, sid: str, messages: Any, **kw: Any) -> Any:
        done = await append(self, sid, messages, **kw)
        if not wrote:
            note = {"role": "user", "content": NOTE, "api_content": SIDECAR}
            wrote["note"] = (await append(self, done.session_id, [note])).message_ids[0]
        return done

    ContextService.append = racing  # type: ignore[method-assign]


#: mode ``assistant``: the caller's note is an assistant message after Hermes's reply
ASIDE = "An aside from a script: part 1 needs no more review."
#: modes ``parted`` and ``unasked``: the caller's user note inside Hermes's tool call
PARTED = "A note from a script, written while the recall ran."


def _inside_tool(engine: Any, mode: str, wrote: dict[str, Any]) -> None:
    """Modes ``parted`` and ``unasked`` (session 46): the caller writes while Hermes runs
    its first tool call of turn 2 (the engine's ``recall``, which hands the list ending
    with the call over first): a user note after the call (``parted``), or the call
    withdrawn and the note in its place (``unasked``). Hermes then hands the call's
    result over, which its repair drops (a user message closes the call, or no call is
    left before it)."""
    handle = type(engine).handle_tool_call

    def writing(self: Any, name: str, args: Any, **kw: Any) -> str:
        out = handle(self, name, args, **kw)
        if not wrote:

            async def write(svc: ContextService) -> None:
                tip = svc.tip(str(self._root))
                last = svc.ledger.transcript.live_ids(tip)[-1]
                note = {"role": "user", "content": PARTED}
                ids = [last] if mode == "unasked" else []
                done = await svc.append(tip, [note], withdraw=ids)
                wrote.update(call=last, note=done.message_ids[0])

            self._shared.run(write)
        return out

    type(engine).handle_tool_call = writing


def _repaired_view(db: Path, root: str) -> list[dict[str, Any]]:
    """The ledger's final view (no system prompt) as Hermes's own repair leaves it: the
    oracle for the list Hermes holds."""
    ledger = Ledger.open(db)
    try:
        view = [m for m in ledger.api_messages(ledger.tip(root)) if m["role"] != "system"]
    finally:
        ledger.close()
    repair_message_sequence(None, view)
    return view


def main() -> None:
    workdir, mode = Path(sys.argv[1]), sys.argv[2]
    home = hermes_home(workdir)
    db = home / "ctxledger.ledger.db"
    agent = fake_agent(serve())
    engine = agent.context_compressor
    history: list[dict[str, Any]] = []
    turns: list[int] = []
    wrote: dict[str, Any] = {}
    for turn in range(4):
        if turn == 2 and mode == "race":
            _race(wrote)
            engine.on_session_end(agent.session_id, history)
        elif turn == 2 and mode in {"parted", "unasked"}:
            _inside_tool(engine, mode, wrote)
        elif turn == 2 and mode == "assistant":
            engine.on_session_end(agent.session_id, history)
            wrote = asyncio.run(_write(db, str(engine._root), False, ASIDE))
        elif turn == 2:
            engine.on_session_end(agent.session_id, history)
            wrote = asyncio.run(_write(db, str(engine._root), mode == "withdraw"))
            if mode == "end":  # Hermes ends with new messages, no check in between
                history = [*history, *ENDING]
                break
        before = len(REQUESTS)
        result = agent.run_conversation(
            f"Turn {turn}: review part {turn} of the alpha module.",
            conversation_history=history or None,
        )
        history = result["messages"]
        turns += [turn] * (len(REQUESTS) - before)
    engine.on_session_end(agent.session_id, history)
    out = {"db": str(db), "root": engine._root, "requests": REQUESTS, "turns": turns}
    out |= {"wrote": wrote, "history": history, "count": engine.compression_count}
    out["repaired"] = _repaired_view(db, str(engine._root))
    (workdir / "foreign.json").write_text(json.dumps(out))


if __name__ == "__main__":
    main()
