"""Hermes's gateway ``/compress`` itself, on its built-in compressor and on ctxledger.

Run by ``tests/test_integration_hermes_gateway.py`` with the python of ``.venv-hermes``:

    .venv-hermes/bin/python tests/hermes_gateway_compress.py WORKDIR

``GatewayRunner._handle_compress_command`` runs as the gateway runs it for a chat: it
loads the transcript from the session store, builds its temporary ``AIAgent`` (the
engine ``config.yaml`` selects), asks ``has_content_to_compress``, compacts, rewrites
the transcript and answers the chat. Only what lies outside Hermes is stood in for: the
session store (one session, in memory), the provider runtime (a local address no call
reaches: ctxledger summarizes offline, and the built-in compressor is only given
histories it leaves unchanged without a model call), the runner's other attributes
(read as nothing). Writes ``WORKDIR/gateway.json``.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from datetime import datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from hermes_compaction import ReadsAsNothing
from hermes_engine_flows import talk

ENGINE = """\
model:
  context_length: 64000
plugins:
  enabled: [ctxledger]
context:
  engine: {engine}
"""


class _Store:
    """The gateway's ``SessionStore`` for one chat (the runner's async facade calls it
    in a worker thread): its entry, and its transcript kept where Hermes keeps it, in
    ``state.db`` (loaded and rewritten as ``SessionStore`` does it)."""

    def __init__(self, entry: Any, db: Any) -> None:
        self.entry, self.db = entry, db

    def get_or_create_session(self, _: Any) -> Any:
        return self.entry

    def load_transcript(self, session_id: str) -> list[dict[str, Any]]:
        return self.db.get_messages_as_conversation(session_id, repair_alternation=True)  # type: ignore[no-any-return]

    def rewrite_transcript(self, session_id: str, messages: list[Any]) -> bool:
        self.db.replace_messages(session_id, messages)
        return True

    def update_session(self, *_: Any, **__: Any) -> None:
        return None

    def _save(self) -> None:
        return None


def _runner(state: Any, store: _Store) -> Any:
    from gateway import run as gateway_run

    class Runner(ReadsAsNothing, gateway_run.GatewayRunner):  # type: ignore[misc, name-defined]
        def _session_key_for_source(self, _: Any) -> str:
            return "chat-key"

        def _resolve_session_agent_runtime(self, **_: Any) -> Any:
            runtime = {
                "api_key": "sk-fake",
                "base_url": "http://127.0.0.1:9/v1",
                "provider": "custom",
            }
            return "fake-model", runtime

    runner = object.__new__(Runner)
    runner._session_db, runner.session_store = state, store
    return runner


def say(state: Any, sid: str, messages: list[dict[str, Any]]) -> None:
    """The chat's turns, saved as the gateway's agent saves them."""
    if state.get_session(sid) is None:
        state.create_session(sid, source="telegram")
    for m in messages:
        state.append_message(sid, role=m["role"], content=m["content"])


def compress(home: Path, engine: str, state: Any, sid: str, args: str = "") -> Any:
    """The gateway's ``/compress {args}`` on session `sid` with ``context.engine:
    {engine}``: its answer, the session id it leaves the chat on, its transcript."""
    from gateway.config import Platform
    from gateway.platforms.base import MessageEvent
    from gateway.session import SessionEntry, SessionSource

    (home / "config.yaml").write_text(ENGINE.format(engine=engine))
    entry = SessionEntry(
        session_key="chat-key",
        session_id=sid,
        created_at=datetime(2026, 1, 1),
        updated_at=datetime(2026, 1, 1),
    )
    store = _Store(entry, state)
    source = SessionSource(platform=Platform.LOCAL, chat_id="chat", user_id="user")
    event = MessageEvent(text=f"/compress {args}".strip(), source=source)
    import run_agent

    built: list[Any] = []

    class Recorded(run_agent.AIAgent):  # type: ignore[misc, name-defined]
        """The handler's temporary agent, kept to read its count and warning after."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            built.append(self)

    saved, run_agent.AIAgent = run_agent.AIAgent, Recorded
    try:
        answer = asyncio.run(_runner(state, store)._handle_compress_command(event))
    finally:
        run_agent.AIAgent = saved
    kept = store.load_transcript(entry.session_id)
    (agent,) = built
    return SimpleNamespace(
        answer=answer,
        sid=entry.session_id,
        kept=[m["content"] for m in kept],
        count=agent.context_compressor.compression_count,
        warning=getattr(agent, "_compression_warning", None),
    )


def chat_agent(workdir: Path, state: Any, sid: str) -> Any:
    """The engine of the chat's agent, as Hermes sets one up on session `sid`."""
    from gateway.session_context import set_current_session_id

    from ctxledger.integrations.hermes import CtxLedgerEngine

    engine = CtxLedgerEngine(db_path=workdir / "gateway.db")
    engine.update_model("fake-model", 64_000)
    set_current_session_id(sid)
    engine.bind_session_state(session_db=state, session_id=sid)
    engine.on_session_start(sid, platform="telegram")
    return engine


def transcript(state: Any, sid: str) -> list[dict[str, Any]]:
    return state.get_messages_as_conversation(sid, repair_alternation=True)  # type: ignore[no-any-return]


def main() -> None:
    workdir = Path(sys.argv[1])
    home = workdir / "home"
    home.mkdir()
    os.environ["HERMES_HOME"] = str(home)  # before Hermes is imported: it reads it once
    os.environ["CTXLEDGER_DB"] = str(workdir / "gateway.db")
    from hermes_state import SessionDB

    state = SessionDB(home / "state.db")
    out: dict[str, Any] = {}
    out["short"] = said = {}  # 6 messages: past the gateway's "not enough", nothing compacts
    for engine in ("compressor", "ctxledger"):
        sid = f"short-{engine[:4]}"  # ids of one length: the system prompt holds it
        say(state, sid, talk(0, 3))
        done = compress(home, engine, state, sid)
        said[engine] = [done.answer, done.kept]
    say(state, "chat", talk(0, 12))
    full = compress(home, "ctxledger", state, "chat")
    say(state, full.sid, talk(12, 3))
    # the chat's agent handed its whole list over (a recall call): the ledger saw the tail
    live = chat_agent(workdir, state, full.sid)
    live.handle_tool_call("recall", {"query": "ask 13"}, messages=transcript(state, full.sid))
    here = compress(home, "ctxledger", state, full.sid, "here 2")
    # the next turn's agent (the gateway evicted the chat's) on what state.db holds
    say(state, here.sid, talk(15, 1))
    rebuilt = chat_agent(workdir, state, here.sid)
    rebuilt.on_session_end(here.sid, transcript(state, here.sid))
    out["full"], out["here"] = vars(full), vars(here)
    out["chains"] = {"live": live._root, "next turn": rebuilt._root}
    (workdir / "gateway.json").write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
