"""A fake model provider on 127.0.0.1 for tests: OpenAI chat completions and Anthropic messages.

Reusable by any test that needs an HTTP model endpoint (summarizers, the runtime's
overflow recovery, ...). It listens on a random free port of 127.0.0.1 in a
background thread, answers in the shape the request path asks for, and records
every request.

Usage::

    from helpers.fake_provider import FakeProvider, Reply, Fail

    with FakeProvider() as provider:
        provider.queue(Reply("first answer"), Fail("429"))   # consumed one per request
        provider.default = Reply("answer when the queue is empty")
        provider.on_model("missing-model", Fail("404"))      # for every request naming it
        url = provider.openai_base_url        # http://127.0.0.1:PORT/v1
        url = provider.anthropic_base_url     # http://127.0.0.1:PORT  (client adds /v1/messages)
        ...
        provider.requests[0].json["model"]    # what the client sent
        provider.requests[0].headers["authorization"]

or the pytest fixture ``fake_provider`` (import it into the test module or conftest).

Routing: a path ending in ``/chat/completions`` gets OpenAI-shaped bodies; a path
ending in ``/messages`` gets Anthropic-shaped ones (success and errors alike). Any
other path is a 404.

Behaviours (each is a small frozen dataclass):

* ``Reply(text, usage=None, model=None, tool_calls=None, finish_reason=None)`` — a
  success with a usage block (``usage`` overrides the computed one; for OpenAI it is
  the ``usage`` object, for Anthropic too).
* ``Fail(kind, shape=None, limit=None)`` — ``kind`` is one of:
  ``"401"``, ``"403"``, ``"404"`` (model not found), ``"429"`` (with Retry-After),
  ``"500"``, ``"503"``, ``"413"`` (payload too large), ``"400"`` (a generic bad request),
  ``"prompt_too_long"`` (400 whose message states the real limit ``limit``, default
  131072, in the ``shape`` ``"openai"`` / ``"anthropic"`` / ``"vllm"``; by default the
  route's shape), ``"max_tokens"`` (400: input + requested output exceed the window),
  ``"hang"`` (sleep ``Fail.seconds`` before answering, default 30 — pair with a short
  client timeout), ``"empty"`` (a success whose text is ``""``), ``"blank"`` (text of
  white space), ``"malformed"`` (200 with a body that is not JSON), ``"missing_fields"``
  (200 JSON without choices/content), ``"close"`` (headers promise a body, the
  connection closes after a few bytes).
* ``Raw(status, body, headers=None)`` — any bytes you like.

Every request is recorded as a :class:`RecordedRequest` (method, path, lower-cased
headers, raw body, decoded JSON or None) in ``provider.requests`` (thread-safe list).
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

DEFAULT_TEXT = "## Active Task\nNone.\n\n## Goal\nA fake summary."


@dataclass(frozen=True)
class Reply:
    text: str = DEFAULT_TEXT
    usage: Mapping[str, Any] | None = None
    model: str | None = None
    tool_calls: list[dict[str, Any]] | None = None
    finish_reason: str | None = None


@dataclass(frozen=True)
class Fail:
    kind: str
    shape: str | None = None
    limit: int = 131072
    seconds: float = 30.0


@dataclass(frozen=True)
class Raw:
    status: int
    body: bytes
    headers: Mapping[str, str] = field(default_factory=dict)


Behaviour = Reply | Fail | Raw


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    json: Any


def _openai_success(reply: Reply, model: str, prompt_chars: int) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.text}
    if reply.tool_calls:
        message["tool_calls"] = reply.tool_calls
    usage = (
        dict(reply.usage)
        if reply.usage is not None
        else {
            "prompt_tokens": prompt_chars // 4,
            "completion_tokens": len(reply.text) // 4,
            "total_tokens": prompt_chars // 4 + len(reply.text) // 4,
            "prompt_tokens_details": {"cached_tokens": 0},
        }
    )
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "model": reply.model or model,
        "choices": [
            {"index": 0, "message": message, "finish_reason": reply.finish_reason or "stop"}
        ],
        "usage": usage,
    }


def _anthropic_success(reply: Reply, model: str, prompt_chars: int) -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "text", "text": reply.text}]
    usage = (
        dict(reply.usage)
        if reply.usage is not None
        else {
            "input_tokens": prompt_chars // 4,
            "output_tokens": len(reply.text) // 4,
            "cache_read_input_tokens": 0,
            "cache_creation_input_tokens": 0,
        }
    )
    return {
        "id": "msg_fake",
        "type": "message",
        "role": "assistant",
        "model": reply.model or model,
        "content": content,
        "stop_reason": reply.finish_reason or "end_turn",
        "usage": usage,
    }


_MESSAGES = {
    "401": (401, "authentication_error", "invalid api key"),
    "403": (403, "permission_error", "this key may not use this model"),
    "404": (
        404,
        "not_found_error",
        "the model {model} does not exist or you do not have access to it",
    ),
    "429": (429, "rate_limit_error", "rate limit reached, retry later"),
    "500": (500, "api_error", "internal server error"),
    "503": (503, "overloaded_error", "the service is overloaded"),
    "413": (413, "request_too_large", "request exceeds the maximum allowed size"),
    "400": (400, "invalid_request_error", "invalid request: unsupported parameter"),
}


def _error_body(
    shape: str, error_type: str, message: str, code: str | None = None
) -> dict[str, Any]:
    if shape == "anthropic":
        return {"type": "error", "error": {"type": error_type, "message": message}}
    if shape == "vllm":
        return {
            "object": "error",
            "message": message,
            "type": "BadRequestError",
            "param": None,
            "code": 400,
        }
    return {"error": {"message": message, "type": error_type, "param": None, "code": code}}


def _overflow_message(kind: str, shape: str, limit: int) -> str:
    if kind == "max_tokens":
        return (
            f"max_tokens is too large: input length plus max_tokens exceeds the context window; "
            f"available_tokens: {limit // 8}"
        )
    if shape == "anthropic":
        return f"prompt is too long: {limit + 5000} tokens > {limit} maximum"
    if shape == "vllm":
        return (
            f"This model's maximum context length is {limit} tokens. However, you requested "
            f"{limit + 5000} tokens ({limit + 4000} in the messages, 1000 in the completion)."
        )
    return (
        f"This model's maximum context length is {limit} tokens. However, your messages "
        f"resulted in {limit + 5000} tokens. Please reduce the length of the messages."
    )


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # keep pytest output clean
        return

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length) if length else b""
        try:
            decoded = json.loads(body) if body else None
        except ValueError:
            decoded = None
        provider = self.server.provider
        provider._record(
            RecordedRequest(
                method="POST",
                path=self.path,
                headers={k.lower(): v for k, v in self.headers.items()},
                body=body,
                json=decoded,
            )
        )
        if self.path.endswith("/chat/completions"):
            shape = "openai"
        elif self.path.endswith("/messages"):
            shape = "anthropic"
        else:
            self._send_json(404, {"error": {"message": f"no route {self.path}"}})
            return
        model = str(decoded.get("model")) if isinstance(decoded, dict) else ""
        self._behave(provider._next(model), shape, model, len(body))

    def _send(self, status: int, payload: bytes, headers: Mapping[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("content-type", "application/json")
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.send_header("content-length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def _send_json(self, status: int, data: Any, headers: Mapping[str, str] | None = None) -> None:
        self._send(status, json.dumps(data).encode(), headers)

    def _behave(self, behaviour: Behaviour, shape: str, model: str, prompt_chars: int) -> None:
        if isinstance(behaviour, Raw):
            self._send(behaviour.status, behaviour.body, behaviour.headers)
        elif isinstance(behaviour, Reply):
            build = _anthropic_success if shape == "anthropic" else _openai_success
            self._send_json(200, build(behaviour, model, prompt_chars))
        else:
            self._fail(behaviour, shape, model, prompt_chars)

    def _fail(self, fail: Fail, shape: str, model: str, prompt_chars: int) -> None:
        kind = fail.kind
        if kind in _MESSAGES:
            status, error_type, message = _MESSAGES[kind]
            code = "model_not_found" if kind == "404" else None
            headers = {"retry-after": "1"} if kind == "429" else None
            self._send_json(
                status,
                _error_body(fail.shape or shape, error_type, message.format(model=model), code),
                headers,
            )
        elif kind in ("prompt_too_long", "max_tokens"):
            error_shape = fail.shape or shape
            message = _overflow_message(kind, error_shape, fail.limit)
            code = "context_length_exceeded" if kind == "prompt_too_long" else None
            self._send_json(400, _error_body(error_shape, "invalid_request_error", message, code))
        elif kind == "hang":
            if not self.server.provider._stopping.wait(fail.seconds):
                self._behave(Reply(), shape, model, prompt_chars)
        elif kind in ("empty", "blank"):
            self._behave(
                Reply(text="" if kind == "empty" else "  \n\t "), shape, model, prompt_chars
            )
        elif kind == "malformed":
            self._send(200, b'{"choices": [ this is not json')
        elif kind == "missing_fields":
            self._send_json(200, {"id": "x", "object": "chat.completion"})
        elif kind == "close":
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", "4096")
            self.end_headers()
            self.wfile.write(b'{"choices": [{"mess')
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
        else:
            raise ValueError(f"unknown failure kind {kind!r}")


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    provider: FakeProvider


class FakeProvider:
    """The fake endpoint; a context manager (see the module docstring)."""

    def __init__(self) -> None:
        self.default: Behaviour = Reply()
        self.requests: list[RecordedRequest] = []
        self._queue: list[Behaviour] = []
        self._by_model: dict[str, Behaviour] = {}
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # -- configuration -----------------------------------------------------

    def queue(self, *behaviours: Behaviour) -> None:
        """Answer the next requests with these, in order (then fall back to ``default``)."""
        with self._lock:
            self._queue.extend(behaviours)

    def on_model(self, model: str, behaviour: Behaviour) -> None:
        """Answer every request naming `model` with `behaviour` (before the queue)."""
        with self._lock:
            self._by_model[model] = behaviour

    def _next(self, model: str) -> Behaviour:
        with self._lock:
            if model in self._by_model:
                return self._by_model[model]
            if self._queue:
                return self._queue.pop(0)
            return self.default

    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(request)

    # -- lifecycle ---------------------------------------------------------

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("the fake provider is not running")
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def openai_base_url(self) -> str:
        return self.base_url + "/v1"

    @property
    def anthropic_base_url(self) -> str:
        return self.base_url

    def start(self) -> FakeProvider:
        server = _Server(("127.0.0.1", 0), _Handler)
        server.provider = self
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()  # wakes handlers that are "hanging"
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> FakeProvider:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on (for connection-refused tests)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def fake_provider() -> Iterator[FakeProvider]:
    """A running :class:`FakeProvider`, stopped after the test."""
    with FakeProvider() as provider:
        yield provider
