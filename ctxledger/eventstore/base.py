"""The event store interface every backend implements (SQLite today).

Contract (checked by ``tests/eventstore_contract.py`` for every backend):

* ``append`` is atomic: a batch is all in or all out.
* Per-stream versions are dense (1, 2, 3, ...); ``expected_version`` is the version
  the caller read (0 for a new stream). A stale one raises :class:`ConcurrencyError`
  and writes nothing. ``expected_version=None`` skips the check (imports, tests).
* Event ids are idempotency keys: re-sending a batch whose ids are all already in
  the log, in the same streams, is a no-op returning the current versions; a batch
  mixing known and new ids raises :class:`DuplicateEventError`.
* The global ``seq`` orders all events; each event's ``hash`` chains to the previous
  event's, so ``verify()`` can name the first tampered event.
* Large message contents and blobs are stored once, content-addressed by sha256.
"""

from __future__ import annotations

import abc
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from typing import Literal

import msgspec

from ctxledger.events import Event

Durability = Literal["full", "normal"]


class Recorded(msgspec.Struct, frozen=True):
    """An event as the log holds it: its global position, stream version and hash."""

    seq: int
    stream: str
    version: int
    event: Event
    hash: str


class AppendRequest(msgspec.Struct, frozen=True):
    """One stream's part of an atomic multi-stream append."""

    stream: str
    events: Sequence[Event]
    expected_version: int | None


class VerifyReport(msgspec.Struct, frozen=True):
    ok: bool
    events_checked: int
    blobs_checked: int
    first_bad_seq: int | None = None
    first_bad_event_id: str | None = None
    problem: str | None = None


class EventStore(abc.ABC):
    """Append-only log of events, partitioned into streams (one per session)."""

    @abc.abstractmethod
    def append(
        self,
        stream: str,
        events: Sequence[Event],
        expected_version: int | None,
        blobs: Mapping[str, bytes] | None = None,
    ) -> int:
        """Append `events` to `stream` atomically; returns the stream's new version."""

    @abc.abstractmethod
    def append_many(
        self, requests: Sequence[AppendRequest], blobs: Mapping[str, bytes] | None = None
    ) -> dict[str, int]:
        """Append to several streams in one transaction (a compaction's session switch).

        Every expected version is checked before anything is written.
        Returns the new version of each stream.
        """

    @abc.abstractmethod
    def stream_version(self, stream: str) -> int:
        """Current version of `stream` (0 if it has no events)."""

    @abc.abstractmethod
    def read_stream(self, stream: str, from_version: int = 1, to_version: int | None = None) -> Iterator[Recorded]:
        """Events of one stream with from_version <= version (<= to_version), in order."""

    @abc.abstractmethod
    def read_all(self, from_seq: int = 1, to_seq: int | None = None, batch_size: int = 2000) -> Iterator[Recorded]:
        """Every event with from_seq <= seq (<= to_seq), in log order."""

    @abc.abstractmethod
    def last_seq(self) -> int:
        """The highest seq in the log (0 when empty)."""

    @abc.abstractmethod
    def streams(self) -> list[tuple[str, int]]:
        """(stream, version) for every stream, oldest first."""

    @abc.abstractmethod
    def put_blob(self, data: bytes) -> str:
        """Store `data` once (content-addressed); returns its sha256 hex."""

    @abc.abstractmethod
    def get_blob(self, ref: str) -> bytes:
        """The bytes of a blob; raises UnknownSession (a KeyError) if absent."""

    @abc.abstractmethod
    def has_blob(self, ref: str) -> bool: ...

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
    def close(self) -> None: ...

    async def follow(self, from_seq: int = 1, poll_interval: float = 0.05) -> AsyncIterator[Recorded]:
        """Yield events from `from_seq` on, then wait for new ones (forever; cancel to stop)."""
        import anyio

        next_seq = from_seq
        while True:
            got = False
            for rec in self.read_all(next_seq):
                got = True
                next_seq = rec.seq + 1
                yield rec
            if not got:
                await anyio.sleep(poll_interval)

    def __enter__(self) -> EventStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
