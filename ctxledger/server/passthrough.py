"""Provider endpoints the proxy passes on unchanged (models, embeddings, Anthropic's token
count): nothing in them to compact or record.

A client whose base URL points at ``ctxledger serve`` calls them too (an SDK or a tool
listing the models at start, embeddings made through the same client, a token count
before a request); they answered 404 ``no route``.

The request goes to the upstream as it came (its query, its body, the client's own auth
and API-version headers, as a proxied turn's); the answer comes back with the
upstream's status, headers and body; nothing is recorded. ``--guard-proxy`` gates them
as it gates the proxy.
"""

from __future__ import annotations

import re
import urllib.parse

import httpx
from starlette.requests import Request
from starlette.responses import Response

from ctxledger.server.auth import require_proxy_token
from ctxledger.server.errors import HTTPError
from ctxledger.server.proxy import FORWARDED_HEADERS
from ctxledger.server.routing import Endpoint, Handler, read_body
from ctxledger.server.state import ServerState
from ctxledger.server.upstream_reply import (
    UPSTREAM_ENCODING,
    forwarded,
    read_whole,
    refuse_encoded,
    upstream_failed,
)

_BOTH = ("openai", "anthropic")


def upstream_url(base: str, api: str, path: str, query: str) -> str:
    """The upstream's URL for the client's ``/v1/...`` `path`: an OpenAI base names its
    ``/v1`` (``https://api.openai.com/v1``), so the rest is appended to it; an Anthropic
    base is the host (``/v1`` kept), unless it already ends with ``/v1``. The base's own
    query (a key some gateways take) stays, the client's after it."""
    parts = urllib.parse.urlsplit(base)
    stem = parts.path.rstrip("/")
    if api == "openai" or stem.endswith("/v1"):
        path = path.removeprefix("/v1")
    joined = "&".join(q for q in (parts.query, query) if q)
    return urllib.parse.urlunsplit(parts._replace(path=stem + path, query=joined))


def _handler(apis: tuple[str, ...], name: str) -> Handler:
    async def handle(request: Request, state: ServerState) -> Response:
        if state.guard_proxy:
            require_proxy_token(request, state.token)
        if state.api not in apis:
            raise HTTPError(
                404,
                "wrong_api",
                f"this proxy forwards to an {state.api} upstream; {request.url.path} is "
                f"not served (start another with --api {apis[0]})",
            )
        body = await read_body(request) if request.method == "POST" else None
        headers = {k: v for k in FORWARDED_HEADERS if (v := request.headers.get(k)) is not None}
        if body is not None:
            headers["content-type"] = request.headers.get("content-type", "application/json")
        url = upstream_url(state.upstream, state.api, request.url.path, request.url.query)
        try:
            upstream = await state.client.send(
                state.client.build_request(
                    request.method, url, content=body, headers={**headers, **UPSTREAM_ENCODING}
                ),
                stream=True,
            )
        except httpx.HTTPError as exc:
            return upstream_failed(state.api, state.upstream, exc)
        if refused := await refuse_encoded(state.api, state.upstream, upstream):
            return refused
        data = await read_whole(state.api, state.upstream, upstream)
        return data if isinstance(data, Response) else forwarded(data, upstream)

    handle.__name__ = name  # the schema's operation id
    return handle


def _endpoint(method: str, path: str, apis: tuple[str, ...], summary: str) -> Endpoint:
    return Endpoint(
        method,
        path,
        _handler(apis, "pass_" + "_".join(re.findall(r"[a-z]+", path.removeprefix("/v1")))),
        f"{summary} (passed to the upstream unchanged, nothing recorded)",
        tag="proxy",
        auth="proxy",
        body=None,
    )


ENDPOINTS = [
    _endpoint("GET", "/v1/models", _BOTH, "The upstream's models"),
    _endpoint("GET", "/v1/models/{model_id}", _BOTH, "One model of the upstream"),
    _endpoint("POST", "/v1/embeddings", ("openai",), "OpenAI embeddings"),
    _endpoint("POST", "/v1/messages/count_tokens", ("anthropic",), "Anthropic token count"),
]

__all__ = ["ENDPOINTS", "upstream_url"]
