"""Copying a whole ledger from one store to another (``ctxledger migrate``), losslessly.

The source must verify first. Events are copied in seq order through the ordinary
``append_many`` (so the destination checks versions and ids as for any writer),
in transactions of up to ``batch_events`` events; a transaction holds one run of
events per stream, so interleaved sessions give smaller ones. The destination must
be empty: then each copied event lands at the same seq with the same stream version,
and its chain hash, recomputed by the destination, must equal the source's. Each
transaction is read back and compared; any difference stops the copy and names the
event. The destination is verified at the end.

Each event is copied as stored (``EventStore.read_stored`` → ``AppendRequest.stored``:
the same schema and payload bytes, a blob-held content still a ref), so an event
written by an older ctxledger, whose class has gained a field since, keeps its
hash. Rows keep their chain format (``AppendRequest.chain``): per-event rows are copied as
per-event rows (in runs of any length), and each linked append of the source (rows
up to one carrying a link, see :func:`~ctxledger.eventstore.rows.link_hash`) is
copied as one append of linked rows, never split or merged, so its link comes out
the same. A SQLite ledger (linked since issue 14) copied to PostgreSQL (per-event)
and back is therefore hash-identical, and a head hash kept for ``verify
--expect-head`` still matches the copy.

Blobs referenced by events (large message contents, persisted tool outputs) are
copied with the events that reference them; blobs no event references are not.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from typing import NamedTuple

import msgspec

from ctxledger.errors import IntegrityError, InvalidEvent, InvalidInput
from ctxledger.events import (
    Event,
    MessageAppended,
    Recorded,
    SessionSwitched,
    ToolOutputPersisted,
)
from ctxledger.eventstore.base import AppendRequest, EventStore
from ctxledger.eventstore.contents import layout_refs
from ctxledger.eventstore.rows import ChainFormat, chain_tip, decode_stored, split_linked
from ctxledger.integers import shown

__all__ = ["CopyReport", "copy_ledger"]


class CopyReport(msgspec.Struct, frozen=True, kw_only=True):
    events: int
    streams: int
    blobs: int
    transactions: int
    #: the head hash (``verify``'s, the chain value of the last event), identical in both stores
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
    source.settle()  # rows a dead writer left unsealed are committed: copy them too
    checked = source.verify()
    if not checked.ok:
        raise IntegrityError(
            f"the source ledger does not verify (seq {checked.first_bad_seq}: {checked.problem}); "
            "nothing was copied"
        )
    versions: dict[str, int] = {}
    copied = transactions = 0
    head: str | None = None
    for runs in _chunks(_source_rows(source), batch_events):
        chunk = [row for _, run in runs for row in run]
        refs = {ref for row in chunk for ref in _blob_refs(row.event)}
        extra = {ref: source.get_blob(ref) for ref in refs if source.has_blob(ref)}
        versions.update(dest.append_many(_requests(runs, versions), extra or None))
        _compare(chunk, _read_back(dest, chunk))
        copied, transactions = copied + len(chunk), transactions + 1
        head = chain_tip(chunk[-1].hash)
        if progress is not None:
            progress(copied)
    final = dest.verify()
    if not final.ok or final.events_checked != copied:
        raise IntegrityError(
            f"the copy does not verify (seq {final.first_bad_seq}: {final.problem}, "
            f"{final.events_checked} of {copied} events checked); the destination is "
            "incomplete: drop it"
        )
    return CopyReport(
        events=copied,
        streams=len(versions),
        blobs=final.blobs_checked,
        transactions=transactions,
        head_hash=head,
    )


class _Row(NamedTuple):
    """One source event: where it is, its hash, and its stored (schema, payload) if known."""

    seq: int
    stream: str
    version: int
    event: Event
    hash: str
    stored: tuple[int, bytes] | None


def _source_rows(source: EventStore) -> Iterator[_Row]:
    """The source's rows as stored (their bytes are copied verbatim, so an event written by
    an older ctxledger keeps its hash); a store without ``read_stored``: decoded events,
    which the destination re-encodes."""
    try:
        rows = source.read_stored()
        first = next(rows, None)
    except NotImplementedError:
        for r in source.read_all():
            yield _Row(r.seq, r.stream, r.version, r.event, r.hash, None)
        return
    if first is None:
        return
    for seq, stream, version, _, _, schema, payload, digest in itertools.chain((first,), rows):
        event = decode_stored(payload, schema)  # as stored: a blob-held content stays a ref
        yield _Row(seq, stream, version, event, digest, (schema, payload))


def _blob_refs(event: Event) -> list[str]:
    """The blobs `event` (as stored) references."""
    if isinstance(event, ToolOutputPersisted):
        return [event.blob_ref]
    if isinstance(event, MessageAppended):
        return [] if event.content_ref is None else [event.content_ref]
    if isinstance(event, SessionSwitched):
        return layout_refs(event)
    return []


_Run = tuple[ChainFormat, list[_Row]]


def _runs(records: Iterator[_Row], limit: int) -> Iterator[_Run]:
    """The source's rows as appends to replay: a linked append whole (up to its link
    row), per-event rows in runs of one stream of at most `limit` events."""
    run: list[_Row] = []
    chain: ChainFormat = "per_event"
    for recorded in records:
        linked = split_linked(recorded.hash)
        kind: ChainFormat = "per_event" if linked is None else "linked"
        if run and (
            kind != chain
            or run[-1].stream != recorded.stream
            or (chain == "per_event" and len(run) >= limit)
        ):
            yield chain, run  # a linked run never ends here: verify() checked the source
            run = []
        run.append(recorded)
        chain = kind
        if linked is not None and linked[1]:
            yield chain, run
            run = []
    if run:
        yield chain, run


def _chunks(records: Iterator[_Row], limit: int) -> Iterator[list[_Run]]:
    """Consecutive runs for one transaction: at most `limit` events (unless one linked
    append is longer), each stream once."""
    chunk: list[_Run] = []
    size = 0
    for chain, run in _runs(records, limit):
        stream = run[0].stream
        if chunk and (size + len(run) > limit or any(r[0].stream == stream for _, r in chunk)):
            yield chunk
            chunk, size = [], 0
        chunk.append((chain, run))
        size += len(run)
    if chunk:
        yield chunk


def _requests(chunk: list[_Run], versions: dict[str, int]) -> list[AppendRequest]:
    requests: list[AppendRequest] = []
    for chain, run in chunk:
        stream = run[0].stream
        stored = [row.stored for row in run if row.stored is not None]
        requests.append(
            AppendRequest(
                stream,
                [row.event for row in run],
                versions.get(stream, 0),
                chain,
                stored if len(stored) == len(run) else None,
            )
        )
    return requests


def _read_back(dest: EventStore, chunk: list[_Row]) -> list[Recorded]:
    """The rows just copied, read back from `dest`; one that cannot be read (a blob or
    row the destination holds differently) stops the copy like any other difference."""
    first, last = chunk[0].seq, chunk[-1].seq
    try:
        return list(dest.read_all(first, last))
    except (IntegrityError, InvalidEvent) as exc:
        raise IntegrityError(
            f"the events of seq {first}..{last} were copied but cannot be read back ({exc}); "
            "the destination is incomplete: drop it"
        ) from exc


def _compare(source: list[_Row], copied: list[Recorded]) -> None:
    for want, got in zip(source, copied, strict=False):
        if (want.seq, want.stream, want.version, want.hash) != (
            got.seq,
            got.stream,
            got.version,
            got.hash,
        ):
            raise IntegrityError(
                f"event {shown(want.event.event_id)} (seq {want.seq}) was copied with hash "
                f"{got.hash[:12]}… at seq {got.seq}, not {want.hash[:12]}…: it re-encodes "
                "differently (a source store that cannot hand out its stored rows?); "
                "the destination is incomplete: drop it"
            )
    if len(copied) != len(source):
        raise IntegrityError(
            f"{len(source)} events were sent but {len(copied)} read back from the destination; "
            "is another writer using it? the destination is incomplete: drop it"
        )
