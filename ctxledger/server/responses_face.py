"""The proxy's OpenAI Responses face: ``POST /v1/responses``, JSON and streaming.

The turn is the one :mod:`ctxledger.server.proxy` runs for chat completions (session
from ``X-Ctxledger-Session`` else the stable key, only the new suffix appended, a
diverging history branches, preflight, overflow recovery, the answer forwarded
unchanged, reply and usage recorded afterwards); this module only speaks the format.
Input items become chat messages through :mod:`ctxledger.importers.responses` (what
chat has no field for — item ids, reasoning items, part annotations — rides along in
each message, so the compacted view converts back to the items the client sent);
``instructions`` (or a leading system/developer item) is the session's system prompt.
A stream is read for its ``response.output_item.done`` items and the
``response.completed`` (or ``response.incomplete``) event's output and usage. The
Responses API may report an overflow inside a 200 stream (``response.failed`` with
``context_length_exceeded`` before any output): the face reads a stream's first events
before answering, and such a failure is recovered from like the HTTP error it stands
for (compact and retry); if it persists, the client gets it as a 400 JSON error.

Any other ``incomplete`` response is recorded marked provisional
(:data:`~ctxledger.server.history.PROVISIONAL`): a next request that went on without it
withdraws it instead of branching (the Agents SDK fails its run on one).

``previous_response_id`` is honoured for responses this proxy recorded itself: each
recorded reply carries its response id (``responses_response_id``, an extra key that is
stored but never sent), so the request is completed with the recorded line up to that
reply and then handled like one that sent the whole conversation — the upstream gets
the compacted view and no ``previous_response_id`` (the provider's copy of the history
is the uncompacted one, so it is never used). Chaining from an older response forks a
branch. An id the proxy did not record (a cut stream, another client, a response left
``incomplete`` with a cut function call in it) is refused with a
400 in OpenAI's error shape, as is everything else that leans on state kept by the
provider: ``conversation``, ``item_reference`` input items, and ``background`` (the
answer would be fetched later, past the proxy). ``store: false`` keeps nothing at the
provider; reasoning items then need ``include: ["reasoning.encrypted_content"]``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import httpx

from ctxledger.errors import InvalidInput
from ctxledger.events import WITHDRAW_REASONS
from ctxledger.importers.common import text_of_parts
from ctxledger.importers.responses import items_to_messages, messages_to_items
from ctxledger.integers import shown
from ctxledger.messages import INSTRUCTION_ROLES
from ctxledger.runtime import classify_provider_error
from ctxledger.server.errors import HTTPError
from ctxledger.server.formats import (
    RESPONSE_ID,
    ClientTurn,
    SSEEvent,
    SSEParser,
    _json,
    _max_tokens,
    _model,
    _tools,
)
from ctxledger.server.history import PROVISIONAL, strip_cache_markers
from ctxledger.server.proxy import SESSION_HEADER, proxy_handler
from ctxledger.server.proxyfaces import Api
from ctxledger.server.routing import Endpoint
from ctxledger.server.upstream_reply import (
    CUT_IN_A_CALL,
    BadUpstreamReply,
    decode_event,
    index_of,
    need_object,
    optional_list,
    optional_object,
    optional_str,
    usage_block,
)

if TYPE_CHECKING:
    from starlette.requests import Request

    from ctxledger.ledger import Ledger
    from ctxledger.server.state import ServerState

JSONDict = dict[str, Any]

#: fields naming conversation state kept by the provider, which the proxy never sees
_PROVIDER_STATE = ("conversation",)
#: a response in one of these states has output worth recording
_FINISHED = ("completed", "incomplete")

SEND_WHOLE_INPUT = (
    "send the whole conversation in 'input' every turn, as with chat completions "
    "(add 'store': false to keep nothing at the provider; reasoning items then need "
    "'include': ['reasoning.encrypted_content'] to be sent back)"
)


def _refuse_provider_state(body: Mapping[str, Any]) -> None:
    previous = body.get("previous_response_id")
    if previous is not None and (not isinstance(previous, str) or not previous.strip()):
        raise InvalidInput("'previous_response_id' must be a non-empty string")
    for key in _PROVIDER_STATE:
        if body.get(key) is not None:
            raise HTTPError(
                400,
                "provider_state_unsupported",
                f"'{key}' makes the provider prepend history kept on its side, which a "
                f"compacting proxy can neither record nor compact: {SEND_WHOLE_INPUT}",
            )
    if body.get("background"):
        raise HTTPError(
            400,
            "background_unsupported",
            "'background': true leaves the answer at the provider to be fetched later, "
            "past the proxy, so it could never be recorded: send the request in the "
            "foreground (stream it for a long answer)",
        )


def _input_items(body: Mapping[str, Any]) -> list[Any]:
    raw = body.get("input")
    if isinstance(raw, str):
        if not raw:
            raise InvalidInput("'input' must be a non-empty string or list of items")
        return [{"role": "user", "content": raw}]
    if not isinstance(raw, list) or not raw:
        raise InvalidInput("'input' must be a non-empty string or list of items")
    for i, item in enumerate(raw):
        if isinstance(item, Mapping) and item.get("type") == "item_reference":
            raise HTTPError(
                400,
                "provider_state_unsupported",
                f"input[{i}] is an item_reference to an item kept by the provider, which "
                f"a compacting proxy cannot see: {SEND_WHOLE_INPUT}",
            )
    return raw


def _system_role(body: Mapping[str, Any]) -> str | None:
    """Where the client put its system prompt: ``instructions``, or the role of a leading
    system/developer item (``None``: it has none)."""
    if body.get("instructions") is not None:
        return "instructions"
    raw = body.get("input")
    if isinstance(raw, list) and raw and isinstance(raw[0], Mapping):
        first = raw[0]
        if first.get("type", "message") == "message" and first.get("role") in INSTRUCTION_ROLES:
            return str(first["role"])
    return None


def responses_turn(body: Mapping[str, Any], markers: bool = True) -> ClientTurn:
    """A Responses request as the ledger sees it (400/422 before anything is appended)."""
    _refuse_provider_state(body)
    model = _model(body)
    items = _input_items(body)
    try:
        messages = items_to_messages(items)
    except InvalidInput as exc:
        raise InvalidInput(f"input: {exc}") from None
    system: str | None = None
    lead: JSONDict | None = None
    where = _system_role(body)
    if where == "instructions":
        system = body["instructions"]
        if not isinstance(system, str):
            raise InvalidInput("'instructions' must be a string")
    elif where is not None:
        system = text_of_parts(messages[0].get("content"))
        if system is None:
            raise InvalidInput(f"input[0]: a {where} message needs text content")
        if where == "developer":  # see ClientTurn.lead
            lead = {"role": where, "content": messages[0].get("content")}
        messages = messages[1:]
    if markers:
        messages = [strip_cache_markers(m) for m in messages]
    tools = _tools(body, "responses")
    return ClientTurn(
        model=model,
        system_prompt=system,
        messages=messages,
        tools=tools,
        stream=bool(body.get("stream")),
        max_tokens=_max_tokens(body, "max_output_tokens"),
        lead=lead,
        system_role=where if where in INSTRUCTION_ROLES else None,  # (instructions: no role)
    )


def responses_upstream(
    body: Mapping[str, Any], view: list[JSONDict], max_tokens: int | None
) -> JSONDict:
    """The client's request with the ledger's compacted view as its input items."""
    view = [strip_cache_markers(m) for m in view]
    out = dict(body)
    out.pop("previous_response_id", None)  # resolved into the view (see resolve_previous)
    where = _system_role(body)
    head: list[JSONDict] = []
    if where is not None and view and view[0].get("role") in INSTRUCTION_ROLES:
        system, view = view[0].get("content"), view[1:]
        if where == "instructions":
            out["instructions"] = system
        else:
            head = [{"role": where, "content": system}]
    out["input"] = head + messages_to_items(view)
    if max_tokens is not None:
        out["max_output_tokens"] = max_tokens
    return out


def _reply(output: Any, response_id: Any = None) -> list[JSONDict] | None:
    """A response's output items as the chat messages to record (None: no output;
    BadUpstreamReply: output that is not a list of items); the last one carries the
    response id, for ``previous_response_id``."""
    output = optional_list(output, "'output'")
    if not output:
        return None
    try:
        messages = items_to_messages(output)
    except InvalidInput as exc:
        raise BadUpstreamReply(f"'output': {exc}") from None
    if messages and isinstance(response_id, str) and response_id:
        messages[-1][RESPONSE_ID] = response_id
    return messages or None


def _marked_if_cut(
    reply: list[JSONDict] | None, items: Any, status: str | None
) -> list[JSONDict] | None:
    """`reply`, marked :data:`CUT_IN_A_CALL` (not recorded) when the response is
    ``incomplete`` and one of its function calls is cut: the item's own status is
    ``incomplete`` or its arguments are not JSON. No agent runs a cut call (the Agents SDK
    fails the run). Anything else an incomplete response holds is recorded: a client
    that chains with ``previous_response_id`` sends nothing back, so the proxy must hold
    its reply."""
    if status == "incomplete" and isinstance(items, list) and any(map(_cut_call, items)):
        for message in reply or ():
            message[CUT_IN_A_CALL] = True
    return reply


def _provisional(
    reply: list[JSONDict] | None, status: str | None, why: Any
) -> list[JSONDict] | None:
    """`reply`, its messages marked :data:`PROVISIONAL` when the response is
    ``incomplete``: recorded (a chaining client sends nothing back), but a client may go
    on without it (the Agents SDK fails its run on any incomplete response), and its
    next request then withdraws it rather than branching."""
    if status == "incomplete" and reply and not reply[0].get(CUT_IN_A_CALL):
        reason = why.get("reason") if isinstance(why, Mapping) else None
        mark = reason if reason in WITHDRAW_REASONS else "incomplete"  # (known ones only)
        for message in reply:
            message[PROVISIONAL] = mark
    return reply


def _cut_call(item: Any) -> bool:
    if not isinstance(item, Mapping) or item.get("type") != "function_call":
        return False
    if item.get("status") == "incomplete":
        return True
    try:
        json.loads(item.get("arguments") or "{}")
    except (TypeError, ValueError):
        return True
    return False


def _family_root(ledger: Ledger, session_id: str) -> str:
    node, seen = ledger.chains.lineage(session_id), {session_id}
    while node.parent_session_id is not None and node.parent_session_id not in seen:
        seen.add(node.parent_session_id)
        node = ledger.chains.lineage(node.parent_session_id)
    return node.session_id


def resolve_previous(
    state: ServerState, request: Request, body: Mapping[str, Any], turn: ClientTurn
) -> str | None:
    """``previous_response_id``: put the recorded line up to that reply in front of the
    new input items and name its family (None when the request has no such id)."""
    previous = body.get("previous_response_id")
    if previous is None:
        return None
    ledger = state.ledger
    ledger.refresh()
    stored = state.responses.find(previous) if isinstance(previous, str) else None
    recorded = state.history.line_messages(ledger.chains.root(stored.session_id)) if stored else []
    end = next(
        (i for i in range(len(recorded) - 1, -1, -1) if recorded[i].get(RESPONSE_ID) == previous),
        None,
    )
    if stored is not None and end is None:  # (recorded, then left out of the live view)
        raise HTTPError(
            400,
            "provider_state_unsupported",
            f"previous_response_id {shown(previous)} was recorded, then withdrawn: a later "
            "request went on without that reply (it was incomplete or a refusal), so no "
            f"history holds it to continue from: {SEND_WHOLE_INPUT}",
        )
    if stored is None or end is None:
        raise HTTPError(
            400,
            "provider_state_unsupported",
            f"previous_response_id {shown(previous)} is not a response this proxy recorded (not "
            "recorded: a response cut inside a function call, an empty one, a cut stream, "
            "another proxy's), and history kept only by the provider cannot be compacted: "
            f"{SEND_WHOLE_INPUT}",
        )
    family = _family_root(ledger, stored.session_id)
    header = (request.headers.get(SESSION_HEADER) or "").strip()
    if header and header != family:
        raise InvalidInput(
            f"previous_response_id {shown(previous)} continues session {shown(family)}, "
            f"not {shown(header)} ({SESSION_HEADER})"
        )
    turn.messages = [dict(m) for m in recorded[: end + 1]] + turn.messages
    return family


def responses_json_reply(data: Any) -> tuple[list[JSONDict] | None, JSONDict | None]:
    """The reply and usage of a response (BadUpstreamReply: not one)."""
    body = need_object(data, "the body")
    usage = usage_block(body.get("usage"))
    status = optional_str(body.get("status"), "'status'") or "completed"
    if status not in _FINISHED:
        return None, usage
    reply = _reply(body.get("output"), optional_str(body.get("id"), "'id'"))
    reply = _marked_if_cut(reply, body.get("output"), status)
    return _provisional(reply, status, body.get("incomplete_details")), usage


@dataclass
class ResponsesStream:
    """Accumulates a Responses stream (named ``response.*`` events) into the reply and usage."""

    done: dict[int, JSONDict] = field(default_factory=dict)
    output: list[Any] | None = None
    usage: JSONDict | None = None
    status: str | None = None
    response_id: str | None = None
    incomplete: Any = None  # the terminal response's ``incomplete_details``

    def feed(self, ev: SSEEvent) -> bool:
        data = decode_event(ev.data)  # BadUpstreamReply: not an event
        if data is None:
            return True
        kind = data.get("type") or ev.event
        kind = kind if isinstance(kind, str) else None  # an odd type names no event
        if kind == "response.output_item.done":
            item = need_object(data.get("item"), f"{kind}'s 'item'")
            index = index_of(data.get("output_index"), f"{kind}'s 'output_index'", len(self.done))
            self.done[index] = dict(item)
        elif kind in _PREAMBLE and isinstance(data.get("response"), Mapping):
            self.response_id = self._id(data["response"])
        elif kind in ("response.completed", "response.incomplete", "response.failed"):
            response = optional_object(data.get("response"), f"{kind}'s 'response'")
            self.response_id = self._id(response)
            status = optional_str(response.get("status"), f"{kind}'s status")
            self.status = status or kind.rpartition(".")[2]
            self.incomplete = response.get("incomplete_details")
            self.usage = usage_block(response.get("usage")) or self.usage
            output = optional_list(response.get("output"), f"{kind}'s output")
            if output:
                self.output = list(output)
        return True

    def _id(self, response: Mapping[str, Any]) -> str | None:
        return optional_str(response.get("id"), "a response's 'id'") or self.response_id

    @property
    def complete(self) -> bool:
        return self.status in _FINISHED

    @property
    def ended(self) -> bool:
        """The stream's last event (``response.completed`` / ``incomplete`` / ``failed``) arrived."""
        return self.status is not None

    def reply(self) -> list[JSONDict] | None:
        items = (
            self.output if self.output is not None else [i for _, i in sorted(self.done.items())]
        )
        reply = _marked_if_cut(_reply(items, self.response_id), items, self.status)
        return _provisional(reply, self.status, self.incomplete)


#: events a stream opens with, before any output
_PREAMBLE = frozenset({"response.created", "response.queued", "response.in_progress"})
#: what the start of a stream may hold before it is handed on unread (bytes)
_PEEK_BYTES = 256 * 1024
#: failures the turn recovers from (the kinds handle_provider_error acts on)
_RECOVERABLE = frozenset({"prompt_too_long", "payload_too_large", "max_tokens_too_large"})


class _Replay(httpx.AsyncByteStream):
    """A stream's bytes already read, then the rest of it."""

    def __init__(
        self, head: list[bytes], rest: AsyncIterator[bytes] | None, upstream: httpx.Response
    ):
        self.head, self.rest, self.upstream = head, rest, upstream

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self.head:
            yield chunk
        if self.rest is not None:
            async for chunk in self.rest:
                yield chunk

    async def aclose(self) -> None:
        await self.upstream.aclose()


def _failure(data: Any) -> JSONDict | None:
    """The OpenAI error body of a ``response.failed`` event the turn can recover from."""
    response = data.get("response") if isinstance(data, Mapping) else None
    error = response.get("error") if isinstance(response, Mapping) else None
    if not isinstance(error, Mapping):
        return None
    body = {
        "error": {
            "message": str(error.get("message") or ""),
            "type": "invalid_request_error",
            "param": None,
            "code": error.get("code"),
        }
    }
    return body if classify_provider_error(400, body).kind in _RECOVERABLE else None


async def peek_stream(upstream: httpx.Response) -> httpx.Response:
    """Read a stream up to its first output event: an overflow reported there becomes a
    400 JSON error response; anything else is handed on, the bytes read replayed first."""
    if not upstream.headers.get("content-type", "").startswith("text/event-stream"):
        return upstream
    head: list[bytes] = []
    parser = SSEParser()
    chunks = upstream.aiter_bytes()
    rest: AsyncIterator[bytes] | None = chunks
    try:
        while sum(map(len, head)) < _PEEK_BYTES:
            chunk = await anext(chunks)
            head.append(chunk)
            for ev in parser.feed(chunk):
                data = _json(ev.data)
                kind = data.get("type") if isinstance(data, Mapping) else ev.event
                if isinstance(kind, str) and kind in _PREAMBLE:
                    continue
                body = _failure(data) if kind == "response.failed" else None
                if body is None:
                    return _replayed(upstream, head, rest)
                await upstream.aclose()
                headers = {"content-type": "application/json"}
                return httpx.Response(400, json=body, headers=headers, request=upstream.request)
    except StopAsyncIteration:  # ended while opening: what came is forwarded, and nothing
        rest = None  # is recorded (no response.completed)
    except httpx.HTTPError as exc:  # cut (or undecodable) while opening: raised after what
        rest = _raising(exc)  # came, so the stream ends with an error event, as later
    return _replayed(upstream, head, rest)


async def _raising(exc: httpx.HTTPError) -> AsyncIterator[bytes]:
    raise exc
    yield b""  # (a generator)


def _replayed(
    upstream: httpx.Response, head: list[bytes], rest: AsyncIterator[bytes] | None
) -> httpx.Response:
    headers = [  # (as the bytes sent: a value that is UTF-8 is not text httpx encodes back)
        (k, v)
        for k, v in upstream.headers.raw
        if k.lower() not in (b"content-encoding", b"content-length")  # the bytes are decoded
    ]
    return httpx.Response(
        upstream.status_code,
        headers=headers,
        stream=_Replay(head, rest, upstream),
        request=upstream.request,
    )


RESPONSES = Api(
    "responses",
    "/responses",
    responses_turn,
    responses_upstream,
    responses_json_reply,
    provider="openai",
    stream=lambda turn: ResponsesStream(),
    peek=peek_stream,
    resolve=resolve_previous,
)

ENDPOINTS = [
    Endpoint(
        "POST",
        "/v1/responses",
        proxy_handler(RESPONSES),
        "OpenAI Responses through the compacting proxy (the whole conversation in 'input')",
        tag="proxy",
        auth="proxy",
        body=None,
        stream=True,
        responses={
            400: "bad_json / too_deep; provider_state_unsupported / background_unsupported: "
            "a previous_response_id this proxy did not record, conversation, item_reference "
            "or background (send the whole conversation in 'input'; nothing appended)",
        },
    ),
]

__all__ = [
    "ENDPOINTS",
    "RESPONSES",
    "RESPONSE_ID",
    "ResponsesStream",
    "peek_stream",
    "resolve_previous",
    "responses_json_reply",
    "responses_turn",
    "responses_upstream",
]
