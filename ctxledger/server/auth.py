"""Who may call the server: the bearer token of the state API and the loopback rule.

A token is only ever compared in constant time and never logged. With no token the
server must listen on a loopback address only (``ctxledger serve`` refuses anything
else), so a token-less server is reachable from this machine alone.
"""

from __future__ import annotations

import hmac
import ipaddress
from pathlib import Path

from starlette.requests import Request

from ctxledger.errors import InvalidInput
from ctxledger.inputfile import open_input, read_capped
from ctxledger.integers import shown
from ctxledger.server.errors import HTTPError

#: the header a guarded proxy endpoint reads (its Authorization header is the upstream's)
PROXY_TOKEN_HEADER = "x-ctxledger-token"


#: a token file is read up to this much (``/dev/zero`` was read until memory ran out)
_TOKEN_FILE_BYTES = 4096


def read_token_file(path: str | Path) -> str:
    """The token in `path` (surrounding whitespace dropped): one word of at least 16
    printable ASCII characters (a header carries it); InvalidInput otherwise."""
    try:
        with open_input(path) as fh:  # a file, a FIFO or pipe; no device (/dev/zero)
            data = read_capped(fh, _TOKEN_FILE_BYTES)
    except OSError as exc:
        raise InvalidInput(
            f"cannot read the token file {str(path)!r}: {exc.strerror or exc}"
        ) from None
    if len(data) > _TOKEN_FILE_BYTES:
        raise InvalidInput(
            f"the token file {str(path)!r} holds more than {_TOKEN_FILE_BYTES:,} bytes: a "
            "token is one word"
        )
    token = data.decode("latin-1").strip()
    if len(token) < 16 or not (token.isascii() and token.isprintable()) or " " in token:
        raise InvalidInput(
            f"the token in {str(path)!r} must be one word of at least 16 characters, "
            "printable ASCII (a header carries it)"
        )
    return token


def is_loopback(host: str) -> bool:
    """True for 127.0.0.0/8, ::1 and ``localhost``."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_bind(host: str, token: str | None) -> None:
    """Refuse to listen beyond this machine without a token."""
    if token is None and not is_loopback(host):
        raise InvalidInput(
            # not "token: pass ...": the CLI redacts its errors, and "token: WORD" reads as a secret
            f"refusing to listen on {shown(host)} without a token (give --token-file FILE, "
            "or bind to 127.0.0.1)"
        )


def _matches(given: str, token: str) -> bool:
    return hmac.compare_digest(given.encode("utf-8", "replace"), token.encode("utf-8"))


def require_bearer(request: Request, token: str | None) -> None:
    """Raise a 401 unless the request carries ``Authorization: Bearer <token>`` (when one is set)."""
    if token is None:
        return
    header = request.headers.get("authorization", "")
    scheme, _, given = header.partition(" ")
    if not header:
        raise HTTPError(401, "unauthorized", "missing Authorization: Bearer <token> header")
    if scheme.lower() != "bearer" or not _matches(given.strip(), token):
        raise HTTPError(401, "unauthorized", "invalid bearer token")


def require_proxy_token(request: Request, token: str | None) -> None:
    """The proxy's own gate (``--guard-proxy``): the token in ``X-Ctxledger-Token``."""
    if token is None:
        return
    given = request.headers.get(PROXY_TOKEN_HEADER)
    if given is None:
        raise HTTPError(401, "unauthorized", f"missing {PROXY_TOKEN_HEADER} header")
    if not _matches(given.strip(), token):
        raise HTTPError(401, "unauthorized", f"invalid {PROXY_TOKEN_HEADER} token")


__all__ = [
    "PROXY_TOKEN_HEADER",
    "check_bind",
    "is_loopback",
    "read_token_file",
    "require_bearer",
    "require_proxy_token",
]
