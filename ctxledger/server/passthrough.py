"""Provider endpoints the proxy passes on unchanged (models, embeddings, Anthropic's token
count): nothing in them to compact or record.

A client whose base URL points at ``ctxledger serve`` calls them too (an SDK or a tool
listing the models at start, embeddings made through the same client, a token count
before a request); they answered 404 ``no route``.

The request goes to the upstream as it came (its query, its body, the client's own auth
and API-version headers, as a proxied turn's); the answer comes back with the
upstream's status, headers and body; nothing is recorded. ``--guard-proxy`` gates them
as it gates the proxy.

As a proxied turn's, the wait for the upstream is watched: a client that hangs up (an
SDK's timeout, whose retries follow) cancels the upstream request (499 ``client_closed``),
and an upstream silent for ``--turn-timeout`` seconds is a 502 ``upstream_unreachable``.
"""

from __future__ import annotations

import logging
import re
import urllib.parse

import httpx
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ctxledger.integers import shown
from ctxledger.server.clientgone import while_connected
from ctxledger.server.errors import HTTPError, provider_error_body
from ctxledger.server.forwarding import admit, forwarded_headers
from ctxledger.server.routing import Endpoint, Handler, read_body
from ctxledger.server.state import ServerState
from ctxledger.server.upstream_reply import (
    UPSTREAM_ENCODING,
    forwarded,
    read_whole,
    refuse_encoded,
    upstream_failed,
)
from ctxledger.shownurl import with_path

log = logging.getLogger(__name__)

_BOTH = ("openai", "anthropic")


def api_path(template: str, params: dict[str, str]) -> str:
    """The upstream's API path (under its ``/v1``) of the route `template` with the
    client's path parameters, each percent-encoded as one path segment: an id ``.`` or
    ``..`` is refused (the upstream's URL would drop or climb it: ``/v1/models/%2e%2e``
    reached ``GET /v1``)."""
    for name, value in params.items():
        if value in (".", ".."):
            raise HTTPError(400, "bad_path", f"{name} {shown(value)} names no model")
    quoted = {k: urllib.parse.quote(v, safe=":@") for k, v in params.items()}
    return template.removeprefix("/v1").format(**quoted)


#: a query passed on as it came: printable ASCII (a client percent-encodes the rest), and
#: short enough for a URL (httpx refuses one over 64 KiB)
_QUERY = re.compile(rb"[\x21-\x7e]{0,16384}")


def _query(request: Request) -> str:
    """The client's query as the upstream gets it; a 400 for bytes no URL holds (a NUL,
    a space, a byte past ASCII: these were a 500 from httpx, or from decoding it)."""
    raw = request.scope.get("query_string", b"")
    if not _QUERY.fullmatch(raw):
        raise HTTPError(
            400,
            "bad_query",
            "the query must be at most 16 KiB of printable ASCII (percent-encode the rest)",
        )
    return str(raw.decode("ascii"))


def _content_type(request: Request) -> str:
    """The client's content type, passed on: ASCII text, as every forwarded header (a tab
    too: HTTP allows it in a header value)."""
    value = request.headers.get("content-type", "application/json")
    if not (value.isascii() and value.replace("\t", " ").isprintable()):
        raise HTTPError(400, "bad_header", "the content-type header must be printable ASCII text")
    return value


def _handler(template: str, faces: tuple[str, ...], name: str) -> Handler:
    async def handle(request: Request, state: ServerState) -> Response:
        admit(request, state, faces)
        headers = forwarded_headers(request)
        path = api_path(template, dict(request.path_params))
        body = await read_body(request) if request.method == "POST" else None
        if body is not None:
            headers["content-type"] = _content_type(request)
        url = with_path(state.upstream, path, state.api == "anthropic", _query(request))
        outbound = state.client.build_request(
            request.method,
            url,
            content=body,
            headers={**headers, **UPSTREAM_ENCODING},
            timeout=state.turn_timeout,
        )
        got = await while_connected(request.receive, lambda: _pass_on(state, outbound))
        if got is None:  # hung up first: the upstream request is cancelled
            log.info("client of %s %s left before the answer", request.method, path)
            message = "the client left before the answer"
            error = provider_error_body(state.api, 499, "client_closed", message)
            return JSONResponse(error, status_code=499)
        return got

    handle.__name__ = name  # the schema's operation id
    return handle


async def _pass_on(state: ServerState, outbound: httpx.Request) -> Response:
    """The upstream's answer to `outbound`, whole, as the client's response (or the 502)."""
    try:
        upstream = await state.client.send(outbound, stream=True)
    except httpx.HTTPError as exc:
        return upstream_failed(state.api, state.upstream, exc)
    if refused := await refuse_encoded(state.api, state.upstream, upstream):
        return refused
    data = await read_whole(state.api, state.upstream, upstream)
    return data if isinstance(data, Response) else forwarded(data, upstream)


def _endpoint(method: str, path: str, apis: tuple[str, ...], summary: str) -> Endpoint:
    return Endpoint(
        method,
        path,
        _handler(path, apis, "pass_" + "_".join(re.findall(r"[a-z]+", path.removeprefix("/v1")))),
        f"{summary} (passed to the upstream unchanged, nothing recorded)",
        tag="proxy",
        auth="proxy",
        body=None,
        either_face=len(apis) > 1,
    )


ENDPOINTS = [
    _endpoint("GET", "/v1/models", _BOTH, "The upstream's models"),
    _endpoint("GET", "/v1/models/{model_id}", _BOTH, "One model of the upstream"),
    _endpoint("POST", "/v1/embeddings", ("openai",), "OpenAI embeddings"),
    _endpoint("POST", "/v1/messages/count_tokens", ("anthropic",), "Anthropic token count"),
]

__all__ = ["ENDPOINTS", "api_path"]
