"""The compacting proxy: ``POST /v1/chat/completions`` (OpenAI) and ``POST /v1/messages`` (Anthropic).

One turn, serialized per session family (a second request on the same session waits
for the first to finish, stream included):

1. find the session (``X-Ctxledger-Session``, else a key derived from the system prompt
   and the first user message) and the line the client's history continues
   (:mod:`ctxledger.server.history`); append only the new suffix, or start a branch
   when the history diverges from the ledger;
2. ``preflight`` (compacts when system + messages + tools reach the threshold);
3. send the compacted view upstream instead of the client's list, with the client's
   own auth headers; on an overflow error, ``handle_provider_error`` decides: compact
   and retry, or lower the output cap (at most ``max_compression_attempts`` retries);
4. answer with the upstream's response unchanged (streams are forwarded event by event),
   then record the reply and the real usage (``report_usage``, which may compact in the
   loop). A reply whose stream was cut is not recorded: the client will resend the turn,
   and it continues from what was recorded. Nor is an answer that is not the format
   asked for (:mod:`ctxledger.server.upstream_reply`): a 502, or a stream ended by an
   error event; a usage block with bad figures is dropped. A client that hangs up before
   the answer (its timeout) ends the turn there, the upstream request dropped and
   nothing of it recorded (:mod:`ctxledger.server.clientgone`).

Turns of a session family are serialized across worker processes too: a turn holds
this process's semaphore and the event store's lease ``proxy:<family>``
(:meth:`ServerState.take_turn`). A request whose exact history the ledger has just
answered (the line's last message is the reply to it: a duplicate sent at the same
time, or a retry) is a *repeat*: it is answered from the view before that reply and
nothing of it is recorded; the ledger keeps the first answer, and a client that
continues from the other one branches at its next turn. A request that drops the line's
last reply when the proxy recorded it as provisional (:data:`~ctxledger.server.history.PROVISIONAL`)
goes on in the session instead, the reply withdrawn (``ReplyWithdrawn``) in the append.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

import anyio
import httpx
import msgspec
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Message, Receive, Scope, Send

from ctxledger.errors import ContextOverflowError, CtxLedgerError, InvalidMessage
from ctxledger.importers.responses import asks_for_tools
from ctxledger.integers import inline_id
from ctxledger.runtime.caching import (
    apply_cache_markers,
    native_cache_layout,
    supports_prompt_caching,
)
from ctxledger.runtime.service_io import check_new_batch
from ctxledger.runtime.toolbudget import for_client_tools
from ctxledger.server.clientgone import cancel_on_disconnect, while_connected
from ctxledger.server.errors import at_client_index, message_of, provider_error_body
from ctxledger.server.formats import ClientTurn, SSEParser
from ctxledger.server.forwarding import admit, forwarded_headers
from ctxledger.server.history import PROVISIONAL, Match
from ctxledger.server.notices import TurnNotices
from ctxledger.server.ownmarks import unmarked_payload
from ctxledger.server.proxyfaces import ANTHROPIC, OPENAI, Accumulator, Api, Reply, Resolver
from ctxledger.server.proxyheaders import SESSION_HEADER, context_length_of, family_of
from ctxledger.server.routing import Endpoint, decode_body, read_body
from ctxledger.server.upstream_reply import (
    BAD_REPLY,
    CUT_IN_A_CALL,
    MAX_REPLY_BYTES,
    UPSTREAM_ENCODING,
    BadUpstreamReply,
    bad_reply_message,
    decode_reply,
    error_event,
    forwarded,
    kept_empty,
    read_upstream,
    read_whole,
    refuse_encoded,
    refuse_redirect,
    response_headers,
    says_nothing,
    upstream_failed,
)
from ctxledger.shownurl import with_path

if TYPE_CHECKING:
    from ctxledger.server.state import ServerState

log = logging.getLogger("ctxledger.server")

#: the most one upstream stream event may hold: the whole reply's (response.completed)
MAX_EVENT_BYTES = MAX_REPLY_BYTES


def _error(api: Api, status: int, code: str, message: str) -> Response:
    from ctxledger.server.routing import JSON

    return JSON(provider_error_body(api.served_by, status, code, message), status_code=status)


class Turn:
    """One proxied request, from its arrival to its recorded reply."""

    def __init__(
        self,
        state: ServerState,
        api: Api,
        request: Request,
        body: dict[str, Any],
        turn: ClientTurn,
        forwarded: dict[str, str],
    ) -> None:
        """`forwarded`: the client's headers the upstream gets, checked once at arrival
        (:func:`forwarded_headers`); every attempt sends the same."""
        self.state, self.api, self.request, self.body, self.turn = state, api, request, body, turn
        turn.messages = [_from_client(m) for m in turn.messages]
        self.headers = {**forwarded, "content-type": "application/json", **UPSTREAM_ENCODING}
        self.svc = state.service
        self.session_id = ""
        self.notices = TurnNotices()  # logged as they come, sent back as headers
        self.repeat = False  # the ledger already answered this exact history: record nothing
        self.withdraw_reason = "incomplete"  # why a reply the client dropped was provisional

    @property
    def logged_id(self) -> str:
        """The session's id for a log line, escaped and cut: an old ledger's may hold a
        control character (:func:`~ctxledger.integers.inline_id`)."""
        return inline_id(self.session_id)

    async def record_request(self, family: str, context_length: int) -> None:
        """Append the new suffix (or start the session / a branch), then preflight."""
        svc, turn, ledger = self.svc, self.turn, self.state.ledger
        ledger.refresh()
        suffix, role = turn.messages, None
        withdraw: list[str] = []
        first = None  # where the suffix begins in the client's chat list, when known
        if family not in ledger.chains.state.sessions:
            check_new_batch(suffix)  # (before it is started: a bad list appends nothing)
            sid = await svc.start_session(
                model=turn.model,
                context_length=context_length,
                system_prompt=turn.system_prompt,
                system_role=turn.system_role or "system",
                tools=turn.tools or None,
                session_id=family,
                title=f"proxy ({self.api.name})",
                loop="every_call",  # preflight before each model call, no hygiene
            )
        else:
            match, suffix, system_prompt = self._match(family)
            sid = match.session_id
            answered = match.branch and self.state.history.answered(family, suffix, system_prompt)
            if match.branch and not answered and self.turn.lead is not None:  # as in _match
                answered = self.state.history.answered(family, [self.turn.lead, *suffix], None)
            if answered:
                self.session_id, self.repeat = answered, True
                self.notices.add(answered, f"session {answered} already answered this history")
                return
            if match.branch:
                sid, suffix, withdraw = await self._off_the_line(
                    family, match, suffix, system_prompt
                )
            else:
                suffix = suffix[match.suffix_start :]
                if self.api is OPENAI:  # (a system message first: not in turn.messages)
                    first = match.suffix_start + (system_prompt is not None)
                # the client's role for the matched prompt: recorded, in the suffix's append,
                # when the line holds it in the other (``role_change``); none sent: as held
                role = self.turn.system_role if system_prompt is not None else None
        if suffix or role:  # the role with the suffix: a refused suffix records neither
            why = self.withdraw_reason
            try:
                sid = (
                    await svc.append(
                        sid, suffix, system_role=role, withdraw=withdraw, withdraw_reason=why
                    )
                ).session_id
            except InvalidMessage as exc:
                raise exc if first is None else at_client_index(exc, first) from None
        result = await svc.preflight(sid)
        self.session_id = result.session_id
        self.notices.add(result.session_id, *result.notices)

    async def _off_the_line(
        self, family: str, match: Match, client: list[Any], system_prompt: str | None
    ) -> tuple[str, list[Any], list[str]]:
        """Where a request no line holds goes: on from the history before a provisional
        reply the client went on without (the reply withdrawn in the append), else a new
        branch. The session, the messages to append, the ids to withdraw."""
        gone = self.state.history.superseded(family, client, system_prompt)
        if gone is not None and not gone.withdrawn:
            why = "no longer ends the view (a compaction replaced it): a branch"
            self.notices.add(gone.session_id, f"the client went on without a reply that {why}")
        elif gone is not None:
            withdrawn = ", ".join(gone.withdrawn)
            self.notices.add(gone.session_id, f"the client went on without reply {withdrawn}")
            self.withdraw_reason = gone.reason
            return gone.session_id, client[gone.suffix_start :], gone.withdrawn
        check_new_batch(client)
        turn, parent = self.turn, self.state.ledger.transcript.session(match.session_id)
        sid = await self.svc.start_session(
            model=turn.model,
            context_length=parent.context_length,
            system_prompt=turn.system_prompt,
            system_role=turn.system_role or "system",
            tools=turn.tools or None,
            parent_session_id=match.session_id,
            reason="branch",
            title=f"proxy branch of {family}",
            loop="every_call",
        )
        self.notices.add(
            match.session_id,
            f"history diverges from the ledger after {match.common} messages: branched as {sid}",
        )
        return sid, client, []

    def _match(self, family: str) -> tuple[Match, list[Any], str | None]:
        """Where the request lands, with the messages and system prompt it is matched
        by. A leading developer message is the system prompt, unless the family was
        recorded with it as its first message (a state-API session): then it is matched,
        and goes on, as that message."""
        turn, history = self.turn, self.state.history
        match = history.match(family, turn.messages, turn.system_prompt)
        if match.branch and turn.lead is not None:
            as_message = [turn.lead, *turn.messages]
            other = history.match(family, as_message, None)
            if not other.branch and other.suffix_start > 0:  # it was recorded as a message
                return other, as_message, None
        return match, turn.messages, turn.system_prompt

    async def call_upstream(self) -> httpx.Response | Response:
        """Send the compacted view; recover from overflow errors as the service decides."""
        anthropic = self.api.served_by == "anthropic"  # the base's query stays after the path
        url = with_path(self.state.upstream, self.api.upstream_path, anthropic)
        max_tokens = self.turn.max_tokens
        retries = 0 if self.repeat else self.svc.config.max_compression_attempts
        for attempt in range(retries + 1):
            payload = unmarked_payload(self.api.upstream(self.body, self._view(), max_tokens))
            try:
                content = msgspec.json.encode(payload)
                req = self.state.client.build_request(
                    "POST",
                    url,
                    content=content,
                    headers=self.headers,
                    timeout=self.state.turn_timeout,
                )
                resp = await self.state.client.send(req, stream=True)
                for refuse in (refuse_redirect, refuse_encoded):  # (a gzipped 3xx: a redirect)
                    if refused := await refuse(self.api.served_by, self.state.upstream, resp):
                        return refused
                if self.api.peek is not None and resp.status_code < 400:
                    resp = await self.api.peek(resp)  # (cancelled by a hang-up, httpcore closes it)
            except httpx.HTTPError as exc:
                return upstream_failed(self.api.served_by, self.state.upstream, exc)
            if resp.status_code < 400:
                return resp
            error_body = await read_whole(self.api.served_by, self.state.upstream, resp)
            if isinstance(error_body, Response):
                return error_body
            failed = forwarded(error_body, resp)
            if attempt == retries:
                return failed
            try:
                with anyio.CancelScope(shield=True):  # a compaction is not cut by a hang-up
                    recovery = await self.svc.handle_provider_error(
                        self.session_id,
                        resp.status_code,
                        error_body,
                        requested_max_tokens=max_tokens,
                    )
            except ContextOverflowError as exc:
                self.notices.add(self.session_id, str(exc))
                return failed
            if recovery.action != "retry":
                return failed
            self.session_id = recovery.session_id
            max_tokens = recovery.max_tokens or max_tokens
            self.notices.add(
                recovery.session_id,
                f"upstream {resp.status_code} ({recovery.kind}): {recovery.reason}; retrying",
            )
        raise AssertionError("unreachable")

    async def upstream_answer(self) -> Response | tuple[httpx.Response, bytes | None]:
        """What the upstream answered: a response to pass on as it is (an error, a body
        cut mid-way: nothing of it is recorded), a stream to relay (None), or a whole body."""
        upstream = await self.call_upstream()
        if isinstance(upstream, Response):
            return upstream
        if self.turn.stream and upstream.headers.get("content-type", "").startswith(
            "text/event-stream"
        ):
            return upstream, None
        data = await read_whole(self.api.served_by, self.state.upstream, upstream)
        return data if isinstance(data, Response) else (upstream, data)

    def _view(self) -> list[Any]:
        """The compacted view to send, its stored-output previews honest about the client's tools."""
        root = self.svc.ledger.chains.root(self.session_id)  # named the same after a compaction
        return for_client_tools(self._compacted_view(), self.turn.tools, root)

    def _compacted_view(self) -> list[Any]:
        """The compacted view; a repeat's ends before the reply the ledger kept, with the
        prompt-cache markers placed on that shorter view (as the first time)."""
        if not self.repeat:
            return self.svc.api_messages(self.session_id)
        svc = self.svc
        view = svc.api_messages(self.session_id, cache=False)[:-1]
        model = svc.ledger.transcript.session(svc.ledger.tip(self.session_id)).model
        if svc.config.prompt_caching and supports_prompt_caching(model, svc.provider):
            native = native_cache_layout(svc.provider)
            view = apply_cache_markers(view, ttl=svc.config.cache_ttl, native_anthropic=native)
        return view

    async def record_reply(self, reply: Reply, usage: Mapping[str, Any] | None) -> None:
        """Append the reply, then report the real usage (which may compact in the loop)."""
        if self.repeat:
            log.info("session %s: a repeated turn's reply is not recorded", self.logged_id)
            return
        replies = [] if not reply else reply if isinstance(reply, list) else [reply]
        cut = any(m.get(CUT_IN_A_CALL) for m in replies)
        empty = isinstance(reply, dict) and says_nothing(reply)
        # the client has its answer either way; the log says why the ledger lacks it
        if cut or empty:
            why = "cut inside its tool calls" if cut else "empty"
            log.info("session %s: a reply %s is not recorded", self.logged_id, why)
        elif replies:
            try:
                self.session_id = (await self.svc.append(self.session_id, replies)).session_id
            except CtxLedgerError as exc:
                log.warning("reply of session %s not recorded: %s", self.logged_id, message_of(exc))
                return
        if usage:
            # a final answer leaves the in-loop check to the next request's preflight
            # (Hermes); a reply cut in its calls asked for them, an empty one for nothing
            asked = any(map(asks_for_tools, replies)) if replies else None
            try:
                result = await self.svc.report_usage(
                    self.session_id, usage, model=self.turn.model, tool_calls=asked
                )
                self.session_id = result.session_id
                self.notices.add(result.session_id, *result.notices)
            except CtxLedgerError as exc:  # an upstream's odd figures: the turn has no usage
                log.warning("usage of session %s not recorded: %s", self.logged_id, message_of(exc))


class TurnStream(Response):
    """Forwards an upstream SSE stream event by event, then records the reply (lock held throughout)."""

    def __init__(self, turn: Turn, upstream: httpx.Response, release: Callable[[], None]) -> None:
        # not Response.__init__: it would declare a Content-Length for an empty body
        self.status_code = upstream.status_code
        self.background = None
        self.raw_headers = response_headers(upstream) + turn.notices.headers()
        self.turn, self.upstream, self.release = turn, upstream, release
        self.recorded = False
        self.broken = False  # an event could not be read: the stream ended with an error

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        acc = self.turn.api.accumulator(self.turn.turn)
        delivered = False
        try:
            async with anyio.create_task_group() as tg:
                # a client that goes away ends the turn: servers drop what is sent after that
                tg.start_soon(cancel_on_disconnect, receive, tg.cancel_scope)
                delivered = await self._forward(send, acc)
                tg.cancel_scope.cancel()
        finally:
            try:
                with anyio.CancelScope(shield=True):
                    await self.upstream.aclose()
                    if delivered and acc.complete and not self.recorded and not self.broken:
                        await self._record_end(acc)  # an upstream that sent no end marker
                    elif not delivered and not self.recorded:
                        log.info(
                            "session %s: the client left mid-stream; reply not recorded",
                            self.turn.logged_id,
                        )
            finally:
                self.release()

    async def _record_end(self, acc: Accumulator) -> None:
        try:
            await self._record(acc)
        except BadUpstreamReply as exc:
            sid, why = self.turn.logged_id, message_of(exc)
            log.warning("session %s: reply not recorded, its stream is unreadable: %s", sid, why)

    async def _record(self, acc: Accumulator) -> None:
        reply = read_upstream(acc.reply)  # BadUpstreamReply: nothing recorded
        self.recorded = True
        with anyio.CancelScope(shield=True):
            await self.turn.record_reply(reply, acc.usage)

    async def _forward(self, send: Send, acc: Accumulator) -> bool:
        """Send the upstream's events as they come; True once the client has the whole body.

        The reply is recorded just before the stream's end marker (``[DONE]``,
        ``message_stop``, ``response.completed``) is sent: a client that has seen the end
        finds its reply in the ledger (SDKs close the connection right after it, before
        the body's last chunk). An event that cannot be read ends the body with an error
        event instead, and nothing of the reply is recorded.
        """
        start = {
            "type": "http.response.start",
            "status": self.status_code,
            "headers": self.raw_headers,
        }
        parser = SSEParser()
        send = self._patient(send)
        try:
            await send(start)
            try:
                last = await self._relay(send, acc, parser)
            except httpx.HTTPError as exc:  # cut mid-stream (or it could not be read)
                log.warning(
                    "upstream stream of session %s cut: %s", self.turn.logged_id, message_of(exc)
                )
                last = self._broken(BadUpstreamReply(f"its stream failed: {message_of(exc)}"))
            await send({"type": "http.response.body", "body": last, "more_body": False})
        except TimeoutError:
            log.info(
                "client of session %s took nothing for %ss: its stream is ended",
                self.turn.logged_id,
                self.turn.state.stall_timeout,
            )
            return False
        except OSError as exc:  # servers that raise on a send to a client that went away
            log.info("client of session %s disconnected: %s", self.turn.logged_id, message_of(exc))
            return False
        return True

    def _patient(self, send: Send) -> Send:
        """`send`, up to the stall timeout: a client that keeps its connection open but
        reads nothing blocks a send once the socket buffers are full, and the turn (the
        session's lock) would wait for it forever (TimeoutError, an OSError, instead)."""
        timeout = self.turn.state.stall_timeout

        async def send_or_give_up(message: Message) -> None:
            with anyio.fail_after(timeout):
                await send(message)

        return send_or_give_up

    async def _relay(self, send: Send, acc: Accumulator, parser: SSEParser) -> bytes:
        """Forward the upstream's events; the bytes that end the body (what the parser
        holds, or an error event when an event could not be read)."""
        size = 0
        async for chunk in self.upstream.aiter_bytes():
            if (size := size + len(chunk)) > MAX_REPLY_BYTES:  # (what the face gathers, too)
                return self._broken(
                    BadUpstreamReply(f"its stream runs past {MAX_REPLY_BYTES:,} bytes")
                )
            out: list[bytes] = []
            for ev in parser.feed(chunk):
                try:
                    if not read_upstream(acc.feed, ev):
                        continue
                    if acc.ended and acc.complete and not self.recorded:
                        if out:
                            await send(_body(b"".join(out)))
                            out = []
                        await self._record(acc)
                except BadUpstreamReply as exc:  # (garbage after the end: the end is sent)
                    return b"".join(out) + self._broken(exc)
                out.append(ev.raw)
            if out:
                await send(_body(b"".join(out)))
            if parser.pending > MAX_EVENT_BYTES:  # one event without end: never all in memory
                why = f"a stream event runs past {MAX_EVENT_BYTES:,} bytes without ending"
                return self._broken(BadUpstreamReply(why))
        return parser.rest()

    def _broken(self, exc: BadUpstreamReply) -> bytes:
        """The error event ending a stream whose reply cannot be had (nothing recorded);
        b"" once recorded (the end marker sent: a resend would duplicate the turn)."""
        if self.recorded:
            why = message_of(exc)
            log.warning("session %s: after its recorded reply, %s", self.turn.logged_id, why)
            return b""
        self.broken = True
        message = bad_reply_message(self.turn.api.name, exc)
        log.warning("session %s: %s", self.turn.logged_id, message)
        return error_event(self.turn.api.name, self.turn.api.served_by, message)


async def _proxy(request: Request, state: ServerState, api: Api) -> Response:
    admit(request, state, (api.served_by,))
    raw = await read_body(request)
    body = await decode_body(raw)
    turn = api.turn(body, b"cache_control" in raw)
    family = (api.resolve and api.resolve(state, request, body, turn)) or family_of(request, turn)
    context_length = context_length_of(request, state)
    sent_on = forwarded_headers(request)
    release = await state.take_turn(family, request.receive)
    if release is None:
        return _error(api, 499, "client_closed", "the client left while waiting for its turn")
    handed_over, t = False, None
    try:
        t = Turn(state, api, request, body, turn, sent_on)
        await t.record_request(family, context_length)
        got = await while_connected(request.receive, t.upstream_answer)
        if got is None:  # hung up (timed out) first: the upstream's answer is dropped
            return _left_before_the_answer(t)
        if isinstance(got, Response):
            return t.notices.on(got)
        upstream, data = got
        if data is None:
            handed_over = True  # the stream releases the lock when it is done
            return TurnStream(t, upstream, release)
        try:
            reply, usage = api.json_reply(decode_reply(data))
        except BadUpstreamReply as exc:
            return t.notices.on(_error(api, 502, BAD_REPLY, bad_reply_message(api.name, exc)))
        if await request.is_disconnected():  # gone as it came (after the watch): not recorded
            return _left_before_the_answer(t)
        await t.record_reply(reply, usage)
        return t.notices.on(forwarded(data, upstream))
    except Exception as exc:
        if t is not None:  # (told on the error response: app._route makes it)
            t.notices.carried_by(exc)
        raise
    finally:
        if not handed_over:
            release()


def _from_client(message: Any) -> Any:
    """A client's message as the turn reads it: an empty assistant reply as ``content: ""``
    (:func:`kept_empty`), without the proxy's own :data:`PROVISIONAL` mark."""
    if not isinstance(message, dict):
        return message
    message.pop(PROVISIONAL, None)
    return kept_empty(message)


def _left_before_the_answer(t: Turn) -> Response:
    """A client that hung up before it had the answer: nothing of it is recorded (its
    retry, answered again, continues the line instead of branching its next turn)."""
    log.info("session %s: the client left before the answer; none recorded", t.logged_id)
    return _error(t.api, 499, "client_closed", "the client left before the answer")


def _body(data: bytes) -> dict[str, Any]:
    return {"type": "http.response.body", "body": data, "more_body": True}


def proxy_handler(api: Api) -> Callable[[Request, ServerState], Awaitable[Response]]:
    """The endpoint handler of one face (the faces outside this module use it too)."""

    async def handle(request: Request, state: ServerState) -> Response:
        return await _proxy(request, state, api)

    handle.__name__ = f"proxy_{api.name}"
    return handle


ENDPOINTS = [
    Endpoint(
        "POST",
        "/v1/chat/completions",
        proxy_handler(OPENAI),
        "OpenAI chat completions through the compacting proxy",
        tag="proxy",
        auth="proxy",
        body=None,
        stream=True,
    ),
    Endpoint(
        "POST",
        "/v1/messages",
        proxy_handler(ANTHROPIC),
        "Anthropic messages through the compacting proxy",
        tag="proxy",
        auth="proxy",
        body=None,
        stream=True,
    ),
]

__all__ = [
    "ANTHROPIC",
    "ENDPOINTS",
    "OPENAI",
    "SESSION_HEADER",
    "Accumulator",
    "Api",
    "Reply",
    "Resolver",
    "Turn",
    "TurnStream",
    "proxy_handler",
]
