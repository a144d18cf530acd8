"""A store held up by another session answers 503 ``store_busy`` with ``Retry-After: 1``
(it was 500 ``ledger_error``): a SQLite ledger's write lock held past its busy timeout
(``StoreBusy``), a PostgreSQL role's ``lock_timeout`` running out (``ServerCancelled``).
Through the ASGI transport, on real stores."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Iterator
from contextlib import AbstractContextManager, asynccontextmanager, contextmanager
from pathlib import Path

import httpx
import pytest
from helpers.pg_server import PgServer
from test_postgres_cancelled import append_lock_held, role_url

from ctxledger import CompressionConfig, ContextService, Ledger
from ctxledger.eventstore import EventStore, SQLiteEventStore
from ctxledger.eventstore.postgres import PostgresEventStore
from ctxledger.server import create_app

pytestmark = pytest.mark.anyio
TOKEN = "s3cret-token-for-busy-tests-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
TURN = {"messages": [{"role": "user", "content": "held up"}]}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@asynccontextmanager
async def served(store: EventStore) -> AsyncIterator[httpx.AsyncClient]:
    service = ContextService(Ledger(store), config=CompressionConfig(context_length=8192))
    app = create_app(service, token=TOKEN)
    try:
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://ledger.test"
        ) as client:
            yield client
    finally:
        await app.state.ctx.aclose()
        await service.aclose()


async def _busy(
    client: httpx.AsyncClient, held: AbstractContextManager[None], why: str
) -> tuple[str, int, str]:
    """A session made; its append with the lock held elsewhere is a 503 ``store_busy``
    with ``Retry-After: 1`` naming `why`. (session id, its version before, the message)"""
    made = await client.post("/v1/sessions", headers=AUTH, json={"model": "m"})
    assert made.status_code == 201, made.text
    sid, version = made.json()["session_id"], made.json()["version"]
    with held:
        resp = await client.post(f"/v1/sessions/{sid}/messages", headers=AUTH, json=TURN)
    assert resp.status_code == 503, resp.text
    assert resp.headers["retry-after"] == "1"
    error = resp.json()["error"]
    assert error["code"] == "store_busy" and why in error["message"]
    return sid, version, error["message"]


@contextmanager
def _sqlite_lock_held(path: Path) -> Iterator[None]:
    blocker = sqlite3.connect(path, isolation_level=None)
    try:
        blocker.execute("BEGIN IMMEDIATE")
        yield
        blocker.execute("ROLLBACK")
    finally:
        blocker.close()


async def test_a_sqlite_lock_held_too_long_is_a_503_store_busy(tmp_path: Path) -> None:
    """Nothing of the cut append is stored; the same request lands once the lock is free."""
    path = tmp_path / "busy.db"
    async with served(SQLiteEventStore(path, busy_timeout_ms=50)) as client:
        sid, version, _ = await _busy(client, _sqlite_lock_held(path), "busy_timeout_ms")
        session = await client.get(f"/v1/sessions/{sid}", headers=AUTH)
        assert session.json()["version"] == version
        again = await client.post(f"/v1/sessions/{sid}/messages", headers=AUTH, json=TURN)
        assert again.status_code == 200, again.text
        assert again.json()["version"] == version + 1


async def test_a_postgres_lock_timeout_is_a_503_store_busy_to_resend_guarded(
    pg_server: PgServer, tmp_path: Path
) -> None:
    """A one-message append commits its row before it waits for the append lock: the
    cut wait leaves it stored (sealed by the next writer), and the message says so
    (the store looked its id up). The re-send with ``expected_version`` is then a 409 naming the version
    the stored append made; the session holds the message once."""
    with role_url(pg_server, tmp_path, "hb", lock_timeout=200) as url:
        store = PostgresEventStore(url, index_dir=tmp_path)
        async with served(store) as client:
            sid, version, said = await _busy(
                client, append_lock_held(pg_server, store), "lock_timeout"
            )
            assert (
                "its events were committed" in said and "re-send the same events (ids make" in said
            )
            guarded = {**TURN, "expected_version": version}
            again = await client.post(f"/v1/sessions/{sid}/messages", headers=AUTH, json=guarded)
            assert again.status_code == 409, again.text
            assert again.json()["error"]["current_version"] == version + 1
            messages = await client.get(f"/v1/sessions/{sid}/api-messages", headers=AUTH)
            texts = [m["content"] for m in messages.json()["messages"]]
            assert texts.count("held up") == 1
