"""A PostgreSQL ledger behind a connection pooler (session 37's review, F1), simulated
without one: PgBouncer's refusal of the ``options`` startup parameter, a server session
whose search path is another client's, one that changes between statements, and
statements another client already prepared on the session. (By hand with a real
PgBouncer 1.18: docs/notes/s37-fleet.md, "Review 1".)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg
import pytest
import test_eventstore_postgres
from helpers.pg_server import PgServer
from test_eventstore_postgres import schema_for

from ctxledger.errors import ConnectionLost, StoreError
from ctxledger.eventstore import postgres_append, postgres_session
from ctxledger.eventstore.postgres import PostgresEventStore
from ctxledger.testing.eventstore import message

url, store = test_eventstore_postgres.url, test_eventstore_postgres.store

_TABLES = "SELECT count(*) FROM information_schema.tables WHERE table_schema = %s"


def _tables(pg_server: PgServer, schema: str) -> int:
    with psycopg.connect(pg_server.url, autocommit=True) as conn:
        row = conn.execute(_TABLES, (schema,)).fetchone()
    assert row is not None
    return int(row[0])


def test_a_pooler_refusing_the_options_parameter_still_gets_the_ledgers_schema(
    pg_server: PgServer, url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """(Review F1: PgBouncer refuses ``options``, ``unsupported startup parameter``; every
    open failed.) The store connects without it and sets schema and durability itself:
    the ledger is in the URL's schema, appended to and verified."""
    real = psycopg.connect
    sent: list[bool] = []

    def bouncer(conninfo: str, **kwargs: Any) -> Any:
        sent.append("options" in kwargs)
        if "options" in kwargs:
            raise psycopg.OperationalError("FATAL:  unsupported startup parameter: options")
        return real(conninfo, **kwargs)

    monkeypatch.setattr(psycopg, "connect", bouncer)
    with PostgresEventStore(url, index_dir=tmp_path, durability="normal") as store:
        store.append("ses_a", [message("ses_a", f"{i}") for i in range(3)], None)
        assert store.try_lease("k") is not None  # (the lease connection: no options)
        durability = store._run("look", lambda c: c.execute("SHOW synchronous_commit"))
        assert durability.fetchone() == ("off",)
        assert store.verify().ok and store.streams() == [("ses_a", 3)]
    assert sent[:2] == [True, False] and not any(sent[2:])  # asked once, then never sent
    assert _tables(pg_server, schema_for(tmp_path)) > 0


@pytest.mark.parametrize(
    ("session", "said"),
    [
        ("another_path", r"no schema t_\w+ on the connection's search path \(it reads public\)"),
        ("another_session", "reach different server sessions .* pool_mode = transaction"),
    ],
)
def test_a_connection_not_on_the_ledgers_schema_is_refused_before_any_table_is_made(
    pg_server: PgServer,
    url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    session: str,
    said: str,
) -> None:
    """(Review F1: with ``ignore_startup_parameters = options`` a ``?schema=`` was dropped
    without a word: the ledger made and written in ``public``.) A session whose search
    path is another client's, or statements that reach another server session (a
    pooler in transaction mode), are refused at the open: nothing is created."""
    real = postgres_session.set_up

    def pooled(conn: Any, schema: str, commit: str) -> tuple[str | None, int]:
        found, pid = real(conn, schema, commit)
        if session == "another_path":
            conn.execute("SET search_path TO public")
            return found, pid
        return found, pid + 1

    monkeypatch.setattr(postgres_session, "set_up", pooled)
    with pytest.raises(StoreError, match=said):
        PostgresEventStore(url, index_dir=tmp_path)
    assert _tables(pg_server, schema_for(tmp_path)) == 0


def test_statements_another_client_prepared_on_the_session_are_no_error(
    url: str, tmp_path: Path
) -> None:
    """(Review F1: behind PgBouncer in transaction mode the pool's setup met
    ``prepared statement "ctxledger_seal" already exists`` and every connection failed;
    appends timed out.) A pool connection whose session holds the statements already
    (perhaps prepared by another ledger's store) is set up, and the store uses plain
    statements from then on: every append path, reads, the chain."""
    with PostgresEventStore(url, index_dir=tmp_path, pool_size=1) as store:
        store.append("ses_a", [message("ses_a", "first")], None)

        # the pool's setup of a new connection, on a session holding them: as behind a pooler
        store._run("set up", store._pool._configure)  # type: ignore[arg-type]
        assert store._appender.plain
        for events in (1, 3, 20):
            store.append("ses_a", [message("ses_a", f"m{i}") for i in range(events)], None)
        store.append("ses_a", [message("ses_a", "z" * 100_000)], None)  # a blob
        assert [r.version for r in store.read_stream("ses_a")] == list(range(1, 27))
        assert store.verify().ok


def test_reads_of_a_store_on_plain_statements_use_none_prepared(
    store: PostgresEventStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """(Review F6: under transaction pooling each ``read_stream`` tried the prepared
    lookup, prepared it again and then ran it plain: three round trips.) Once the
    store is on plain statements, a read asks the plain query only."""
    store.append("ses_a", [message("ses_a", "m")], None)
    store._appender.plain = True

    def prepared(conn: Any, stream: str) -> Any:
        raise AssertionError("the prepared lookup was asked")

    monkeypatch.setattr(postgres_append, "_ends_prepared", prepared)
    assert [r.version for r in store.read_stream("ses_a")] == [1]


def test_an_open_whose_pool_connection_shares_the_opens_server_session_is_refused(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """(Review 2, G1: behind PgBouncer in transaction mode, idle, every statement got the
    same server session, the open's check passed, and a store then wrote into another
    store's ledger at its durability.) The open's connection stays open until the pool's
    first is set up; the two on one server process (a fake pid here: only a pooler in
    transaction mode hands one to two open clients) refuse the open, naming the mode."""
    real = postgres_session.set_up
    pids: list[int] = []

    def shared(conn: Any, schema: str, commit: str) -> tuple[str | None, int]:
        found, pid = real(conn, schema, commit)
        pids.append(pid)
        return found, pids[0]  # (the pool's connection reports the open's server process)

    monkeypatch.setattr(postgres_session, "set_up", shared)
    with pytest.raises(StoreError, match=r"share a server session .* pool_mode = transaction"):
        PostgresEventStore(url, index_dir=tmp_path, pool_size=1)
    assert len(pids) >= 2 and pids[1] != pids[0]  # (the server's two sessions were distinct)


def test_a_pool_connection_off_the_ledgers_schema_is_refused_and_named_on_timeout(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """(Review 2, G2: the pool's per-connection schema check was untested, and its reason
    went only to psycopg_pool's log: the caller read "couldn't get a connection".) A new
    pool connection whose schema is not the ledger's is never used, and the pool's
    timeout names why its connections were refused."""
    with PostgresEventStore(url, index_dir=tmp_path, pool_size=1, connect_timeout=1) as store:
        real = postgres_session.set_up

        def public(conn: Any, schema: str, commit: str) -> tuple[str | None, int]:
            return "public", real(conn, schema, commit)[1]  # (as a dropped SET would read)

        monkeypatch.setattr(postgres_session, "set_up", public)
        with store._pool.connection() as conn:
            conn.close()  # (the pool replaces it: its setup is asked again)
        with pytest.raises(ConnectionLost, match=r"refused: .*no schema t_\w+ on the .* public"):
            store.append("ses_a", [message("ses_a", "m")], None)
