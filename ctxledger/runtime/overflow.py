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

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

import msgspec

from ctxledger.errors import ContextOverflowError, InvalidInput

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
            lowered = str(key).lower()
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
                yield "text", f"{lowered}: {value}"
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
        return str(body)[:_HAYSTACK_CHARS], frozenset()
    if decoded is None:
        return str(body)[:_HAYSTACK_CHARS], frozenset()
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
            texts.append(str(decoded))
    return "\n".join(texts)[:_HAYSTACK_CHARS], frozenset(codes)


# --- the patterns ------------------------------------------------------------------------

#: characters a token, counted low, for a prompt a server states in characters
_CHARS_PER_TOKEN_LOW = 3

_N = r"(\d{1,3}(?:,\d{3})+|\d+)"
_SN = r"(-?\d{1,3}(?:,\d{3})+|-?\d+)"


def _rx(pattern: str) -> re.Pattern[str]:
    # "{limit}" becomes a named number group (thousands separators allowed), "{available:S}"
    # a signed one, so every rule reads like the message it matches
    expanded = re.sub(
        r"\{(\w+)(:S)?\}", lambda m: f"(?P<{m[1]}>{(_SN if m[2] else _N)[1:]}", pattern
    )
    return re.compile(expanded, re.IGNORECASE)


#: how a figure follows its name: "max_model_len 32768", ": 32768", "=32768", "(32768)",
#: "is 32768", "of 32768", "is: 32768"
_DELIM = r"(?:\s*[:=]\s*|\s*\(\s*|\s+(?:is|of)(?:\s*[:=])?\s*\(?\s*|\s+)"


@dataclass(frozen=True)
class _Rule:
    signal: Literal["output", "prompt", "fact"]
    pattern: re.Pattern[str]
    #: the figure it states is the model's own output ceiling, not what the window has left
    ceiling: bool = False


#: Ordered: the first rule to state a fact wins it. "output" rules are evidence that
#: the requested output cap is what overflowed; "prompt" rules that the input did;
#: "fact" rules only supply numbers.
_RULES: Final[tuple[_Rule, ...]] = (
    # Anthropic: input + max_tokens > window
    _Rule(
        "output",
        _rx(
            r"input length and `?max_tokens`? exceed context limit:\s*{prompt}\s*\+\s*{requested}\s*>\s*{limit}"
        ),
    ),
    _Rule(
        "output",
        _rx(
            r"max_tokens\s*:?\s*{requested}\s*>\s*context_window\s*:?\s*{limit}\s*-\s*input_tokens\s*:?\s*{prompt}\s*=\s*available_tokens\s*:?\s*{available:S}"
        ),
    ),
    _Rule("output", _rx(r"available_tokens\s*[:=]?\s*{available:S}")),
    # OpenAI: the model's own output ceiling
    _Rule(
        "output",
        _rx(
            r"max_(?:completion_|new_)?tokens\W*(?:or\W+max_completion_tokens\W*)?is too large:\s*{requested}"
        ),
    ),
    _Rule("output", _rx(r"supports at most {available} completion tokens"), ceiling=True),
    # vLLM / older OpenAI: "(31000 in the messages, 2000 in the completion)"
    # (OpenRouter says "(140000 of text input, 10000 in the output)")
    _Rule(
        "output",
        _rx(
            r"\({prompt} (?:in the messages|of text input)(?:,\s*[\d,]+ of [a-z ]+input)*,\s*{requested} in the (?:completion|output)\)"
        ),
    ),
    _Rule(
        "output",
        _rx(
            r"requested {requested} output tokens and your prompt contains (?:at least )?{prompt} input tokens"
        ),
    ),
    _Rule("output", _rx(r"prompt contains (?:at least )?{prompt} input tokens")),
    # LM Studio / llama.cpp: the window in tokens, the prompt in characters
    _Rule(
        "output",
        _rx(
            r"requested {requested} output tokens and your prompt contains {prompt_chars} characters"
        ),
    ),
    # HF text-generation-inference
    _Rule(
        "output",
        _rx(
            r"inputs`? tokens \+ `?max_new_tokens`? must be <=\s*{limit}\.?\s*Given:\s*{prompt} `?inputs`? tokens and {requested} `?max_new_tokens"
        ),
    ),
    # DashScope / Qwen, Groq and friends: a plain output range
    _Rule(
        "output", _rx(r"range of max_tokens should be \[\s*1\s*,\s*{available}\s*\]"), ceiling=True
    ),
    _Rule(
        "output",
        _rx(r"max_tokens`? must be (?:less than or equal to|<=|at most)\s*`?{available}"),
        ceiling=True,
    ),
    # input overflow, with numbers
    _Rule(
        "prompt", _rx(r"prompt is too long:\s*{prompt} tokens\s*>\s*{limit}(?: tokens)? maximum")
    ),
    _Rule(
        "prompt",
        _rx(r"request \({prompt} tokens\) exceeds the available context size \({limit} tokens\)"),
    ),
    _Rule(
        "prompt",
        _rx(
            r"input token count \(?{prompt}\)? exceeds the maximum number of tokens allowed \(?{limit}\)?"
        ),
    ),
    _Rule(
        "prompt",
        _rx(
            r"prompt contains {prompt} tokens(?: and \d+ draft tokens)?,? too large for model with {limit} maximum context length"
        ),
    ),
    _Rule("prompt", _rx(r"maximum context length" + _DELIM + r"{limit}(?: tokens)?")),
    # llama.cpp / Ollama / LM Studio / vLLM wordings that state the window
    _Rule("prompt", _rx(r"maximum context size" + _DELIM + r"{limit}")),
    _Rule("prompt", _rx(r"context window of {limit} tokens")),
    _Rule("prompt", _rx(r"max_model_len" + _DELIM + r"{limit}")),
    _Rule("prompt", _rx(r"maximum model length" + _DELIM + r"{limit}")),
    _Rule("prompt", _rx(r"最大(?:上下文)?长度(?:为|是|:|：)?\s*{limit}")),
    _Rule("prompt", _rx(r"loaded with (?:a )?context length of (?:only )?{limit}")),
    _Rule("prompt", _rx(r"range of input length should be \[\s*1\s*,\s*{limit}\s*\]")),
    # numbers only
    _Rule(
        "fact",
        _rx(r"(?:messages?|request|prompt) (?:has|have|resulted in) {prompt} (?:input )?tokens"),
    ),
    _Rule("fact", _rx(r"context (?:window|length|size) (?:is|of) {limit} tokens")),
    _Rule("fact", _rx(r"n_ctx: {limit}")),
    _Rule("fact", _rx(r"n_prompt_tokens: {prompt}")),
    _Rule("fact", _rx(r"prompt \(length {prompt}\)")),
)

_GENERIC_PROMPT = re.compile(
    r"context_length_exceeded|context length exceeded|prompt is too long|input is too long"
    r"|exceeds? (?:the )?(?:model'?s? )?(?:maximum |available )?context (?:window|length|size|limit)"
    r"|too many (?:input )?tokens|reduce the length of the (?:messages|input|prompt)"
    r"|context window (?:is )?(?:full|exceeded)|maximum context length"
    # llama.cpp server / Ollama / LM Studio / vLLM
    r"|context (?:size|window|length) (?:has been |was |is )?exceeded|maximum context size"
    r"|context window of [\d,]+ tokens|context length\b[^.\n]{0,80}?\bexceeded"
    r"|max_model_len|maximum model length|\bslot\b[^\n]{0,120}?\bcontext\b[^\n]{0,120}?not enough space"
    r"|not enough space in (?:the )?(?:context|kv cache)"
    # Chinese "exceeds the maximum (context) length" wordings
    r"|超过最大长度限制|超(?:过|出)了?[^，。,.\n]{0,16}?(?:最大|上下文)[^，。,.\n]{0,8}?(?:长度|限制|token|令牌|窗口)"
    r"|(?:上下文|输入)(?:长度|窗口)[^，。,.\n]{0,6}?(?:超过|超出|超限)",
    re.IGNORECASE,
)
_RATE_TEXT = re.compile(
    r"rate.?limit|too many requests|tokens per min|requests per min|\b[RT]PM\b", re.IGNORECASE
)
_PAYLOAD_TEXT = re.compile(
    r"payload too large|request entity too large|entity too large|body too large"
    r"|request_too_large|request too large|maximum allowed number of bytes",
    re.IGNORECASE,
)
_AUTH_TEXT = re.compile(
    r"invalid.?api.?key|incorrect api key|unauthori[sz]ed|authentication|permission denied",
    re.IGNORECASE,
)
_SERVER_TEXT = re.compile(
    r"overloaded|internal server error|service unavailable|bad gateway", re.IGNORECASE
)

_RATE_CODES = frozenset(
    {"rate_limit_exceeded", "rate_limit_error", "rate_limited", "too_many_requests"}
)
_AUTH_CODES = frozenset(
    {"authentication_error", "invalid_api_key", "permission_error", "unauthorized"}
)
_PAYLOAD_CODES = frozenset({"request_too_large", "payload_too_large"})
_SERVER_CODES = frozenset({"overloaded_error", "api_error", "server_error", "internal_error"})
_OVERFLOW_CODES = frozenset({"context_length_exceeded", "string_above_max_length"})


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


def _number(text: str) -> int:
    return int(text.replace(",", ""))


def _gather(haystack: str) -> _Facts:
    facts = _Facts()
    for rule in _RULES:
        match = rule.pattern.search(haystack)
        if match is None:
            continue
        for name, value in match.groupdict().items():
            if value is not None and getattr(facts, name) is None:
                setattr(facts, name, _number(value))
                if name == "available":
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
            facts.limit - (facts.prompt_chars + _CHARS_PER_TOKEN_LOW - 1) // _CHARS_PER_TOKEN_LOW
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
    if codes & _OVERFLOW_CODES:
        return "prompt_too_long", "code=" + sorted(codes & _OVERFLOW_CODES)[0]
    rate = _RATE_TEXT.search(text)
    if rate:
        return "rate_limit", rate.group(0)
    if status == 429 or codes & _RATE_CODES:
        return "rate_limit", f"HTTP {status}" if status == 429 else "rate limit code"
    generic = _GENERIC_PROMPT.search(text)
    if generic:
        return "prompt_too_long", generic.group(0)
    payload = _PAYLOAD_TEXT.search(text)
    if status == 413 or codes & _PAYLOAD_CODES or payload:
        return "payload_too_large", payload.group(0) if payload else "HTTP 413"
    auth = _AUTH_TEXT.search(text)
    if codes & _AUTH_CODES or auth:
        return "auth", auth.group(0) if auth else "auth error code"
    server = _SERVER_TEXT.search(text)
    if (status is not None and status >= 500) or codes & _SERVER_CODES or server:
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
            raise ContextOverflowError(
                f"The provider still rejects the prompt as too long after {self.attempts} "
                f"compression attempt{'s' if self.attempts != 1 else ''}"
                f"{f' ({cls.evidence!r})' if cls.evidence else ''}. {_SUGGESTION}"
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
