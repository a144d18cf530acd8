"""The Hermes engine through the session flows of Hermes's CLI, without a model.

Run by ``tests/test_integration_hermes_flows.py`` with the python of ``.venv-hermes``
(the engine subclasses Hermes's ``ContextEngine``):

    .venv-hermes/bin/python tests/hermes_engine_flows.py WORKDIR

Each flow writes its own ledger in ``WORKDIR`` and what the engine said in
``WORKDIR/flows.json``; the test reads the ledgers with the project's ctxledger. The
calls are the ones Hermes makes: its CLI's ``/new``, ``/resume <id>`` and ``/branch``
move ``HERMES_SESSION_ID`` (``set_current_session_id``), set the agent's id and call
``reset_session_state()`` with no arguments: ``on_session_reset`` alone, no start.
"""

from __future__ import annotations

import asyncio
import copy
import json
import sys
from pathlib import Path
from typing import Any

MARK = "_db_persisted"


def u(text: str, **extra: Any) -> dict[str, Any]:
    return {"role": "user", "content": text, **extra}


def a(text: str, **extra: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": text, **extra}


def talk(first: int, turns: int) -> list[dict[str, Any]]:
    return [m for i in range(first, first + turns) for m in (u(f"ask {i}"), a(f"answer {i}"))]


def engine(db: Path, model: str = "m1", window: int = 100_000) -> Any:
    from ctxledger.integrations.hermes import CtxLedgerEngine

    e = CtxLedgerEngine(db_path=db)
    e.update_model(model, window)
    return e


def cli_switch(e: Any, new_id: str) -> None:
    """What the CLI's /new, /resume <id>, /branch do to the engine."""
    from gateway.session_context import set_current_session_id

    set_current_session_id(new_id)
    e.on_session_reset()


def branch(workdir: Path) -> dict[str, Any]:
    """/branch: the branch's id is only in HERMES_SESSION_ID; then /resume A continues A."""
    e = engine(workdir / "branch.db")
    e.on_session_start("A")
    chain_a = talk(0, 2)
    e.on_session_end("A", chain_a)
    cli_switch(e, "B")
    e.compress(chain_a + talk(2, 1), force=True)  # no id handed: only Hermes's current one
    cli_switch(e, "A")
    e.on_session_end("A", chain_a + talk(5, 1))
    return {}


def new_same_opening(workdir: Path) -> dict[str, Any]:
    """/new, the new conversation opening as the old one did; the id only via on_session_end."""
    from gateway.session_context import set_current_session_id

    set_current_session_id("")  # no current id kept: it comes with the hand-over
    e = engine(workdir / "new.db")
    e.on_session_start("C")
    e.on_session_end("C", talk(0, 1))
    e.on_session_reset()
    e.on_session_end("D", [*talk(0, 1), u("a new topic"), a("sure")])
    return {}


def reset_without_an_id(workdir: Path) -> dict[str, Any]:
    """A reset after which no new id is learnt (none kept current, none handed over):
    the old id's chain is not this conversation's."""
    from gateway.session_context import set_current_session_id

    set_current_session_id("")
    e = engine(workdir / "reset.db")
    e.on_session_start("F")
    e.on_session_end("F", talk(0, 1))
    e.on_session_reset()
    e.compress(talk(0, 1) + talk(1, 1), force=True)
    return {}


def resume_other_model(workdir: Path) -> dict[str, Any]:
    """A chain written with m1/100K and compacted, resumed by an agent on m2/200K."""
    db = workdir / "model.db"
    first = engine(db)
    first.on_session_start("S")
    view = first.compress(talk(0, 12), force=True)
    compacted = first.compression_count
    first.on_session_end("S", view)
    second = engine(db, "m2", 200_000)
    second.on_session_start("S")
    second.on_session_end("S", view + talk(12, 1))
    return {"compacted": compacted, "resumed_count": second.compression_count}


def empty_root(workdir: Path) -> dict[str, Any]:
    """A root titled with the id and no message yet: no conversation to continue."""
    from ctxledger import ContextService

    db = workdir / "empty.db"
    svc = ContextService.open(db)
    asyncio.run(svc.start_session(model="m1", context_length=100_000, title="hermes session E"))
    svc.ledger.close()
    e = engine(db)
    e.on_session_start("E")
    e.on_session_end("E", talk(0, 1))
    return {}


def old_marks(workdir: Path) -> dict[str, Any]:
    """A ledger written before the mark was left out: its events hold ``_db_persisted``."""
    from ctxledger import ContextService

    db = workdir / "marks.db"
    svc = ContextService.open(db)

    async def write() -> None:
        sid = await svc.start_session(model="m1", context_length=100_000, title="hermes session O")
        await svc.append(sid, [{**m, MARK: True} for m in talk(0, 2)])

    asyncio.run(write())
    svc.ledger.close()
    e = engine(db)
    e.on_session_start("O")
    resumed = [{**m, "timestamp": 1.0, MARK: True} for m in talk(0, 2)]
    view = e.compress(resumed + talk(2, 1), force=True)
    return {"view_marked": any(MARK in m for m in view)}


def memory(workdir: Path) -> dict[str, Any]:
    """What a compaction leaves the engine holding of the list it was made from."""
    from ctxledger.integrations import hermes_host

    e = engine(workdir / "memory.db")
    e.on_session_start("M")
    history = talk(0, 12)
    e.compress(history, force=True)
    parts = u([{"type": "text", "text": "a part"}], **{MARK: True})
    shallow = hermes_host.unmarked([parts])[0]["content"] is parts["content"]
    return {
        "handed_dicts": sum(isinstance(d, dict) for d in e._handed),
        "handed": len(e._handed),
        "unmarked_shares_values": shallow,
    }


def store(workdir: Path, name: str) -> Any:
    """Hermes's own session store (``state.db``), as the CLI and the gateway keep it."""
    from hermes_state import SessionDB

    return SessionDB(workdir / f"{name}-state.db")


def begin(db: Path, state: Any, sid: str) -> Any:
    """An agent's engine on Hermes session `sid`, as Hermes sets it up with its store."""
    from gateway.session_context import set_current_session_id

    e = engine(db)
    if state.get_session(sid) is None:
        state.create_session(sid, source="cli")
    set_current_session_id(sid)
    e.bind_session_state(session_db=state, session_id=sid)
    e.on_session_start(sid, hermes_home=str(db.parent), platform="cli")
    return e


def rotate(e: Any, state: Any, old: str, new: str, handed: list[dict[str, Any]]) -> None:
    """What Hermes's compress_context does after a compaction with compression.in_place
    false: the memory flush of the list compacted, the old session ended, a child row, the
    current id moved, the engine told of the boundary."""
    from gateway.session_context import set_current_session_id

    e.on_session_end(old, handed)
    state.end_session(old, "compression")
    state.create_session(new, source="cli", parent_session_id=old)
    set_current_session_id(new)
    e.on_session_start(new, boundary_reason="compression", old_session_id=old, platform="cli")


def rotated(workdir: Path) -> dict[str, Any]:
    """Two compactions with rotation (R -> X -> Y), then a new process resuming R as
    ``hermes --resume`` does (resolved to its compression tip, Y)."""
    state, db = store(workdir, "rotated"), workdir / "rotated.db"
    e = begin(db, state, "R")
    history = talk(0, 12)
    view = e.compress(history, force=True)
    rotate(e, state, "R", "X", history)
    history = view + talk(12, 12)
    view = e.compress(history, force=True)
    rotate(e, state, "X", "Y", history)
    e.on_session_end("Y", view + talk(24, 1))
    tip = state.resolve_resume_session_id("R")
    resumed = begin(db, state, tip)
    resumed.on_session_end(tip, view + talk(24, 2))
    return {"tip": tip, "count": resumed.compression_count}


def rotated_after_a_sub_agent(workdir: Path) -> dict[str, Any]:
    """A conversation that delegated a task (Hermes's delegate_task: a child row marked
    ``_delegate_from``, started before the compaction) then compacted with rotation
    (R -> X), resumed on X in a new process. Hermes's ``get_compression_lineage(X)``
    is X alone here (walking down from R it takes the sub-agent's row)."""
    state, db = store(workdir, "delegated"), workdir / "delegated.db"
    e = begin(db, state, "R")
    state.create_session(
        "sub", source="cli", parent_session_id="R", model_config={"_delegate_from": "R"}
    )
    history = talk(0, 12)
    view = e.compress(history, force=True)
    rotate(e, state, "R", "X", history)
    e.on_session_end("X", view + talk(12, 1))
    resumed = begin(db, state, "X")
    resumed.on_session_end("X", view + talk(12, 2))
    return {"lineage": state.get_compression_lineage("X")}


def rotated_then_branched(workdir: Path) -> dict[str, Any]:
    """A rotated conversation (R -> X) branched (the CLI's /branch: X ended, a child
    marked ``_branched_from``), X resumed and compacted with rotation again (X -> Z: X
    ends ``compression``), then the branch resumed: a branch is no compression
    continuation in Hermes's store (its mark decides, X's end reason does not), so it is
    a chain of its own."""
    state, db = store(workdir, "branched"), workdir / "branched.db"
    e = begin(db, state, "R")
    history = talk(0, 12)
    view = e.compress(history, force=True)
    rotate(e, state, "R", "X", history)
    e.on_session_end("X", view + talk(12, 1))
    state.end_session("X", "branched")
    state.create_session(
        "B", source="cli", parent_session_id="X", model_config={"_branched_from": "X"}
    )
    state.reopen_session("X")
    state.end_session("X", "compression")
    state.create_session("Z", source="cli", parent_session_id="X")
    later = begin(db, state, "B")
    later.on_session_end("B", view + talk(12, 2))
    return {}


def rotated_then_reset(workdir: Path) -> dict[str, Any]:
    """A reset after a rotation (R -> X) that learns no new id (X still current, none
    handed over): the chain X continues is not this conversation's."""
    state, db = store(workdir, "reset-rot"), workdir / "reset-rot.db"
    e = begin(db, state, "R")
    history = talk(0, 12)
    view = e.compress(history, force=True)
    rotate(e, state, "R", "X", history)
    e.on_session_reset()
    e.compress(view + talk(12, 1), force=True)
    return {}


def model_switch(workdir: Path) -> dict[str, Any]:
    """A model switch after a response (``/model``, a fallback): Hermes's built-in
    compressor and the engine given the same calls; the engine's chain then written."""
    from agent.context_compressor import ContextCompressor

    builtin = ContextCompressor("m1", config_context_length=200_000, quiet_mode=True)
    ours = engine(workdir / "switch.db", "m1", 200_000)
    ours.on_session_start("W")
    ours.on_session_end("W", talk(0, 1))  # the chain the switch is recorded on
    usage = {"prompt_tokens": 90_000, "completion_tokens": 500, "total_tokens": 90_500}
    said: dict[str, Any] = {}
    for name, e in (("builtin", builtin), ("ours", ours)):
        e.update_from_response(usage)
        e._last_compression_made_progress = True
        e.update_model("m2", 64_000)
        status = e.get_status()
        said[name] = {
            "figures": [e.last_prompt_tokens, e.last_completion_tokens, e.last_total_tokens],
            "progress": e._last_compression_made_progress,
            "status": [status["last_prompt_tokens"], status["usage_percent"]],
        }
    ours.on_session_end("W", talk(0, 2))
    return said


def partial_compress(workdir: Path) -> dict[str, Any]:
    """``/compress here 2`` (the CLI's and the gateway's): Hermes splits its list with
    its own function, hands only the head to ``compress`` and re-appends the tail after
    the result; a recall call had handed the ledger the whole list before. Then the
    conversation goes on, and a new process resumes it. The expectation: the head
    compacted as a conversation of its own (another engine, another ledger)."""
    from hermes_cli.partial_compress import (
        rejoin_compressed_head_and_tail,
        split_history_for_partial_compress,
    )

    e = begin(workdir / "partial.db", store(workdir, "partial"), "P")
    view = e.compress(talk(0, 12), force=True)
    history = view + talk(12, 3)
    e.handle_tool_call("recall", {"query": "ask 13"}, messages=history)
    head, tail = split_history_for_partial_compress(history, 2)
    compressed = e.compress(head, force=True)
    e.on_session_end("P", head)  # Hermes's memory flush of the list it compacted
    # what the chain had compacted before the branch is still this conversation's
    hits = json.loads(e.handle_tool_call("recall", {"query": "ask 5"}))["hits"]
    first = next((h for h in hits if h["snippet"] == "«ask» «5»"), {})
    expanded = json.loads(
        e.handle_tool_call("expand_compaction", {"compaction_id": first.get("compacted_by")})
    )
    history = rejoin_compressed_head_and_tail(compressed, tail)
    e.on_session_end("P", history + talk(15, 1))
    alone = engine(workdir / "partial-alone.db")
    alone.on_session_start("Q")
    resumed = begin(workdir / "partial.db", store(workdir, "partial"), "P")
    resumed.on_session_end("P", history + talk(15, 2))
    return {
        "head": [m.get("content") for m in head],
        "tail": len(tail),
        "as_alone": compressed == alone.compress(head, force=True),
        "count": [e.compression_count, resumed.compression_count],
        "same_chain": e._root == resumed._root,
        "recalled": [first.get("role"), first.get("origin"), first.get("live")],
        "expanded": [m["message"]["content"] for m in expanded.get("messages", [])],
    }


def compress_here_no_progress(workdir: Path) -> dict[str, Any]:
    """``/compress here 7``: the head reaches back to the summary, and nothing in it
    compacts; Hermes keeps its list (no progress). Then the conversation goes on."""
    from hermes_cli.partial_compress import split_history_for_partial_compress

    e = begin(workdir / "here-noop.db", store(workdir, "here-noop"), "N")
    history = e.compress(talk(0, 12), force=True) + talk(12, 3)
    e.handle_tool_call("recall", {"query": "ask 13"}, messages=history)
    head, _ = split_history_for_partial_compress(history, 7)
    compressed = e.compress(head, force=True)
    e.on_session_end("N", head)  # Hermes's memory flush of the list it handed over
    e.on_session_end("N", history + talk(15, 1))
    return {
        "head": [m.get("content")[:12] for m in head],
        "unchanged": compressed == head,
        "progress": e._last_compression_made_progress,
    }


#: messages Hermes may hand that the ledger refuses (``hostile_after_a_foreign_write``)
BAD = {
    "result_id_list": {"role": "tool", "tool_call_id": ["c1"], "content": "x"},
    "result_id_object": {"role": "tool", "tool_call_id": {"id": "c1"}, "content": "x"},
    "calls_number": {"role": "assistant", "content": "x", "tool_calls": 5},
}


def hostile_after_a_foreign_write(workdir: Path) -> dict[str, Any]:
    """A message the ledger refuses in Hermes's list after another writer's note
    (session 46's review: the engine's repair raised TypeError on it first, out of
    ``compress``): the compaction fails with the ledger's reason, Hermes keeps its list,
    the session end is told in the log; nothing is appended."""
    return {name: _refused_after_a_note(workdir, name, bad) for name, bad in BAD.items()}


def _refused_after_a_note(workdir: Path, name: str, bad: dict[str, Any]) -> dict[str, Any]:
    e = engine(workdir / f"hostile-{name}.db")
    e.on_session_start("X")
    history = talk(0, 2)
    e.on_session_end("X", history)
    root = str(e._root)

    async def note(svc: Any) -> int:
        await svc.append(svc.tip(root), [u("a note from a script")])
        return await _live(svc, root)

    live = e._shared.run(note)
    handed = [*history, bad]
    kept = e.compress(copy.deepcopy(handed), force=True)
    e.on_session_end("X", copy.deepcopy(handed))
    return {
        "kept": kept == handed,
        "aborted": e._last_compress_aborted,
        "error": e._last_summary_error,
        "appended": e._shared.run(lambda svc: _live(svc, root)) - live,
    }


async def _live(svc: Any, root: str) -> int:
    return len(svc.ledger.transcript.live_ids(svc.tip(root)))


def left_out_then_failed(workdir: Path) -> dict[str, Any]:
    """Another writer withdrew Hermes's call (a note in its place); Hermes hands the
    call's result and its reply with a ``/compress`` that fails after the append, then
    ends (session 46's review, L1): the result is left out, the reply recorded, and the
    engine still knows Hermes's list (it held only what went into the ledger, and the
    end started a second root with the whole conversation)."""
    from ctxledger import ContextService
    from ctxledger.errors import InvalidInput

    e = engine(workdir / "left-out.db")
    e.on_session_start("L")
    call = {"id": "c1", "type": "function", "function": {"name": "recall", "arguments": "{}"}}
    history = [*talk(0, 2), u("look it up"), a("", tool_calls=[call])]
    e.on_session_end("L", history)
    root = str(e._root)

    async def withdraw(svc: Any) -> None:
        tip = svc.tip(root)
        last = svc.ledger.transcript.live_ids(tip)[-1]
        await svc.append(tip, [u("a note from a script")], withdraw=[last])

    e._shared.run(withdraw)
    handed = [*history, {"role": "tool", "tool_call_id": "c1", "content": "found"}, a("ok")]
    real = ContextService.compress

    async def failing(self: Any, *args: Any, **kwargs: Any) -> Any:
        raise InvalidInput("the summarizer is down")

    ContextService.compress = failing  # type: ignore[method-assign]
    try:
        kept = e.compress(copy.deepcopy(handed), force=True)
    finally:
        ContextService.compress = real  # type: ignore[method-assign]
    known = e._known == handed
    e.on_session_end("L", [*handed, u("next"), a("done")])
    return {"kept": kept == handed, "aborted": e._last_compress_aborted, "known": known}


def undo_then_compress(workdir: Path) -> dict[str, Any]:
    """``/undo`` of the last exchange (the compaction had kept it in the view), then
    ``/compress``: Hermes hands a strict prefix of the view, so the engine branches;
    recall from there must not find the undone answer."""
    e = begin(workdir / "undo.db", store(workdir, "undo"), "U")
    view = e.compress(talk(0, 12), force=True)
    e.compress(view[:-2], force=True)
    hits = json.loads(e.handle_tool_call("recall", {"query": "answer 11"}))["hits"]
    return {"undone": view[-1]["content"], "recalled": [h["snippet"] for h in hits]}


def resume_beside_a_branch(workdir: Path) -> dict[str, Any]:
    """After ``/compress here 2``, a new agent handed the list from before it (Hermes's
    store never got the compacted transcript: a crash in between). The old chain's tip
    ended when the branch started: the agent must not go on there."""
    from hermes_cli.partial_compress import split_history_for_partial_compress

    state, db = store(workdir, "beside"), workdir / "beside.db"
    e = begin(db, state, "S")
    history = e.compress(talk(0, 12), force=True) + talk(12, 3)
    e.handle_tool_call("recall", {"query": "ask 13"}, messages=history)
    e.compress(split_history_for_partial_compress(history, 2)[0], force=True)
    again = begin(db, state, "S")
    handed = history + talk(15, 1)
    again.compress(handed, force=True)
    return {
        "handed": [m.get("content") for m in handed],
        "aborted": again._last_compress_aborted,
        "error": again._last_summary_error,
    }


def branch_inherits(workdir: Path) -> dict[str, Any]:
    """A chain with a system prompt (held as developer) and a window (another client
    wrote it, under the title the engine resumes), resumed by an agent whose model has
    no known window, then handed a strict prefix: the branch takes the parent's prompt,
    in its role, and window."""
    from ctxledger import ContextService

    db = workdir / "inherits.db"
    svc = ContextService.open(db)

    async def write() -> None:
        sid = await svc.start_session(
            model="m1",
            context_length=64_000,
            system_prompt="be brief",
            system_role="developer",
            title="hermes session I",
        )
        await svc.append(sid, talk(0, 4))

    asyncio.run(write())
    svc.ledger.close()
    e = engine(db, window=0)
    e.on_session_start("I")
    e.on_session_end("I", talk(0, 3))
    return {}


def gateway_compress_here(workdir: Path) -> dict[str, Any]:
    """The gateway's ``/compress here 2``: a temporary agent (a new engine on the chat's
    session) compacts the head Hermes's split gives, the cached agent is evicted and the
    next turn's agent takes the rejoined history. The chat's agent had handed the whole
    list over before (a recall call)."""
    from hermes_cli.partial_compress import (
        rejoin_compressed_head_and_tail,
        split_history_for_partial_compress,
    )

    state, db = store(workdir, "gateway-here"), workdir / "gateway-here.db"
    live = begin(db, state, "G")
    history = live.compress(talk(0, 12), force=True) + talk(12, 3)
    live.handle_tool_call("recall", {"query": "ask 13"}, messages=history)
    head, tail = split_history_for_partial_compress(history, 2)
    temporary = begin(db, state, "G")
    history = rejoin_compressed_head_and_tail(temporary.compress(head, force=True), tail)
    rebuilt = begin(db, state, "G")
    rebuilt.on_session_end("G", history + talk(15, 1))
    return {
        "head": [m.get("content") for m in head],
        "same_chain": temporary._root == rebuilt._root,
    }


def cli_compress_here(workdir: Path) -> dict[str, Any]:
    """The same through Hermes's own ``/compress here 2``: its CLI's ``_manual_compress``
    on a real ``AIAgent`` (no model call: ctxledger summarizes) that compacts with
    rotation, then a resume of the id Hermes resolves."""
    import contextlib
    import os
    import types

    import cli
    import hermes_scenario

    home = Path(os.environ["HERMES_HOME"])  # set up before Hermes was imported (main)
    state = store(workdir, "cli")
    never_called = "http://127.0.0.1:9/v1"  # ctxledger summarizes: no model call
    agent = hermes_scenario.fake_agent(never_called, session_id="H", session_db=state)
    agent.compression_in_place = False  # compression.in_place: false
    e = agent.context_compressor
    view, _ = agent._compress_context(talk(0, 12), None, approx_tokens=1000, force=True)
    e.handle_tool_call("recall", {"query": "ask 13"}, messages=view + talk(12, 3))
    shell = types.SimpleNamespace(
        conversation_history=view + talk(12, 3),
        agent=agent,
        session_id=agent.session_id,
        _pending_title=None,
        _busy_command=lambda status: contextlib.nullcontext(),
    )
    cli.HermesCLI._manual_compress(shell, "/compress here 2")
    history = shell.conversation_history
    e.on_session_end(agent.session_id, history + talk(15, 1))
    tip = state.resolve_resume_session_id("H")
    resumed = begin(home / "ctxledger.ledger.db", state, tip)
    resumed.on_session_end(tip, history + talk(15, 2))
    return {
        "engine": type(e).__name__,
        "rotated": tip != "H",
        "same_chain": e._root == resumed._root,
    }


def failing_store(workdir: Path) -> dict[str, Any]:
    """A session store that raises (locked, closed): the resume looks under the agent's
    own id alone, Hermes's loop goes on, and the user is told once."""
    import logging

    class Broken:
        def get_session(self, session_id: str) -> Any:
            raise RuntimeError("database is locked")

    seen: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(f"{record.levelname} {record.getMessage()}")

    handler = Keep()
    logging.getLogger("ctxledger.integrations.hermes").addHandler(handler)
    try:
        e = engine(workdir / "broken.db")
        for turns in (1, 2):  # the agent, then a copy resuming it (Hermes deep-copies)
            agent = copy.deepcopy(e)
            agent.bind_session_state(session_db=Broken(), session_id="F")
            agent.on_session_start("F")
            agent.on_session_end("F", talk(0, turns))
    finally:
        logging.getLogger("ctxledger.integrations.hermes").removeHandler(handler)
    return {"logged": seen}


def gateway_context(workdir: Path) -> dict[str, Any]:
    """The gateway keeps each chat's Hermes id in a ContextVar of the thread that runs
    the agent (``set_session_vars``), not in ``os.environ`` (which may name another
    chat's session): after a reset the id is learnt there."""
    import os

    from gateway.session_context import clear_session_vars, set_session_vars

    os.environ["HERMES_SESSION_ID"] = "another-chat"
    e = engine(workdir / "gateway.db")
    e.on_session_start("G1", platform="telegram")
    e.on_session_end("G1", talk(0, 1))
    e.on_session_reset()
    tokens = set_session_vars(platform="telegram", session_id="G2")
    try:
        e.compress(talk(0, 1) + talk(1, 1), force=True)
    finally:
        clear_session_vars(tokens)
    return {}


def main() -> None:
    import os

    workdir = Path(sys.argv[1])
    import hermes_scenario

    # Hermes reads its home and config once: the ones cli_compress_here's agent uses
    (workdir / "cli-home").mkdir()
    (workdir / "cli-home" / "config.yaml").write_text(hermes_scenario.CONFIG)
    os.environ["HERMES_HOME"] = str(workdir / "cli-home")
    flows = (
        branch,
        new_same_opening,
        reset_without_an_id,
        resume_other_model,
        empty_root,
        old_marks,
        memory,
        rotated,
        rotated_after_a_sub_agent,
        rotated_then_branched,
        rotated_then_reset,
        model_switch,
        failing_store,
        partial_compress,
        compress_here_no_progress,
        hostile_after_a_foreign_write,
        left_out_then_failed,
        resume_beside_a_branch,
        undo_then_compress,
        branch_inherits,
        cli_compress_here,
        gateway_compress_here,
        gateway_context,  # last: it engages Hermes's per-context session variables
    )
    out = {flow.__name__: flow(workdir) for flow in flows}
    (workdir / "flows.json").write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
