"""The projector: every projection, folded together, incrementally or from scratch.

``Projector.rebuild(store)`` folds the whole log (or up to a sequence number);
``catch_up(store)`` folds only what was appended since the last event it saw. A
checkpoint stores the serialized state at a sequence so a rebuild can start late.
Rebuilding and folding incrementally must give the same state (a property test
checks it).

A rebuild folds *message heads* (``read_rows``: a message's id,
session and token count; its body is not parsed) and leaves each body in the log,
read back by seq the first time it is asked for (:mod:`ctxledger.projections.bodies`):
a rebuild of a million events then neither parses nor keeps a million bodies.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Protocol

import msgspec

from ctxledger.collector import collector_paused
from ctxledger.events import Event, MessageAppended, Recorded
from ctxledger.eventstore.base import EventStore, no_stream
from ctxledger.eventstore.rows import ColumnRow, HeadRow
from ctxledger.projections.accounting import AccountingProjection
from ctxledger.projections.bodies import Bodies
from ctxledger.projections.chains import ChainsProjection
from ctxledger.projections.rowfold import Versions
from ctxledger.projections.source import EventSource
from ctxledger.projections.transcript import TranscriptProjection

#: bump whenever a projection's state gains or changes a field: a checkpoint saved under
#: another name is ignored (the rebuild starts from the log), never decoded into the wrong
#: shape with defaults filling what an older fold never computed. v4 (session 38): a
#: session's ``prompt_role``; a checkpoint saved here wins over a later v3 that an older
#: version saved over a ledger holding roles (its fold dropped them)
CHECKPOINT_NAME = "projector/v4"
#: the checkpoint before the system prompt's role (still loaded when no v4 is saved: a
#: state without roles encodes as v3 did, so one saved over a ledger written before
#: session 38 is today's state, and an upgraded ledger does not rebuild from its log)
ROLELESS_CHECKPOINT_NAME = "projector/v3"
#: the checkpoint before message bodies could stay in the log (still loaded)
LEGACY_CHECKPOINT_NAME = "projector/v2"


class HeadSource(Protocol):
    """A log that can be folded from message heads (every event store can)."""

    def read_rows(self, from_seq: int = 1, to_seq: int | None = None) -> Iterator[list[HeadRow]]:
        """Pages of stored rows (seq, version, schema, payload), in log order."""
        ...

    def read_at(self, seqs: Sequence[int]) -> list[Recorded]:
        """The records at `seqs`, in seq order."""
        ...


class Projector:
    def __init__(
        self,
        transcript: TranscriptProjection | None = None,
        accounting: AccountingProjection | None = None,
        chains: ChainsProjection | None = None,
    ) -> None:
        self.transcript = transcript or TranscriptProjection()
        self.accounting = accounting or AccountingProjection()
        self.chains = chains or ChainsProjection()
        self.last_seq = max(
            self.transcript.state.last_seq,
            self.accounting.state.last_seq,
            self.chains.state.last_seq,
        )
        #: called with every record folded, in log order, after the projections saw it
        #: (other folds, e.g. the runtime's, ride along instead of re-reading the store)
        self.listeners: list[Callable[[Recorded], None]] = []
        #: reads the bodies of messages folded from their heads (set by the first such fold)
        self._bodies: Bodies | None = None

    def apply(self, rec: Recorded) -> None:
        self.apply_all((rec,))

    def apply_all(self, records: Iterable[Recorded]) -> int:
        """Fold records in log order (already-folded ones are skipped); returns how many."""
        transcript, accounting, chains = (
            self.transcript.apply,
            self.accounting.apply,
            self.chains.apply,
        )
        listeners = self.listeners
        last = self.last_seq
        n = 0
        try:
            for rec in records:
                seq = rec.seq
                if seq <= last:
                    continue
                event = rec.event
                transcript(seq, event, rec.version)
                if type(event) is not MessageAppended:
                    accounting(seq, event)
                    chains(seq, event)
                if listeners:
                    for listener in listeners:
                        listener(rec)
                last = seq
                n += 1
        finally:
            self.last_seq = last
        return n

    def catch_up(
        self, store: EventSource, to_seq: int | None = None, *, heads: bool = False
    ) -> int:
        """Fold events appended since the last one seen; returns how many were folded.

        `heads`: fold messages from their heads and leave their bodies in the log (what
        :meth:`rebuild` does; ignored with listeners, or for a store without
        ``read_rows``). Otherwise whole events are folded: an incremental catch-up
        (``Ledger.refresh`` after an append) keeps the bodies it just read and extends
        cached API views in place.

        Long folds run with the cyclic garbage collector paused: they allocate only
        acyclic, long-lived objects, and collector passes over them cost more than the
        fold itself (measured: about 2x on a 1M-event rebuild).
        """
        with collector_paused():
            source = _heads_of(store) if heads and not self.listeners else None
            if source is not None:
                columns = _columns_of(source)
                if columns is not None:  # heads in columns (SQLite): payloads left unread
                    return self.apply_column_rows(
                        columns.read_heads(self.last_seq + 1, to_seq),
                        self._bodies_in(source),
                        columns.versions_at,
                    )
                return self.apply_rows(
                    source.read_rows(self.last_seq + 1, to_seq), self._bodies_in(source)
                )
            return self.apply_all(store.read_all(self.last_seq + 1, to_seq))

    def _bodies_in(self, source: HeadSource) -> Bodies:
        """One body reader per log, shared by every message folded from it."""
        bodies = self._bodies
        if bodies is None or bodies.source is not source:
            bodies = self._bodies = Bodies(source)
        return bodies

    def apply_rows(self, pages: Iterable[list[HeadRow]], bodies: Bodies) -> int:
        """Fold stored rows (``read_rows``): messages from their heads, bodies left in the
        log behind `bodies`; returns how many events were folded. Listeners are not
        called (they need whole events)."""
        last, folded = self.last_seq, 0
        try:
            last, folded = self.transcript.fold_rows(pages, bodies, self._fold_other, last)
        finally:
            self.last_seq = max(last, self.transcript.state.last_seq)
        return folded

    def apply_column_rows(
        self,
        pages: Iterable[tuple[Mapping[int, str], list[ColumnRow]]],
        bodies: Bodies,
        versions: Versions,
    ) -> int:
        """:meth:`apply_rows` for ``read_heads`` pages (message heads in columns);
        `versions` is the store's ``versions_at``."""
        last, folded = self.last_seq, 0
        try:
            last, folded = self.transcript.fold_column_rows(
                pages, bodies, self._fold_other, last, versions
            )
        finally:
            self.last_seq = max(last, self.transcript.state.last_seq)
        return folded

    def _fold_other(self, seq: int, event: Event, version: int) -> None:
        """Fold an event a row fold did not take as a message head, into every projection."""
        self.transcript.apply(seq, event, version)
        if type(event) is not MessageAppended:
            self.accounting.apply(seq, event)
            self.chains.apply(seq, event)

    @classmethod
    def rebuild(
        cls,
        store: EventSource,
        to_seq: int | None = None,
        *,
        use_checkpoint: bool = True,
        check_streams: bool = True,
    ) -> Projector:
        """A fresh projector folded from the log (from the latest usable checkpoint).
        `check_streams` False: a past view of a ledger whose open checked the stream
        names (:meth:`_check_streams`; a query of every stream name on PostgreSQL)."""
        projector = cls()
        if use_checkpoint:
            for name in (CHECKPOINT_NAME, ROLELESS_CHECKPOINT_NAME, LEGACY_CHECKPOINT_NAME):
                saved = store.load_checkpoint(name)
                if saved is not None and (to_seq is None or saved[0] <= to_seq):
                    heads = _heads_of(store)
                    projector = cls.decode(
                        saved[1],
                        None if heads is None else Bodies(heads),
                        legacy=name == LEGACY_CHECKPOINT_NAME,
                    )
                    break
        projector.catch_up(store, to_seq, heads=True)
        if check_streams:
            projector._check_streams(store)
        return projector

    def _check_streams(self, store: EventSource) -> None:
        """A log folded from rows without their streams (PostgreSQL's ``read_rows``: each
        session is read from the payloads) is checked against the store's stream names
        once (``EventStore.stream_names``, None for SQLite), as a fold of SQLite's heads checks each
        message row against its stream: a folded session with no stream of its name (its
        row renamed or removed) is refused here, not at the first read of it. (Rows
        whose names were swapped are named by that read: ``base.of_stream``.)"""
        sessions = self.transcript.state.sessions
        if not sessions or not isinstance(store, EventStore):
            return
        held = store.stream_names()
        if held is None:
            return
        missing = next((sid for sid in sessions if sid not in held), None)
        if missing is not None:
            raise no_stream(missing)

    def save_checkpoint(self, store: EventSource) -> None:
        store.save_checkpoint(CHECKPOINT_NAME, self.last_seq, self.encode())

    def _sync_last_seq(self) -> None:
        """Every projection has seen the log up to ``last_seq`` (some skip irrelevant events)."""
        self.accounting.state.last_seq = self.chains.state.last_seq = self.last_seq

    def encode(self) -> bytes:
        self._sync_last_seq()
        return msgspec.msgpack.encode(
            [
                self.transcript.encode_state(),
                self.accounting.encode_state(),
                self.chains.encode_state(),
            ]
        )

    @classmethod
    def decode(
        cls, data: bytes, bodies: Bodies | None = None, *, legacy: bool = False
    ) -> Projector:
        """A projector from :meth:`encode`'s bytes; `bodies` reads the message bodies the
        checkpoint left in the log (`legacy`: a ``projector/v2`` checkpoint)."""
        t, a, c = msgspec.msgpack.decode(data, type=tuple[bytes, bytes, bytes])
        projector = cls(
            TranscriptProjection.decode_state(t, bodies, legacy=legacy),
            AccountingProjection.decode_state(a),
            ChainsProjection.decode_state(c),
        )
        projector._bodies = bodies
        return projector

    def fingerprint(self) -> bytes:
        """A canonical encoding of the whole state, for equality checks (rebuild == live)."""
        self._sync_last_seq()
        return msgspec.json.encode(
            [
                self.transcript.builtins(),
                msgspec.to_builtins(self.accounting.state),
                msgspec.to_builtins(self.chains.state),
            ],
            order="sorted",
        )


class ColumnSource(Protocol):
    """A log that keeps message heads in columns (SQLite since its migration 0002)."""

    def read_heads(
        self, from_seq: int = 1, to_seq: int | None = None
    ) -> Iterator[tuple[Mapping[int, str], list[ColumnRow]]]:
        """Pages of (stream names, rows), heads from their columns."""
        ...

    def versions_at(self, stream_ids: Iterable[int], seq: int) -> dict[int, int]:
        """Each stream's version as of `seq`."""
        ...


def _columns_of(store: HeadSource) -> ColumnSource | None:
    """`store` when it keeps message heads in columns, else None."""
    if callable(getattr(store, "read_heads", None)) and callable(
        getattr(store, "versions_at", None)
    ):
        return store  # type: ignore[return-value]
    return None


def _heads_of(store: EventSource) -> HeadSource | None:
    """`store` when it can be folded from message heads (every event store), else None."""
    if callable(getattr(store, "read_rows", None)) and callable(getattr(store, "read_at", None)):
        return store  # type: ignore[return-value]
    return None
