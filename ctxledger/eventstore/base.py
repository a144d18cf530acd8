"""The event store interface every backend implements (SQLite; others pass the same contract).

Contract (checked by :mod:`ctxledger.testing.eventstore` for every backend):

* ``append`` is atomic: a batch is all in or all out.
* Per-stream versions are dense (1, 2, 3, ...); ``expected_version`` is the version
  the caller read (0 for a new stream). A stale one raises :class:`ConcurrencyError`
  and writes nothing. ``expected_version=None`` skips the check (imports, tests).
* Event ids are idempotency keys: re-sending a batch whose ids are all already in
  the log, in the same streams, is a no-op returning the current versions; a batch
  mixing known and new ids raises :class:`DuplicateEventError`.
* The global ``seq`` orders all events; the rows chain by hash, so ``verify()`` can
  name the first tampered event. Two row formats verify as one chain: the per-event
  format (each row holds :func:`chain_hash` of the previous row) and the linked one
  (one sha256 :func:`link_hash` per append to a stream, on its last row, plus a crc
  digest per row that locates a damaged row; the SQLite store writes this one since
  issue 14: a batched append then hashes once instead of once per event).
* Large message contents and blobs are stored once, content-addressed by sha256.

The hash chain (:func:`~ctxledger.eventstore.rows.chain_hash`,
:func:`~ctxledger.eventstore.rows.link_hash`, in :mod:`ctxledger.eventstore.rows`) and the
walk that checks it (:class:`~ctxledger.eventstore.verifier.ChainVerifier`) live outside
any backend, so every backend computes and checks the same chain; so does the preparing
of an append (:func:`~ctxledger.eventstore.preparing.prepare_append`).
"""

from __future__ import annotations

import abc
import contextlib
import threading
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from typing import Literal, NamedTuple, Self, TypeVar

import msgspec

from ctxledger.errors import (
    InvalidConfig,
    InvalidEvent,
    StoreBusy,
    StoreError,
)
from ctxledger.events import (
    Event,
    Recorded,
)
from ctxledger.eventstore import leases
from ctxledger.eventstore.backoff import Backoff
from ctxledger.eventstore.leases import LocalLeases, Release
from ctxledger.eventstore.paging import paged, seq_runs
from ctxledger.eventstore.rows import ChainFormat, StoredRow, shown
from ctxledger.eventstore.seals import append_sealed
from ctxledger.eventstore.verifier import VerifyReport
from ctxledger.integers import shown as quoted
from ctxledger.integers import shown_id  # ids: whole, so `stem#2`/`stem#3` read apart

Durability = Literal["full", "normal"]


def check_durability(durability: object) -> None:
    """InvalidConfig unless `durability` is one of :data:`Durability` (both stores)."""
    if durability not in ("full", "normal"):
        raise InvalidConfig(f"durability must be 'full' or 'normal', got {quoted(durability)}")


class AppendRequest(msgspec.Struct, frozen=True):
    """One stream's part of an atomic multi-stream append.

    `chain` is None for the store's own row format (SQLite: linked, PostgreSQL:
    per-event); a copy (``ctxledger migrate``) names the source's format so every
    copied row gets the source's hash.
    """

    stream: str
    events: Sequence[Event]
    expected_version: int | None
    chain: ChainFormat | None = None
    #: each event's (schema, payload) exactly as another store holds it, written verbatim
    #: instead of encoding `events` (a copy: ``ctxledger migrate``); the caller vouches
    #: that each payload is its event (the copy verifies the destination at the end)
    stored: Sequence[tuple[int, bytes]] | None = None


class StreamedRequest(NamedTuple):
    """One stream's part of :meth:`EventStore.append_stream`: its events may be a
    generator, read once, a chunk at a time (the store's own row format)."""

    stream: str
    events: Iterable[Event]
    expected_version: int | None


#: guards every store's list of closers (held for a list operation, never while one runs;
#: re-entrant: a close from a signal handler landing inside one returns, see on_close)
_CLOSERS = threading.RLock()
#: "no upper bound" for a seq or a version (SQLite's and PostgreSQL's largest integer)
MAX_SEQ = 2**63 - 1


class EventStore(abc.ABC):
    """Append-only log of events, partitioned into streams (one per session)."""

    def append(
        self,
        stream: str,
        events: Sequence[Event],
        expected_version: int | None,
        blobs: Mapping[str, bytes] | None = None,
    ) -> int:
        """Append `events` to `stream` atomically (:meth:`append_many` of one request);
        returns the stream's new version."""
        return self.append_many((AppendRequest(stream, events, expected_version),), blobs)[stream]

    @abc.abstractmethod
    def append_many(
        self, requests: Sequence[AppendRequest], blobs: Mapping[str, bytes] | None = None
    ) -> dict[str, int]:
        """Append to several streams in one transaction (a compaction's session switch).

        Every expected version is checked before anything is written.
        Returns the new version of each stream.
        """

    def append_stream(self, requests: Iterable[StreamedRequest]) -> dict[str, int]:
        """:meth:`append_many` of requests whose events may be generators, for new events
        (an import): one transaction, all or nothing. This default reads each request
        whole first; SQLite and PostgreSQL encode and write a chunk at a time
        (:mod:`.streamed`, :mod:`.postgres_stream`) and refuse a re-send (InvalidInput)
        where this is a no-op. On PostgreSQL an ``expected_version`` of None does not
        absorb a concurrent writer: a row another appender wrote to the stream while the
        streamed append held the lock is a ConcurrencyError (nothing appended; retry)."""
        return self.append_many(
            [AppendRequest(r.stream, list(r.events), r.expected_version) for r in requests]
        )

    @abc.abstractmethod
    def stream_version(self, stream: str) -> int:
        """Current version of `stream` (0 if it has no events)."""

    @abc.abstractmethod
    def read_stream(
        self, stream: str, from_version: int = 1, to_version: int | None = None
    ) -> Iterator[Recorded]:
        """Events of one stream with from_version <= version (<= to_version), in order."""

    def read_session(self, session: str) -> Iterator[Recorded]:
        """Every event of a session the caller knows has events (the ledger folded them):
        :meth:`read_stream`, but nothing read is damage, not an unknown session. A
        streams row renamed or removed (PostgreSQL's fold reads each session from the
        payload, so the ledger opens) left the session's reads empty without a word."""
        empty = True
        for record in self.read_stream(session):
            empty = False
            yield record
        if empty:
            raise no_stream(session)

    def read_all(
        self, from_seq: int = 1, to_seq: int | None = None, batch_size: int = 2000
    ) -> Iterator[Recorded]:
        """Every event with from_seq <= seq (<= to_seq), in log order, `batch_size` rows
        per :meth:`_read_batch` (read-only)."""
        upto = MAX_SEQ if to_seq is None else to_seq
        return paged(
            lambda n, k: self._read_batch(n, upto, k), from_seq, batch_size, lambda r: r.seq
        )

    @abc.abstractmethod
    def _read_batch(self, from_seq: int, to_seq: int, limit: int) -> list[Recorded]:
        """Up to `limit` records with from_seq <= seq <= to_seq, in seq order (read-only)."""

    def read_at(self, seqs: Sequence[int]) -> list[Recorded]:
        """The records at `seqs` (any order; missing seqs are left out), in seq order (read-only).

        Reads runs of nearby seqs with one :meth:`read_all` each, so the bodies of one
        session's live messages cost a few queries, not one per message.
        """
        out: list[Recorded] = []
        for run in seq_runs(seqs):
            keep = set(run)
            out.extend(r for r in self.read_all(run[0], run[-1]) if r.seq in keep)
        return out

    def read_stored(self, from_seq: int = 1, batch_size: int = 2000) -> Iterator[StoredRow]:
        """Rows as stored (schema, payload bytes and hash untouched), in seq order (read-only).

        What ``ctxledger migrate`` copies, so an event written by an older ctxledger
        keeps its bytes and hash. Optional: a backend without it raises
        NotImplementedError, and a copy then re-encodes the decoded events.
        """
        raise NotImplementedError(f"{type(self).__name__} does not hand out stored rows")

    def sealed(self, seq: int) -> bool:
        """Whether the append holding the row at `seq` still matches its seal (row digests,
        sha256 link) as ``verify`` checks it; see :mod:`ctxledger.eventstore.seals`."""
        return append_sealed(self.read_stored, seq)

    def settle(self) -> None:  # noqa: B027 (a default no-op, not an abstract method)
        """Make every committed append visible before a whole-log read (a copy).

        A no-op for stores whose appends are visible once committed; PostgreSQL seals
        rows whose writer died between its insert and the seal (see
        :mod:`ctxledger.eventstore.postgres`).
        """

    @abc.abstractmethod
    def last_seq(self) -> int:
        """The highest seq in the log (0 when empty)."""

    @abc.abstractmethod
    def streams(self) -> list[tuple[str, int]]:
        """(stream, version) for every stream, oldest first."""

    def stream_names(self) -> set[str] | None:
        """Every stream's name, for the open's check of a log folded from rows without
        their streams (PostgreSQL's: a streams row renamed or removed is refused there);
        None (this default) when the store's fold checks each row against its stream
        itself (SQLite's). A store wrapping another passes it on."""
        return None

    @abc.abstractmethod
    def put_blob(self, data: bytes) -> str:
        """Store `data` once (content-addressed); returns its sha256 hex."""

    @abc.abstractmethod
    def get_blob(self, ref: str) -> bytes:
        """The bytes of a blob; raises UnknownBlob (a KeyError) if absent."""

    @abc.abstractmethod
    def has_blob(self, ref: str) -> bool:
        """Whether a blob with this sha256 hex is stored (read-only)."""

    @abc.abstractmethod
    def verify(self) -> VerifyReport:
        """Walk the whole log and the blobs; report the first event whose hash does not match."""

    @abc.abstractmethod
    def save_checkpoint(self, name: str, seq: int, state: bytes) -> None:
        """Keep a projection's serialized state as of `seq` (replaces the previous one)."""

    @abc.abstractmethod
    def load_checkpoint(self, name: str) -> tuple[int, bytes] | None:
        """The last checkpoint saved under `name`, as (seq, state)."""

    @abc.abstractmethod
    def get_derived(self, ref: str, kind: str, version: str) -> bytes | None:
        """A derived value of content `ref`, or None (read-only; see ``eventstore.derived``)."""

    @abc.abstractmethod
    def put_derived(self, ref: str, kind: str, version: str, value: bytes) -> None:
        """Keep a derived value (replaces one there); outside the log and its hash chain."""

    @abc.abstractmethod
    def close(self) -> None:
        """Close the store (idempotent); it first runs what :meth:`on_close` was given."""

    def on_close(self, close: Callable[[], None]) -> None:
        """Have :meth:`close` run `close` first: a derived index's own connection to this
        log's file (recall's), which must not outlive the store (it kept the SQLite
        ledger's ``-wal``/``-shm`` beside it after the store closed). StoreError once the
        store closed (the caller closes what it opened)."""
        with _CLOSERS:  # (one with the swap in _close_derived: none lands on a list run)
            closers = self.__dict__.setdefault("_on_close", [])
            if closers is None:
                raise StoreError("the event store is closed; open it again")
            closers.append(close)
            if self.__dict__.get("_on_close") is not closers:  # a close ran in between (a
                raise StoreError("the event store is closed; open it again")  # handler's)

    def _close_derived(self) -> None:
        """Run (once) what :meth:`on_close` was given; an error of one is dropped (the
        index is a projection, and the store itself must still close)."""
        with _CLOSERS:
            closers, self.__dict__["_on_close"] = self.__dict__.get("_on_close") or [], None
        for close in closers:
            with contextlib.suppress(Exception):
                close()

    def check_unchanged(self) -> None:
        """StoreError when the file a lock-free read-only open read changed meanwhile (a
        SQLite ledger opened ``immutable``, see :mod:`.readonly`); else nothing."""
        return None

    def change_token(self) -> object | None:
        """A value that differs after any append since the previous call, or None (unknown).

        Lets a reader that has folded everything skip its catch-up query when the
        token has not moved; None (the default) means "always catch up".
        """
        return None

    # --- leases (see :mod:`ctxledger.eventstore.leases`) -----------------------------------

    def try_lease(self, key: str) -> Release | None:
        """Take lease `key` if nobody holds it, without waiting: a release function, else None.

        Backends override this with a lock every process using the same log sees; this
        default is process-local (right for a store no other process can open).
        """
        local: LocalLeases = self.__dict__.setdefault("_local_leases", LocalLeases())
        return local.try_lease(key)

    def lease(self, key: str, wait: float | None = None) -> AbstractContextManager[bool]:
        """Hold lease `key` for the ``with`` block, waiting (blocking) up to `wait` seconds
        (None: until it is free); yields whether it is held."""
        return leases.hold(self, key, wait)

    def alease(self, key: str, wait: float | None = None) -> AbstractAsyncContextManager[bool]:
        """:meth:`lease` for async code: waits without blocking the event loop, cancellable."""
        return leases.hold_async(self, key, wait)

    def local_index_path(self, name: str) -> str:
        """The SQLite file where a derived index named `name` of this log may live.

        Indexes that need SQLite (recall's FTS5 tables) keep their tables there; they
        are projections, rebuilt from ``read_all`` when missing. ``":memory:"`` (this
        default) means a private in-memory index per process.
        """
        return ":memory:"

    async def follow(
        self, from_seq: int = 1, poll_interval: float = 0.05, batch_size: int = 2000
    ) -> AsyncIterator[Recorded]:
        """Yield events from `from_seq` on, then poll for new ones (forever; cancel to stop). Read-only.

        Each batch is read in a worker thread, so a long backlog never blocks the event loop.
        A read another session held up past the store's wait (:class:`StoreBusy`: SQLite's
        lock held too long) is retried with backoff, from the same seq.
        """
        import itertools

        import anyio

        def read_batch(start: int) -> list[Recorded]:
            return list(itertools.islice(self.read_all(start, None, batch_size), batch_size))

        next_seq, backoff = from_seq, Backoff()
        while True:
            try:
                batch = await anyio.to_thread.run_sync(read_batch, next_seq)
            except StoreBusy:
                await anyio.sleep(backoff.next())
                continue
            backoff.reset()
            if not batch:
                await anyio.sleep(poll_interval)
                continue
            for recorded in batch:
                yield recorded
            next_seq = batch[-1].seq + 1

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


Versioned = TypeVar("Versioned", bound=tuple[object, ...])


def sound_ends(low: object, high: object) -> bool:
    """Whether a stream's lowest and highest versions are integers from 1 up (else
    :func:`in_versions` is given their rows, to name the one that is not)."""
    return type(low) is int and low >= 1 and type(high) is int


def in_versions(
    rows: list[Versioned], first: int, stream: str, ends: Sequence[object] = ()
) -> list[Versioned]:
    """`rows` (seq, version, ...) of `stream`, read by version from `first` on: refused
    (InvalidEvent) unless their versions are ``first, first + 1, ...``. A row whose
    version was edited (NULL, text, a number out of place) was left out of a read by
    version, or read out of order, without a word (verify names the row).

    `ends` (given with a read's last page): the seq and version of the stream's lowest
    and highest rows by version, read with its id (one index seek each, no count). A
    version edited below 1 or to NULL, or to text, sorts where no read by version looks:
    the stream's *last* row so edited left no gap a later version shows."""
    start = max(first, 1)
    if [row[1] for row in rows] != list(range(start, start + len(rows))):
        for expected, row in enumerate(rows, start):  # (the common case skips this loop)
            seq, version = row[0], row[1]
            if type(version) is not int or version != expected:
                raise InvalidEvent(
                    f"the stream {shown_id(stream)} cannot be read: it has no event at version "
                    f"{expected} (the event at seq {seq} has version {shown(version)}); run "
                    "verify() on the log"
                )
    for seq, version in zip(ends[0::2], ends[1::2], strict=True) if ends else ():
        if seq is not None and (type(version) is not int or version < 1):
            raise InvalidEvent(
                f"the stream {shown_id(stream)} cannot be read: the event at seq {seq} has version "
                f"{shown(version)}, not one from 1 up; run verify() on the log"
            )
    return rows


def no_stream(session: str) -> InvalidEvent:
    """A session whose events exist has no stream of its name (read or open)."""
    return InvalidEvent(
        f"the session {shown_id(session)} has events but no stream of that name (its streams row "
        "renamed or removed?); run verify() on the log"
    )


def of_stream(records: list[Recorded], stream: str) -> list[Recorded]:
    """A page read by `stream`, refused (InvalidEvent) when any of its events is another
    session's: every event is appended to its own session's stream (``prepare_append``),
    so a streams row renamed, or an event row moved into this stream (its stream id and
    version edited), read one session's events as this one's. One compare per record
    (~1 % of decoding it); verify names the rows. A row moved *out* of a stream is not
    seen here: mid-stream it leaves a gap :func:`in_versions` names, from its top
    nothing a read can see (verify names it)."""
    for record in records:
        if record.event.session_id != stream:
            raise InvalidEvent(
                f"the stream {shown_id(stream)} cannot be read: its event at seq {record.seq} is of "
                f"session {shown_id(record.event.session_id)}; run verify() on the log"
            )
    return records
