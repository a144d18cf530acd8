"""Derived values written when a long message is appended (session 39, issue 14).

Both of a ledger's append paths call :func:`store_quietly` once their append committed:
:meth:`Ledger.append <ctxledger.ledger.facade.Ledger.append>` (the proxy, the service,
the integrations, a what-if's replay, a compaction) and the import's streamed append
(``Ledger._append_stream`` → :mod:`.streamappend`, session 40). A message whose string
content is at least :data:`~ctxledger.eventstore.derived.STORED_MIN_CHARS` long gets
its facts (:mod:`ctxledger.compressor.factstore`), its normal-form byte
(:mod:`ctxledger.compressor.normalstore`) and, when it is the message's only text, the
count of the content followed by the merge lead's start (:func:`ctxledger.tokens.remember_count_after`).
Written right after the append's transaction, not in it: a crash between the two loses
only the value (computed when read), and a failure to store it is dropped. A replay
re-appending a content read from another ledger (inside
:func:`~ctxledger.eventstore.contents.sharing_contents`) copies that ledger's value.
``ctxledger upgrade`` fills and mends them (:func:`backfill_derived`), ``verify
--derived`` compares them with their recomputation (:func:`differing_values`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import NamedTuple

from ctxledger.compressor import normalstore
from ctxledger.compressor.factstore import (
    computed_value,
    facts_kind,
    facts_version,
    stored_content,
)
from ctxledger.compressor.markers import merge_lead
from ctxledger.errors import CtxLedgerError
from ctxledger.events import Event, MessageAppended, hydrate, sha256_hex
from ctxledger.eventstore.base import AppendRequest, EventStore
from ctxledger.eventstore.contents import hashed_ref, shared_contents
from ctxledger.eventstore.derived import STORED_MIN_CHARS
from ctxledger.eventstore.fingerprints import (
    count_after_kind,
    count_after_version,
    encode_count_after,
)
from ctxledger.eventstore.longscan import LongContentScan, may_hold_long
from ctxledger.eventstore.rows import decode_stored
from ctxledger.tokens import count_text_after, cuts_apply, first_cut

__all__ = [
    "Backfill",
    "Differing",
    "backfill_derived",
    "differing_values",
    "store_derived",
    "store_quietly",
]

_log = logging.getLogger("ctxledger")


def store_quietly(store: EventStore, requests: Sequence[AppendRequest]) -> int:
    """:func:`store_derived`, after an append committed: nothing that fails there may turn
    the committed append into a reported failure (a value is a cache), so any error is
    logged at debug level and dropped."""
    try:
        return store_derived(store, requests)
    except Exception:
        _log.debug("derived values of an append were not stored", exc_info=True)
        return 0


def store_derived(store: EventStore, requests: Sequence[AppendRequest]) -> int:
    """Store the derived values of the long messages `requests` appended; returns how many
    were written (0 for anything else: one type and length test per event). Errors go
    to the caller: :func:`store_quietly` drops them after an append."""
    return _store_events(store, (event for request in requests for event in request.events))


class Backfill(NamedTuple):
    """What :func:`backfill_derived` wrote: values stored where none was, values replaced
    because they differed from their recomputation, contents it could not read."""

    stored: int
    replaced: int
    unreadable: int


class Differing(NamedTuple):
    """A stored value that differs from its recomputation (:func:`differing_values`)."""

    seq: int
    ref: str
    kind: str


def backfill_derived(store: EventStore) -> Backfill:
    """Store the derived values of every long message already in `store`'s log (appended
    before session 39 stored them, or whose values were lost), and replace a stored one
    that differs from its recomputation (what ``verify`` reports). Reads the whole log,
    each long content decoded and hashed once; a content whose blob cannot be read is
    counted and skipped (a cache never blocks an upgrade). Safe to run again. For
    ``ctxledger upgrade``: a read command never writes."""
    stored = replaced = 0
    contents = _LongContents(store)
    for _seq, ref, (kind, version, _compute), found, value in _recomputed(store, contents):
        if found != value and value is not None:
            store.put_derived(ref, kind, version, value)
            if found is None:
                stored += 1
            else:
                replaced += 1
    return Backfill(stored, replaced, contents.unreadable)


def differing_values(store: EventStore) -> Iterator[Differing]:
    """Each derived value stored at today's version for a long message of the log that
    differs from what the code computes now (read-only: ``verify``). The values are a
    cache outside the hash chain that audits and what-ifs trust, so a wrong one (edited,
    or stale after a code slip) must be found by the check the user runs. A store
    holding no value has nothing to compare: the log is not read."""
    if isinstance(store, LongContentScan) and not store.has_derived():
        return
    for seq, ref, (kind, _version, _compute), found, value in _recomputed(
        store, _LongContents(store), stored_only=True
    ):
        if found != value:
            yield Differing(seq, ref, kind)


def _recomputed(
    store: EventStore,
    contents: Iterable[tuple[int, MessageAppended, str]],
    stored_only: bool = False,
) -> Iterator[tuple[int, str, Value, bytes | None, bytes | None]]:
    """(seq, ref, value's kind/version/compute, the stored value, the value computed now)
    for each (content, kind) once; with `stored_only`, only where a value is stored."""
    seen: set[tuple[str, str]] = set()
    for seq, event, content in contents:
        ref = sha256_hex(content.encode("utf-8"))
        for item in _values(event, content):
            kind, version, compute = item
            if (ref, kind) in seen:
                continue
            seen.add((ref, kind))
            found = store.get_derived(ref, kind, version)
            if found is not None or not stored_only:
                yield seq, ref, item, found, compute()


class _LongContents:
    """(seq, event, content) of each long message in the log, read row by row so that a
    content whose blob cannot be read is skipped and counted (:attr:`unreadable`).

    Only the rows that may hold one are decoded (:func:`may_hold_long`: a long payload,
    or one referencing a blob at least as long), and the log is not read at all when the
    store holds neither (:class:`LongContentScan`): a walk over a log without long
    contents costs two length queries, not another decode of the whole log.
    So a row that cannot hold one is not counted when it cannot be read (verify names
    it), where the walk of every row counted it."""

    def __init__(self, store: EventStore) -> None:
        self.store, self.unreadable = store, 0

    def __iter__(self) -> Iterator[tuple[int, MessageAppended, str]]:
        maybe, refs = _long_refs(self.store)
        if not maybe:
            return
        for seq, _stream, _v, _id, kind, schema, payload, _hash in self.store.read_stored():
            if kind and kind != "MessageAppended":
                continue  # (not decoded: the other events hold no message)
            if refs is not None and not may_hold_long(payload, schema, refs):
                continue
            try:
                event = hydrate(decode_stored(payload, schema), self.store.get_blob)
            except (CtxLedgerError, KeyError, UnicodeDecodeError):
                self.unreadable += 1
                continue
            if type(event) is MessageAppended:
                content = stored_content(event.message)
                if content is not None:
                    yield seq, event, content


def _long_refs(store: EventStore) -> tuple[bool, frozenset[bytes] | None]:
    """(whether any row of `store` may hold a long content, the refs of the blobs long
    enough to hold one as a payload writes them); the refs are None when the store
    cannot tell (then every row is decoded). A UTF-8 text is at least as many bytes as
    characters, in its blob or in the payload holding it inline."""
    if not isinstance(store, LongContentScan):
        return True, None
    found = store.long_blob_refs(STORED_MIN_CHARS)
    refs = frozenset(ref.encode("utf-8", "replace") for ref in found)
    return bool(refs) or store.has_long_payload(STORED_MIN_CHARS), refs


Value = tuple[str, str, Callable[[], "bytes | None"]]


def _values(event: MessageAppended, content: str) -> list[Value]:
    """(kind, version, compute) of each derived value of `event`'s long `content` that
    the code running can version (no version: nothing stored or read)."""
    message, encoding = event.message, event.encoding
    values: list[tuple[str, str | None, Callable[[], bytes | None]]] = [
        (facts_kind(message), facts_version(), lambda: computed_value(message)),
        (
            normalstore.KIND,
            normalstore.normal_version(),
            lambda: normalstore.computed_value(content),
        ),
    ]
    if message.keys() <= {"role", "content"} and cuts_apply(encoding):
        kind = count_after_kind(encoding)
        values.append((kind, count_after_version(), lambda: _count_after(content, encoding)))
    return [(kind, version, compute) for kind, version, compute in values if version is not None]


def _store_events(store: EventStore, events: Iterable[Event]) -> int:
    written = 0
    for event in events:
        if type(event) is not MessageAppended:
            continue
        content = stored_content(event.message)
        if content is not None:
            written += _store_values(store, event, content)
    return written


def _store_values(store: EventStore, event: MessageAppended, content: str) -> int:
    shared = shared_contents()
    ref = shared.checked_ref(content) if shared is not None else None
    if ref is None:  # (the append hashed it: not again)
        ref, shared = hashed_ref(content) or sha256_hex(content.encode("utf-8")), None
    written = 0
    for kind, version, compute in _values(event, content):
        if store.get_derived(ref, kind, version) is not None:
            continue  # (the same content appended again)
        # a replay copies the value of the ledger it read the content from (or none)
        value = shared.derived(ref, kind, version) if shared is not None else compute()
        if value is not None:
            store.put_derived(ref, kind, version, value)
            written += 1
    return written


def _count_after(content: str, encoding: str) -> bytes | None:
    """The count of `content` followed by the merge lead up to its first cut (``\n\n---
    a``): a summary merged after the content is then counted from there (the lead's
    wording is in the value, and a text not extending it is counted as before)."""
    lead = merge_lead()
    cut = first_cut(lead)
    if cut is None:
        return None
    extension = lead[:cut]
    # from the content's count (just made by the append) and its last few KiB, when a cut
    # falls there; else the whole text is tokenized (the cost moves here from the what-if)
    count = count_text_after(content + extension, content, encoding)
    return encode_count_after(extension, count)
