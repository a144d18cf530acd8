"""Schema migrations of the SQLite event store, registered by decorator.

Each migration is a function taking a ``sqlite_utils.Database``; it runs in its own
``BEGIN IMMEDIATE`` transaction together with the row recording it in
``_migrations``, so a migration is either applied and recorded or not at all. The
write lock is taken before re-reading ``_migrations``, so two processes opening a
new ledger at the same moment apply each migration exactly once.

Migrations are append-only: never edit one that has shipped, add the next one.
"""

from __future__ import annotations

import datetime
import os
import sqlite3
from collections.abc import Callable
from typing import TYPE_CHECKING

from ctxledger.errors import InvalidInput, StoreError
from ctxledger.eventstore.readonly import (
    SQLITE_FAILURES,
    connect_read_only,
    refuse_old_schema,
    tidy_side_files,
)
from ctxledger.eventstore.registered import Registered
from ctxledger.integers import shown

if TYPE_CHECKING:
    from sqlite_utils import Database

MigrationFn = Callable[["Database"], None]

_CREATE_MIGRATIONS_TABLE = (
    "CREATE TABLE IF NOT EXISTS _migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)"
)
_SELECT_APPLIED = "SELECT name FROM _migrations ORDER BY rowid"
_SELECT_ONE = "SELECT 1 FROM _migrations WHERE name = ?"
_RECORD = "INSERT INTO _migrations (name, applied_at) VALUES (?, ?)"
#: every table of the database but SQLite's own, in one statement (one snapshot)
_TABLES = (
    "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite!_%' ESCAPE '!'"
)


#: how a read-only open reads a ledger lacking a migration (:meth:`Migrations.read_as_current`):
#: 0002's head columns read NULL, as in a row written before them (folded from its payload)
_READ_SHIMS = {
    "0002_message_heads": (
        "CREATE TEMP VIEW events AS SELECT seq, event_id, stream_id, version, kind, schema,"
        " payload, hash, NULL AS message_id, NULL AS tokens FROM main.events"
    ),
}


#: what a read-only open's refusal of a file that is no ledger adds
_READ_ONLY = ", not read_only=True"


class Migrations(Registered[MigrationFn]):
    """The SQLite store's migrations, applied on a ``sqlite_utils`` database."""

    def applied(self, conn: sqlite3.Connection) -> list[str]:
        """Names of the migrations recorded in this database, oldest first (read-only).

        Raises InvalidInput for a database that holds tables but no ``_migrations``:
        another program's database, which opening it as a ledger must not change (the
        first migration creates its tables and ``_migrations`` in one transaction, so a
        ledger never has one without the other).
        """
        if not _is_ledger(conn, "this SQLite database"):
            return []
        return [row[0] for row in conn.execute(_SELECT_APPLIED)]

    def pending(self, conn: sqlite3.Connection) -> list[str]:
        """Names of the registered migrations not yet applied (read-only).

        Raises StoreError when the database records a migration this code does not
        know: it was written by a newer ctxledger, and writing to it could corrupt it.
        """
        applied = self.applied(conn)
        unknown = [name for name in applied if name not in self.names]
        if unknown:
            raise StoreError(
                f"this ledger was migrated by a newer ctxledger (unknown migration {shown(unknown[0])}); "
                "upgrade ctxledger to open it"
            )
        return [name for name in self.names if name not in applied]

    def read_as_current(self, conn: sqlite3.Connection, path: str) -> None:
        """Let the read-only `conn` read a ledger an older ctxledger wrote as the current
        schema, writing nothing to it: each pending migration's read shim (a TEMP view,
        which shadows the file's table for every unqualified name) is made in the
        connection's own temp schema. A pending migration with no shim is refused (derived
        data, such as the stored values of ``eventstore/derived``, is kept outside the
        migrations: a reader that finds none computes it)."""
        if not self.applied(conn):  # (every ledger holds 0001: this holds no table)
            raise unmade_ledger(path, "a SQLite database holding no table", _READ_ONLY)
        pending = self.pending(conn)
        refuse_old_schema(path, [name for name in pending if name not in _READ_SHIMS])
        for name in pending:
            conn.execute(_READ_SHIMS[name])

    def apply(self, conn: sqlite3.Connection) -> list[str]:
        """Apply every pending migration; one transaction per migration. Returns the names applied.

        `conn` must be in autocommit mode (``isolation_level=None``) and outside a
        transaction. Opening an up-to-date database only reads (no write lock).
        """
        if not self.pending(conn):
            return []
        from sqlite_utils import Database  # imported only when there is work to do (it is slow)

        db = Database(conn, recursive_triggers=False, execute_plugins=False)
        done: list[str] = []
        for name, fn in self._steps:
            conn.execute("BEGIN IMMEDIATE")
            try:
                # inside the write lock: in WAL mode a statement that reads the schema and
                # then writes fails at once (no busy wait) if another opener wrote meanwhile
                conn.execute(_CREATE_MIGRATIONS_TABLE)
                # re-check under the write lock: another process may have applied it meanwhile
                if conn.execute(_SELECT_ONE, (name,)).fetchone() is None:
                    fn(db)
                    conn.execute(_RECORD, (name, datetime.datetime.now(datetime.UTC).isoformat()))
                    done.append(name)
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
        return done


def _is_ledger(conn: sqlite3.Connection, what: str) -> bool:
    """Whether `conn`'s database has ``_migrations`` (False: it has no table at all);
    raises InvalidInput when it holds tables but not that one."""
    tables = [row[0] for row in conn.execute(_TABLES)]
    if not tables:
        _refuse_marked(conn, what)
    if "_migrations" in tables or not tables:
        return bool(tables)
    raise InvalidInput(
        f"{what} is not a ctxledger ledger (it holds a table {shown(tables[0])} and no "
        "_migrations); give a ledger's path or a new file"
    )


def _refuse_marked(conn: sqlite3.Connection, what: str) -> None:
    """InvalidInput for a database with no table that another program made its own: a
    view, or an application id or user version (a ledger never sets them), which
    opening it as a new ledger would fill with the ledger's tables."""
    app_id = conn.execute("PRAGMA application_id").fetchone()[0]
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    view = conn.execute("SELECT name FROM sqlite_master WHERE type = 'view' LIMIT 1").fetchone()
    if app_id or version or view:
        mark = (
            f"a view {shown(view[0])}"
            if view
            else f"application id {app_id}, user version {version}"
        )
        raise InvalidInput(
            f"{what} is not a ctxledger ledger (it holds no table but is another program's: "
            f"{mark}); give a ledger's path or a new file"
        )


def refuse_foreign_database(path: str) -> bool:
    """Raise InvalidInput when the file at `path` is another program's SQLite database,
    before opening it as a ledger touches it (WAL mode, permissions, a side lock file).
    True when it is a SQLite database holding no table, index or view (one a program made
    and never filled: a ``PRAGMA journal_mode=WAL`` alone writes its first page).

    Read-only; a missing or empty file (a new ledger) or one SQLite cannot read is left
    to the store's open, which reports what it finds (False).
    """
    conn = _peek(path)
    if conn is None:
        return False
    try:
        refuse_foreign_connection(conn, path)
        return conn.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchone() is None
    except SQLITE_FAILURES:
        return False
    finally:
        conn.close()


def written_by_older(path: str) -> bool:
    """Whether the file at `path` is a ledger an older ctxledger wrote (a migration this
    one has is not applied there), which a command that only reads opens read-only: a
    writing open would migrate it, and the older ctxledger still writing it would then
    refuse it as "migrated by a newer ctxledger". Read-only; False for a missing, empty
    or unreadable file and for one that is no ledger (its open says what it is)."""
    conn = _peek(path)
    if conn is None:
        return False
    try:
        applied = MIGRATIONS.applied(conn)
        return bool(applied) and any(name not in applied for name in MIGRATIONS.names)
    except (*SQLITE_FAILURES, InvalidInput):
        return False
    finally:
        conn.close()


def unmade_ledger(path: str, what: str, read: str = "") -> InvalidInput:
    """The refusal of an open that expects a ledger (``existing``) at `path`, which is
    `what` (an empty file, a SQLite database holding no table): writing would make one."""
    return InvalidInput(
        f"{path} is {what}, not a ledger; nothing was written (a write starts a ledger "
        f"there: `ctxledger import FILE`, or Ledger.open without existing=True{read})"
    )


def _peek(path: str) -> sqlite3.Connection | None:
    """A connection reading the database at `path` writing nothing, or None for a
    missing or empty file and one SQLite cannot open."""
    try:
        if os.path.getsize(path) == 0:
            return None
        # the read-only open's own (see .readonly): immutable where nothing can be
        # written, so no -wal/-shm is made beside a ledger on a read-only folder, and
        # those its close may remove removed (a WAL database no one has open)
        return connect_read_only(path)[0]
    except (OSError, *SQLITE_FAILURES, StoreError):
        return None


def refuse_foreign_connection(conn: sqlite3.Connection, path: str) -> None:
    """:func:`refuse_foreign_database` on a connection already open to `path` (a
    read-only open checks its own: a second connection read the schema twice); an
    error of SQLite's is left to the reads that follow."""
    try:
        _is_ledger(conn, path)
    except SQLITE_FAILURES:
        return
    except InvalidInput:
        conn.close()
        tidy_side_files(path)
        raise


MIGRATIONS = Migrations()


@MIGRATIONS("0001_event_log")
def _create_event_log(db: Database) -> None:
    """The log, its streams, content-addressed blobs and projection checkpoints.

    ``events.stream_id`` points at ``streams``: an integer key keeps the per-stream
    index small, which is much of the cost of a batched append. A stream's version
    is ``max(version)`` of its events (one index seek), so an append never has to
    rewrite the stream's row.
    """
    db.table("streams").create(
        {"stream_id": int, "stream": str, "created_seq": int},
        pk="stream_id",
        not_null=["stream", "created_seq"],
    )
    db.table("streams").create_index(["stream"], index_name="streams_by_name", unique=True)
    db.table("events").create(
        {
            "seq": int,
            "event_id": str,
            "stream_id": int,
            "version": int,
            "kind": str,
            "schema": int,
            "payload": bytes,
            "hash": str,
        },
        pk="seq",
        not_null=["event_id", "stream_id", "version", "kind", "schema", "payload", "hash"],
    )
    db.table("events").create_index(["event_id"], index_name="events_by_id", unique=True)
    db.table("events").create_index(
        ["stream_id", "version"], index_name="events_by_stream", unique=True
    )
    db.table("blobs").create(
        {"ref": str, "size": int, "data": bytes}, pk="ref", not_null=["size", "data"]
    )
    db.table("checkpoints").create(
        {"name": str, "seq": int, "state": bytes}, pk="name", not_null=["seq", "state"]
    )


@MIGRATIONS("0002_message_heads")
def _add_message_heads(db: Database) -> None:
    """``events.message_id`` and ``events.tokens``: a message's head, beside its payload.

    Derived data (the payload stays the record and the only hashed bytes): a rebuild
    reads a message's id and token count from these two columns (its session is the
    row's stream) instead of parsing the payload. ``ALTER TABLE ... ADD COLUMN`` does
    not rewrite the table, so the migration is instant on any log; rows written before
    it keep NULL there and are folded from their payload as before. ``verify`` checks
    every non-NULL head against the payload.
    """
    db.execute("ALTER TABLE events ADD COLUMN message_id TEXT")
    db.execute("ALTER TABLE events ADD COLUMN tokens INTEGER")
