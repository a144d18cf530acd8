"""A ledger's append of requests whose events are generators (an import, session 40).

:meth:`Ledger.append <ctxledger.ledger.facade.Ledger.append>` checks an append whole,
writes it, and folds it back with its bodies: an import of a large file held it all
several times over (``docs/notes/s39-hostile.md`` §2). :func:`append_streamed` checks
the events a chunk at a time as the store reads them
(``EventStore.append_stream``, one transaction: an error anywhere appends nothing),
and folds them from their heads afterwards, bodies left in the log. The derived values
of long messages (:mod:`ctxledger.ledger.derived`) are stored after the commit from
the events read back by seq, as ``append`` stores them from the events it was given;
each long content read back is handed the ref the append hashed for its event
(``contents.remembering_refs``), so it is hashed once (session 41).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator

from ctxledger.compressor.factstore import stored_content
from ctxledger.events import Event, MessageAppended
from ctxledger.eventstore.base import AppendRequest, EventStore, StreamedRequest
from ctxledger.eventstore.contents import remember_hash, remembering_hashes, remembering_refs
from ctxledger.eventstore.streamed import chunks
from ctxledger.ledger.derived import store_quietly
from ctxledger.ledger.eventcheck import check_decodable, check_references
from ctxledger.ledger.ownfold import WrittenRows
from ctxledger.projections.stored import TranscriptState

__all__ = ["append_streamed", "written_span"]

_log = logging.getLogger("ctxledger")
#: long messages read back at a time for their derived values: each is at least
#: ``STORED_MIN_CHARS`` (256 KiB), so 16 hold ~4 MB of contents or more (the default
#: chunk of 2,048 would hold 512 MB or more)
READ_BACK = 16


class _Checked:
    """The requests' events, each chunk checked as ``Ledger.append`` checks an append
    (:func:`check_decodable`; the first chunk of a stream :func:`check_references`:
    an import's events name no message outside their own request), counting events and
    noting where the long messages are. A store that does not say which rows it wrote
    (``WrittenRows``: PostgreSQL, the in-memory store) lists the events anyway, so the
    long messages' events themselves are kept for it."""

    def __init__(self, state: TranscriptState, store: EventStore) -> None:
        self.state, self.store = state, store
        self.count = 0
        self.long_at: list[int] = []  # positions in the append of long messages
        self.keep = not isinstance(store, WrittenRows)
        self.long: list[Event] = []  # their events, when `keep`

    def requests(self, requests: Iterable[StreamedRequest]) -> Iterator[StreamedRequest]:
        for request in requests:
            yield request._replace(events=self._events(request))

    def _events(self, request: StreamedRequest) -> Iterator[Event]:
        first = True
        for chunk in chunks(request.events):
            one = [AppendRequest(request.stream, chunk, request.expected_version)]
            check_decodable(one, self.state.messages, self.store)
            if first:
                check_references(one, self.state.sessions)
                first = False
            for event in chunk:
                if type(event) is MessageAppended and stored_content(event.message) is not None:
                    self.long_at.append(self.count)
                    if self.keep:
                        self.long.append(event)
                self.count += 1
            yield from chunk


def written_span(store: EventStore) -> tuple[int, int] | None:
    """The (first, last) seq the store's last append on this thread wrote, when it says."""
    return store.last_written() if isinstance(store, WrittenRows) else None


def append_streamed(
    state: TranscriptState, store: EventStore, requests: Iterable[StreamedRequest]
) -> None:
    """Check and append `requests` as they come, one transaction; then store the long
    messages' derived values (a failure there, the read-back too, is dropped: a cache)."""
    checked = _Checked(state, store)
    if checked.keep:  # (the events are held anyway: so are the refs the store hashed for
        # their blobs, not hashed again for the derived values; a store read back instead
        # keeps none: that would hold every long content of the import till its end)
        with remembering_hashes():
            store.append_stream(checked.requests(requests))
            if checked.long_at:
                _store_derived(store, checked.long)
        return
    with remembering_refs() as refs:  # (the refs the store hashed, by event id)
        store.append_stream(checked.requests(requests))
    if not checked.long_at:
        return
    span = written_span(store)
    try:
        for seqs in chunks([span[0] + i for i in checked.long_at] if span else [], READ_BACK):
            with remembering_hashes():  # each content read back is handed its ref
                events = [r.event for r in store.read_at(seqs)]
                _hand_refs(events, refs)
                _store_derived(store, events)
    except Exception:  # (after the commit: the import stands; store_quietly logs its own)
        _log.debug("the long messages of an import were not read back", exc_info=True)


def _hand_refs(events: list[Event], refs: dict[str, str]) -> None:
    """Each long content read back gets the ref the append hashed for its event (the
    blob its row names: that text's sha256), so the derived values do not hash it again."""
    for event in events:
        ref = refs.get(event.event_id)
        content = stored_content(event.message) if type(event) is MessageAppended else None
        if ref is not None and content is not None:
            remember_hash(content, ref)


def _store_derived(store: EventStore, events: list[Event]) -> None:
    by_stream: dict[str, list[Event]] = {}
    for event in events:
        by_stream.setdefault(event.session_id, []).append(event)
    store_quietly(store, [AppendRequest(s, e, None) for s, e in by_stream.items()])
