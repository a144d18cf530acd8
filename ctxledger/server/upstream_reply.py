"""What the proxy requires of an upstream's 2xx answer before it reads a reply from it.

A model server that answers 200 with a body that is not JSON, or with JSON of the wrong
shape (``choices`` a number, a stream event whose ``delta`` is a string), has not
answered: the proxy raises :class:`BadUpstreamReply` while reading it, answers a 502 (a
stream ends with an error event instead) and records nothing of it, as when the
upstream fails outright. The checks here name the field and the type found (never the
data itself), so the message is plain text the client can act on.

It also owns how an answer is passed on: the upstream's headers as the bytes it sent
(a UTF-8 value has no Latin-1 text form), and a body the upstream failed to finish (a
connection cut mid-body) as a 502; an answer in a content-encoding not asked for, or past
:data:`MAX_REPLY_BYTES`, or a redirect (3xx), as a 502 ``bad_upstream_reply``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import httpx
import msgspec
from starlette.responses import JSONResponse, Response

from ctxledger.integers import shown, shown_id
from ctxledger.messages import is_text_content_empty, kind_of
from ctxledger.server.errors import message_of, provider_error_body
from ctxledger.shownurl import UNPARSED, scrubbed, shown_url

JSONDict = dict[str, Any]
_T = TypeVar("_T")

#: the error code of an upstream 2xx answer that is not the format asked for
BAD_REPLY = "bad_upstream_reply"
_WHAT = {"openai": "a chat completion", "anthropic": "a message", "responses": "a response"}
#: upstream response headers that are not passed on (they describe its connection)
DROPPED_RESPONSE_HEADERS = frozenset(
    {
        "content-length",
        "content-encoding",
        "transfer-encoding",
        "connection",
        "keep-alive",
        "date",
        "server",
    }
)
#: upstream response headers in the proxy's own namespace are not passed on either: an
#: upstream (another ctxledger in front of the model, or a hostile one) would otherwise
#: speak as this proxy (an ``x-ctxledger-notice`` it never made; session 45's review)
OWN_HEADER_PREFIX = "x-ctxledger-"


class BadUpstreamReply(Exception):
    """The upstream's 2xx answer is not the format the request asked for."""


def decode_reply(data: bytes) -> Mapping[str, Any]:
    """A non-streamed reply's body as a JSON object, else BadUpstreamReply."""
    try:
        value = json.loads(data)
    except (ValueError, RecursionError):  # RecursionError: nested absurdly deep
        head = data[:40].decode("utf-8", "replace")
        raise BadUpstreamReply(
            f"the body is not JSON ({len(data):,} bytes, starting {head!r})"
        ) from None
    return need_object(value, "the body")


def decode_event(data: str) -> Mapping[str, Any] | None:
    """A stream event's data as a JSON object; None for an event without data (a
    comment, a keep-alive); BadUpstreamReply for anything else."""
    if not data.strip():
        return None
    try:
        value = json.loads(data)
    except (ValueError, RecursionError):
        raise BadUpstreamReply(
            f"a stream event's data is not JSON (starting {data[:40]!r})"
        ) from None
    return need_object(value, "a stream event's data")


def need_object(value: Any, what: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise BadUpstreamReply(f"{what} must be a JSON object, got {kind_of(value)}")
    return value


def optional_object(value: Any, what: str) -> Mapping[str, Any]:
    """`value` when an object, ``{}`` when absent or null."""
    return {} if value is None else need_object(value, what)


def optional_list(value: Any, what: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise BadUpstreamReply(f"{what} must be a list, got {kind_of(value)}")
    return value


def optional_str(value: Any, what: str) -> str | None:
    if value is not None and not isinstance(value, str):
        raise BadUpstreamReply(f"{what} must be a string, got {kind_of(value)}")
    return value


def index_of(value: Any, what: str, default: int = 0) -> int:
    """A stream event's ``index``: a non-negative integer (absent: `default`)."""
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        got = value if type(value) is int else kind_of(value)
        raise BadUpstreamReply(f"{what} must be a non-negative integer, got {got}")
    return value


def usage_block(value: Any) -> JSONDict | None:
    """A reply's usage block when it is an object (its figures are checked when it is
    reported: a bad one is not recorded, the reply is); anything else: no usage."""
    return dict(value) if isinstance(value, Mapping) else None


def check_openai_message(message: Any, what: str) -> Mapping[str, Any]:
    """A chat completion's assistant message (or a stream's delta): content a string,
    a list of parts or null; a refusal a string or null; tool calls a list of objects
    with string names/arguments."""
    checked = need_object(message, what)
    content = checked.get("content")
    if content is not None and not isinstance(content, str | list):
        raise BadUpstreamReply(
            f"{what}.content must be a string, a list or null, got {kind_of(content)}"
        )
    optional_str(checked.get("refusal"), f"{what}.refusal")  # (a 5 was dropped unsaid)
    for i, call in enumerate(optional_list(checked.get("tool_calls"), f"{what}.tool_calls")):
        where = f"{what}.tool_calls[{i}]"
        call = need_object(call, where)
        optional_str(call.get("id"), f"{where}.id")
        fn = optional_object(call.get("function"), f"{where}.function")
        optional_str(fn.get("name"), f"{where}.function.name")
        optional_str(fn.get("arguments"), f"{where}.function.arguments")
    return checked


#: the mark of a reply the output limit stopped inside its tool calls (never recorded)
CUT_IN_A_CALL = "ctxledger_cut_in_a_call"


def marked_if_cut(reply: JSONDict | None, finish_reason: Any) -> JSONDict | None:
    """`reply`, marked :data:`CUT_IN_A_CALL` when the output limit stopped it
    (``finish_reason: length``, Anthropic's ``stop_reason: max_tokens``) with tool calls in
    it: the last call is cut, and no agent runs it (Hermes sends the same request again).
    Not recorded (its usage is, as a reply that asked for tools), the client's retry is a
    turn of its own; a client that keeps the reply sends it back with its next turn."""
    cut = finish_reason in ("length", "max_tokens")
    if cut and reply and reply.get("tool_calls"):
        reply[CUT_IN_A_CALL] = True
    return reply


#: what a reply may carry besides its text that makes it worth recording
_SAYS_SOMETHING = (
    "tool_calls",
    "refusal",
    "audio",
    "thinking_blocks",  # Anthropic's signed thinking: sent back on the next turn
    "reasoning_content",
    "reasoning",
    "reasoning_details",
)


def says_nothing(reply: Mapping[str, Any]) -> bool:
    """An assistant reply with no text but whitespace and nothing else (no call, refusal,
    audio, thinking or reasoning, no part but text): Hermes drops it and asks again. Not
    recorded; a client that keeps it sends it back with its next turn."""
    if any(reply.get(key) for key in _SAYS_SOMETHING):
        return False
    content = reply.get("content")
    if isinstance(content, list) and any(
        not isinstance(p, Mapping) or p.get("type") != "text" for p in content
    ):
        return False
    return content is None or (isinstance(content, (str, list)) and is_text_content_empty(reply))


def kept_empty(message: dict[str, Any]) -> dict[str, Any]:
    """A client's assistant message as the ledger reads it: one with no content, calls,
    refusal or audio (a client that omits an empty field, Go's ``omitempty``; content
    null) is the empty reply ``content: ""``."""
    if message.get("role") != "assistant" or any(
        message.get(key) is not None for key in ("content", "tool_calls", "refusal", "audio")
    ):
        return message
    return {**message, "content": ""}


def bad_reply_message(face: str, exc: BadUpstreamReply) -> str:
    """What the client is told (`face`: the proxy face, ``openai``, ``responses``...)."""
    return (
        f"the upstream model server answered with something that is not "
        f"{_WHAT.get(face, 'a reply')}: {message_of(exc)}. Nothing of its answer was "
        f"recorded; send the turn again (or check the upstream server)"
    )


def error_event(face: str, served_by: str, message: str) -> bytes:
    """The SSE event ending a stream whose upstream sent something unreadable, in the
    shape the face's SDKs raise on (`served_by`: ``openai`` or ``anthropic``)."""
    body = provider_error_body(served_by, 502, BAD_REPLY, message)
    if face == "openai":
        return b"data: " + msgspec.json.encode(body) + b"\n\n"
    if face == "responses":  # the Responses API's error event, plus the key SDKs check
        body = {"type": "error", "code": BAD_REPLY, "message": message, "param": None, **body}
    return b"event: error\ndata: " + msgspec.json.encode(body) + b"\n\n"


def read_upstream(step: Callable[..., _T], *args: Any) -> _T:
    """`step` of an accumulator over upstream data: what its checks did not foresee (a
    field of an odd type deep in an event) is a BadUpstreamReply too, not a traceback."""
    try:
        return step(*args)
    except (TypeError, AttributeError, KeyError, IndexError, ValueError) as exc:
        raise BadUpstreamReply(f"a stream event could not be read ({message_of(exc)})") from exc


def response_headers(resp: httpx.Response) -> list[tuple[bytes, bytes]]:
    """The upstream's response headers to pass on, as the bytes it sent (a value that is
    not Latin-1 text, UTF-8 bytes, which httpx decodes, cannot be encoded back from
    text), but for its connection's and those named as this proxy's own."""
    kept = []
    for key, value in resp.headers.raw:
        name = key.lower().decode("latin-1")
        if name not in DROPPED_RESPONSE_HEADERS and not name.startswith(OWN_HEADER_PREFIX):
            kept.append((key.lower(), value))
    return kept


def forwarded(content: bytes, resp: httpx.Response) -> Response:
    """The upstream's whole answer, as the client's response (its status and headers)."""
    out = Response(content, status_code=resp.status_code)
    out.raw_headers.extend(response_headers(resp))
    return out


def upstream_failed(served_by: str, upstream: str, exc: httpx.HTTPError) -> Response:
    """A 502 for an upstream that could not be reached, or that failed while sending its
    answer (a connection cut mid-body)."""
    message = scrubbed(f"upstream {upstream} failed: {message_of(exc)}", upstream)
    body = provider_error_body(served_by, 502, "upstream_unreachable", message)
    return JSONResponse(body, status_code=502)


#: the most an upstream answer may hold, streamed or whole: as much as a client may
#: send. Its bytes are counted; what a face gathers of a stream to record it (text and
#: tool arguments, as decoded ``str``) is bounded by them but is not bytes: one
#: character outside the BMP makes CPython keep every character of a str in 4 bytes,
#: and the pieces are joined at the end: about 4-5x this in memory at a stream's peak
MAX_REPLY_BYTES = 64 * 1024 * 1024
#: what the upstream is asked for: uncompressed answers (httpx decodes a compressed
#: chunk at once, so 64 KiB of gzip became 64 MiB before any cap could look at it)
UPSTREAM_ENCODING = {"accept-encoding": "identity"}


def _bad_reply(served_by: str, upstream: str, why: str) -> Response:
    message = scrubbed(f"upstream {upstream} {why}", upstream)
    return JSONResponse(provider_error_body(served_by, 502, BAD_REPLY, message), status_code=502)


async def refuse_encoded(served_by: str, upstream: str, resp: httpx.Response) -> Response | None:
    """A 502 (the answer closed unread) for an answer in a content-encoding not asked
    for (:data:`UPSTREAM_ENCODING`), else None."""
    encoding = resp.headers.get("content-encoding", "").strip().lower()
    if encoding in ("", "identity"):
        return None
    await resp.aclose()
    why = (
        f"answered in content-encoding {shown(encoding)} though asked for identity: its "
        "answers are read uncompressed (a compressed one decodes past any memory cap)"
    )
    return _bad_reply(served_by, upstream, why)


async def refuse_redirect(served_by: str, upstream: str, resp: httpx.Response) -> Response | None:
    """A 502 (the answer closed unread) for a 3xx: the proxy follows no redirect, and a
    redirect's body is no reply (it was read as one: passed on and recorded when it
    parsed, else "not JSON", the redirect unnamed), else None."""
    if not 300 <= resp.status_code < 400:
        return None
    await resp.aclose()
    location = resp.headers.get("location") or ""
    to = shown_url(location) if location else ""
    if to:  # (a Location that does not parse, a port past 65535, is not echoed)
        to = " to a Location that is no URL" if to == UNPARSED else f" to {shown_id(to)}"
    why = (
        f"answered {resp.status_code}, a redirect{to}: the proxy follows no redirect, and "
        "nothing of the answer was recorded (start it with --upstream set to the base URL "
        "the model server answers at)"
    )
    return _bad_reply(served_by, upstream, why)


async def read_whole(served_by: str, upstream: str, resp: httpx.Response) -> bytes | Response:
    """A non-streamed answer's body, else the 502: the upstream failed while sending it,
    or sent more than :data:`MAX_REPLY_BYTES` (not read further)."""
    parts: list[bytes] = []
    size = 0
    try:
        async for chunk in resp.aiter_bytes():
            size += len(chunk)
            if size > MAX_REPLY_BYTES:
                return _bad_reply(served_by, upstream, f"answered over {MAX_REPLY_BYTES:,} bytes")
            parts.append(chunk)
        return b"".join(parts)
    except httpx.HTTPError as exc:
        return upstream_failed(served_by, upstream, exc)
    finally:
        await resp.aclose()


__all__ = [
    "BAD_REPLY",
    "CUT_IN_A_CALL",
    "DROPPED_RESPONSE_HEADERS",
    "MAX_REPLY_BYTES",
    "UPSTREAM_ENCODING",
    "BadUpstreamReply",
    "bad_reply_message",
    "check_openai_message",
    "decode_event",
    "decode_reply",
    "error_event",
    "forwarded",
    "index_of",
    "kept_empty",
    "marked_if_cut",
    "need_object",
    "optional_list",
    "optional_object",
    "optional_str",
    "read_upstream",
    "read_whole",
    "refuse_encoded",
    "refuse_redirect",
    "response_headers",
    "says_nothing",
    "upstream_failed",
    "usage_block",
]
