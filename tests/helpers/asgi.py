"""ASGI pieces the fake servers share (standard library only: the Hermes scenarios import
them in Hermes's own virtualenv, where ctxledger is not installed)."""

from __future__ import annotations

from typing import Any


async def serve_lifespan(receive: Any, send: Any) -> None:
    """An ASGI app's lifespan as a server runs it (uvicorn): started, then shut down."""
    while (await receive())["type"] != "lifespan.shutdown":
        await send({"type": "lifespan.startup.complete"})
    await send({"type": "lifespan.shutdown.complete"})


async def request_body(receive: Any) -> bytes:
    """An ASGI request's whole body."""
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            return body
