"""Provider errors: is this a context overflow, and what should the agent loop do?

Owns HERMES_SPEC §2 "Overflow recovery". Two very different failures look alike:

* **max_tokens too large**: the input fits, but input + requested output does not.
  The fix is a lower output cap for this one call. Compressing would throw away
  history for nothing, and shrinking the window would make every later turn
  compress too early.
* **prompt too long** (or HTTP 413): the input itself does not fit. If the message
  states the real window and it is smaller than the configured one, learn it; then
  compress and retry, a bounded number of times, each time making progress.

Everything here is pure: :func:`classify_provider_error` reads a status and a body,
:func:`recovery_action` turns the classification into a decision, and
:class:`OverflowRecovery` counts attempts for one turn. The caller does the I/O and
records the decisions as events (``ContextLimitLearned``, ``CompressionChecked``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

import msgspec

from ctxledger.errors import ContextOverflowError, InvalidInput
from ctxledger.integers import printable, shown, written
from ctxledger.runtime import overflow_patterns as pt

ErrorKind = Literal[
    "prompt_too_long",
    "payload_too_large",
    "max_tokens_too_large",
    "rate_limit",
    "auth",
    "server",
    "other",
]
ActionKind = Literal["lower_max_tokens", "compress", "fail"]

#: a stated window outside this range is a parsing accident or a toy model; never learn it
MIN_LEARNED_CONTEXT: Final = 1_024
MAX_LEARNED_CONTEXT: Final = 10_000_000

_EVIDENCE_CHARS = 240
#: proxies sometimes answer with whole HTML pages; the facts are always near the start
_HAYSTACK_CHARS = 20_000
_MAX_DEPTH = 6
_TEXT_KEYS = frozenset({"message", "raw", "detail", "error", "msg", "error_message", "description"})
_CODE_KEYS = frozenset({"code", "type", "error_type", "status"})
#: numeric fields some servers add to an overflow error (llama.cpp: n_ctx, n_prompt_tokens)
_NUMBER_KEYS = frozenset({"n_ctx", "n_prompt_tokens"})
#: the output cap is lowered to this many tokens below what the provider says is left
OUTPUT_SAFETY_MARGIN: Final = 64

_SUGGESTION = (
    "Start a new session, or run a manual /compress (optionally with a focus topic) and try again."
)


class ProviderErrorClass(msgspec.Struct, frozen=True, kw_only=True):
    """What a provider error means for the context window.

    ``context_limit`` is the window the provider stated (only values in
    1,024-10,000,000 are kept); ``available_output_tokens`` the output budget the
    message implies for max-tokens errors; ``output_is_ceiling`` says that figure is
    the model's own output maximum ("supports at most N completion tokens"), exact and
    independent of the prompt, rather than what the window has left after it;
    ``evidence`` the excerpt that decided.
    """

    kind: ErrorKind
    status: int | None = None
    context_limit: int | None = None
    available_output_tokens: int | None = None
    output_is_ceiling: bool = False
    prompt_tokens: int | None = None
    requested_output_tokens: int | None = None
    evidence: str = ""
    message: str = ""

    @property
    def is_context_overflow(self) -> bool:
        return self.kind in ("prompt_too_long", "payload_too_large")


class RecoveryAction(msgspec.Struct, frozen=True, kw_only=True):
    """The decision for one failed call.

    ``lower_max_tokens``: retry this call with ``max_tokens`` as the output cap.
    ``compress``: record ``learn_context_length`` first when set, compress, retry.
    ``fail``: not a context problem (or nothing to do); surface the error.
    """

    action: ActionKind
    max_tokens: int | None = None
    learn_context_length: int | None = None
    reason: str = ""


# --- reading the body ------------------------------------------------------------------


def _maybe_json(text: str) -> Any:
    stripped = text.strip()
    if not stripped or stripped[0] not in "{[":
        return None
    try:
        return msgspec.json.decode(stripped)
    except (msgspec.DecodeError, RecursionError):
        return None


def _walk(node: Any, depth: int) -> Iterator[tuple[str, str]]:
    """Yield ("text", s) and ("code", s) pairs from a decoded JSON body.

    OpenRouter nests the upstream provider's own JSON body as a string under
    ``error.metadata.raw``, so string values that are JSON are decoded and walked too.
    """
    if depth > _MAX_DEPTH:
        return
    if isinstance(node, Mapping):
        for key, value in node.items():
            lowered = written(key).lower()
            if isinstance(value, str):
                if lowered in _TEXT_KEYS:
                    inner = _maybe_json(value)
                    if inner is not None:
                        yield from _walk(inner, depth + 1)
                    else:
                        yield "text", value
                elif lowered in _CODE_KEYS:
                    yield "code", value.lower()
            elif isinstance(value, Mapping | list):
                yield from _walk(value, depth + 1)
            elif lowered in _NUMBER_KEYS and isinstance(value, int) and not isinstance(value, bool):
                yield "text", f"{lowered}: {written(value)}"
    elif isinstance(node, list):
        for item in node:
            yield from _walk(item, depth + 1)
    elif isinstance(node, str):
        yield "text", node


def _read_body(body: Any) -> tuple[str, frozenset[str]]:
    """The body's human-readable text (one haystack) and its error codes.

    Any shape: text, bytes, a decoded object, a list, a number, null.
    """
    if body is None:
        return "", frozenset()
    if isinstance(body, bytes | bytearray):
        body = bytes(body).decode("utf-8", errors="replace")
    if isinstance(body, Mapping | list | tuple):
        decoded: Any = list(body) if isinstance(body, tuple) else body
    elif isinstance(body, str):
        decoded = _maybe_json(body)
    else:  # a number, a bool, anything else: its text is all there is
        return written(body)[:_HAYSTACK_CHARS], frozenset()
    if decoded is None:
        return written(body)[:_HAYSTACK_CHARS], frozenset()
    texts: list[str] = []
    codes: set[str] = set()
    for kind, value in _walk(decoded, 0):
        if kind == "code":
            codes.add(value)
        else:
            texts.append(value)
    if not texts:
        # a JSON body with none of the usual keys: search its encoding rather than nothing
        try:
            texts.append(msgspec.json.encode(decoded).decode())
        except (TypeError, msgspec.EncodeError):
            texts.append(written(decoded))
        except (RecursionError, ValueError):  # a body holding itself, or nesting thousands
            texts.append(shown(decoded))  # of levels; an int past Python's 4,300 digits
    return "\n".join(texts)[:_HAYSTACK_CHARS], frozenset(codes)


@dataclass
class _Facts:
    limit: int | None = None
    prompt: int | None = None
    requested: int | None = None
    available: int | None = None
    available_is_ceiling: bool = False
    prompt_chars: int | None = None
    output_evidence: str | None = None
    prompt_evidence: str | None = None


#: more digits than any token figure has: such a "number" in an error text is not one
#: (5,000 digits were a ValueError out of handle_provider_error: Python's int() limit)
_MAX_DIGITS = 18


def _number(text: str) -> int | None:
    digits = text.replace(",", "")
    return int(digits) if len(digits.lstrip("-")) <= _MAX_DIGITS else None


def _gather(haystack: str) -> _Facts:
    facts = _Facts()
    for rule in pt.RULES:
        match = rule.pattern.search(haystack)
        if match is None:
            continue
        for name, value in match.groupdict().items():
            if value is not None and getattr(facts, name) is None:
                setattr(facts, name, _number(value))
                if name == "available" and facts.available is not None:
                    facts.available_is_ceiling = rule.ceiling
        excerpt = match.group(0)[:_EVIDENCE_CHARS]
        if rule.signal == "output" and facts.output_evidence is None:
            facts.output_evidence = excerpt
        elif rule.signal == "prompt" and facts.prompt_evidence is None:
            facts.prompt_evidence = excerpt
    return facts


def _learnable(limit: int | None) -> int | None:
    if limit is None or not MIN_LEARNED_CONTEXT <= limit <= MAX_LEARNED_CONTEXT:
        return None
    return limit


def _from_facts(facts: _Facts, status: int | None, message: str) -> ProviderErrorClass | None:
    """Decide from the numbers when any specific rule matched, else None."""
    if facts.output_evidence is None and facts.prompt_evidence is None:
        return None
    available = facts.available
    if available is None and facts.limit is not None and facts.prompt is not None:
        available = facts.limit - facts.prompt
    if available is None and facts.limit is not None and facts.prompt_chars is not None:
        # a prompt stated in characters: ~3 a token over-reserves the input, so the
        # lowered output cap stays inside the window
        available = (
            facts.limit
            - (facts.prompt_chars + pt.CHARS_PER_TOKEN_LOW - 1) // pt.CHARS_PER_TOKEN_LOW
        )
    input_overflows = (
        facts.limit is not None and facts.prompt is not None and facts.prompt >= facts.limit
    ) or (available is not None and available <= 0)
    if facts.output_evidence is not None and not input_overflows:
        return ProviderErrorClass(
            kind="max_tokens_too_large",
            status=status,
            context_limit=_learnable(facts.limit),
            available_output_tokens=available,
            output_is_ceiling=facts.available is not None and facts.available_is_ceiling,
            prompt_tokens=facts.prompt,
            requested_output_tokens=facts.requested,
            evidence=facts.output_evidence,
            message=message,
        )
    return ProviderErrorClass(
        kind="prompt_too_long",
        status=status,
        context_limit=_learnable(facts.limit),
        prompt_tokens=facts.prompt,
        requested_output_tokens=facts.requested,
        evidence=facts.prompt_evidence or facts.output_evidence or "",
        message=message,
    )


def _by_status_and_text(
    status: int | None, text: str, codes: frozenset[str]
) -> tuple[ErrorKind, str]:
    """The fallback ladder once no rule with numbers matched; returns (kind, evidence)."""
    if codes & pt.OVERFLOW_CODES:
        return "prompt_too_long", "code=" + sorted(codes & pt.OVERFLOW_CODES)[0]
    rate = pt.RATE_TEXT.search(text)
    if rate:
        return "rate_limit", rate.group(0)
    if status == 429 or codes & pt.RATE_CODES:
        return "rate_limit", f"HTTP {status}" if status == 429 else "rate limit code"
    generic = pt.GENERIC_PROMPT.search(text)
    if generic:
        return "prompt_too_long", generic.group(0)
    payload = pt.PAYLOAD_TEXT.search(text)
    if status == 413 or codes & pt.PAYLOAD_CODES or payload:
        return "payload_too_large", payload.group(0) if payload else "HTTP 413"
    auth = pt.AUTH_TEXT.search(text)
    if codes & pt.AUTH_CODES or auth:
        return "auth", auth.group(0) if auth else "auth error code"
    server = pt.SERVER_TEXT.search(text)
    if (status is not None and status >= 500) or codes & pt.SERVER_CODES or server:
        return "server", server.group(0) if server else f"HTTP {status}"
    return "other", text[:_EVIDENCE_CHARS]


def classify_provider_error(status: int | None, body: Any) -> ProviderErrorClass:
    """Classify a failed model call from its HTTP status and response body.

    ``body`` may be the raw text, bytes, or decoded JSON of any shape (an object, a
    list, a number, null; nested ``error.message`` and OpenRouter's
    ``error.metadata.raw`` are read). Never raises on odd bodies. The overflow
    wordings of real servers count whatever the status (a proxy may turn the
    server's 400 into a 500 or 502).
    """
    text, codes = _read_body(body)
    message = text[:500]
    if status in (401, 403):
        return ProviderErrorClass(
            kind="auth", status=status, evidence=f"HTTP {status}", message=message
        )
    facts = _gather(text)
    decided = _from_facts(facts, status, message)
    if decided is not None:
        return decided
    kind, evidence = _by_status_and_text(status, text, codes)
    overflow = kind in ("prompt_too_long", "payload_too_large")
    return ProviderErrorClass(
        kind=kind,
        status=status,
        # numbers stated beside a generic wording (llama.cpp's n_ctx / n_prompt_tokens)
        context_limit=_learnable(facts.limit) if overflow else None,
        prompt_tokens=facts.prompt if overflow else None,
        evidence=evidence[:_EVIDENCE_CHARS],
        message=message,
    )


# --- deciding ------------------------------------------------------------------------------


def _lower_cap(cls: ProviderErrorClass, requested_max_tokens: int | None) -> RecoveryAction:
    requested = (
        requested_max_tokens if requested_max_tokens is not None else cls.requested_output_tokens
    )
    available = cls.available_output_tokens
    # a margin below what the window has left: providers count their own framing tokens
    # too; a model's own output ceiling is exact and independent of the prompt
    margin = 0 if cls.output_is_ceiling else OUTPUT_SAFETY_MARGIN
    cap = max(1, available - margin) if available is not None else None
    if cap is not None and (requested is None or cap < requested):
        said = (
            f"the model's maximum of {available:,}"
            if cls.output_is_ceiling
            else f"{margin} below the {available:,} the provider says are left"
        )
        return RecoveryAction(
            action="lower_max_tokens",
            max_tokens=cap,
            reason=f"input fits; output cap lowered to {cap:,} tokens ({said})",
        )
    # No usable figure (or one that would not lower anything): halve, so repeated
    # failures shrink the cap geometrically and the retry loop always ends.
    if requested is not None and requested >= 2:
        return RecoveryAction(
            action="lower_max_tokens",
            max_tokens=requested // 2,
            reason=f"input fits but the provider gave no usable output budget; cap halved to {requested // 2:,}",
        )
    return RecoveryAction(
        action="fail", reason="max_tokens rejected and there is no smaller output cap to try"
    )


def recovery_action(
    cls: ProviderErrorClass, *, context_length: int, requested_max_tokens: int | None
) -> RecoveryAction:
    """The pure decision for one classified error (see the module docstring)."""
    if context_length <= 0:
        raise InvalidInput(f"context_length must be positive, got {context_length}")
    if cls.kind == "max_tokens_too_large":
        return _lower_cap(cls, requested_max_tokens)
    if cls.is_context_overflow:
        learned = (
            cls.context_limit
            if cls.context_limit is not None and cls.context_limit < context_length
            else None
        )
        reason = f"{cls.kind.replace('_', ' ')}: compress and retry"
        if learned is not None:
            reason += (
                f"; provider states a {learned:,}-token window (configured {context_length:,})"
            )
        return RecoveryAction(action="compress", learn_context_length=learned, reason=reason)
    return RecoveryAction(
        action="fail", reason=f"{cls.kind.replace('_', ' ')} is not a context-window problem"
    )


#: a compression pass makes progress when tokens drop below this share of before
PROGRESS_RATIO: Final = 0.95


def made_progress(tokens_before: int, tokens_after: int, rows_removed: int) -> bool:
    """HERMES_SPEC §2: rows were removed, or tokens fell below 95 % of before.

    The one rule for preflight passes and overflow retries: a 3 % drop is no progress
    (the provider would reject the retry the same way).
    """
    return rows_removed > 0 or tokens_after < PROGRESS_RATIO * tokens_before


class OverflowRecovery:
    """Compress-and-retry bookkeeping for one turn.

    Call :meth:`start_attempt` before each compression the overflow path runs and
    :meth:`record_result` after it. Both raise :class:`ContextOverflowError` when
    retrying cannot help: the attempts are used up, or a pass made no progress
    (a retry would send the same prompt and fail the same way).
    """

    __slots__ = ("attempts", "max_attempts")

    def __init__(self, max_attempts: int) -> None:
        """``max_attempts`` is the config's ``max_compression_attempts``."""
        if max_attempts < 1:
            raise InvalidInput(f"max_attempts must be at least 1, got {max_attempts}")
        self.max_attempts = max_attempts
        self.attempts = 0

    @property
    def remaining(self) -> int:
        return self.max_attempts - self.attempts

    def start_attempt(self, cls: ProviderErrorClass) -> int:
        """Count one more attempt (1-based number returned) or give up."""
        if self.attempts >= self.max_attempts:
            # the provider's excerpt whole (at most its 240 characters: the numbers that
            # decided), escaped: a quote cut at 40 cut a number in two
            said = f" ('{printable(cls.evidence[:_EVIDENCE_CHARS])}')" if cls.evidence else ""
            raise ContextOverflowError(
                f"The provider still rejects the prompt as too long after {self.attempts} "
                f"compression attempt{'s' if self.attempts != 1 else ''}{said}. {_SUGGESTION}"
            )
        self.attempts += 1
        return self.attempts

    def record_result(self, *, tokens_before: int, tokens_after: int, rows_removed: int) -> None:
        """Accept a pass that made material progress (:func:`made_progress`); else give up."""
        if min(tokens_before, tokens_after, rows_removed) < 0:
            raise InvalidInput("token counts and rows_removed must not be negative")
        if made_progress(tokens_before, tokens_after, rows_removed):
            return
        raise ContextOverflowError(
            f"Compression made no progress on attempt {self.attempts} "
            f"({tokens_before:,} -> {tokens_after:,} tokens, not below {PROGRESS_RATIO:.0%} "
            f"of before, no messages removed), so a retry would be rejected again. {_SUGGESTION}"
        )


__all__ = [
    "MAX_LEARNED_CONTEXT",
    "MIN_LEARNED_CONTEXT",
    "OUTPUT_SAFETY_MARGIN",
    "PROGRESS_RATIO",
    "ActionKind",
    "ErrorKind",
    "OverflowRecovery",
    "ProviderErrorClass",
    "RecoveryAction",
    "classify_provider_error",
    "made_progress",
    "recovery_action",
]
