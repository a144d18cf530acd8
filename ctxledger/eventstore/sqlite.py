"""The SQLite event store: one WAL-mode file, created on first use with mode 0600.

Tables (see :mod:`ctxledger.eventstore.migrations`): ``events`` (one row per event,
``seq`` is the global order), ``streams`` (one row per session, numbering it),
``blobs`` (content-addressed bytes) and ``checkpoints`` (projection snapshots).

Threading: the store owns one connection, opened with ``check_same_thread=False``
and guarded by a re-entrant lock, so it can be shared with worker threads
(``anyio.to_thread``). Each method holds the lock only for its own statements;
iterators take it once per batch and never across a ``yield``, so a slow consumer
never blocks writers. The exception is ``append_stream``: its write transaction
reads the caller's event generators, so they must only build events (an import
validates and counts first, ``ledger.importing``). Several processes may open the same file: ``BEGIN
IMMEDIATE`` plus ``busy_timeout`` serialize writers, WAL lets readers run alongside.

Fair writes: SQLite's busy handler sleeps with a growing backoff, so with many writing
processes one waiter can lose the race again and again (a 1.25 s wait for an append at
8 processes). A file-backed store therefore takes a blocking OS lock
(``fcntl.flock`` on the side file ``<ledger>.lock``) around each write transaction:
waiters sleep in the kernel and are woken when the holder commits, and SQLite's own
lock is then almost always free. The side lock only orders writers that use it; a
writer without it (an older ctxledger, the sqlite3 shell) is still handled by
``busy_timeout``, which also bounds how long any holder keeps the side lock.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence

from ctxledger.errors import (
    ConcurrencyError,
    CtxLedgerError,
    InvalidConfig,
    StoreError,
    UnknownBlob,
)
from ctxledger.events import BLOB_THRESHOLD, Recorded, sha256_hex
from ctxledger.eventstore import sqlite_sql as q
from ctxledger.eventstore.base import (
    MAX_SEQ,
    AppendRequest,
    Durability,
    EventStore,
    StreamedRequest,
    in_versions,
    of_stream,
    sound_ends,
)
from ctxledger.eventstore.derived import SQLiteDerived
from ctxledger.eventstore.files import close_side_lock, create_ledger_file, open_side_lock
from ctxledger.eventstore.leases import FileLeases, Release
from ctxledger.eventstore.migrations import (
    MIGRATIONS,
    refuse_foreign_connection,
    refuse_foreign_database,
    unmade_ledger,
)
from ctxledger.eventstore.paging import paged
from ctxledger.eventstore.preparing import PreparedBatch, prepare_append
from ctxledger.eventstore.readonly import (
    READ_ONLY_WRITE,
    Unchanged,
    connect_read_only,
    refuse_unwritable,
)
from ctxledger.eventstore.resends import StoredAs, already_stored, as_stored, blobs_then
from ctxledger.eventstore.rows import (
    GENESIS_HASH,
    NO_HEAD,
    HeadedRow,
    StoredRow,
    chain_rows,
    chain_tip,
    decode_rows,
)
from ctxledger.eventstore.space import PAGE_SIZE, TEMPORARY, UNPERSISTED, check_options, ledger_path
from ctxledger.eventstore.sqlite_errors import check_numbered, translated, undecoded
from ctxledger.eventstore.sqlite_heads import HeadColumns
from ctxledger.eventstore.sqlite_stream import insert_rows, write_stream
from ctxledger.eventstore.verifier import BlobChecks, ChainVerifier, VerifyReport

if sys.platform != "win32":
    import fcntl

__all__ = ["SQLiteEventStore"]

#: page cache per connection: keeps the upper index levels of a large log in memory
_CACHE_KIB = 16 * 1024
_READ_BATCH = 2000
_VERIFY_BATCH = 4000


class SQLiteEventStore(SQLiteDerived, EventStore, HeadColumns):
    """The default event store: a single SQLite file in WAL mode.

    ``durability="full"`` (default) fsyncs the WAL on every commit, so an append that
    returned survives a power loss; ``"normal"`` may lose the last commits on power
    loss (never on a process crash) and never corrupts the log. ``max_page_count``
    caps the file size in pages (mostly for tests of the disk-full path).
    ``":memory:"`` / ``space.TEMPORARY``: private logs, nothing persisted; ``""`` is refused.
    ``fair_write_lock`` (default on) orders writing processes with a blocking OS lock
    on ``<path>.lock`` (see the module docstring); off, SQLite's busy handler alone does.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        durability: Durability = "full",
        busy_timeout_ms: int = 5000,
        blob_threshold: int = BLOB_THRESHOLD,
        max_page_count: int | None = None,
        fair_write_lock: bool = True,
        read_only: bool = False,
        existing: bool = False,
    ) -> None:
        check_options(durability, busy_timeout_ms, blob_threshold, max_page_count)
        self.path = ledger_path(path)
        self.durability = durability
        self.busy_timeout_ms = busy_timeout_ms
        self._blob_threshold = blob_threshold
        self._lock = threading.RLock()
        self._closed, self._closing = False, threading.RLock()  # (a 2nd close waits: close)
        self._side_lock: int | None = None
        self._side_depth = 0
        self._commits = 0  # appends committed through this connection (see change_token)
        self._wrote = threading.local()  # this thread's last append's seqs (last_written)
        in_memory = self.path in UNPERSISTED  # leases: files beside the ledger, else per process
        #: reads only, writing nothing (see :mod:`.readonly`); every write is refused
        self.read_only = read_only
        self._unchanged: Unchanged | None = None  # what an immutable open saw of the file
        if read_only:
            self._open_read_only(in_memory)
            return
        self._file_leases = None if in_memory else FileLeases(self.path, super().try_lease)
        if not in_memory:
            if refuse_foreign_database(self.path) and existing:  # (a ledger expected)
                raise unmade_ledger(self.path, "a SQLite database holding no table")
            refuse_unwritable(self.path)
            create_ledger_file(self.path)
            if fair_write_lock:
                self._side_lock = open_side_lock(self.path)
        with self._errors("open the ledger"):
            target = "" if self.path == TEMPORARY else self.path  # "": SQLite's temp database
            self._conn = sqlite3.connect(target, isolation_level=None, check_same_thread=False)
            try:
                self._configure(in_memory, max_page_count)
                MIGRATIONS.apply(self._conn)
                check_numbered(self._conn, self.path)
            except BaseException:
                self._conn.close()
                close_side_lock(self._side_lock)
                raise

    def _open_read_only(self, in_memory: bool) -> None:
        if in_memory:
            raise InvalidConfig("a private in-memory log cannot be opened read-only")
        self._file_leases = None
        with self._errors("open the ledger read-only"):
            self._conn, self._unchanged = connect_read_only(self.path)
            try:
                self._conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout_ms)}")
                refuse_foreign_connection(self._conn, self.path)  # (before any other read)
                self._conn.execute(f"PRAGMA cache_size = -{_CACHE_KIB}")
                if self._conn.execute("PRAGMA database_list").fetchone()[2] == "":
                    MIGRATIONS.apply(self._conn)  # an empty file: the empty schema, in memory
                MIGRATIONS.read_as_current(self._conn, self.path)  # (an older ledger: as is)
                check_numbered(self._conn, self.path)
            except BaseException:
                self._conn.close()
                raise

    def _configure(self, in_memory: bool, max_page_count: int | None) -> None:
        conn = self._conn
        conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout_ms)}")
        conn.execute(f"PRAGMA page_size = {PAGE_SIZE}")  # only takes effect on a new, empty file
        mode = self._enter_wal()
        if not in_memory and str(mode).lower() != "wal":
            raise StoreError(
                f"could not put {self.path} in WAL mode (journal mode is {mode}); "
                "keep the ledger on a local filesystem"
            )
        conn.execute("PRAGMA synchronous = " + ("FULL" if self.durability == "full" else "NORMAL"))
        conn.execute(f"PRAGMA cache_size = -{_CACHE_KIB}")
        if max_page_count is not None:
            conn.execute(f"PRAGMA max_page_count = {int(max_page_count)}")

    def _enter_wal(self) -> str:
        """Switch to WAL (a no-op when the file already is), retrying while others open it.

        The switch on a new file needs an exclusive lock, and SQLite reports a
        concurrent opener's lock at once rather than through the busy timeout.
        """
        deadline = time.monotonic() + self.busy_timeout_ms / 1000
        while True:
            try:
                return str(self._conn.execute("PRAGMA journal_mode = WAL").fetchone()[0])
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() >= deadline:
                    raise
                time.sleep(0.01)

    def __repr__(self) -> str:
        return f"SQLiteEventStore({self.path!r}, durability={self.durability!r})"

    # --- errors ------------------------------------------------------------------------

    @contextlib.contextmanager
    def _errors(self, action: str) -> Iterator[None]:
        """Turn sqlite3 exceptions into the ctxledger error a user can act on."""
        try:
            if self._closed:  # (closing: its connection may still be open, see close)
                raise sqlite3.ProgrammingError("Cannot operate on a closed database.")
            yield
        except sqlite3.Error as exc:
            raise self._translate(exc, action) from exc
        except UnicodeDecodeError as exc:  # (SQLite's message on a damaged schema)
            raise self._translate(undecoded(exc), action) from exc

    def _translate(self, exc: sqlite3.Error, action: str) -> CtxLedgerError:
        if self._unchanged is not None and self._unchanged.changed():
            return self._unchanged.error()  # a torn immutable read, not a damaged file
        if self._closed or (isinstance(exc, sqlite3.ProgrammingError) and "closed" in str(exc)):
            return StoreError(f"the event store {self.path} is closed; open a new SQLiteEventStore")
        return translated(
            exc, f"could not {action} in {self.path}", self.path, self.busy_timeout_ms
        )

    # --- appending -----------------------------------------------------------------------

    def append_many(
        self, requests: Sequence[AppendRequest], blobs: Mapping[str, bytes] | None = None
    ) -> dict[str, int]:
        """Append to several streams in one transaction: all of it is written, or none of it.

        Every expected version is checked (under the write lock) before anything is
        written. Large message contents and `blobs` are stored in the same transaction.
        """
        self._wrote.span = None
        batches, new_blobs = prepare_append(requests, blobs, self._blob_threshold)
        if not new_blobs and not any(batch.rows for batch in batches):
            return {batch.stream: self.stream_version(batch.stream) for batch in batches}
        with self._lock, self._errors("append"), self._writing():
            try:
                return self._transaction(lambda: self._write(batches, new_blobs, False))
            except sqlite3.IntegrityError as exc:
                if "event_id" not in str(exc):
                    raise
            # an id is already stored: look before writing, to tell a re-send from a clash
            return self._transaction(lambda: self._write(batches, new_blobs, True))

    @contextlib.contextmanager
    def _writing(self) -> Iterator[None]:
        """Hold the side lock (a fair, blocking OS lock) for one write; the caller holds _lock."""
        if self.read_only:
            raise StoreError(f"the ledger {self.path} {READ_ONLY_WRITE}")
        fd = self._side_lock
        if fd is None or self._side_depth:  # none, or already held by this (nested) write
            yield
            return
        fcntl.flock(fd, fcntl.LOCK_EX)
        self._side_depth += 1
        try:
            yield
        finally:
            self._side_depth -= 1
            fcntl.flock(fd, fcntl.LOCK_UN)

    def append_stream(self, requests: Iterable[StreamedRequest]) -> dict[str, int]:
        """``append_many`` of requests whose events may be generators, encoded and
        inserted a chunk at a time in one transaction (:mod:`.streamed`): same rows."""
        self._wrote.span = None
        with self._lock, self._errors("append"), self._writing():
            return self._transaction(lambda: self._streamed(requests))

    def _streamed(self, requests: Iterable[StreamedRequest]) -> dict[str, int]:
        versions, self._wrote.span = write_stream(self._conn, requests, self._blob_threshold)
        return versions

    def _transaction(self, write: Callable[[], dict[str, int]]) -> dict[str, int]:
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            versions = write()
            conn.execute("COMMIT")
            self._commits += 1
        except BaseException:
            self._wrote.span = None  # rolled back: nothing inserted
            if conn.in_transaction:
                with contextlib.suppress(sqlite3.Error):  # keep the original error
                    conn.execute("ROLLBACK")
            raise
        return versions

    def _write(
        self, batches: list[PreparedBatch], new_blobs: dict[str, bytes], check_ids: bool
    ) -> dict[str, int]:
        """The body of an append transaction (the caller holds BEGIN IMMEDIATE)."""
        conn = self._conn
        current, stale = self._versions(batches)
        if stale is not None or check_ids:
            blobs = blobs_then(new_blobs, self._blob_in)
            if already_stored(batches, self._stored_in, blobs):  # a re-send: versions as they are
                return {b.stream: v for b, (_, v) in zip(batches, current, strict=True)}
            if stale is not None:
                raise ConcurrencyError(stale[0].stream, stale[0].expected_version or 0, stale[1])
        if new_blobs:
            conn.executemany(q.INSERT_BLOB, [(r, len(d), d) for r, d in new_blobs.items()])
        tail = conn.execute(q.TAIL).fetchone()
        seq, prev = (tail[0], chain_tip(tail[1])) if tail is not None else (0, GENESIS_HASH)
        first = seq
        flat: list[object] = []  # the event rows, sqlite_stream.COLUMNS values each, for one INSERT
        out: dict[str, int] = {}
        extend = flat.extend
        for batch, (stream_id, version) in zip(batches, current, strict=True):
            stream, rows = batch.stream, batch.rows
            out[stream] = version + len(rows)
            if not rows:
                continue
            if stream_id is None:
                stream_id = conn.execute(q.NEW_STREAM, (stream, seq + 1)).lastrowid
            # linked (one sha256 link per append to a stream, a crc digest per row) unless
            # a copy asks for the source's per-event hashes
            hashes, prev = chain_rows(prev, seq, stream, version, rows, batch.chain or "linked")
            heads = batch.heads if batch.heads is not None else [NO_HEAD] * len(rows)
            for (event_id, kind, schema, payload), digest, (message_id, tokens) in zip(
                rows, hashes, heads, strict=True
            ):
                seq += 1
                version += 1
                extend((seq, event_id, stream_id, version, kind, schema, payload, digest,
                        message_id, tokens))  # fmt: skip
        insert_rows(self._conn, flat)
        self._wrote.span = (first + 1, seq) if flat else None  # kept if it commits
        return out

    def _versions(
        self, batches: list[PreparedBatch]
    ) -> tuple[list[tuple[int | None, int]], tuple[PreparedBatch, int] | None]:
        """(stream id or None, version) of each batch's stream, and the first stale batch."""
        current: list[tuple[int | None, int]] = []
        stale: tuple[PreparedBatch, int] | None = None
        for batch in batches:
            row = self._conn.execute(q.STREAM, (batch.stream,)).fetchone()
            stream_id, version = (row[0], row[1]) if row is not None else (None, 0)
            # an empty request writes nothing, so it cannot be stale
            if stale is None and batch.rows and batch.expected_version not in (None, version):
                stale = (batch, version)
            current.append((stream_id, version))
        return current, stale

    def _stored_in(self, event_id: str) -> StoredAs | None:
        """The row holding `event_id` as stored, or None (:func:`already_stored`)."""
        row = self._conn.execute(q.ROW_OF_EVENT, (event_id,)).fetchone()
        return None if row is None else (row[0], row[1], row[2], as_stored(row[3]))

    def _blob_in(self, ref: str) -> bytes | None:
        row = self._conn.execute(q.GET_BLOB, (ref,)).fetchone()
        return None if row is None else bytes(row[0])

    # --- reading -----------------------------------------------------------------------------

    def stream_version(self, stream: str) -> int:
        """Current version of `stream`, 0 if it has no events (read-only)."""
        with self._lock, self._errors("read a stream version"):
            row = self._conn.execute(q.STREAM_VERSION, (stream,)).fetchone()
        return int(row[0]) if row is not None else 0

    def last_seq(self) -> int:
        """The highest seq in the log, 0 when empty (read-only)."""
        with self._lock, self._errors("read the log's end"):
            row = self._conn.execute(q.LAST_SEQ).fetchone()
        return int(row[0] or 0)

    def change_token(self) -> tuple[int, int]:
        """A value that differs after any append by anyone since the previous call (read-only).

        ``PRAGMA data_version`` moves when another connection commits; this
        connection's own appends are counted beside it. Equal tokens mean no event
        was added, so a reader that has folded the log can skip its catch-up query.
        """
        # called before every read (Ledger.refresh): a plain try instead of ``_errors``'
        # generator-based context manager halves its Python overhead (measured ~7.5 -> ~4 µs)
        with self._lock:
            try:
                version = int(self._conn.execute(q.DATA_VERSION).fetchone()[0])
            except sqlite3.Error as exc:
                raise self._translate(exc, "check the log for changes") from exc
            return (version, self._commits)

    def streams(self) -> list[tuple[str, int]]:
        """(stream, version) for every stream, in order of their first event (read-only)."""
        with self._lock, self._errors("list streams"):
            return [(str(s), int(v)) for s, v in self._conn.execute(q.STREAMS)]

    def read_stored(self, from_seq: int = 1, batch_size: int = _READ_BATCH) -> Iterator[StoredRow]:
        """Rows as stored, `batch_size` at a time, in seq order (read-only; see EventStore)."""

        def fetch(from_seq: int, limit: int) -> list[StoredRow]:
            with self._lock, self._errors("read the log"):
                rows: list[StoredRow] = self._conn.execute(
                    q.VERIFY_EVENTS, (from_seq, limit)
                ).fetchall()
            return rows

        return paged(fetch, from_seq, batch_size, lambda row: row[0])

    def _read_batch(self, from_seq: int, to_seq: int, limit: int) -> list[Recorded]:
        return self._decode(self._stored_rows(from_seq, to_seq, limit))

    def _stored_rows(
        self, from_seq: int, to_seq: int, limit: int
    ) -> list[tuple[int, int, int, bytes, str]]:
        with self._lock, self._errors("read the log"):
            rows: list[tuple[int, int, int, bytes, str]] = self._conn.execute(
                q.READ_ALL, (from_seq, to_seq, limit)
            ).fetchall()
        return rows

    def read_at(self, seqs: Sequence[int]) -> list[Recorded]:
        """The records at `seqs`, in seq order: only those rows are fetched and decoded,
        not the other sessions' rows between them (read-only)."""
        wanted = sorted(set(seqs))
        rows: list[tuple[int, int, int, bytes, str]] = []
        with self._lock, self._errors("read the log"):
            for start in range(0, len(wanted), q.READ_AT_CHUNK):
                chunk = wanted[start : start + q.READ_AT_CHUNK]
                rows += self._conn.execute(q.read_at(len(chunk)), chunk).fetchall()
        return self._decode(rows)

    def read_stream(
        self, stream: str, from_version: int = 1, to_version: int | None = None
    ) -> Iterator[Recorded]:
        """Events of one stream with from_version <= version (<= to_version), in order (read-only)."""
        with self._lock, self._errors("read a stream"):
            found = self._conn.execute(q.STREAM_ENDS, (stream,)).fetchone()
        if found is None:
            return
        stream_id, upto, next_version = (
            found[0],
            MAX_SEQ if to_version is None else to_version,
            from_version,
        )
        while True:
            with self._lock, self._errors("read a stream"):
                rows = self._conn.execute(
                    q.READ_STREAM, (stream_id, next_version, upto, _READ_BATCH)
                ).fetchall()
            last = len(rows) < _READ_BATCH  # (the stream's ends checked with it)
            ends = () if not last or sound_ends(*found[1:]) else self._end_rows(stream_id)
            yield from of_stream(
                self._decode(in_versions(rows, next_version, stream, ends)), stream
            )
            if last:
                return
            next_version = rows[-1][1] + 1

    def _end_rows(self, stream_id: int) -> tuple[object, ...]:
        """(seq, version) of a stream's lowest and highest rows by version (in_versions)."""
        with self._lock, self._errors("read a stream"):
            return tuple(self._conn.execute(q.STREAM_END_ROWS, (stream_id,)).fetchone())

    def _decode(self, rows: list[tuple[int, int, int, bytes, str]]) -> list[Recorded]:
        """Rows (seq, version, schema, payload, hash) -> Recorded, upcasting and re-inflating blobs."""
        return decode_rows(rows, self.get_blob, self.sealed)

    # --- blobs and checkpoints ------------------------------------------------------------

    def put_blob(self, data: bytes) -> str:
        """Store `data` once, keyed by its sha256 hex; one transaction (a no-op if already stored)."""
        ref = sha256_hex(data)
        with self._lock, self._errors("store a blob"), self._writing():
            if self._conn.execute(q.HAS_BLOB, (ref,)).fetchone() is None:
                self._conn.execute(q.INSERT_BLOB, (ref, len(data), data))
        return ref

    def get_blob(self, ref: str) -> bytes:
        """The bytes stored under `ref` (read-only); UnknownBlob if there are none."""
        with self._lock, self._errors("read a blob"):
            row = self._conn.execute(q.GET_BLOB, (ref,)).fetchone()
        if row is None:
            raise UnknownBlob(f"no blob {ref!r} in {self.path}; store it with put_blob() first")
        return bytes(row[0])

    def has_blob(self, ref: str) -> bool:
        """Whether a blob with this sha256 hex is stored (read-only)."""
        with self._lock, self._errors("look up a blob"):
            return self._conn.execute(q.HAS_BLOB, (ref,)).fetchone() is not None

    def save_checkpoint(self, name: str, seq: int, state: bytes) -> None:
        """Keep `state` as projection `name` at `seq`, replacing the previous one; one transaction."""
        with self._lock, self._errors("save a checkpoint"), self._writing():
            self._conn.execute(q.SAVE_CHECKPOINT, (name, seq, state))

    def load_checkpoint(self, name: str) -> tuple[int, bytes] | None:
        """(seq, state) last saved under `name`, or None (read-only)."""
        with self._lock, self._errors("load a checkpoint"):
            row = self._conn.execute(q.LOAD_CHECKPOINT, (name,)).fetchone()
        return (int(row[0]), bytes(row[1])) if row is not None else None

    # --- integrity -------------------------------------------------------------------------

    def verify(self) -> VerifyReport:
        """Re-hash every blob, then walk every event in seq order checking the chain (read-only).

        Rows are streamed in batches; the lock is held per batch, so appends may
        continue meanwhile (events appended after the walk started may be left out).
        """
        verifier = ChainVerifier(self._check_blobs())
        next_seq = 1
        while True:
            with self._lock, self._errors("verify the log"):
                rows: list[HeadedRow] = self._conn.execute(
                    q.VERIFY_HEADS, (next_seq, _VERIFY_BATCH)
                ).fetchall()
            if not rows or not verifier.feed(rows):
                break
            next_seq = rows[-1][0] + 1
        self.check_unchanged()
        return verifier.report()

    def check_unchanged(self) -> None:
        if self._unchanged is not None:
            self._unchanged.check()

    def _check_blobs(self) -> BlobChecks:
        """ref -> None when the bytes hash to the ref, else what is wrong (read-only; one
        blob in memory at a time: contents can be tens of megabytes each)."""
        with self._lock, self._errors("verify the blobs"):
            listing = self._conn.execute(q.LIST_BLOBS).fetchall()
        checked = BlobChecks()
        for ref, size in listing:
            with self._lock, self._errors("verify the blobs"):
                data = bytes(self._conn.execute(q.GET_BLOB, (ref,)).fetchone()[0])
            checked.check(ref, size, data)
        return checked

    def try_lease(self, key: str) -> Release | None:
        """A ``flock`` on ``<ledger>.leases/<hash of key>`` (see :mod:`.leases`); a private
        in-memory log, or a directory where the lease file cannot be made, leases per process."""
        if self._file_leases is not None:
            return self._file_leases.try_lease(key)
        return super().try_lease(key)

    def local_index_path(self, name: str) -> str:
        """Derived indexes share the ledger file (their tables never touch the log's);
        a log kept in no file keeps them in memory; a closed store's file gets none."""
        with self._errors("open an index"):
            return ":memory:" if self.path in UNPERSISTED or self.read_only else self.path

    def close(self) -> None:
        """Close the connection (idempotent); SQLite checkpoints the WAL when the last one closes."""
        with self._closing:  # another thread's close returns once the first closed all; a
            # close inside it (a signal handler, a closer) re-enters and returns: RLock
            with self._lock:
                if self._closed:
                    return
                self._closed = True  # (from here every call says so: see _errors)
            self._close_derived()  # unlocked: a recall in its index's lock reads the store
            with self._lock:
                self._conn.close()  # (last: SQLite removes the -wal/-shm at the last close)
                close_side_lock(self._side_lock)
