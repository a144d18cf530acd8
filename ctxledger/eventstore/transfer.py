"""Copying a whole ledger from one store to another (``ctxledger migrate``), losslessly.

The source must verify first. Events are copied in seq order through the ordinary
``append_many`` (so the destination checks versions and ids as for any writer),
in transactions of up to ``batch_events`` events; a transaction holds one run of
events per stream, so interleaved sessions give smaller ones. The destination must
be empty: then each copied event lands at the same seq with the same stream version,
and its chain hash, recomputed by the destination, must equal the source's. Each
transaction is read back and compared; any difference stops the copy and names the
event. The destination is verified at the end.

Blobs referenced by events (large message contents, persisted tool outputs) are
copied with the events that reference them; blobs no event references are not.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import msgspec

from ctxledger.errors import IntegrityError, InvalidInput
from ctxledger.events import Event, Recorded, ToolOutputPersisted
from ctxledger.eventstore.base import AppendRequest, EventStore

__all__ = ["CopyReport", "copy_ledger"]


class CopyReport(msgspec.Struct, frozen=True, kw_only=True):
    events: int
    streams: int
    blobs: int
    transactions: int
    #: the hash of the last event, identical in both stores
    head_hash: str | None


def copy_ledger(
    source: EventStore,
    dest: EventStore,
    *,
    batch_events: int = 1000,
    progress: Callable[[int], None] | None = None,
) -> CopyReport:
    """Copy every event of `source` into the empty `dest`, hashes re-verified (see module doc).

    Raises InvalidInput when `dest` is not empty, IntegrityError when the source does
    not verify or an event's hash differs once copied. `progress` gets the events
    copied so far after each transaction.
    """
    if batch_events < 1:
        raise InvalidInput(f"batch_events must be >= 1, got {batch_events}")
    held = dest.last_seq()
    if held:
        raise InvalidInput(
            f"the destination already holds {held} events: migrate into an empty ledger"
        )
    checked = source.verify()
    if not checked.ok:
        raise IntegrityError(
            f"the source ledger does not verify (seq {checked.first_bad_seq}: {checked.problem}); "
            "nothing was copied"
        )
    versions: dict[str, int] = {}
    copied = transactions = 0
    head: str | None = None
    for chunk in _chunks(source.read_all(), batch_events):
        refs = {r.event.blob_ref for r in chunk if isinstance(r.event, ToolOutputPersisted)}
        extra = {ref: source.get_blob(ref) for ref in refs if source.has_blob(ref)}
        requests = _requests(chunk, versions)
        versions.update(dest.append_many(requests, extra or None))
        _compare(chunk, list(dest.read_all(chunk[0].seq, chunk[-1].seq)))
        copied, transactions = copied + len(chunk), transactions + 1
        head = chunk[-1].hash
        if progress is not None:
            progress(copied)
    final = dest.verify()
    if not final.ok or final.events_checked != copied:
        raise IntegrityError(
            f"the copy does not verify (seq {final.first_bad_seq}: {final.problem}, "
            f"{final.events_checked} of {copied} events checked)"
        )
    return CopyReport(
        events=copied,
        streams=len(versions),
        blobs=final.blobs_checked,
        transactions=transactions,
        head_hash=head,
    )


def _chunks(records: Iterator[Recorded], limit: int) -> Iterator[list[Recorded]]:
    """Consecutive events, cut where a stream would come back after another one."""
    chunk: list[Recorded] = []
    streams: set[str] = set()
    for recorded in records:
        stream = recorded.stream
        back = stream in streams and chunk[-1].stream != stream
        if chunk and (len(chunk) >= limit or back):
            yield chunk
            chunk, streams = [], set()
        chunk.append(recorded)
        streams.add(stream)
    if chunk:
        yield chunk


def _requests(chunk: list[Recorded], versions: dict[str, int]) -> list[AppendRequest]:
    runs: dict[str, list[Event]] = {}
    for recorded in chunk:
        runs.setdefault(recorded.stream, []).append(recorded.event)
    return [AppendRequest(s, events, versions.get(s, 0)) for s, events in runs.items()]


def _compare(source: list[Recorded], copied: list[Recorded]) -> None:
    for want, got in zip(source, copied, strict=False):
        if (want.seq, want.stream, want.version, want.hash) != (
            got.seq,
            got.stream,
            got.version,
            got.hash,
        ):
            raise IntegrityError(
                f"event {want.event.event_id!r} (seq {want.seq}) was copied with hash "
                f"{got.hash[:12]}… at seq {got.seq}, not {want.hash[:12]}…: it re-encodes "
                "differently (written by an older ctxledger or another blob threshold?); "
                "the destination is incomplete: drop it"
            )
    if len(copied) != len(source):
        raise IntegrityError(
            f"{len(source)} events were sent but {len(copied)} read back from the destination; "
            "is another writer using it? the destination is incomplete: drop it"
        )
