"""A framework adapter's model call recovering from a provider's overflow error, as the
proxy does (HERMES_SPEC §2 "Overflow recovery").

The adapter catches what the model call raised (the provider SDK's own exception:
``openai.BadRequestError`` with a ``context_length_exceeded`` body, an Anthropic
"prompt is too long", a 413, ...) and hands it here. Its HTTP status and body are read
off the exception, and the service classifies and decides
(:meth:`~ctxledger.runtime.service.ContextService.handle_provider_error`: there is one
classifier): an output-cap error is retried with a lower ``max_tokens`` and nothing
compacted; a prompt too long learns a stated smaller window, compacts and is retried
on the compacted view, at most ``max_compression_attempts`` times, each making
progress, else :class:`~ctxledger.errors.ContextOverflowError` (raised from the
provider's error). Anything else is not this module's to handle: the caller re-raises
the original error.
"""

from __future__ import annotations

from typing import Any, Final

from ctxledger import ContextService
from ctxledger.errors import ContextOverflowError, CtxLedgerError
from ctxledger.integrations.common import logger
from ctxledger.runtime.service_io import Recovery, is_int

#: lowered output caps one model call may be retried with (each is below the last, so the
#: service's halving ends sooner; this only bounds a provider that never stops refusing)
MAX_CAP_RETRIES: Final = 8


def provider_error(exc: BaseException) -> tuple[int | None, Any]:
    """The HTTP status (None when the exception has none) and the body of a provider
    error as the service's classifier reads them: the exception's text and, when the SDK
    kept it, the decoded error body (``openai`` / ``anthropic`` ``APIStatusError.body``,
    whose ``code`` / ``type`` fields the classifier reads too)."""
    status: Any = getattr(exc, "status_code", None)
    if not is_int(status):
        status = getattr(getattr(exc, "response", None), "status_code", None)
    if not (is_int(status) and 100 <= status <= 599):
        status = None
    body: dict[str, Any] = {"message": str(exc)}
    sent = getattr(exc, "body", None)
    if isinstance(sent, dict | list | str):
        body["error"] = sent
    return status, body


def requested_cap(*candidates: Any) -> int | None:
    """The first positive integer of `candidates` (the call's ``max_tokens`` as set)."""
    for value in candidates:
        if is_int(value) and value >= 1:
            return int(value)
    return None


async def recover(
    service: ContextService,
    session_id: str,
    exc: BaseException,
    *,
    requested_max_tokens: int | None,
) -> Recovery | None:
    """How to retry the model call that raised `exc` on `session_id`: a recovery whose
    ``session_id`` (compacted, maybe) and ``max_tokens`` (lowered, maybe) the retry uses;
    None when it is not an error the service recovers from (the caller re-raises
    `exc`). Raises ContextOverflowError (from `exc`) when recovery gave up."""
    if not isinstance(exc, Exception) or isinstance(exc, CtxLedgerError):
        return None  # a cancellation, or the ledger's own refusal: not the provider's
    status, body = provider_error(exc)
    try:
        recovery = await service.handle_provider_error(
            session_id, status, body, requested_max_tokens=requested_max_tokens
        )
    except ContextOverflowError as error:
        raise error from exc
    except CtxLedgerError as error:  # (an ended session, say): the provider's error stands
        logger.warning(
            "ctxledger: no recovery from %s on %s: %s", type(exc).__name__, session_id, error
        )
        return None
    return recovery if recovery.action == "retry" else None


__all__ = ["MAX_CAP_RETRIES", "provider_error", "recover", "requested_cap"]
