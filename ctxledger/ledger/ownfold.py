"""A ledger's own append, folded as written instead of read back from the store.

After an append the projections must see what was written. Reading it back
(``Ledger.refresh``) fetches and decodes every payload the ledger encoded a moment
before: for a compaction, a plan and every pruned replacement (≈ 6 ms of 5,000
messages). A store that can say where rows landed (``written_rows``: seq, version,
event id, hash, no payload) lets the ledger fold the very events it appended.

Only events whose stored payload decodes to an equal event qualify: no
``MessageAppended`` (a large content is moved to a blob and re-inflated on read), no
verbatim copies (``AppendRequest.stored``); and only when the rows are exactly the
requested events, contiguous, right after what the projections have folded (no other
writer in between), and the store says this very append inserted them
(``last_written``: equal ids are not enough, another writer with deterministic ids may
have stored them first, making this append a re-send that wrote nothing). Anything
else returns None and the caller reads back as before. A ``SessionSwitched`` whose long
layout content the store kept by reference (schema 2, inside a what-if) qualifies: a
read re-inflates it to the very event given, which is what is folded here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol, runtime_checkable

from ctxledger.errors import CtxLedgerError
from ctxledger.events import MessageAppended, Recorded
from ctxledger.eventstore.base import AppendRequest
from ctxledger.projections import Projector

__all__ = ["WrittenRows", "fold_written", "log_end", "written_records"]


@runtime_checkable
class WrittenRows(Protocol):
    """A store that can list the rows an append wrote (``SQLiteEventStore``)."""

    def last_seq(self) -> int: ...

    def last_written(self) -> tuple[int, int] | None:
        """(first seq, last seq) the calling thread's last append inserted, None if none."""
        ...

    def written_rows(
        self, stream: str, after_version: int, count: int
    ) -> list[tuple[int, int, str, str]]:
        """(seq, version, event id, hash) of `stream`'s rows after `after_version`."""
        ...


def written_records(
    store: object,
    requests: Sequence[AppendRequest],
    versions: Mapping[str, int],
    last_seq: int,
) -> list[Recorded] | None:
    """The records `requests` became (the events as given, at the seqs, versions and hashes
    stored), in seq order; None unless they can be folded as is right after `last_seq`."""
    if not isinstance(store, WrittenRows):
        return None
    total = sum(len(request.events) for request in requests)
    if store.last_written() != (last_seq + 1, last_seq + total):
        return None  # not all written by this append (a re-send, another writer's rows)
    out: list[Recorded] = []
    for request in requests:
        events = list(request.events)
        if not events:
            continue
        if request.stored is not None or any(type(e) is MessageAppended for e in events):
            return None
        new = versions.get(request.stream)
        if new is None:
            return None
        rows = store.written_rows(request.stream, new - len(events), len(events))
        if len(rows) != len(events):
            return None
        for (seq, version, event_id, digest), event in zip(rows, events, strict=True):
            if event_id != event.event_id:  # not ours (a re-send found the first copy)
                return None
            out.append(Recorded(seq, request.stream, version, event, digest))
    out.sort(key=lambda rec: rec.seq)
    if not out or any(rec.seq != last_seq + 1 + i for i, rec in enumerate(out)):
        return None  # another writer's rows come first (or between): read back
    return out


def log_end(store: object, blobs: object) -> int | None:
    """The store's last seq, read just before an own append, when that append could be
    folded as written (a store that says what it wrote, no blobs); else None: no look."""
    if blobs or not isinstance(store, WrittenRows):
        return None
    return store.last_seq()


def fold_written(
    projector: Projector,
    store: object,
    requests: Sequence[AppendRequest],
    versions: Mapping[str, int],
    before: int,
) -> bool:
    """Fold the records `requests` became into `projector` when they qualify (see the
    module); returns whether it did (if not, a read-back catch-up folds them).

    `before` is the store's last seq read just before the append: unless it is where the
    projections stand, another writer's rows are in the log, and an id clash with them
    (two writers with deterministic ids) could make this append a re-send that wrote
    nothing; then the rows are read back. The append has committed when this runs, so a
    failed look at the written rows is not the caller's failure: the read-back folds them.
    """
    if before != projector.last_seq:
        return False
    try:
        records = written_records(store, requests, versions, projector.last_seq)
    except CtxLedgerError:
        return False
    if records is None:
        return False
    projector.apply_all(records)
    return True
