"""The event feed: the log as Server-Sent Events, following it live.

``GET /v1/events?after=SEQ`` streams every event after ``SEQ``;
``GET /v1/sessions/{id}/events`` only the events of that session's family (its
compression chain, branches and delegates, including sessions started later). Each
event is one SSE message: ``id`` is the event's global sequence number (so a client
reconnects with ``Last-Event-ID`` or ``?after=``), ``event`` its kind, ``data`` the
JSON ``{"seq", "stream", "version", "hash", "event": {...}}``. The feed reads the
store through its ``follow()`` and never writes.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING

import anyio
import msgspec
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.types import Send

from ctxledger.errors import InvalidInput
from ctxledger.events import SessionStarted
from ctxledger.eventstore import EventStore, Recorded
from ctxledger.projections import ChainsProjection
from ctxledger.server.routing import (
    Endpoint,
    Param,
    decimal,
    path_param,
    query_bool,
    query_int,
    quoted_short,
)

if TYPE_CHECKING:
    from ctxledger.server.state import ServerState

#: a comment line is sent when nothing happened for this long, so proxies keep the stream open
KEEPALIVE_SECONDS = 15.0
_WAKE_SECONDS = 0.5
_SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


def family_of(chains: ChainsProjection, session_id: str) -> set[str]:
    """`session_id`'s chain root and every session descending from it."""
    root = chains.root(session_id)
    family, todo = {root}, [root]
    while todo:
        for child in chains.lineage(todo.pop()).children:
            if child not in family:
                family.add(child)
                todo.append(child)
    return family


def format_event(recorded: Recorded) -> bytes:
    data = msgspec.json.encode(
        {
            "seq": recorded.seq,
            "stream": recorded.stream,
            "version": recorded.version,
            "hash": recorded.hash,
            "event": recorded.event,
        }
    )
    kind = type(recorded.event).__name__
    return b"id: %d\nevent: %s\ndata: %s\n\n" % (recorded.seq, kind.encode(), data)


async def event_feed(
    store: EventStore,
    *,
    after: int,
    family: set[str] | None,
    limit: int | None,
    follow: bool,
    stopping: Callable[[], bool],
    poll_interval: float = 0.05,
) -> AsyncIterator[bytes]:
    """Yield SSE messages for events after `after` (of `family` only, when given)."""
    yield b": ctxledger event feed\n\n"
    sent = 0
    end = None if follow else store.last_seq()
    if end is not None and end <= after:
        return
    send, receive = anyio.create_memory_object_stream[Recorded](64)

    async def pump() -> None:
        async with send:
            async for recorded in store.follow(after + 1, poll_interval=poll_interval):
                await send.send(recorded)

    async with anyio.create_task_group() as tg, receive:
        tg.start_soon(pump)
        quiet_since = anyio.current_time()
        while not stopping():
            recorded = None
            with anyio.move_on_after(_WAKE_SECONDS):  # wake up to notice a shutdown
                recorded = await receive.receive()
            if recorded is None:
                if anyio.current_time() - quiet_since >= KEEPALIVE_SECONDS:
                    quiet_since = anyio.current_time()
                    yield b": keepalive\n\n"
                continue
            if family is not None:
                if (
                    isinstance(recorded.event, SessionStarted)
                    and recorded.event.parent_session_id in family
                ):
                    family.add(recorded.stream)
                if recorded.stream not in family:
                    if end is not None and recorded.seq >= end:
                        break
                    continue
            yield format_event(recorded)
            quiet_since = anyio.current_time()
            sent += 1
            if (limit is not None and sent >= limit) or (end is not None and recorded.seq >= end):
                break
        tg.cancel_scope.cancel()


class FeedResponse(StreamingResponse):
    """A StreamingResponse that closes its feed in the task that iterated it.

    Starlette leaves a body iterator that stopped early (the client went away, a send
    failed) to the garbage collector, whose ``aclose()`` runs in another task: the
    feed's task group (it spans the yields) could not exit there, and its pump would
    keep following the log until shutdown.
    """

    body_iterator: AsyncIterator[bytes]

    async def stream_response(self, send: Send) -> None:
        try:
            await super().stream_response(send)
        finally:
            with anyio.CancelScope(shield=True):
                await self.body_iterator.aclose()  # type: ignore[attr-defined]


def _after(request: Request) -> int:
    after = query_int(request, "after", None)
    if after is None:
        last = request.headers.get("last-event-id")
        if last:
            after = decimal(last)
            if after is None:
                raise InvalidInput(
                    f"Last-Event-ID must be an event sequence number, got {quoted_short(last)}"
                )
    return after or 0


def _stream(request: Request, state: ServerState, family: set[str] | None) -> Response:
    feed = event_feed(
        state.ledger.store,
        after=_after(request),
        family=family,
        limit=query_int(request, "limit", None, minimum=1),
        follow=bool(query_bool(request, "follow", True)),
        stopping=state.stopping,
    )
    return FeedResponse(feed, media_type="text/event-stream", headers=_SSE_HEADERS)


async def all_events(request: Request, state: ServerState) -> Response:
    return _stream(request, state, None)


async def session_events(request: Request, state: ServerState) -> Response:
    sid = state.ledger_resolve(path_param(request, "session_id"))
    return _stream(request, state, family_of(state.ledger.chains, sid))


_QUERY = (
    Param(
        "after",
        "integer",
        False,
        "stream events after this sequence number (default 0; or Last-Event-ID)",
    ),
    Param("limit", "integer", False, "stop after this many events"),
    Param(
        "follow",
        "boolean",
        False,
        "keep following the log (default true); false stops at its current end",
    ),
)
ENDPOINTS = [
    Endpoint(
        "GET",
        "/v1/events",
        all_events,
        "Every event of the log, live (Server-Sent Events)",
        tag="events",
        query=_QUERY,
        stream=True,
    ),
    Endpoint(
        "GET",
        "/v1/sessions/{session_id}/events",
        session_events,
        "The events of a session's family (chain, branches), live (Server-Sent Events)",
        tag="events",
        query=_QUERY,
        stream=True,
    ),
]

__all__ = ["ENDPOINTS", "event_feed", "family_of", "format_event"]
