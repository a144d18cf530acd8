"""A summarizer that asks a model over HTTP (httpx): OpenAI-compatible or Anthropic.

Endpoints:

* ``api="openai"``: ``POST {base_url}/chat/completions`` with ``Authorization: Bearer
  <key>``; ``base_url`` includes the version prefix (``https://api.openai.com/v1``,
  ``http://127.0.0.1:8000/v1`` for vLLM).
* ``api="anthropic"``: ``POST {base_url}/v1/messages`` with ``x-api-key`` and
  ``anthropic-version`` headers; a ``base_url`` that already ends in ``/v1`` gets
  ``/messages`` only.

Configuration comes from the constructor, else from the environment:
``CTXLEDGER_SUMMARY_API`` (``openai`` by default), ``CTXLEDGER_SUMMARY_BASE_URL``,
``CTXLEDGER_SUMMARY_MODEL`` and ``CTXLEDGER_SUMMARY_API_KEY``. Without a base URL, or
without any model (neither a summary model nor the request's session model), the
summarizer is *not configured*.

The request is a system message (``prompts/summarizer_preamble.md``) and one user
message: the first-compaction or update instructions, the previous summary, the
serialized turns (``compressor.serialize``), the focus instructions and the template.
``prompt_hash`` is the sha256 of the body bytes sent (canonical JSON, sorted keys).

The request does not force sampling: no ``temperature`` unless one is configured
(and never for models that reject it: Kimi's ``kimi-for-coding`` and ``kimi-k2*`` on
Moonshot endpoints), and no output cap for OpenAI-compatible endpoints: the target
length is in the prompt ("about N tokens"). Anthropic's messages API requires
``max_tokens``, so there it is a generous ceiling (:func:`max_output_tokens`), not
the target. ``<think>``/``<thinking>``/``<reasoning>`` blocks are stripped from what
is sent and from the reply.

Replies are read tolerantly: ``message.content`` may be a string, a list of parts
(strings or ``{"text": ...}``), an object with a ``text`` (or ``content``) field, or
``message`` itself a bare string; a legacy ``choices[0].text`` is read too.

Failures raise :class:`~ctxledger.errors.SummarizerError` classified as: 401/403 ->
``auth``; connection errors (including a connect timeout) -> ``network``; other
timeouts -> ``timeout``; 429 -> ``rate_limit``; 5xx -> ``server``; undecodable JSON,
missing fields or a connection closed mid-body -> ``malformed``; empty or blank text
(reasoning only included) -> ``empty``; any other status -> ``other``. When a
separate summary model is configured and fails with 400/404/422 (model not found,
unsupported request), an empty completion, an undecodable body (an HTML error page,
truncated JSON, JSON wrapped in another object) or a stream closed mid-body, the
session's model is tried once instead.
"""

from __future__ import annotations

import hashlib
import math
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import httpx
import msgspec

from ctxledger.compressor.markers import prompt_text, unwrap_summary
from ctxledger.compressor.redact import redact
from ctxledger.compressor.serialize import serialize_turns, strip_reasoning
from ctxledger.compressor.summarizers.base import SummaryRequest, SummaryResult
from ctxledger.errors import FailureClass, InvalidConfig, InvalidInput, SummarizerError
from ctxledger.integers import shown
from ctxledger.shownurl import scrubbed, with_path
from ctxledger.usage import CanonicalUsage, normalize_usage

if TYPE_CHECKING:
    from ctxledger.compressor.config import CompressionConfig

APIS = ("openai", "anthropic")
DEFAULT_TIMEOUT = 120.0
DEFAULT_ANTHROPIC_VERSION = "2023-06-01"
ENV_API = "CTXLEDGER_SUMMARY_API"
ENV_BASE_URL = "CTXLEDGER_SUMMARY_BASE_URL"
ENV_MODEL = "CTXLEDGER_SUMMARY_MODEL"
ENV_API_KEY = "CTXLEDGER_SUMMARY_API_KEY"
#: statuses after which a separate summary model is swapped for the session's model
MODEL_RETRY_STATUSES = frozenset({400, 404, 422})
#: failures of a separate summary model's reply after which the session's model is tried
#: (and a connection the server closed: see LLMSummarizer.summarize)
MODEL_RETRY_CLASSES = frozenset({"empty", "malformed"})
#: hosts of Moonshot's own endpoints, where ``kimi-k2*`` models reject ``temperature``
MOONSHOT_HOSTS = ("moonshot.ai", "moonshot.cn", "kimi.com", "kimi.ai")


def max_output_tokens(budget_tokens: int) -> int:
    """The ``max_tokens`` an Anthropic request must carry: a ceiling, not the target.

    Twice the target length, at least 4,096 and at most 16,384 (every current
    Claude model writes that much); the target itself is in the prompt.
    """
    return min(16_384, max(4_096, math.ceil(budget_tokens * 2)))


def rejects_temperature(model: str, base_url: str | None = None) -> bool:
    """Whether `model` refuses a ``temperature`` parameter (Kimi coding models).

    ``kimi-for-coding`` always; ``kimi-k2*`` on Moonshot's endpoints (or when the
    endpoint is unknown). A provider prefix (``moonshotai/kimi-k2``) is ignored.
    """
    bare = model.strip().lower().rsplit("/", 1)[-1]
    if bare == "kimi-for-coding":
        return True
    if not bare.startswith("kimi-k2"):
        return False
    host = httpx.URL(base_url).host.lower() if base_url else ""
    return not host or any(host == h or host.endswith("." + h) for h in MOONSHOT_HOSTS)


def build_prompt(request: SummaryRequest) -> tuple[str, str]:
    """``(system, user)`` texts for `request` (see the module docstring for the layout)."""
    parts: list[str] = []
    if request.previous_summary:
        previous = unwrap_summary(request.previous_summary) or request.previous_summary.strip()
        parts.append(prompt_text("summary_update.md"))
        previous = strip_reasoning(previous)
        parts.append(f"<previous-summary>\n{redact(previous)}\n</previous-summary>")
    else:
        parts.append(prompt_text("summary_first.md"))
    parts.append(f"<turns>\n{serialize_turns(request.turns)}\n</turns>")  # reasoning stripped
    if request.focus:
        parts.append(prompt_text("summary_focus.md").replace("{focus}", request.focus.strip()))
    parts.append(
        prompt_text("summary_template.md").replace("{budget_tokens}", str(request.budget_tokens))
    )
    return prompt_text("summarizer_preamble.md"), "\n\n".join(parts)


def _model_retry(exc: SummarizerError) -> bool:
    """Whether a separate summary model's failure is retried on the session's model: a
    status or reply that says the model is wrong or broken, or a connection the server
    closed (the endpoint answers; that model's backend may not)."""
    return (
        exc.status in MODEL_RETRY_STATUSES
        or exc.failure_class in MODEL_RETRY_CLASSES
        or isinstance(exc.__cause__, httpx.RemoteProtocolError)
    )


def _snippet(response: httpx.Response) -> str:
    try:
        text = response.text
    except (httpx.HTTPError, UnicodeDecodeError):
        return ""
    text = " ".join(redact(text).split())
    return text[:300] + (" …" if len(text) > 300 else "")


def _status_error(response: httpx.Response, model: str) -> SummarizerError:
    status = response.status_code
    failure_class: FailureClass
    if status in (401, 403):
        failure_class = "auth"
    elif status == 429:
        failure_class = "rate_limit"
    elif status >= 500:
        failure_class = "server"
    else:
        failure_class = "other"
    return SummarizerError(
        f"summary model {shown(model)} answered HTTP {status}: {_snippet(response)}",
        failure_class=failure_class,
        status=status,
    )


def _transport_error(exc: httpx.HTTPError, url: str) -> SummarizerError:
    """The error for `exc`, with `url`'s credentials masked (the message may be logged)."""
    error = _unscrubbed_transport_error(exc, url)
    return SummarizerError(scrubbed(str(error), url), failure_class=error.failure_class)


def _unscrubbed_transport_error(exc: httpx.HTTPError, url: str) -> SummarizerError:
    if isinstance(exc, httpx.ConnectTimeout):
        # Never reached the endpoint: the same situation as a refused connection.
        return SummarizerError(f"cannot connect to {url}: {exc!r}", failure_class="network")
    if isinstance(exc, httpx.TimeoutException):
        return SummarizerError(
            f"summary request to {url} timed out: {exc!r}", failure_class="timeout"
        )
    if isinstance(exc, httpx.RemoteProtocolError) and "without sending a response" not in str(exc):
        # cut off mid-response: a network failure like the one below (the compaction is
        # abandoned, not replaced by a fallback: the next try may well work, #29559),
        # worded apart; dropped before any answer is h11's wording for a reset or a close
        return SummarizerError(
            f"connection to {url} closed before the response was complete: {exc}",
            failure_class="network",
        )
    return SummarizerError(f"network error talking to {url}: {exc!r}", failure_class="network")


def _coerce_text(value: Any, depth: int = 0) -> str:
    """Text out of the shapes servers put a reply in; raises TypeError on anything else."""
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    if depth < 4 and isinstance(value, list):
        return "".join(
            _coerce_text(part, depth + 1)
            for part in value
            # reasoning parts ("thinking", "reasoning") are not the summary
            if not (isinstance(part, Mapping) and part.get("type") in ("thinking", "reasoning"))
        )
    if depth < 4 and isinstance(value, Mapping):
        for key in ("text", "content", "value"):
            if key in value:
                return _coerce_text(value[key], depth + 1)
    raise TypeError(f"reply content is {type(value).__name__}")


def _text_of(api: str, data: Any) -> str:
    """The reply text of a decoded response body; raises KeyError/TypeError/IndexError."""
    if api == "anthropic":
        blocks = data["content"]
        return "".join(
            b["text"] for b in blocks if isinstance(b, Mapping) and b.get("type") == "text"
        )
    choice = data["choices"][0]
    if "message" not in choice and "text" in choice:  # a legacy completions-style choice
        return _coerce_text(choice["text"])
    message = choice["message"]
    if isinstance(message, str):  # some servers answer with the message as a bare string
        return message
    return _coerce_text(message["content"])


def _usage_of(api: str, data: Mapping[str, Any]) -> CanonicalUsage | None:
    raw = data.get("usage")
    if not isinstance(raw, Mapping):
        return None
    try:
        return normalize_usage(raw, "anthropic" if api == "anthropic" else "openai_chat")[1]
    except InvalidInput:
        # A provider's odd usage block must not turn a good summary into a failure.
        return None


class LLMSummarizer:
    """Summaries from an OpenAI-compatible or Anthropic endpoint (see the module docstring)."""

    kind = "llm"

    def __init__(
        self,
        *,
        api: str | None = None,
        base_url: str | None = None,
        model: str | None = None,
        api_key: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        transport: httpx.AsyncBaseTransport | None = None,
        client: httpx.AsyncClient | None = None,
        anthropic_version: str = DEFAULT_ANTHROPIC_VERSION,
        session_model: str | None = None,
        env: Mapping[str, str] | None = None,
        temperature: float | None = None,
    ) -> None:
        environ = os.environ if env is None else env
        for name, text in (("api", api), ("base_url", base_url), ("model", model),
                           ("api_key", api_key), ("session_model", session_model),
                           ("anthropic_version", anthropic_version)):  # fmt: skip
            if text is not None and not isinstance(text, str):  # ('a list'.strip() raised)
                raise InvalidConfig(f"summary {name} must be text, got {type(text).__name__}")
        self.api = (api or environ.get(ENV_API) or "openai").strip().lower()
        if self.api not in APIS:
            raise InvalidConfig(
                f"summary api must be one of {', '.join(APIS)}, not {shown(self.api)}"
            )
        self.base_url = (base_url or environ.get(ENV_BASE_URL) or "").strip().rstrip("/") or None
        self.model = (model or environ.get(ENV_MODEL) or "").strip() or None
        self.api_key = api_key if api_key is not None else environ.get(ENV_API_KEY) or None
        if isinstance(timeout, bool) or not (
            isinstance(timeout, int | float) and 0 < timeout < math.inf
        ):  # (a text was a TypeError; NaN was taken)
            raise InvalidConfig(f"summary timeout must be positive seconds, not {shown(timeout)}")
        self.timeout = timeout
        self.anthropic_version = anthropic_version
        if temperature is not None and not (
            isinstance(temperature, int | float) and 0 <= temperature <= 2
        ):
            raise InvalidConfig(
                f"summary temperature must be between 0 and 2, not {shown(temperature)}"
            )
        #: sent only when set, and never to a model that rejects it (:func:`rejects_temperature`)
        self.temperature = temperature
        #: used when a request does not name the session's model
        self.session_model = session_model
        self._transport = transport
        self._client = client

    @classmethod
    def from_env(
        cls,
        *,
        summary_model: str | None = None,
        session_model: str | None = None,
        env: Mapping[str, str] | None = None,
        **kwargs: Any,
    ) -> LLMSummarizer:
        """Configured from ``CTXLEDGER_SUMMARY_*``; `summary_model` (from the compression
        config) wins over the environment's model."""
        return cls(model=summary_model, session_model=session_model, env=env, **kwargs)

    @classmethod
    def from_config(
        cls,
        config: CompressionConfig,
        *,
        session_model: str | None = None,
        env: Mapping[str, str] | None = None,
        **kwargs: Any,
    ) -> LLMSummarizer:
        """Endpoint from ``CTXLEDGER_SUMMARY_*``; the model (`summary_model`) and the
        request timeout (`summary_timeout`) from the resolved compression settings, so
        a ``summary_timeout`` in a config file or ``CTXLEDGER_SUMMARY_TIMEOUT`` applies."""
        kwargs.setdefault("timeout", config.summary_timeout)
        return cls.from_env(
            summary_model=config.summary_model, session_model=session_model, env=env, **kwargs
        )

    @property
    def url(self) -> str:
        if self.base_url is None:
            raise SummarizerError(
                f"no summarizer endpoint configured: set {ENV_BASE_URL} (and {ENV_MODEL})",
                failure_class="not_configured",
            )
        anthropic = self.api == "anthropic"
        return with_path(
            self.base_url, "/messages" if anthropic else "/chat/completions", anthropic
        )

    def request_body(self, request: SummaryRequest, model: str) -> dict[str, Any]:
        """The JSON body sent for `request` to `model`."""
        system, user = build_prompt(request)
        body: dict[str, Any] = {"model": model}
        if self.api == "anthropic":
            body["max_tokens"] = max_output_tokens(request.budget_tokens)  # required there
            body["system"] = system
            body["messages"] = [{"role": "user", "content": user}]
        else:
            body["messages"] = [
                {"role": "system", "content": system},
                {"role": "user", "content": user},
            ]
        if self.temperature is not None and not rejects_temperature(model, self.base_url):
            body["temperature"] = self.temperature
        return body

    def _headers(self) -> dict[str, str]:
        headers = {"content-type": "application/json"}
        if self.api == "anthropic":
            headers["anthropic-version"] = self.anthropic_version
            if self.api_key:
                headers["x-api-key"] = self.api_key
        elif self.api_key:
            headers["authorization"] = f"Bearer {self.api_key}"
        return headers

    async def summarize(self, request: SummaryRequest) -> SummaryResult:
        url = self.url
        session_model = request.session_model or self.session_model
        model = self.model or session_model
        if not model:
            raise SummarizerError(
                f"no summary model: set {ENV_MODEL} or pass the session's model",
                failure_class="not_configured",
            )
        try:
            return await self._call(url, model, request)
        except SummarizerError as exc:
            if self.model and session_model and session_model != model and _model_retry(exc):
                try:
                    return await self._call(url, session_model, request)
                except SummarizerError as retry:  # both failures told: the first is the cause
                    raise SummarizerError(
                        f"{exc}; retried with the session's model: {retry}",
                        failure_class=retry.failure_class,
                        status=retry.status,
                    ) from retry
            raise

    async def _post(self, url: str, content: bytes) -> httpx.Response:
        if self._client is not None:
            return await self._client.post(url, content=content, headers=self._headers())
        async with httpx.AsyncClient(
            transport=self._transport, timeout=httpx.Timeout(self.timeout)
        ) as client:
            return await client.post(url, content=content, headers=self._headers())

    async def _call(self, url: str, model: str, request: SummaryRequest) -> SummaryResult:
        content = msgspec.json.encode(self.request_body(request, model), order="sorted")
        try:
            response = await self._post(url, content)
        except httpx.HTTPError as exc:
            raise _transport_error(exc, url) from exc
        if response.status_code >= 300:
            raise _status_error(response, model)
        try:
            data = response.json()
            text = _text_of(self.api, data)
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise SummarizerError(
                f"summary response from {shown(model)} is not a valid {self.api} reply: {exc!r}",
                failure_class="malformed",
                status=response.status_code,
            ) from exc
        text = strip_reasoning(text, dangling=True)
        unwrapped = unwrap_summary(text)
        body_text = (unwrapped if unwrapped is not None else text).strip()
        if not body_text:
            raise SummarizerError(
                f"summary model {shown(model)} returned no text", failure_class="empty"
            )
        return SummaryResult(
            text=redact(body_text),
            summarizer=self.kind,
            model=model,
            prompt_hash=hashlib.sha256(content).hexdigest(),
            usage=_usage_of(self.api, data) if isinstance(data, Mapping) else None,
        )


__all__ = [
    "APIS",
    "DEFAULT_TIMEOUT",
    "LLMSummarizer",
    "build_prompt",
    "max_output_tokens",
    "rejects_temperature",
]
