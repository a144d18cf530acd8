"""The Starlette application: one ``ContextService`` behind the state API, the event
feed and the compacting proxy.

:func:`create_app` builds it from a service (tests drive it in-process through an ASGI
transport); :func:`app_from_env` is the factory ``ctxledger serve --workers N`` gives
uvicorn, each worker opening the same ledger file (SQLite WAL; the ledger's optimistic
concurrency settles races between processes). Ledger calls run on the event loop's
thread, as in the service; one lock per proxied session family serializes its turns
inside a process.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import AsyncIterator, Callable
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ctxledger import ContextService
from ctxledger.compressor.settings import resolve_config
from ctxledger.server import passthrough, proxy, reads, responses_face, sse, state_api
from ctxledger.server.auth import read_token_file, require_bearer
from ctxledger.server.errors import (
    HTTPError,
    classify,
    error_response,
    message_of,
    provider_error_response,
)
from ctxledger.server.idempotency import refuse_idempotency_key
from ctxledger.server.notices import on_error
from ctxledger.server.openapi import build_schema
from ctxledger.server.routing import JSON, Endpoint
from ctxledger.server.state import (
    DEFAULT_CONTEXT_LENGTH,
    DEFAULT_STALL_TIMEOUT,
    DEFAULT_TURN_TIMEOUT,
    ServerState,
)
from ctxledger.terminal import inline

log = logging.getLogger("ctxledger.server")


def _api_of(endpoint: Endpoint, state: ServerState) -> str:
    """The provider whose error shape a proxy endpoint answers in: its own face's; for
    an endpoint both faces serve, this proxy's (one shape per proxy face)."""
    if endpoint.either_face:
        return state.api
    return "anthropic" if endpoint.path.startswith("/v1/messages") else "openai"


def _route(endpoint: Endpoint, state: ServerState) -> Route:
    async def call(request: Request) -> Response:
        try:
            if endpoint.auth == "bearer":
                require_bearer(request, state.token)
            if endpoint.tag == "state" and endpoint.method == "POST":
                refuse_idempotency_key(request, endpoint.headers)
            return await endpoint.handler(request, state)
        except Exception as exc:
            status = 0 if isinstance(exc, HTTPError) else classify(exc)[0]
            # the path as a client sent it, decoded: %1b is an ESC (shown escaped)
            if status == 503:  # the store out of reach or busy: expected, one line
                log.warning(
                    "%s %s: %s", request.method, inline(request.scope["path"]), message_of(exc)
                )
            elif status >= 500:  # on either face
                log.exception("%s %s failed", request.method, inline(request.scope["path"]))
            if endpoint.auth == "proxy":  # (with what the turn noticed before)
                return on_error(exc, provider_error_response(_api_of(endpoint, state), exc))
            return error_response(exc)

    return Route(
        endpoint.path, call, methods=[endpoint.method], name=f"{endpoint.method} {endpoint.path}"
    )


def endpoints() -> list[Endpoint]:
    """Every endpoint the server serves (the OpenAPI schema is built from this list)."""
    return [
        *meta_endpoints(),
        *state_api.ENDPOINTS,
        *reads.ENDPOINTS,
        *sse.ENDPOINTS,
        *proxy.ENDPOINTS,
        *responses_face.ENDPOINTS,
        *passthrough.ENDPOINTS,
    ]


async def _health(request: Request, state: ServerState) -> Response:
    state.ledger.refresh()
    return JSON({"ok": True, "last_seq": state.ledger.store.last_seq(), "api": state.api})


async def _openapi(request: Request, state: ServerState) -> Response:
    return JSON(build_schema(endpoints()))


def meta_endpoints() -> list[Endpoint]:
    return [
        Endpoint(
            "GET",
            "/healthz",
            _health,
            "Liveness and the log's last sequence number",
            tag="meta",
            auth="none",
        ),
        Endpoint("GET", "/openapi.json", _openapi, "This schema", tag="meta", auth="none"),
    ]


async def _not_found(request: Request, exc: Exception) -> Response:
    status = exc.status_code if isinstance(exc, HTTPException) else 500
    code = {404: "not_found", 405: "method_not_allowed"}.get(status, "http_error")
    message = (
        f"no route {request.method} {request.scope['path']}"
        if status in (404, 405)
        else message_of(exc)
    )
    return error_response(HTTPError(status, code, message))


def create_app(service: ContextService, *, own_service: bool = False, **settings: Any) -> Starlette:
    """The ASGI app over `service` (closed on shutdown when `own_service`). Settings: see ServerState."""
    state = ServerState(service, **settings)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await state.aclose()
            if own_service:
                await service.aclose()

    app = Starlette(
        routes=[_route(e, state) for e in endpoints()],
        exception_handlers={404: _not_found, 405: _not_found},
        lifespan=lifespan,
    )
    app.state.ctx = state
    return app


# --- the uvicorn factory (one per worker process) ------------------------------------------

ENV_PREFIX = "CTXLEDGER_SERVE_"
#: set by ``ctxledger serve`` (one process) so the event feed ends its streams on shutdown
STOPPING: Callable[[], bool] | None = None


def app_from_env() -> Starlette:
    """Build the app from ``CTXLEDGER_SERVE_*`` variables (set by ``ctxledger serve``)."""
    env = {
        k[len(ENV_PREFIX) :].lower(): v for k, v in os.environ.items() if k.startswith(ENV_PREFIX)
    }
    # the one precedence: defaults < --config FILE (else the file found) < CTXLEDGER_<KEY>
    config = resolve_config(env.get("config") or None).config
    summarizer = None
    if env.get("summarizer") == "llm":
        from ctxledger import LLMSummarizer

        summarizer = LLMSummarizer.from_config(config)
    service = ContextService.open(
        env["db"], config=config, summarizer=summarizer, durability=env.get("durability") or "full"
    )
    return create_app(
        service,
        own_service=True,
        token=read_token_file(env["token_file"]) if env.get("token_file") else None,
        guard_proxy=env.get("guard_proxy") == "1",
        upstream=env.get("upstream") or None,
        api=env.get("api") or "openai",
        context_length=int(env["context_length"]) if env.get("context_length") else None,
        stopping=STOPPING,
        stall_timeout=float(env.get("stall_timeout") or DEFAULT_STALL_TIMEOUT),
        turn_timeout=float(env.get("turn_timeout") or DEFAULT_TURN_TIMEOUT),
    )


__all__ = [
    "DEFAULT_CONTEXT_LENGTH",
    "ENV_PREFIX",
    "ServerState",
    "app_from_env",
    "create_app",
    "endpoints",
]
