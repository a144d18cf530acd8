"""A real Hermes Agent (its own context compressor) as a client of ``ctxledger serve``.

Run by ``tests/test_integration_hermes_proxy.py`` with the python of ``.venv-hermes``:

    .venv-hermes/bin/python tests/hermes_proxy_client.py WORKDIR

A fake OpenAI-compatible upstream and the proxy (``create_app``) are served by uvicorn
on 127.0.0.1 in threads of this process; Hermes's ``AIAgent`` points at the proxy.

- ``tools``: the model answers the first ask with two parallel ``todo`` calls in one
  stream (its own spacing in the arguments, text with a trailing newline), then a final
  answer; a second ask follows on the returned history.
- ``later`` and ``first``: Hermes is interrupted (``agent.interrupt``) while the proxy
  waits for the model, on a later ask or on the first one; the model answers only once
  Hermes has given up on the call, and Hermes's worker still reads that answer (its
  abort shuts no socket down: it looks for the connection in the client's default
  transport, and Hermes sends through mounted ones), so the proxy records a reply the
  agent never saw. Then the agent asks again on its own history.
- ``cut``: the output limit stops the model inside a tool call (``finish_reason:
  length``); Hermes drops that reply and sends the same request again.
- ``empty``: the model's first answer is empty; Hermes drops it and asks again.
- ``interleaved`` (session 46): the two parallel calls stream interleaved (both heads,
  then each call's arguments in halves, the calls taking turns), then the answer and a
  second ask on the returned history.

Writes ``WORKDIR/result.json``: the paths the upstream was asked for, the final answers,
Hermes's histories and the ledger's path. (What the upstream is sent is the ledger's
view, not Hermes's copy: Hermes's own spelling is seen only by the proxy's matching.)
Nothing here talks to the internet.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

from helpers.asgi import request_body, respond, serve_lifespan
from helpers.chat_stream import chat_chunks, send_stream
from helpers.uvicorn_thread import serving
from hermes_scenario import hermes_home

CONFIG = "model:\n  context_length: 64000\nagent:\n  environment_probe: false\n"
CALLS = [
    ("call_1", '{ "todos": [ {"id": "1", "content": "read the spec", "status": "pending"} ] }'),
    ("call_2", '{"todos": [{"status": "pending", "id": "2", "content": "write the test"}],'
     ' "merge": true}'),
]  # fmt: skip
#: the model's replies in order; ``hold``: interrupt the agent, answer once it gave up
REPLIES: list[dict[str, Any]] = [
    {"content": "Planning it.\n", "tool_calls": CALLS},
    {"content": "Planned: two items.\n"},
    {"content": "Next: read the spec."},
    {"content": "Started."},
    {"content": "An answer the agent never saw.", "hold": True},
    {"content": "Did the other thing."},
    {"content": "A first answer the agent never saw.", "hold": True},
    {"content": "Both asks answered."},
    {
        "content": "Cut.",
        "tool_calls": [("call_cut", '{"todos": [{"id": "1", "cont')],
        "finish": "length",
    },
    {
        "content": "Whole.",
        "tool_calls": [("call_whole", '{"todos": [{"id": "1", "content": "a"}]}')],
    },
    {"content": "Planned once."},
    {"content": ""},
    {"content": "Said at last."},
    {"content": None, "tool_calls": CALLS, "interleave": True},
    {"content": "Both planned."},
    {"content": "Going on."},
]
SEEN: list[str] = []
STREAMED: list[bool] = []
AGENT: list[Any] = []  # the agent a held reply interrupts
GAVE_UP = threading.Event()  # the interrupted run_conversation has returned
ANSWERED = threading.Event()  # the held reply has been sent


async def upstream(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":
        await serve_lifespan(receive, send)
        return
    body = await request_body(receive)
    SEEN.append(scope["path"])
    if scope["path"].endswith("/models"):
        models = {"object": "list", "data": [{"id": "fake-model", "object": "model"}]}
        await respond(send, 200, "application/json", json.dumps(models).encode())
        return
    STREAMED.append(bool(json.loads(body).get("stream")))
    n = len(STREAMED)
    reply = REPLIES[n - 1] if n <= len(REPLIES) else {"content": "ok"}
    if reply.get("hold"):
        AGENT[-1].interrupt("stop")
        while not GAVE_UP.is_set():
            await asyncio.sleep(0.02)
    chunks = chat_chunks(
        reply,
        chunk_id=f"c{n}",
        split_calls=True,
        finish=reply.get("finish"),
        interleave=bool(reply.get("interleave")),
    )
    await send_stream(send, chunks)
    if reply.get("hold"):
        ANSWERED.set()


def _agent(port: int) -> Any:
    from run_agent import AIAgent

    agent = AIAgent(
        base_url=f"http://127.0.0.1:{port}/v1",
        api_key="sk-fake",
        model="fake-model",
        provider="custom",
        quiet_mode=True,
        skip_memory=True,
        skip_context_files=True,
        enabled_toolsets=["todo"],
    )
    AGENT.append(agent)
    return agent


def _interrupted(agent: Any, ask: str, history: list[dict[str, Any]] | None, db: Path) -> Any:
    """`ask`, interrupted while the model thinks; returns once the proxy has recorded the
    reply Hermes dropped (its worker reads it after the agent gave up)."""
    from ctxledger import Ledger
    from ctxledger.events import MessageAppended

    GAVE_UP.clear()
    ANSWERED.clear()
    result = agent.run_conversation(ask, conversation_history=history)
    GAVE_UP.set()
    assert ANSWERED.wait(20), "the held reply was not sent"
    deadline = time.monotonic() + 20
    with Ledger.open(db) as ledger:
        while time.monotonic() < deadline:
            ledger.refresh()
            events = (r.event for r in ledger.store.read_all())
            if any(
                isinstance(e, MessageAppended) and "never saw" in str(e.message.get("content"))
                for e in events
            ):
                return result
            time.sleep(0.05)
    raise AssertionError("the proxy did not record the held reply")


def _kept(messages: list[dict[str, Any]]) -> list[list[Any]]:
    return [[m.get("role"), m.get("content")] for m in messages]


def main() -> None:
    workdir = Path(sys.argv[1])
    hermes_home(workdir, CONFIG)
    os.environ.pop("CTXLEDGER_DB", None)
    from ctxledger import ContextService
    from ctxledger.server import create_app

    db = workdir / "proxy.db"
    service = ContextService.open(db)
    out: dict[str, Any] = {"db": str(db)}
    with serving(upstream) as up:
        app = create_app(service, upstream=f"http://127.0.0.1:{up}/v1")
        with serving(app) as port:
            agent = _agent(port)
            first = agent.run_conversation("Plan the work.")
            second = agent.run_conversation("And next?", conversation_history=first["messages"])
            out["finals"] = [first.get("final_response"), second.get("final_response")]

            agent = _agent(port)
            started = agent.run_conversation("Start the later one.")
            cut = _interrupted(agent, "Think it over at length.", started["messages"], db)
            after = agent.run_conversation(
                "Do the other thing.", conversation_history=cut["messages"]
            )
            out["later"] = {
                "interrupted": cut.get("interrupted"),
                "cut": _kept(cut["messages"]),
                "after": _kept(after["messages"]),
            }

            agent = _agent(port)
            cut = _interrupted(agent, "Think about the first ask.", None, db)
            after = agent.run_conversation(
                "And a second ask.", conversation_history=cut["messages"]
            )
            out["first"] = {
                "interrupted": cut.get("interrupted"),
                "cut": _kept(cut["messages"]),
                "after": _kept(after["messages"]),
            }
            agent = _agent(port)
            out["cut"] = _kept(agent.run_conversation("Plan it in one call.")["messages"])
            agent = _agent(port)
            out["empty"] = _kept(agent.run_conversation("Say something.")["messages"])
            agent = _agent(port)
            both = agent.run_conversation("Plan both, in parallel.")
            again = agent.run_conversation("Go on.", conversation_history=both["messages"])
            out["interleaved"] = [both.get("final_response"), again.get("final_response")]
    out["paths"], out["streamed"] = SEEN, STREAMED
    (workdir / "result.json").write_text(json.dumps(out))


if __name__ == "__main__":
    main()
