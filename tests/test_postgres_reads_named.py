"""PostgreSQL reads that name what an edit of the tables did (session 36): a stream's
last version lowered or NULLed, a renamed streams row, an event row moved into another
stream, a NULL stream name; the stream lookup never depending on a prepared statement;
a NUL in a stream name; a database or a URL that is not UTF8."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import psycopg
import pytest
import test_eventstore_postgres
from helpers.pg_server import PgServer
from test_eventstore_postgres import raw, schema_for

from ctxledger.errors import DuplicateEventError, InvalidEvent, StoreError
from ctxledger.eventstore import postgres_append
from ctxledger.eventstore.postgres import PostgresEventStore
from ctxledger.testing.eventstore import message

# the store and its URL as the store's own tests make them (one schema per test)
url, store = test_eventstore_postgres.url, test_eventstore_postgres.store


@pytest.mark.parametrize(
    ("edit", "said"),
    [
        ("UPDATE events SET version = 0 WHERE seq = 3", "0"),
        ("UPDATE events SET version = -5 WHERE seq = 3", "-5"),
        (
            "ALTER TABLE events ALTER COLUMN version DROP NOT NULL;"
            " UPDATE events SET version = NULL WHERE seq = 3",
            "NULL",
        ),
    ],
)
def test_a_read_by_stream_names_its_last_row_edited_out_of_it(
    store: PostgresEventStore, edit: str, said: str
) -> None:
    """(Session 36: the stream's last row lowered or NULLed left no gap a later version
    shows, and ``read_stream`` returned the stream without it.)"""
    store.append("ses_a", [message("ses_a", f"m{i}") for i in range(3)], expected_version=None)
    store.append("ses_b", [message("ses_b", "other")], expected_version=None)
    with raw(store) as conn:
        for statement in edit.split(";"):
            conn.execute(statement)
    refused = f"the event at seq 3 has version {said}, not one from 1 up"
    for start, end in [(1, None), (2, None), (4, None), (1, 2), (2, 2)]:
        with pytest.raises(InvalidEvent, match=re.escape(refused)):
            list(store.read_stream("ses_a", start, end))
    assert [r.seq for r in store.read_stream("ses_b")] == [4]


def test_a_read_by_stream_names_a_streams_row_renamed(store: PostgresEventStore) -> None:
    """(Session 36: ``read_stream('T')`` returned session ses_a's events as T's.)"""
    store.append("ses_a", [message("ses_a", f"m{i}") for i in range(3)], expected_version=None)
    with raw(store) as conn:
        conn.execute("UPDATE streams SET stream = 'T' WHERE stream = 'ses_a'")
    for start in (1, 3):
        with pytest.raises(InvalidEvent, match=f"its event at seq {start} is of session 'ses_a'"):
            list(store.read_stream("T", start))


def test_a_read_by_stream_names_an_event_row_moved_into_it(store: PostgresEventStore) -> None:
    """(Only a page's first event was compared with the stream: a row moved to the end of
    another stream read as that session's.)"""
    for sid in ("ses_a", "ses_b"):
        store.append(sid, [message(sid, f"m{i}") for i in range(3)], expected_version=None)
    with raw(store) as conn:
        conn.execute(
            "UPDATE events SET stream_id = (SELECT stream_id FROM streams WHERE stream ="
            " 'ses_a'), version = 4 WHERE seq = 6"
        )
    for start in (1, 4):
        with pytest.raises(InvalidEvent, match="its event at seq 6 is of session 'ses_b'"):
            list(store.read_stream("ses_a", start))


def test_a_stored_id_under_a_null_stream_name_is_not_a_resend_to_stream_none(
    store: PostgresEventStore,
) -> None:
    """The re-send check compared ``str(stream)``: an id stored under a NULL stream name,
    appended to a stream named "None", was a re-send and nothing was written."""
    store.append("s1", [message("s1", "a")], expected_version=None)
    stored = next(iter(store.read_all())).event.event_id
    with raw(store) as conn:
        conn.execute("ALTER TABLE streams ALTER COLUMN stream DROP NOT NULL")
        conn.execute("UPDATE streams SET stream = NULL")
    with pytest.raises(DuplicateEventError, match="stored in stream NULL, not 'None'"):
        store.append("None", [message("None", "a", event_id=stored)], expected_version=None)


@pytest.mark.parametrize("prepares", [True, False])
def test_a_read_by_stream_needs_no_statement_prepared_on_its_session(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, prepares: bool
) -> None:
    """(Session 36's lookup was an ``EXECUTE`` of a statement prepared on each pool
    connection: after a ``DEALLOCATE ALL``/``DISCARD ALL``, or behind a pooler handing
    out another server session, every read by stream failed; main's reads needed none.)
    The statement is prepared again; where that does not hold (`prepares` False: as if
    the prepare went to another session) the query runs unprepared."""
    with PostgresEventStore(url, index_dir=tmp_path, pool_size=1) as store:
        store.append("ses_a", [message("ses_a", f"m{i}") for i in range(3)], expected_version=None)
        store.append("ses_b", [message("ses_b", "b")], expected_version=None)
        with raw(store) as conn:
            conn.execute("UPDATE events SET version = 0 WHERE seq = 4")
        if not prepares:
            monkeypatch.setattr(postgres_append, "_send_prepare", lambda conn, name: None)
        store._run("drop", lambda conn: conn.execute("DEALLOCATE ALL"))
        assert [r.version for r in store.read_stream("ses_a")] == [1, 2, 3]
        assert list(store.read_stream("unknown")) == []
        with pytest.raises(InvalidEvent, match="the event at seq 4 has version 0, not one"):
            list(store.read_stream("ses_b"))
        held = store._run("look", lambda c: c.execute(_HELD).fetchall())
        assert held == ([("ctxledger_stream_ends",)] if prepares else [])


_HELD = "SELECT name FROM pg_prepared_statements WHERE name = 'ctxledger_stream_ends'"


def test_a_stream_name_holding_nul_reads_as_no_stream_not_as_the_name_cut_short(
    url: str, tmp_path: Path
) -> None:
    """Review 2 of session 36: the prepared lookup sends text parameters, which end at a
    NUL, so ``ses_a\\x00x`` was looked up as ``ses_a`` and named a false damage. No stored
    stream holds a NUL (appends refuse it): the read is empty, as on SQLite."""
    with PostgresEventStore(url, index_dir=tmp_path, pool_size=1) as store:
        store.append("ses_a", [message("ses_a", "m")], expected_version=None)
        assert list(store.read_stream("ses_a\x00x")) == []
        assert list(store.read_stream("nope\x00")) == []


def test_a_statement_another_call_prepared_first_is_used(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The re-prepare after a missing statement tolerates one prepared meanwhile (a
    pooler's other client): ``DuplicatePreparedStatement`` is not an error of the read."""
    with PostgresEventStore(url, index_dir=tmp_path, pool_size=1) as store:
        store.append("ses_a", [message("ses_a", "m")], expected_version=None)
        real = postgres_append._ends_prepared
        calls: list[int] = []

        def first_missing(conn: Any, stream: str) -> Any:
            calls.append(1)
            return (False, None) if len(calls) == 1 else real(conn, stream)

        monkeypatch.setattr(postgres_append, "_ends_prepared", first_missing)
        assert [r.version for r in store.read_stream("ses_a")] == [1] and len(calls) == 2


def test_a_new_ledger_in_a_database_not_utf8_is_refused_at_open(
    pg_server: PgServer, tmp_path: Path
) -> None:
    """Review 2 of session 36: a LATIN1 database took a ledger and refused the first "€"
    of a later append with a raw UnicodeEncodeError. A new ledger there is refused at
    open, in one line, and nothing is created."""
    name = f"latin_{schema_for(tmp_path)}"
    with psycopg.connect(pg_server.url, autocommit=True) as conn:
        conn.execute(
            f"CREATE DATABASE {name} ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C' "
            "TEMPLATE template0"
        )
    latin = f"{pg_server.url.rsplit('/', 1)[0]}/{name}"
    for where in (latin, f"{latin}?schema=newone"):  # public, and a schema of its own
        with pytest.raises(StoreError, match=r"encoding is LATIN1, not UTF8: .* ENCODING 'UTF8'"):
            PostgresEventStore(where, index_dir=tmp_path)
    with psycopg.connect(latin, autocommit=True) as conn:
        assert conn.execute("SELECT to_regclass('_migrations')").fetchone() == (None,)
        named = "SELECT 1 FROM pg_namespace WHERE nspname = 'newone'"
        assert conn.execute(named).fetchone() is None  # (review: the schema was left behind)


def test_a_url_asking_for_another_client_encoding_still_reads_text(
    url: str, tmp_path: Path
) -> None:
    """Review 2 of session 36: ``client_encoding=SQL_ASCII`` in the URL handed back bytes:
    the ledger could not open (``unknown migration "b'0001_event_log'"``). The store
    talks UTF8 whatever the URL says."""
    with PostgresEventStore(url, index_dir=tmp_path) as store:
        store.append("ses_é", [message("ses_é", "m")], expected_version=None)
    with PostgresEventStore(f"{url}&client_encoding=SQL_ASCII", index_dir=tmp_path) as store:
        assert store.streams() == [("ses_é", 1)]
        assert [r.event.session_id for r in store.read_stream("ses_é")] == ["ses_é"]
