"""ASGI pieces the fake servers share (standard library only: the Hermes scenarios import
them in Hermes's own virtualenv, where ctxledger is not installed)."""

from __future__ import annotations

from collections.abc import Iterable
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


async def respond(
    send: Any,
    status: int,
    content_type: str,
    body: bytes,
    headers: Iterable[tuple[bytes, bytes]] = (),
) -> None:
    """A whole ASGI response: `status`, its content type and length (then `headers`),
    and `body` in one message."""
    start = [(b"content-type", content_type.encode()), (b"content-length", b"%d" % len(body))]
    await send({"type": "http.response.start", "status": status, "headers": [*start, *headers]})
    await send({"type": "http.response.body", "body": body, "more_body": False})


def http_scope(
    method: str, path: str, headers: list[tuple[bytes, bytes]], query: bytes = b"", port: int = 1
) -> dict[str, Any]:
    """The ASGI scope of one HTTP/1.1 request to the proxy from 127.0.0.1, for tests that
    drive the app with raw messages (bytes no client library would send)."""
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": query,
        "root_path": "",
        "headers": headers,
        "client": ("127.0.0.1", port),
        "server": ("proxy.test", 80),
    }
