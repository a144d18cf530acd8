"""The PostgreSQL event store: one ledger shared by many writers on many machines.

The second backend of :class:`~ctxledger.eventstore.base.EventStore` (optional extra
``ctxledger[postgres]``, psycopg 3). Same tables as the SQLite store (see
:mod:`ctxledger.eventstore.postgres_schema`), same hash chain, same verifier.

Ordering: appends group-commit and are then sealed. An append inserts its rows
*unsealed* (``seq`` and ``hash`` NULL) and commits without any lock, so the WAL
flushes of concurrent appenders' commits are shared; ``UNIQUE (stream_id, version)``
and ``UNIQUE (event_id)`` decide races (versions are checked against every row,
sealed or not). Then whoever holds the append lock (a transaction-scoped advisory
lock, one key per ledger schema) *seals* every unsealed row it can see, in insertion
order: the next gapless ``seq``, each hash chained to the one before exactly as in
SQLite, one transaction (one flush) for many appends, and a notification. An
appender that finds the lock taken waits for it (a one-event append first looks a
few times, over 18 ms, whether the sealer of the moment sealed its row): if the
sealer did not see its rows, or died (its transaction rolls back, the lock goes),
it seals them itself. An append returns only once its rows are sealed and that
commit is flushed. Readers see sealed rows only, and the lock is held until the
seal commits, so seq order is commit order: a reader tailing by seq never sees
seq n+1 before seq n, nor an event a crash can take back. The details are in
:mod:`ctxledger.eventstore.postgres_append` and migration ``0003``.

Connections come from a ``psycopg_pool`` pool (autocommit; one per thread at a
time). A connection found broken (the server restarted) is dropped and the
operation retried once on a fresh one: safe for appends too, because a re-sent
batch whose ids are stored is a no-op that returns the current versions.

``follow()`` LISTENs on the ledger's channel in a thread of its own: a notification
(sent by every append, delivered at commit) only wakes the follower, which re-reads
by seq. A lost connection is re-opened and followed by a re-read, so nothing is
skipped or repeated.
"""

from __future__ import annotations

import os
import threading
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any, TypeVar

import psycopg
import psycopg.errors
import psycopg_pool

from ctxledger.errors import (
    CtxLedgerError,
    InvalidConfig,
    StoreError,
    UnknownBlob,
)
from ctxledger.events import BLOB_THRESHOLD, Recorded, sha256_hex
from ctxledger.eventstore import postgres_sql as q
from ctxledger.eventstore.backoff import Backoff
from ctxledger.eventstore.base import (
    MAX_SEQ,
    AppendRequest,
    Durability,
    EventStore,
    check_durability,
)
from ctxledger.eventstore.leases import Release
from ctxledger.eventstore.postgres_append import (
    CALL_ROWS,
    Appender,
    client_side,
)
from ctxledger.eventstore.postgres_copy import copy_append, copy_shaped
from ctxledger.eventstore.postgres_derived import PgDerived
from ctxledger.eventstore.postgres_errors import ConnectionLost, ServerCancelled, translated
from ctxledger.eventstore.postgres_leases import PgLeases
from ctxledger.eventstore.postgres_listen import Listener
from ctxledger.eventstore.postgres_reads import PgReads
from ctxledger.eventstore.postgres_schema import PG_MIGRATIONS
from ctxledger.eventstore.postgres_session import PoolSetUp, connect, open_schema
from ctxledger.eventstore.postgres_stream import PgStreamed
from ctxledger.eventstore.postgres_url import (
    SCHEMA_NAME,
    check_postgres_url,
    describe,
    is_postgres_url,
    split_schema,
)
from ctxledger.eventstore.preparing import PreparedBatch, prepare_append
from ctxledger.eventstore.verifier import BlobChecks, ChainVerifier, VerifyReport
from ctxledger.integers import shown

__all__ = ["ConnectionLost", "PostgresEventStore", "is_postgres_url"]

T = TypeVar("T")
Conn = psycopg.Connection[tuple[Any, ...]]

_VERIFY_BATCH = 4000
#: without a notification, a follower re-reads at least this often (a safety net only)
_IDLE_REREAD = 1.0
#: an append that keeps losing races to other appenders of its streams gives up
_RACE_RETRIES = 50


class PostgresEventStore(PgDerived, PgStreamed, PgReads, EventStore):
    """An event store in a PostgreSQL database (schema ``public`` unless told otherwise).

    ``url`` is a libpq URL (``postgresql://user@host:5432/db``); a ``schema=NAME``
    query parameter, or the `schema` argument, keeps several ledgers in one database.
    ``durability="full"`` (default) waits for the commit's WAL flush; ``"normal"``
    sets ``synchronous_commit=off``: a server crash may lose the last commits, never
    corrupts the log. `index_dir` is where local side indexes live (recall's FTS5
    file): default ``$CTXLEDGER_INDEX_DIR``, else the user cache directory.
    ``create=False`` (a command that only reads): a URL holding no ledger is NoLedger
    (an InvalidInput), nothing created.
    """

    def __init__(
        self,
        url: str,
        *,
        schema: str | None = None,
        durability: Durability = "full",
        blob_threshold: int = BLOB_THRESHOLD,
        pool_size: int = 4,
        connect_timeout: float = 10.0,
        index_dir: str | os.PathLike[str] | None = None,
        create: bool = True,
    ) -> None:
        check_postgres_url(url)
        conninfo, url_schema = split_schema(url)
        self.schema = schema or url_schema or "public"
        if not SCHEMA_NAME.fullmatch(self.schema):
            raise InvalidConfig(
                f"schema {shown(self.schema)} must be a lowercase identifier (letters, digits, _)"
            )
        check_durability(durability)
        if blob_threshold < 1 or pool_size < 1 or connect_timeout <= 0:
            raise InvalidConfig("blob_threshold and pool_size must be >= 1, connect_timeout > 0")
        self.durability = durability
        self.where = describe(conninfo, self.schema)
        self._blob_threshold = blob_threshold
        self._index_dir = index_dir
        self._closed, self._closing = False, threading.RLock()  # (a 2nd close waits: close)
        self._appender = Appender(q.lock_key(self.schema, "append"), q.notify_channel(self.schema))
        self._channel = self._appender.channel
        self._conninfo = conninfo
        self._commit = commit = "on" if durability == "full" else "off"
        self._kwargs: dict[str, Any] = {
            "autocommit": True,
            "connect_timeout": max(1, round(connect_timeout)),
            "application_name": "ctxledger",
            "options": f"-c search_path={self.schema} -c synchronous_commit={commit}",
            # UTF8 whatever the database or the URL says (SQL_ASCII handed back bytes;
            # LATIN1 left psycopg to encode in LATIN1: a raw UnicodeEncodeError on "€")
            "client_encoding": "UTF8",
        }
        self._setup = setup = PoolSetUp(self.schema, commit, self.where, self._appender)
        opener = self._open(create)
        self._leases = PgLeases(conninfo, self._kwargs, self.schema)
        try:  # the pool's first connection compared with the open's, then the tables made
            kwargs = {**self._kwargs, "prepare_threshold": None}  # (psycopg's: DEALLOCATE ALL)
            self._pool = setup.pool(conninfo, kwargs, pool_size, connect_timeout)
            PG_MIGRATIONS.apply(opener, self.schema)
            self.ledger_id = str(opener.execute(q.LEDGER_ID).fetchall()[0][0])
        except BaseException as exc:
            if hasattr(self, "_pool"):
                self._pool.close()
            if isinstance(exc, psycopg.Error):
                raise self._translate(exc, "open the ledger") from exc
            raise
        finally:
            opener.close()

    def _open(self, create: bool) -> Conn:
        """The open's connection: the schema set up, created if needed (`create`; else
        NoLedger when there is no ledger), the session checked; left open."""
        conn = None
        try:
            conn = connect(self._conninfo, self._kwargs)
            pid = open_schema(conn, self.schema, self._commit, self.where, create=create)
        except BaseException as exc:
            if conn is not None:
                conn.close()
            if isinstance(exc, psycopg.Error):
                raise self._translate(exc, "open the ledger") from exc
            raise
        self._setup.opener = (conn, pid)
        return conn

    def __repr__(self) -> str:
        return f"PostgresEventStore({self.where!r}, durability={self.durability!r})"

    # --- connections and errors ------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError(
                f"the event store {self.where} is closed; open a new PostgresEventStore"
            )

    def _run(self, action: str, fn: Callable[[Conn], T]) -> T:
        """Run `fn` on a pooled connection; retried once if the connection turns out broken."""
        self._check_open()
        for attempt in (0, 1):
            broken = False
            try:
                with self._pool.connection() as conn:
                    try:
                        return fn(conn)
                    except psycopg.OperationalError:
                        broken = conn.broken
                        raise
            except psycopg.Error as exc:
                if broken and attempt == 0:
                    self._pool.check()  # drop the other dead connections (a server restart)
                    continue
                raise self._translate(exc, action) from exc
        raise AssertionError("unreachable")

    def _translate(self, exc: psycopg.Error, action: str) -> CtxLedgerError:
        error = translated(exc, action, self.where)
        if isinstance(exc, psycopg_pool.PoolTimeout) and isinstance(error, ConnectionLost):
            return self._setup.timed_out(error)  # (with why new connections were refused)
        return error

    # --- appending -------------------------------------------------------------------------

    def append_many(
        self, requests: Sequence[AppendRequest], blobs: Mapping[str, bytes] | None = None
    ) -> dict[str, int]:
        """Append to several streams in one transaction: all of it is written, or none of it.

        Every expected version is checked under the append lock before anything is
        written. Large message contents and `blobs` are stored in the same transaction.
        """
        if not blobs and copy_shaped(requests, CALL_ROWS):
            return self._run("append", lambda conn: self._append_copy(conn, requests))
        batches, new_blobs = prepare_append(requests, blobs, self._blob_threshold)
        if not new_blobs and not any(batch.rows for batch in batches):
            return {batch.stream: self.stream_version(batch.stream) for batch in batches}
        return self._run("append", lambda conn: self._append(conn, batches, new_blobs))

    def _append(
        self, conn: Conn, batches: list[PreparedBatch], new_blobs: dict[str, bytes]
    ) -> dict[str, int]:
        """The append; retried when another appender took a version or stream id first."""
        for _ in range(_RACE_RETRIES):
            try:
                return self._append_once(conn, batches, new_blobs)
            except (psycopg.errors.UniqueViolation, psycopg.errors.DeadlockDetected) as exc:
                if not isinstance(exc, psycopg.errors.DeadlockDetected) and (
                    exc.diag.constraint_name not in q.RACES
                ):
                    raise
        raise StoreError(
            f"could not append in {self.where}: {_RACE_RETRIES} attempts in a row lost a race "
            "with other appenders to the same streams; retry later"
        )

    def _append_copy(self, conn: Conn, requests: Sequence[AppendRequest]) -> dict[str, int]:
        """:func:`copy_append`, preparing the batch while its head is on the way; if it
        declines (new blobs), finds a stale version, a stored id or a race, another way."""
        prepared: list[tuple[list[PreparedBatch], dict[str, bytes]]] = []

        def prepare() -> list[PreparedBatch] | None:
            prepared.append(prepare_append(requests, None, self._blob_threshold))
            batches, new_blobs = prepared[0]
            return None if client_side(batches, new_blobs) else batches

        heads, race = [(r.stream, len(r.events)) for r in requests], False
        try:
            versions = copy_append(conn, self._appender, heads, prepare)
        except (psycopg.errors.UniqueViolation, psycopg.errors.DeadlockDetected) as exc:
            name = getattr(exc.diag, "constraint_name", None)
            if name not in q.RACES and name != "events_event_id_key" and name is not None:
                raise
            versions, race = None, name != "events_event_id_key"
        if versions is not None:
            return versions
        batches, new_blobs = prepared[0]
        if race or client_side(batches, new_blobs):
            return self._append(conn, batches, new_blobs)  # retried, or the blob-carrying way
        # a stale version or a stored id: told apart under the lock, the batch not sent again
        return self._appender.transaction(conn, batches, new_blobs, check_ids=True)

    def _append_once(
        self, conn: Conn, batches: list[PreparedBatch], new_blobs: dict[str, bytes]
    ) -> dict[str, int]:
        try:
            if client_side(batches, new_blobs):
                return self._appender.transaction(conn, batches, new_blobs, check_ids=False)
            if sum(len(b.rows) for b in batches) <= CALL_ROWS:
                return self._appender.call(conn, batches)
            heads = [(b.stream, len(b.rows)) for b in batches]
            versions = copy_append(conn, self._appender, heads, lambda: batches)
            if versions is not None:
                return versions
        except psycopg.errors.UniqueViolation as exc:
            if exc.diag.constraint_name != "events_event_id_key":
                raise
        except psycopg.DatabaseError as exc:
            if exc.sqlstate != q.STALE_VERSION:
                raise
        # an id is already stored or a version is stale: look before writing, to tell a
        # re-send from a clash (or a conflict), under the lock
        return self._appender.transaction(conn, batches, new_blobs, check_ids=True)

    # --- reading ---------------------------------------------------------------------------

    def _fetch(self, action: str, query: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        """All rows of one read-only query (binary results: bytea arrives as bytes)."""
        return self._run(
            action, lambda conn: conn.cursor(binary=True).execute(query, params).fetchall()
        )

    def settle(self) -> None:
        """Seal every committed unsealed row (a writer died before sealing its own), under
        the append lock, so a whole-log read sees every committed append."""

        def seal(conn: Conn) -> None:
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (self._appender.key,))
                conn.execute("SELECT ctxledger_seal(%s)", (self._channel,))

        self._run("seal pending appends", seal)

    # --- blobs and checkpoints ---------------------------------------------------------------

    def put_blob(self, data: bytes) -> str:
        """Store `data` once, keyed by its sha256 hex (a no-op if already stored)."""
        ref = sha256_hex(data)

        def put(conn: Conn) -> None:
            if conn.execute(q.HAS_BLOB, (ref,)).fetchone() is None:
                conn.execute(q.INSERT_BLOB, (ref, len(data), data))

        self._run("store a blob", put)
        return ref

    def get_blob(self, ref: str) -> bytes:
        """The bytes stored under `ref` (read-only); UnknownBlob if there are none."""
        rows = self._fetch("read a blob", q.GET_BLOB, (ref,))
        if not rows:
            raise UnknownBlob(f"no blob {ref!r} in {self.where}; store it with put_blob() first")
        return bytes(rows[0][0])

    def has_blob(self, ref: str) -> bool:
        """Whether a blob with this sha256 hex is stored (read-only)."""
        return bool(self._fetch("look up a blob", q.HAS_BLOB, (ref,)))

    def save_checkpoint(self, name: str, seq: int, state: bytes) -> None:
        """Keep `state` as projection `name` at `seq` (an upsert: replaces the previous one)."""
        self._run(
            "save a checkpoint", lambda conn: conn.execute(q.SAVE_CHECKPOINT, (name, seq, state))
        )

    def load_checkpoint(self, name: str) -> tuple[int, bytes] | None:
        """(seq, state) last saved under `name`, or None (read-only)."""
        rows = self._fetch("load a checkpoint", q.LOAD_CHECKPOINT, (name,))
        return (int(rows[0][0]), bytes(rows[0][1])) if rows else None

    # --- integrity ---------------------------------------------------------------------------

    def verify(self) -> VerifyReport:
        """Re-hash every blob, then walk every event in seq order checking the chain (read-only).

        One REPEATABLE READ transaction: the walk sees one consistent snapshot (a
        prefix of the log, since commit order is seq order) while appends go on.
        """

        def walk(conn: Conn) -> VerifyReport:
            with conn.transaction():
                conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                verifier = ChainVerifier(_check_blobs(conn))
                cursor, next_seq = conn.cursor(binary=True), 1
                while True:
                    rows = cursor.execute(q.VERIFY_EVENTS, (next_seq, _VERIFY_BATCH)).fetchall()
                    if not rows or not verifier.feed(rows):
                        break
                    next_seq = rows[-1][0] + 1
            return verifier.report()

        return self._run("verify the log", walk)

    # --- following ---------------------------------------------------------------------------

    async def follow(
        self, from_seq: int = 1, poll_interval: float = 0.05, batch_size: int = 2000
    ) -> AsyncIterator[Recorded]:
        """Yield events from `from_seq` on, then wait for new ones (forever; cancel to stop). Read-only.

        Woken by LISTEN/NOTIFY, then re-reads by seq (a notification is not the data);
        without one it re-reads every ``max(poll_interval, 1 s)``. Reads run in worker
        threads; a lost connection, or a read the server cancelled (a role's lock or
        statement timeout, a cancel, a standby's conflict: :class:`ServerCancelled`), is
        retried with backoff, resuming after the last event yielded.
        """
        import anyio

        listener = Listener(self._conninfo, self._kwargs, self._channel)
        idle = max(poll_interval, _IDLE_REREAD)
        next_seq, backoff = from_seq, Backoff()
        try:
            while True:
                listener.wake.clear()  # before the read: a commit after it sets it again
                try:
                    batch = await anyio.to_thread.run_sync(
                        self._read_batch, next_seq, MAX_SEQ, batch_size
                    )
                except (ConnectionLost, ServerCancelled):
                    await anyio.sleep(backoff.next())
                    continue
                backoff.reset()
                for recorded in batch:
                    yield recorded
                    next_seq = recorded.seq + 1
                if not batch:
                    await anyio.to_thread.run_sync(listener.wake.wait, idle, abandon_on_cancel=True)
        finally:
            listener.stop()

    # --- the rest --------------------------------------------------------------------------

    def local_index_path(self, name: str) -> str:
        """A file named by the ledger's id in `index_dir` (each machine keeps its own copy)."""
        base = self._index_dir or os.environ.get("CTXLEDGER_INDEX_DIR")
        if not base:
            from platformdirs import user_cache_dir

            base = os.path.join(user_cache_dir("ctxledger", appauthor=False), "indexes")
        os.makedirs(base, mode=0o700, exist_ok=True)
        return os.path.join(os.fspath(base), f"{self.ledger_id}.{name}.db")

    # --- leases -------------------------------------------------------------------------

    def try_lease(self, key: str) -> Release | None:
        """A session-level advisory lock on the store's lease connection, held until
        release (see :mod:`.postgres_leases`)."""
        self._check_open()
        try:
            return self._leases.try_lease(key)
        except psycopg.Error as exc:
            raise self._translate(exc, f"take lease {key!r}") from exc
        except psycopg_pool.PoolTimeout as exc:
            raise ConnectionLost(f"could not take lease {key!r} on {self.where}: {exc}") from exc

    def close(self) -> None:
        """Close the pools (idempotent); leases still held are dropped with their connections."""
        with self._closing:  # another thread's close returns once the first closed all; a
            # close inside it (a signal handler, a closer) re-enters and returns: RLock
            if not self._closed:
                self._closed = True
                self._close_derived()
                self._pool.close()
                self._leases.close()


def _check_blobs(conn: Conn) -> BlobChecks:
    """ref -> None when the bytes hash to the ref, else what is wrong (one blob in memory at a time)."""
    cursor = conn.cursor(binary=True)
    checked = BlobChecks()
    for ref, size in cursor.execute(q.LIST_BLOBS).fetchall():
        row = cursor.execute(q.GET_BLOB, (ref,)).fetchone()
        checked.check(ref, size, bytes(row[0]) if row is not None else b"")
    return checked
