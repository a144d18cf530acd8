"""What every endpoint that goes to the upstream checks first, and what it passes on of
the client's request: the ``--guard-proxy`` token, the face of the proxy (``--api``), and
the client's own auth and API-version headers (the proxy holds no credentials).

One place for the proxied turns (``proxy._proxy``, which the Responses face goes through
too) and the endpoints passed on unchanged (``passthrough``): a check one of them left
out (the ASCII rule of the forwarded headers) answered a 500 there.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from starlette.requests import Request

from ctxledger.errors import InvalidInput
from ctxledger.server.auth import require_proxy_token
from ctxledger.server.errors import HTTPError

if TYPE_CHECKING:
    from ctxledger.server.state import ServerState

#: client headers passed to the upstream (its auth and API version), nothing else
FORWARDED_HEADERS = (
    "authorization",
    "x-api-key",
    "anthropic-version",
    "anthropic-beta",
    "openai-organization",
    "openai-project",
)


def admit(request: Request, state: ServerState, faces: tuple[str, ...]) -> None:
    """The guard token (with ``--guard-proxy``), then the face: an endpoint of another
    provider's API than this proxy's upstream is a 404 ``wrong_api``."""
    if state.guard_proxy:
        require_proxy_token(request, state.token)
    if state.api not in faces:
        raise HTTPError(
            404,
            "wrong_api",
            f"this proxy forwards to an {state.api} upstream; "
            f"{request.scope['path']} is not served (start another with --api {faces[0]})",
        )


def check_forwarded(request: Request) -> None:
    """The headers sent on upstream must be ASCII (HTTP's own rule): refused before the
    request is recorded, not after (a non-ASCII key failed the upstream call, every retry)."""
    for name in FORWARDED_HEADERS:
        value = request.headers.get(name)
        if value is not None and not value.isascii():
            raise InvalidInput(f"the {name} header must be ASCII text")


def forwarded_headers(request: Request) -> dict[str, str]:
    """The client's headers the upstream gets (:data:`FORWARDED_HEADERS`), checked."""
    check_forwarded(request)
    return {k: v for k in FORWARDED_HEADERS if (v := request.headers.get(k)) is not None}


__all__ = ["FORWARDED_HEADERS", "admit", "check_forwarded", "forwarded_headers"]
