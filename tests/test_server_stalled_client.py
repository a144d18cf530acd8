"""A client that stops reading a streamed reply must not hold its session's turn forever.

Review (session 26): a turn holds its session family's lock until its stream is done;
a client that keeps the connection open but reads nothing makes the server's ``send``
wait (the socket buffers are full) with no end, and every later turn of that session
waited behind it. A send that cannot go out for ``stall_timeout`` seconds now ends the
turn like a client that left: nothing more is sent, the reply is not recorded (unless
its end had already gone out), the lock is released. (Before, the second turn below
waited past any timeout: confirmed with a 20 s client timeout.)
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from helpers.fake_upstream import FakeUpstream, Raw
from helpers.uvicorn_thread import serving

from ctxledger import ContextService
from ctxledger.events import MessageAppended
from ctxledger.server import create_app

SESSION = "stalled-1"
USER = {"role": "user", "content": "hello"}


def _big_stream(megabytes: int) -> tuple[bytes, ...]:
    text = "x" * 100_000
    chunk = {"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]}
    event = f"data: {json.dumps(chunk)}\n\n".encode()
    stop = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    tail = (f"data: {json.dumps(stop)}\n\n".encode(), b"data: [DONE]\n\n")
    return (event,) * (megabytes * 10) + tail


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, FakeUpstream, ContextService]]:
    # both under uvicorn: the upstream's stream reaches the proxy as it is sent (an
    # in-process transport would hand over the whole body at once)
    fake = FakeUpstream()
    service = ContextService.open(tmp_path / "server.db")
    with serving(fake) as up_port:
        app = create_app(service, upstream=f"http://127.0.0.1:{up_port}/v1", stall_timeout=1.0)
        with serving(app) as port:
            yield f"http://127.0.0.1:{port}", fake, service
    anyio.run(service.aclose)


def _start_and_stop_reading(base: str, body: dict[str, Any]) -> socket.socket:
    """Send a streamed request over a raw socket, read one byte of the answer, then nothing."""
    port = int(base.rsplit(":", 1)[1])
    sock = socket.create_connection(("127.0.0.1", port))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    payload = json.dumps(body).encode()
    sock.sendall(
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: proxy\r\n"
        b"Content-Type: application/json\r\nX-Ctxledger-Session: " + SESSION.encode() + b"\r\n"
        b"Content-Length: " + str(len(payload)).encode() + b"\r\n\r\n" + payload
    )
    assert sock.recv(1)  # the answer has started: the turn holds the session's lock
    return sock


def test_a_client_that_stops_reading_releases_its_sessions_turn(
    served: tuple[str, FakeUpstream, ContextService],
) -> None:
    base, fake, service = served
    fake.queue(Raw(_big_stream(40), "text/event-stream"))
    stalled = _start_and_stop_reading(base, {"model": "m", "messages": [USER], "stream": True})
    try:
        # the next turn of the same session is answered (before: it waited forever)
        nxt = httpx.post(
            base + "/v1/chat/completions",
            json={"model": "m", "messages": [USER]},
            headers={"X-Ctxledger-Session": SESSION},
            timeout=60,
        )
        assert nxt.status_code == 200, nxt.text
    finally:
        stalled.close()
    events = [rec.event for rec in service.ledger.store.read_all()]
    replies = [e.message for e in events if isinstance(e, MessageAppended)]
    # the stalled turn's reply was never delivered: only the second one is recorded
    assert [m["role"] for m in replies] == ["user", "assistant"]
    assert "x" * 100 not in (replies[1].get("content") or "")
