"""The event store interface every backend implements (SQLite; others pass the same contract).

Contract (checked by :mod:`ctxledger.testing.eventstore` for every backend):

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

The hash chain (:func:`chain_hash`) and the walk that checks it (:class:`ChainVerifier`)
live here, not in a backend, so every backend computes and checks the same chain.
"""

from __future__ import annotations

import abc
import hashlib
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from typing import Literal, NamedTuple, Self

import msgspec

from ctxledger.errors import (
    DuplicateEventError,
    IntegrityError,
    InvalidEvent,
    InvalidInput,
    UnknownBlob,
)
from ctxledger.events import (
    EVENT_DECODER,
    EVENT_TYPES,
    Event,
    MessageAppended,
    Recorded,
    ToolOutputPersisted,
    dehydrate,
    encode_event,
    hydrate,
    sha256_hex,
    upcast_stored,
)
from ctxledger.eventstore import leases
from ctxledger.eventstore.leases import LocalLeases, Release

Durability = Literal["full", "normal"]


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
    #: the last event that verified and the hash that commits to the log up to it (the
    #: value to keep elsewhere and pass to ``verify --expect-head``); None for an empty log
    head_seq: int | None = None
    head_hash: str | None = None


# --- the hash chain -------------------------------------------------------------------

#: the "previous hash" of the first event in a log
GENESIS_HASH = "0" * 64

#: a stored event as backends hand it to the verifier:
#: (seq, stream, version, event_id, kind, schema, payload, hash)
StoredRow = tuple[int, str, int, str, str, int, bytes, str]

#: encodes ``(prev_hash, seq, stream, version, event_id, kind, schema)`` as a JSON array:
#: the bytes hashed before an event's payload (JSON, so no field can bleed into another)
chain_header: Callable[[tuple[str, int, str, int, str, str, int]], bytes] = (
    msgspec.json.Encoder().encode
)


def chain_hash(
    prev_hash: str,
    seq: int,
    stream: str,
    version: int,
    event_id: str,
    kind: str,
    schema: int,
    payload: bytes,
) -> str:
    """sha256 hex of the previous event's hash, this event's position and identity, and its payload."""
    header = chain_header((prev_hash, seq, stream, version, event_id, kind, schema))
    return hashlib.sha256(header + payload).hexdigest()


# --- decoding stored payloads ----------------------------------------------------------


def decode_stored(payload: bytes, schema: int) -> Event:
    """Decode a stored payload, upcasting it when `schema` is not today's (pure).

    The payload carries its ``kind`` tag, so backends need not read the kind column.
    Raises InvalidEvent when the payload is not an event or cannot be upcast.
    """
    try:
        event: Event = EVENT_DECODER.decode(payload)
        if schema == event.SCHEMA:
            return event
    except (msgspec.DecodeError, msgspec.ValidationError):
        pass  # perhaps an older shape: the upcasting path decides
    return upcast_stored(payload, schema)


def decode_rows(
    rows: Iterable[tuple[int, int, int, bytes, str]], get_blob: Callable[[str], bytes]
) -> list[Recorded]:
    """Stored rows (seq, version, schema, payload, hash) -> Recorded (shared by backends).

    Upcasts older payloads and re-inflates message contents kept as blobs; the
    stream is the event's session (append guarantees it, verify() checks it).
    """
    out: list[Recorded] = []
    append, decode = out.append, EVENT_DECODER.decode
    seq = 0
    try:
        for seq, version, schema, payload, digest in rows:
            try:
                event: Event | None = decode(payload)
            except (msgspec.DecodeError, msgspec.ValidationError):
                event = None  # maybe an older shape: upcast_stored upcasts or explains
            if event is None or schema != event.SCHEMA:
                event = upcast_stored(payload, schema)
            if type(event) is MessageAppended and event.content_ref is not None:
                event = hydrate(event, get_blob)
            append(Recorded(seq, event.session_id, version, event, digest))
    except InvalidEvent as exc:
        raise InvalidEvent(
            f"the event at seq {seq} cannot be decoded ({exc}); run verify() on the log"
        ) from exc
    except UnknownBlob as exc:
        raise IntegrityError(
            f"the event at seq {seq} lost its content blob ({exc}); run verify() on the log"
        ) from exc
    return out


# --- preparing appends (shared by backends) ---------------------------------------------

_encode = encode_event
#: event class -> (kind, schema): one lookup validates the type and gives both columns
_KINDS: dict[type, tuple[str, int]] = {cls: (k, cls.SCHEMA) for k, cls in EVENT_TYPES.items()}


class PreparedBatch(NamedTuple):
    """One stream's events, validated and encoded, ready for a transaction."""

    stream: str
    expected_version: int | None
    rows: list[tuple[str, str, int, bytes]]  # event_id, kind, schema, payload


def prepare_append(
    requests: Sequence[AppendRequest], blobs: Mapping[str, bytes] | None, threshold: int
) -> tuple[list[PreparedBatch], dict[str, bytes]]:
    """Validate and encode an append before any I/O (pure); raises on bad input.

    Returns one batch per request (large message contents moved out by
    ``dehydrate``) and every blob to store in the same transaction.
    """
    batches: list[PreparedBatch] = []
    new_blobs: dict[str, bytes] = {}
    for request in requests:
        stream, expected = request.stream, request.expected_version
        if not isinstance(stream, str) or not stream:
            raise InvalidInput(f"stream must be a non-empty session id, got {stream!r}")
        if any(batch.stream == stream for batch in batches):
            raise InvalidInput(
                f"stream {stream!r} appears twice in one append; merge its events into one request"
            )
        if expected is not None and expected < 0:
            raise InvalidInput(
                f"expected_version must be >= 0 (0 for a new session), got {expected}"
            )
        rows: list[tuple[str, str, int, bytes]] = []
        for event in request.events:
            meta = _KINDS.get(type(event))
            if meta is None:
                raise InvalidEvent(
                    f"only catalogue events can be appended, got {type(event).__name__}"
                )
            if event.session_id != stream:
                raise InvalidEvent(
                    f"event {event.event_id!r} belongs to session {event.session_id!r}, "
                    f"not stream {stream!r}: append it to its own session"
                )
            if isinstance(event, MessageAppended):
                # the test dehydrate() makes, inlined: this loop runs once per event
                content = event.message.get("content")
                if isinstance(content, str) and len(content) >= threshold:
                    event, extra = dehydrate(event, threshold)
                    new_blobs.update(extra)
            rows.append((event.event_id, meta[0], meta[1], _encode(event)))
        batches.append(PreparedBatch(stream, expected, rows))
    _reject_repeated_ids(batches)
    for ref, data in (blobs or {}).items():
        if sha256_hex(data) != ref:
            raise InvalidInput(
                f"blob {ref!r} is not the sha256 hex of its bytes; key blobs by sha256"
            )
        new_blobs[ref] = data
    return batches, new_blobs


def _reject_repeated_ids(batches: list[PreparedBatch]) -> None:
    ids = [row[0] for batch in batches for row in batch.rows]
    if len(set(ids)) == len(ids):
        return
    seen: set[str] = set()
    for event_id in ids:
        if event_id in seen:
            raise DuplicateEventError(
                f"event id {event_id!r} appears twice in one append; give every event its own id"
            )
        seen.add(event_id)


class ChainVerifier:
    """Checks stored rows, fed in seq order, and keeps the first problem found (pure: no I/O).

    `blobs` maps every stored blob ref to ``None`` when its bytes hash to the ref,
    or to what is wrong with it; an event that references a bad or missing blob is
    reported at that event.
    """

    def __init__(self, blobs: Mapping[str, str | None]) -> None:
        self.blobs = blobs
        self.prev_hash = GENESIS_HASH
        self.next_seq = 1
        self.checked = 0
        self.versions: dict[str, int] = {}
        self.problem: tuple[int | None, str | None, str] | None = None

    def feed(self, rows: Iterable[StoredRow]) -> bool:
        """Check `rows` (the next ones in seq order); False once a problem was found."""
        if self.problem is not None:
            return False
        prev, seq_expected, versions = self.prev_hash, self.next_seq, self.versions
        sha256, header = hashlib.sha256, chain_header
        problem: str | None = None
        for seq, stream, version, event_id, kind, schema, payload, stored_hash in rows:
            previous_version = versions.get(stream, 0)
            if seq != seq_expected:
                problem = f"gap in the log: seq {seq_expected} is missing"
            elif version != previous_version + 1:
                problem = f"gap in stream {stream!r}: version {version} follows {previous_version}"
            elif (
                sha256(header((prev, seq, stream, version, event_id, kind, schema)) + payload)
            ).hexdigest() != stored_hash:
                problem = "hash mismatch: this event (or its row) was altered"
            else:
                problem = self._check_payload(payload, kind, schema, stream, event_id)
            if problem is not None:
                self.problem = (seq, event_id, problem)
                break
            prev = stored_hash
            versions[stream] = version
            seq_expected += 1
        self.checked += seq_expected - self.next_seq
        self.prev_hash, self.next_seq = prev, seq_expected
        return problem is None

    def _check_payload(
        self, payload: bytes, kind: str, schema: int, stream: str, event_id: str
    ) -> str | None:
        try:
            event = decode_stored(payload, schema)
        except InvalidEvent as exc:
            return f"undecodable payload: {exc}"
        if (event.event_id, event.session_id, type(event).__name__) != (event_id, stream, kind):
            return "payload disagrees with the row's event id, stream or kind"
        if isinstance(event, MessageAppended) and event.content_ref is not None:
            ref = event.content_ref
            if ref not in self.blobs:
                return f"missing blob {ref}: the message content is gone"
        elif isinstance(event, ToolOutputPersisted) and event.blob_ref in self.blobs:
            ref = event.blob_ref  # a tool output's blob is stored by the caller; absent is allowed
        else:
            return None
        bad = self.blobs[ref]
        return None if bad is None else f"blob mismatch: {bad}"

    def report(self) -> VerifyReport:
        """The verdict so far: the first problem found, else any bad blob no event referenced."""
        if self.problem is None:
            bad = next((why for why in self.blobs.values() if why is not None), None)
            if bad is not None:
                self.problem = (None, None, f"blob mismatch: {bad}")
        head = (
            (self.next_seq - 1, self.prev_hash) if self.prev_hash != GENESIS_HASH else (None, None)
        )
        if self.problem is None:
            return VerifyReport(
                ok=True,
                events_checked=self.checked,
                blobs_checked=len(self.blobs),
                head_seq=head[0],
                head_hash=head[1],
            )
        seq, event_id, problem = self.problem
        return VerifyReport(
            ok=False,
            events_checked=self.checked,
            blobs_checked=len(self.blobs),
            first_bad_seq=seq,
            first_bad_event_id=event_id,
            problem=problem,
            head_seq=head[0],
            head_hash=head[1],
        )


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
    def read_stream(
        self, stream: str, from_version: int = 1, to_version: int | None = None
    ) -> Iterator[Recorded]:
        """Events of one stream with from_version <= version (<= to_version), in order."""

    @abc.abstractmethod
    def read_all(
        self, from_seq: int = 1, to_seq: int | None = None, batch_size: int = 2000
    ) -> Iterator[Recorded]:
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
    def close(self) -> None: ...

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
        """
        import itertools

        import anyio

        def read_batch(start: int) -> list[Recorded]:
            return list(itertools.islice(self.read_all(start, None, batch_size), batch_size))

        next_seq = from_seq
        while True:
            batch = await anyio.to_thread.run_sync(read_batch, next_seq)
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
