"""``ctxledger serve --workers 2``: the turns of one proxied session are serialized across
worker processes (the event store's lease), on a SQLite file and on PostgreSQL.

Which worker accepts a connection is the kernel's choice, so the test decides it: the
other worker is frozen (SIGSTOP) while a request is sent. The same request of one
session lands in both workers while the first one's model call is in flight: exactly
one reply is recorded, no branch is started, both clients get an answer, and the next
turn continues the same line. (Linux: worker pids come from /proc.)
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from helpers.fake_upstream import FakeUpstream
from helpers.pg_server import PgServer
from helpers.uvicorn_thread import free_port
from test_server_smoke import CLI, _wait_healthy, upstream  # noqa: F401

from ctxledger import Ledger

SYSTEM = {"role": "system", "content": "Be brief."}


@pytest.fixture(params=["sqlite", "postgres"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "workers.db")
    pg: PgServer = request.getfixturevalue("pg_server")
    return f"{pg.url}?schema=w_{hashlib.sha256(str(tmp_path).encode()).hexdigest()[:20]}"


@contextlib.contextmanager
def serve_workers(
    target: str, upstream_port: int, tmp_path: Path
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """``ctxledger serve --workers 2``, yielded once *both* workers finished their startup
    (a frozen worker must not be waiting for the other one to start: uvicorn's supervisor
    kills a worker that does not answer its health check for 5 s)."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "CTXLEDGER_INDEX_DIR": str(tmp_path)}
    upstream_url = f"http://127.0.0.1:{upstream_port}/v1"
    args = ["--db", target, "--port", str(port), "--workers", "2", "--upstream", upstream_url]
    proc = subprocess.Popen(
        [*CLI, "serve", *args, "--log-level", "info"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=env,
    )
    started = threading.Semaphore(0)

    def read_log() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            if b"Application startup complete" in line:
                started.release()

    threading.Thread(target=read_log, daemon=True).start()
    try:
        assert started.acquire(timeout=90) and started.acquire(timeout=90), "workers not started"
        _wait_healthy(base, proc)
        yield base, proc
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def worker_pids(server: subprocess.Popen[bytes]) -> list[int]:
    """uvicorn's worker processes (spawned children; not multiprocessing's resource tracker)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        children = Path(f"/proc/{server.pid}/task/{server.pid}/children").read_text().split()
        pids = [
            int(pid)
            for pid in children
            if b"spawn_main" in Path(f"/proc/{pid}/cmdline").read_bytes()
        ]
        if len(pids) == 2:
            return pids
        time.sleep(0.1)  # poll: /proc has no change notification
    raise AssertionError("uvicorn did not start two workers")


@contextlib.contextmanager
def stopped(pid: int) -> Iterator[None]:
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)


def ask(base: str, family: str, messages: list[dict[str, Any]], stream: bool) -> bytes:
    body = {"model": "gpt-4.1", "messages": messages, "stream": stream}
    headers = {"X-Ctxledger-Session": family}
    with (
        httpx.Client(timeout=120) as http,
        http.stream("POST", base + "/v1/chat/completions", json=body, headers=headers) as resp,
    ):
        assert resp.status_code == 200
        return resp.read()


def test_one_sessions_turn_sent_to_two_workers_at_once_is_recorded_once(
    target: str,
    upstream: tuple[FakeUpstream, int],  # noqa: F811 (the fixture imported above)
    tmp_path: Path,
) -> None:
    """Worker X takes the turn and is frozen (SIGSTOP) while its model call is in flight;
    the same request then lands in worker W, which must wait for X's turn (the store's
    lease), find it answered, and record nothing of its own."""
    fake, upstream_port = upstream
    calls = threading.Semaphore(0)  # one release per model call
    fake.on_request = lambda seen: calls.release()
    fake.event_delay = 0.3  # the first answer streams slowly: X is frozen in the middle of it
    question = [SYSTEM, {"role": "user", "content": "what is 2 + 2?"}]
    replies: dict[str, bytes] = {}
    with serve_workers(target, upstream_port, tmp_path) as (base, server):
        w, other = worker_pids(server)
        with stopped(w):  # the first request can only land in the other worker, X
            first = threading.Thread(
                target=lambda: replies.update(first=ask(base, "dup", question, True))
            )
            first.start()
            assert calls.acquire(timeout=60)  # X holds the turn and waits for the model
        fake.event_delay = 0.0
        x = other
        with stopped(x):  # the same request now can only land in W
            second = threading.Thread(
                target=lambda: replies.update(second=ask(base, "dup", question, False))
            )
            second.start()
            # W answers this only after it accepted the request sent before it
            assert httpx.get(base + "/healthz", timeout=60).status_code == 200
            # W must not call the model while X's turn is open (without the lease it would)
            assert not calls.acquire(timeout=1.0)
        first.join(120)
        second.join(120)
        assert replies["first"].rstrip().endswith(b"data: [DONE]")
        assert b"answer 2" in replies["second"]  # W got its own answer from the model
        peers = {seen.peer for seen in fake.requests}
        assert len(fake.requests) == 2 and len(peers) == 2  # one model call from each worker
        assert fake.max_in_flight == 1  # W called the model only after X's turn was recorded
        with httpx.Client(base_url=base, timeout=30) as http:
            view = http.get("/v1/sessions/dup/api-messages").json()["messages"]
            assert [(m["role"], m["content"]) for m in view[1:]] == [
                ("user", "what is 2 + 2?"),
                ("assistant", "answer 1"),  # X's answer, recorded once; W's not at all
            ]
            # the next turn continues the same line
            follow = [*question, view[-1], {"role": "user", "content": "and 3 + 3?"}]
            ask(base, "dup", follow, False)
    with Ledger.open(target) as ledger:
        assert ledger.verify().ok
        assert [s.session_id for s in ledger.sessions()] == ["dup"]  # no branch started
        assert len(ledger.transcript.live_messages("dup")) == 4
        assert ledger.usage("dup").agent_calls == 2  # one recorded model call per turn
