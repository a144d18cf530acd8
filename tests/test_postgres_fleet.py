"""A PostgreSQL ledger shared by a fleet (session 37): appends that do not depend on the
statements a pool connection prepared (a ``DISCARD ALL``, a pooler in transaction mode
handing out another server session)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg
import pytest
import test_eventstore_postgres
from click.testing import CliRunner
from helpers.pg_server import PgServer
from test_eventstore_postgres import schema_for

from ctxledger import Ledger
from ctxledger.cli.main import cli
from ctxledger.errors import InvalidEvent, StoreError
from ctxledger.eventstore import postgres_append
from ctxledger.eventstore.postgres import PostgresEventStore
from ctxledger.testing.eventstore import message

# the store and its URL as the store's own tests make them (one schema per test)
url, store = test_eventstore_postgres.url, test_eventstore_postgres.store

_HELD = "SELECT count(*) FROM pg_prepared_statements WHERE name LIKE 'ctxledger_%'"


def _each_path(store: PostgresEventStore, before: Any) -> list[int]:
    """One append down each path (one event, a few, one with a blob, a COPY batch, a
    stale version told by the client-side check), `before()` ahead of each."""
    versions: list[int] = []
    for events in (1, 3, 1, 20):
        before()
        text = "z" * 100_000 if len(versions) == 2 else "m"  # the third stores a blob
        batch = [message("ses_a", f"{text} {i}") for i in range(events)]
        versions.append(store.append("ses_a", batch, expected_version=None))
    before()
    with pytest.raises(Exception, match="not the expected 1"):
        store.append("ses_a", [message("ses_a", "late")], expected_version=1)
    return versions


@pytest.mark.parametrize("prepares", [True, False])
def test_appends_need_no_statement_prepared_on_their_session(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, prepares: bool
) -> None:
    """(Session 36 left it: after a ``DISCARD ALL`` every append but a 2-16 event one
    failed, ``prepared statement "ctxledger_one" does not exist``.) The statements are
    prepared again; where that does not hold (`prepares` False: as if the prepare went to
    another server session, a pooler in transaction mode) the appends run on plain
    statements, with the same rows and hashes."""
    with PostgresEventStore(url, index_dir=tmp_path, pool_size=1) as store:
        store.append("ses_a", [message("ses_a", "first")], expected_version=None)
        if not prepares:
            monkeypatch.setattr(postgres_append, "prepare", lambda conn, again=False: None)

        def discard() -> None:
            store._run("discard", lambda conn: conn.execute("DISCARD ALL"))

        assert _each_path(store, discard) == [2, 5, 6, 26]
        held = store._run("look", lambda c: c.execute(_HELD).fetchone())
        assert held == ((6,) if prepares else (0,))
        assert store.verify().ok and store.verify().events_checked == 26
    with PostgresEventStore(url, index_dir=tmp_path, pool_size=1) as fresh:
        versions = [r.version for r in fresh.read_stream("ses_a")]
        assert versions == list(range(1, 27))  # nothing lost, nothing twice


@pytest.mark.parametrize(
    "edit",
    [
        "UPDATE streams SET stream = 'T' WHERE stream = 'S'",
        "DELETE FROM streams WHERE stream = 'S'",
    ],
)
def test_a_ledger_whose_streams_row_was_edited_is_refused_at_open(url: str, edit: str) -> None:
    """(Session 36 left it: PostgreSQL's fold reads each session from the payloads, so a
    ledger with a streams row renamed opened, and ``show``/``export`` printed it while
    ``verify`` failed; SQLite's fold names the row at open.) The open names it too."""
    with Ledger.open(url) as ledger:
        for sid, n in (("S", 2), ("U", 1)):
            ledger.start_session(model="m", context_length=8192, session_id=sid)
            ledger.append_messages(sid, [{"role": "user", "content": f"{i}"} for i in range(n)])
        store = ledger.store
        assert isinstance(store, PostgresEventStore)
        store._run("edit", lambda conn: conn.execute(edit))
    with pytest.raises(InvalidEvent, match="the session 'S' has events but no stream of that"):
        Ledger.open(url)


def test_a_role_with_the_readme_grants_reads_and_writes_and_one_without_is_told(
    pg_server: PgServer, url: str, tmp_path: Path
) -> None:
    """A fleet's agents connect as a role of their own. (Session 37: the README named no
    grants; a role without USAGE on the schema was told "no schema has been selected to
    create in", one without table grants only "permission denied for table".) With the
    README's grants a reader reads and a writer appends; without them, one line names
    them."""
    schema = schema_for(tmp_path)
    with PostgresEventStore(url, index_dir=tmp_path) as owner:
        owner.append("ses_a", [message("ses_a", "m")], expected_version=None)
    agent, reader = f"agent_{schema}", f"reader_{schema}"
    as_role = {r: url.replace("postgres@", f"{r}@") for r in (agent, reader)}
    with psycopg.connect(pg_server.url, autocommit=True) as conn:
        for role in (agent, reader):
            conn.execute(f"CREATE ROLE {role} LOGIN")
        with pytest.raises(StoreError, match=r"no schema .* the role connecting needs USAGE"):
            PostgresEventStore(as_role[agent], index_dir=tmp_path)
        conn.execute(f"GRANT USAGE ON SCHEMA {schema} TO {agent}, {reader}")
        with pytest.raises(StoreError, match=r"denied for table _migrations; the role .* SELECT"):
            PostgresEventStore(as_role[agent], index_dir=tmp_path)
        conn.execute(f"GRANT SELECT ON ALL TABLES IN SCHEMA {schema} TO {reader}")
        conn.execute(f"GRANT SELECT, INSERT, UPDATE ON ALL TABLES IN SCHEMA {schema} TO {agent}")
        conn.execute(f"GRANT USAGE ON ALL SEQUENCES IN SCHEMA {schema} TO {agent}")
    with PostgresEventStore(as_role[agent], index_dir=tmp_path) as store:
        store.append("ses_b", [message("ses_b", "x" * 100_000)], expected_version=None)
        store.append("ses_a", [message("ses_a", f"{i}") for i in range(20)], expected_version=1)
        store.save_checkpoint("c", 1, b"s")
        store.save_checkpoint("c", 2, b"t")
    with PostgresEventStore(as_role[reader], index_dir=tmp_path) as store:
        assert store.verify().ok and store.streams() == [("ses_a", 21), ("ses_b", 1)]
        assert store.load_checkpoint("c") == (2, b"t")
        with pytest.raises(StoreError, match=r"denied for table .* INSERT and UPDATE"):
            store.append("ses_a", [message("ses_a", "no")], expected_version=None)


@pytest.mark.parametrize(
    "command", [["verify"], ["sessions"], ["show", "S"], ["export", "S"], ["audit", "S"]]
)
def test_a_read_of_a_url_naming_no_ledger_is_refused_and_creates_nothing(
    pg_server: PgServer, url: str, tmp_path: Path, command: list[str]
) -> None:
    """(Session 37: ``verify`` of a URL with another ``?schema=`` or database than meant
    created the schema and its tables and printed ``ok: 0 events``; SQLite refuses a
    missing file.) Nothing is created; a URL naming a ledger still reads."""
    schema = schema_for(tmp_path)
    with Ledger.open(url) as ledger:
        ledger.start_session(model="m", context_length=8192, session_id="S")
    other = url.replace(f"schema={schema}", f"schema={schema}_x")
    said = f"no ledger in postgresql://127.0.0.1:{pg_server.port}/postgres (schema {schema}_x)"
    for target in (other, f"{pg_server.url.rsplit('/', 1)[0]}/template1?schema={schema}"):
        done = CliRunner().invoke(cli, ["--db", target, *command])
        assert done.exit_code != 0 and "no ledger in " in done.output, done.output
    assert said in CliRunner().invoke(cli, ["--db", other, *command]).output
    with psycopg.connect(pg_server.url, autocommit=True) as conn:
        found = conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (f"{schema}_x",))
        assert found.fetchone() is None
    assert CliRunner().invoke(cli, ["--db", url, *command]).exit_code in (0, 1)
    if command == ["verify"]:  # a second ledger a command reads: named by its option
        copy = str(tmp_path / "c.db")
        moved = CliRunner().invoke(cli, ["migrate", "--from", other, "--to", copy])
        named = said.removeprefix("no ledger in ")
        assert moved.exit_code == 2 and f"--from {named}: no ledger there" in moved.output


def test_a_read_command_opens_one_connection_before_its_pool(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """(Review F2: the no-ledger check made a connection of its own before the store's
    open made another, so every read paid a second connect, and ``verify`` of a server
    that accepts and never answers waited twice the connect timeout, 21.6 s.) The check
    is the open's: one connection, the pool's apart."""
    with Ledger.open(url) as ledger:
        ledger.start_session(model="m", context_length=8192, session_id="S")
    real, made = psycopg.connect, []

    def counted(conninfo: str, **kwargs: Any) -> Any:
        made.append(conninfo)
        return real(conninfo, **kwargs)

    monkeypatch.setattr(psycopg, "connect", counted)
    for command in (["verify"], ["show", "S"]):
        made.clear()
        assert CliRunner().invoke(cli, ["--db", url, *command]).exit_code == 0
        assert len(made) == 1, command
