"""The pieces every endpoint module shares: the endpoint table entry, request parsing,
and the JSON response.

An :class:`Endpoint` carries what the OpenAPI schema says about it (summary, body
fields, query parameters), so the served schema is built from the same table as the
routes and cannot drift from them.
"""

from __future__ import annotations

import math
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio
import msgspec
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response

from ctxledger.errors import InvalidInput
from ctxledger.integers import all_digits, ascii_int, quoted_short, shown
from ctxledger.limits import json_problem, max_json_depth, walked_depth
from ctxledger.server.errors import HTTPError

if TYPE_CHECKING:
    from ctxledger.server.state import ServerState

Handler = Callable[[Request, "ServerState"], Awaitable[Response]]

#: request bodies larger than this are refused before they are parsed (64 MiB)
MAX_BODY_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class Param:
    """A query parameter or body field: name, JSON-schema type, whether it is required."""

    name: str
    type: str
    required: bool = False
    description: str = ""


@dataclass(frozen=True)
class Endpoint:
    method: str
    path: str
    handler: Handler
    summary: str
    tag: str = "state"
    body: tuple[Param, ...] | None = None
    query: tuple[Param, ...] = ()
    #: request headers the endpoint reads (documented in the OpenAPI schema)
    headers: tuple[Param, ...] = ()
    auth: str = "bearer"  # "bearer" (state API), "none", or "proxy"
    stream: bool = False  # answers text/event-stream
    responses: dict[int, str] = field(default_factory=dict)
    #: a proxy endpoint both faces serve (``/v1/models``): its errors take the shape of
    #: the proxy's ``--api``, not of its path
    either_face: bool = False


class JSON(Response):
    """A JSON response encoded with msgspec (Structs, lists and dicts alike)."""

    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return msgspec.json.encode(content)


async def read_body(request: Request) -> bytes:
    declared = request.headers.get("content-length")
    length = decimal(declared) if declared is not None else None
    # a length over 18 digits is no int64 (uvicorn still takes it): far over the cap too
    too_long = declared is not None and length is None and all_digits(declared)
    if too_long or (length is not None and length > MAX_BODY_BYTES):
        raise HTTPError(413, "body_too_large", f"request body over {MAX_BODY_BYTES:,} bytes")
    chunks: list[bytes] = []
    size = 0
    try:
        async for chunk in request.stream():  # a chunked body is refused once it is too big
            size += len(chunk)
            if size > MAX_BODY_BYTES:
                raise HTTPError(
                    413, "body_too_large", f"request body over {MAX_BODY_BYTES:,} bytes"
                )
            chunks.append(chunk)
    except ClientDisconnect:  # a client that left mid-body: no answer, and no server error
        raise HTTPError(
            499, "client_closed", "the client closed the connection before its body arrived"
        ) from None
    return b"".join(chunks)


async def json_object(request: Request, fields: tuple[Param, ...] | None = None) -> dict[str, Any]:
    """The body as a JSON object; with `fields`, unknown or mistyped fields are a 422."""
    data = await decode_body(await read_body(request))
    if fields is not None:
        check_fields(data, fields)
    return data


#: levels a request body may add around a message ({"messages": [ {message} ]} and the like)
_ENVELOPE_DEPTH = 8
#: a body larger than this is decoded on a worker thread (see decode_body)
THREAD_DECODE_BYTES = 1024 * 1024


async def decode_body(raw: bytes) -> dict[str, Any]:
    """:func:`decode_object`, on a worker thread for a large body: its depth scan then
    leaves the event loop free between its steps for the server's other requests (the
    decoder itself, C code holding the GIL, still stalls it for its own run)."""
    if len(raw) <= THREAD_DECODE_BYTES:
        return decode_object(raw)
    return await anyio.to_thread.run_sync(decode_object, raw)


def decode_object(raw: bytes) -> dict[str, Any]:
    """A request body as a JSON object (empty: ``{}``); anything else is a 400 ``bad_json``.

    A body nesting deeper than the limit is a 400 ``too_deep``. Its depth is the walk
    of its decoded containers (a chat body's are few: its strings are most of it), and
    a body of more than :data:`_WALKED` containers (built of tiny ones, or to nest) is
    scanned as bytes instead (:func:`bracket_depth`): both are exact and linear, the
    scan is the cheaper for such a body and the dearer for a chat body (~8x its decode:
    it must cut every string). A body whose start is that dense is scanned before it is
    decoded, so a too deep one is refused without being decoded.
    """
    if not raw.strip():
        return {}
    limit = max_json_depth() + _ENVELOPE_DEPTH
    start = raw[:_SAMPLE]
    dense = (start.count(b"[") + start.count(b"{")) * _DENSE >= len(start)
    if dense and bracket_depth(raw, limit) > limit:
        raise _too_deep(limit)
    try:
        data = msgspec.json.decode(raw)
    except RecursionError:
        raise _too_deep(limit) from None
    except (msgspec.DecodeError, UnicodeDecodeError) as exc:
        # bytes that are not UTF-8 inside a string: msgspec 0.22 raises UnicodeDecodeError,
        # 0.23 a DecodeError ("Invalid UTF-8 encoded string"); both are named the same way
        raise _not_utf8(raw) or HTTPError(
            400, "bad_json", f"the request body is not valid JSON: {json_problem(exc, raw)}"
        ) from None
    if not dense:
        depth = walked_depth(data, limit, _WALKED)
        if (bracket_depth(raw, limit) if depth is None else depth) > limit:
            raise _too_deep(limit)
    if not isinstance(data, dict):
        raise HTTPError(400, "bad_json", "the request body must be a JSON object")
    return data


def _not_utf8(raw: bytes) -> HTTPError | None:
    """The 400 for a body that is not UTF-8 text, naming its first bad byte; else None."""
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        bad = raw[exc.start : exc.start + 1].hex()
        return HTTPError(
            400,
            "bad_json",
            f"the request body is not UTF-8 text (it holds the byte 0x{bad} at offset "
            f"{exc.start:,}); send JSON encoded as UTF-8",
        )
    return None


#: how much of a body's start says whether it is dense with brackets (one per
#: _DENSE bytes); how many decoded containers are walked before the byte scan decides
_SAMPLE = 64 * 1024
_DENSE = 64
_WALKED = 50_000


def _too_deep(limit: int) -> HTTPError:
    return HTTPError(
        400,
        "too_deep",
        f"the request body nests deeper than {limit} levels (a message may nest "
        f"{max_json_depth()}; raise CTXLEDGER_MAX_JSON_DEPTH if this is intended)",
    )


#: a JSON string, escapes included (the unrolled form: no backtracking per character).
#: An unterminated one runs to the end of the body: a match that could fail would be
#: tried again from each later quote, each time to the end (a body of 40 KB of \"
#: after one quote took 6 s); one that cannot fail reads each byte once.
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*(?:"|\\?\Z)', re.DOTALL)
#: every byte but the brackets (deleted), and the braces read as brackets
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_AS_BRACKETS = bytes.maketrans(b"{}", b"[]")


def bracket_depth(raw: bytes, stop_above: int) -> int:
    """How deep the brackets of JSON `raw` nest, strings skipped, without decoding it;
    ``stop_above + 1`` once it is deeper than that.

    Exact for valid JSON (where it is the decoded value's depth). It keeps only the
    brackets (bytes-level C calls: the strings cut, the rest deleted), then removes the
    innermost pairs, one level per pass, until nothing is left: at most `stop_above`
    passes over a shrinking copy. Left unpaired (invalid JSON: ``[[[`` cut short), the
    opening brackets count as levels, so a cut deep body is still too deep.
    """
    text = _STRING.sub(b"", raw) if b'"' in raw else raw
    brackets = text.translate(_AS_BRACKETS, _NOT_BRACKETS)
    depth = 0
    while brackets:
        if depth > stop_above:
            return depth
        inner = brackets.replace(b"[]", b"")
        if len(inner) == len(brackets):  # ']...][...[': nothing pairs up any more
            return depth + inner.count(b"[")
        brackets, depth = inner, depth + 1
    return depth


_TYPES: dict[str, Callable[[Any], bool]] = {
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v),
    "boolean": lambda v: isinstance(v, bool),
    "array": lambda v: isinstance(v, list),
    "object": lambda v: isinstance(v, dict),
    "any": lambda v: True,
}


def check_fields(data: Mapping[str, Any], fields: tuple[Param, ...]) -> None:
    known = {f.name: f for f in fields}
    unknown = sorted(set(data) - set(known))
    if unknown:
        expected = f"expected {', '.join(known)}" if known else "this call takes no fields"
        raise InvalidInput(f"unknown field(s) {', '.join(map(repr, unknown))}; {expected}")
    for f in fields:
        if f.name not in data or data[f.name] is None:
            if f.required:
                raise InvalidInput(f"field {f.name!r} is required")
            continue
        if not _TYPES[f.type](data[f.name]):
            raise InvalidInput(f"field {f.name!r} must be of type {f.type}")


def query_int(request: Request, name: str, default: int | None, *, minimum: int = 0) -> int | None:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    value = ascii_int(raw, signed=True)  # int() alone took "1_000", "+1" and "٣"
    if value is None:
        raise InvalidInput(f"query parameter {name!r} must be an integer, got {quoted_short(raw)}")
    if value < minimum:
        raise InvalidInput(f"query parameter {name!r} must be ≥ {minimum}, got {value}")
    return value


def query_bool(request: Request, name: str, default: bool | None = False) -> bool | None:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    lowered = raw.lower()
    if lowered in ("1", "true", "yes"):
        return True
    if lowered in ("0", "false", "no"):
        return False
    raise InvalidInput(f"query parameter {name!r} must be true or false, got {quoted_short(raw)}")


def query_str(request: Request, name: str, *, required: bool = False) -> str | None:
    raw = request.query_params.get(name)
    if required and (raw is None or not raw.strip()):
        raise InvalidInput(f"query parameter {name!r} is required")
    return raw


#: a session id a client may choose (the proxy's header, the state API's start): one that
#: every route can name again (no "/", no surrounding blanks, no control characters)
SESSION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@-]{0,199}")


def check_session_id(value: object, what: str) -> str:
    """`value` when it is a session id a client may choose (:data:`SESSION_ID`), else
    InvalidInput naming `what` (a header, a field)."""
    if not (isinstance(value, str) and SESSION_ID.fullmatch(value)):
        raise InvalidInput(
            f"{what} must be 1-200 characters of letters, digits and ._:@- "
            f"(starting with a letter or digit), got {shown(value)}"[:300]
        )
    return value


def decimal(raw: str) -> int | None:
    """The non-negative integer a header spells in 1 to 18 ASCII digits, else None."""
    return ascii_int(raw, max_digits=18)


def path_param(request: Request, name: str) -> str:
    value = str(request.path_params.get(name, "")).strip()
    if not value:
        raise InvalidInput(f"{name} must not be empty")
    return value


__all__ = [
    "JSON",
    "SESSION_ID",
    "Endpoint",
    "Handler",
    "Param",
    "bracket_depth",
    "check_fields",
    "check_session_id",
    "decimal",
    "decode_body",
    "decode_object",
    "json_object",
    "path_param",
    "query_bool",
    "query_int",
    "query_str",
    "quoted_short",
    "read_body",
]
