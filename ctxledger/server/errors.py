"""JSON errors of the HTTP server: a stable ``code``, a one-line ``message``, a status.

Every :mod:`ctxledger.errors` class maps to one (status, code) pair here, so a client
can branch on ``code`` without parsing text. The state API answers
``{"error": {"code": ..., "message": ...}}``; the proxy endpoints answer in their
provider's own error shape (see :func:`provider_error_body`) so the SDKs parse it.
"""

from __future__ import annotations

from typing import Any

from starlette.responses import JSONResponse

from ctxledger.compressor.redact import redact
from ctxledger.errors import (
    CompressionError,
    ConcurrencyError,
    ConnectionLost,
    ContextOverflowError,
    CtxLedgerError,
    IntegrityError,
    InvalidInput,
    InvalidMessage,
    NotFound,
    SessionEndedError,
    StorageFullError,
    StoreBusy,
    UnknownBlob,
    UnknownCompaction,
    UnknownMessage,
    UnknownSession,
    described,
)
from ctxledger.terminal import inline

#: (exception class, HTTP status, code), most specific first
_MAP: tuple[tuple[type[Exception], int, str], ...] = (
    (InvalidMessage, 422, "invalid_message"),
    (InvalidInput, 422, "invalid_input"),
    (UnknownSession, 404, "unknown_session"),
    (UnknownMessage, 404, "unknown_message"),
    (UnknownCompaction, 404, "unknown_compaction"),
    (UnknownBlob, 404, "unknown_blob"),
    (NotFound, 404, "not_found"),
    (ConcurrencyError, 409, "version_conflict"),
    (SessionEndedError, 409, "session_ended"),
    (StorageFullError, 507, "storage_full"),
    (ConnectionLost, 503, "store_unavailable"),
    (StoreBusy, 503, "store_busy"),
    (IntegrityError, 500, "integrity_error"),
    (ContextOverflowError, 422, "context_overflow"),
    (CompressionError, 502, "compression_failed"),
    (CtxLedgerError, 500, "ledger_error"),
)


#: 401: how to authenticate; 503 (the store's server out of reach, or the store busy:
#: a lock held too long, a deadlock, a timeout): when to try again
_HEADERS = {401: {"WWW-Authenticate": "Bearer"}, 503: {"Retry-After": "1"}}


class HTTPError(Exception):
    """An error the server raises itself (bad JSON, bad token, unknown route)."""

    def __init__(self, status: int, code: str, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.extra = extra


def one_line(text: str) -> str:
    """`text` as one line for a client's error body and the server's log: blanks joined,
    control and bidi characters escaped (:func:`~ctxledger.terminal.inline`), so an
    upstream's or a client's bytes never act on the operator's terminal."""
    return inline(" ".join(str(text).split()))[:1000]


def classify(exc: Exception) -> tuple[int, str, dict[str, Any]]:
    """(status, code, extra fields) of an exception; unknown exceptions are 500 ``internal``."""
    if isinstance(exc, HTTPError):
        return exc.status, exc.code, exc.extra
    for cls, status, code in _MAP:
        if isinstance(exc, cls):
            extra: dict[str, Any] = {}
            if isinstance(exc, ConcurrencyError):
                extra = {
                    "session_id": exc.stream,
                    "current_version": exc.actual,
                    "expected_version": exc.expected,
                }
            return status, code, extra
    return 500, "internal", {}


def message_of(exc: Exception) -> str:
    # redacted: an error can quote a secret (a summarizer's HTTP reply naming its key)
    if isinstance(exc, KeyError) and exc.args:
        return one_line(redact(str(exc.args[0])))  # KeyError quotes its message otherwise
    return one_line(redact(described(exc))) or type(exc).__name__


def error_response(exc: Exception) -> JSONResponse:
    """The state API's error body for `exc`."""
    status, code, extra = classify(exc)
    message = (
        message_of(exc)
        if status < 500 or code != "internal"
        else f"internal error: {message_of(exc)}"
    )
    headers = _HEADERS.get(status)
    return JSONResponse(
        {"error": {"code": code, "message": message, **extra}}, status_code=status, headers=headers
    )


_OPENAI_TYPES = {401: "authentication_error", 404: "not_found_error", 409: "conflict_error"}
_ANTHROPIC_TYPES = {401: "authentication_error", 404: "not_found_error", 413: "request_too_large"}


def provider_error_body(api: str, status: int, code: str, message: str) -> dict[str, Any]:
    """An error in the OpenAI or Anthropic shape (with our ``code``), for the proxy endpoints."""
    if api == "anthropic":
        kind = _ANTHROPIC_TYPES.get(
            status, "invalid_request_error" if status < 500 else "api_error"
        )
        return {"type": "error", "error": {"type": kind, "message": message, "code": code}}
    kind = _OPENAI_TYPES.get(status, "invalid_request_error" if status < 500 else "server_error")
    return {"error": {"message": message, "type": kind, "code": code, "param": None}}


def provider_error_response(api: str, exc: Exception) -> JSONResponse:
    status, code, _ = classify(exc)
    body = provider_error_body(api, status, code, message_of(exc))
    return JSONResponse(body, status_code=status, headers=_HEADERS.get(status))


def at_client_index(exc: InvalidMessage, offset: int) -> InvalidMessage:
    """`exc`, about a message of an appended suffix, renamed to the client's own index
    (the suffix began at `offset` in the list the client sent), so a refusal that says
    to drop a message names the one in the client's list."""
    if exc.index is None:
        return exc
    text = str(exc).removeprefix(f"message {exc.index}: ")
    return InvalidMessage(text, index=exc.index + offset)


__all__ = [
    "HTTPError",
    "at_client_index",
    "classify",
    "error_response",
    "message_of",
    "one_line",
    "provider_error_body",
    "provider_error_response",
]
