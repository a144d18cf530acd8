"""Hermes's gateway hygiene itself on the ctxledger engine (session 39).

Run by ``tests/test_integration_hermes_hygiene.py`` with the python of ``.venv-hermes``:

    .venv-hermes/bin/python tests/hermes_hygiene.py WORKDIR

A chat's agent handed its conversation to the ledger (its session's end); the next
inbound message goes through ``GatewayRunner._handle_message_with_agent``, whose hygiene
finds the transcript past 85 % of the 64,000-token window and compacts it on a fresh
``AIAgent`` (``_compress_context(..., approx_tokens=...)``, ``force=False``) before the
turn. The handler is stopped at the first call after its hygiene block. Only what lies
outside Hermes is stood in for, as in ``hermes_compaction.hygiene``: the session store
(one session, in memory), the provider runtime (a local address no call reaches:
ctxledger summarizes offline), the runner's other attributes (read as nothing).
Writes ``WORKDIR/hygiene.json``.
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

import hermes_scenario
from hermes_compaction import ReadsAsNothing, _Decided, _Store

SID = "chat-session"


def _runner() -> Any:
    from gateway import run as gateway_run
    from gateway.config import GatewayConfig

    class Runner(ReadsAsNothing, gateway_run.GatewayRunner):  # type: ignore[misc, name-defined]
        def _thread_metadata_for_source(self, *_: Any, **__: Any) -> Any:
            return None

        def _resolve_session_agent_runtime(self, **_: Any) -> Any:
            runtime = {"api_key": "sk-fake", "base_url": "http://127.0.0.1:9/v1"}
            return "local-model", runtime | {"provider": "custom"}

        def _voice_channel_sidecar_note(self, *_: Any, **__: Any) -> Any:
            raise _Decided(False)  # the first call after the hygiene block

    runner = object.__new__(Runner)
    runner.config, runner._session_db, runner._turn_leases = GatewayConfig(), None, None
    return runner


def _talk(turns: int) -> list[dict[str, Any]]:
    filler = " ".join(f"alpha{i} beta gamma delta" for i in range(600))
    out: list[dict[str, Any]] = []
    for turn in range(turns):
        out.append({"role": "user", "content": f"ask {turn}: part {turn}.\n{filler}"})
        out.append({"role": "assistant", "content": f"answer {turn}: done.\n{filler}"})
    return out


def _gateway_message(history: list[dict[str, Any]]) -> None:
    """The gateway's handler for the chat's next message, up to its hygiene's end."""
    from gateway import run as gateway_run
    from gateway.config import Platform
    from gateway.session import SessionEntry, SessionSource

    source = SessionSource(platform=Platform.LOCAL, chat_id="chat", user_id="user")
    entry = SessionEntry(
        session_key="key",
        session_id=SID,
        created_at=datetime(2026, 1, 2),
        updated_at=datetime(2026, 1, 1),
    )
    runner = _runner()
    runner.session_store = _Store(entry, history)
    event = SimpleNamespace(
        text="next", reply_to_message_id=None, reply_to_text=None, metadata={}, source=source
    )
    gateway_run._hermes_home = Path(os.environ["HERMES_HOME"])
    try:
        asyncio.run(runner._handle_message_with_agent(event, source, "key", 1))
    except _Decided:
        return
    raise AssertionError("the handler did not reach the end of its hygiene block")


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
    _gateway_message(history)
    out = {"db": str(db), "root": chat._root, "threshold": chat.threshold_tokens}
    (workdir / "hygiene.json").write_text(json.dumps(out))


if __name__ == "__main__":
    main()
