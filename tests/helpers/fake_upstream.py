"""A fake model upstream as an ASGI app: OpenAI chat completions, OpenAI Responses and
Anthropic messages.

Drive it in-process (``httpx.ASGITransport(app=upstream, raise_app_exceptions=False)``)
or under uvicorn. Every request is recorded (path, headers, JSON body). Answers come
from a script, one per request, else ``default``:

* ``Say(text, tool=None, reasoning=None)`` — a reply (``tool=(name, args)`` adds one tool
  call; ``reasoning`` a Responses reasoning item with that summary), JSON or SSE as the
  request asks, with usage computed from what the request sent (prompt tokens = exact
  token count of the messages, or Responses input items, it received);
* ``Error(status, body)`` — an error response with that JSON body;
* ``Cut(after)`` — a stream that stops (raises) after `after` events, mid-body;
* ``Raw(chunks, content_type)`` — a 200 whose body is exactly these bytes (sent one
  chunk at a time), whatever the request asked: a server answering garbage;
* ``Failed(code, message)`` — Responses: a 200 stream that opens and then reports the
  error as a ``response.failed`` event (how the API may report an overflow in a
  stream); without ``stream``, a 400 JSON error.

A body that is not JSON is answered a 400 JSON error, as a provider would (not recorded,
no script step taken).

``delay`` (seconds) makes every answer wait (to overlap requests), ``event_delay``
pauses between the events of a stream; ``in_flight`` and
``max_in_flight`` count concurrent requests.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio

from ctxledger.tokens import count_messages
from helpers.asgi import request_body, respond, serve_lifespan


@dataclass(frozen=True)
class Say:
    text: str
    tool: tuple[str, dict[str, Any]] | None = None
    reasoning: str | None = None


@dataclass(frozen=True)
class Error:
    status: int
    body: Mapping[str, Any]


@dataclass(frozen=True)
class Cut:
    after: int = 2


@dataclass(frozen=True)
class Failed:
    code: str
    message: str

    def body(self) -> dict[str, Any]:
        return {
            "error": {
                "message": self.message,
                "type": "invalid_request_error",
                "param": None,
                "code": self.code,
            }
        }


@dataclass(frozen=True)
class Raw:
    chunks: tuple[bytes, ...]
    content_type: str = "application/json"


Behaviour = Say | Error | Cut | Failed | Raw


def raw_responses_stream(response: dict[str, Any]) -> Raw:
    """A Responses API `response` as the stream an SDK reads: created, each output item
    done, then its terminal event (``response.incomplete`` or ``response.completed``)."""
    start = {**response, "status": "in_progress", "output": [], "usage": None}
    events: list[dict[str, Any]] = [{"type": "response.created", "response": start}]
    for i, item in enumerate(response["output"]):
        events.append({"type": "response.output_item.done", "output_index": i, "item": item})
    done = "response.incomplete" if response["status"] == "incomplete" else "response.completed"
    events.append({"type": done, "response": response})
    raw = [
        f"event: {e['type']}\ndata: {json.dumps({**e, 'sequence_number': n})}\n\n".encode()
        for n, e in enumerate(events)
    ]
    return Raw(tuple(raw), "text/event-stream")


@dataclass
class Seen:
    path: str
    headers: dict[str, str]
    json: dict[str, Any]
    #: the caller's (host, port): one per connection (a server process keeps its own)
    peer: Any = None

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.json.get("messages") or [])

    @property
    def items(self) -> list[dict[str, Any]]:
        """A Responses request's input items."""
        raw = self.json.get("input") or []
        return [{"role": "user", "content": raw}] if isinstance(raw, str) else list(raw)

    def prompt_tokens(self) -> int:
        """Exact tokens of what this request sent (system + messages, as text)."""
        if self.path.endswith("/responses"):
            return responses_prompt_tokens(self.json.get("instructions"), self.items)
        msgs = (
            [{"role": "system", "content": _text(self.json["system"])}]
            if self.json.get("system")
            else []
        )
        for m in self.messages:
            msgs.append({"role": m.get("role", "user"), "content": _text(m.get("content"))})
        return sum(count_messages(msgs)) if msgs else 0


_TEXT_PARTS = ("text", "input_text", "output_text")


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            p["text"] if p.get("type") in _TEXT_PARTS else json.dumps(p, sort_keys=True)
            for p in content
        )
    return ""


def responses_prompt_tokens(instructions: str | None, items: list[dict[str, Any]]) -> int:
    """Exact tokens of Responses input items read as text (what the fake charges for)."""
    msgs = [{"role": "system", "content": instructions}] if instructions else []
    for item in items:
        kind = item.get("type", "message")
        if kind == "message":
            text = _text(item.get("content"))
        elif kind == "function_call":
            text = f"{item.get('name')}({item.get('arguments')})"
        elif kind == "function_call_output":
            text = _text(item.get("output"))
        else:
            text = json.dumps(item, sort_keys=True)
        msgs.append({"role": "user", "content": text})
    return sum(count_messages(msgs)) if msgs else 0


@dataclass
class FakeUpstream:
    script: list[Behaviour] = field(default_factory=list)
    requests: list[Seen] = field(default_factory=list)
    delay: float = 0.0
    #: pause between the events of a stream (a model that writes slowly)
    event_delay: float = 0.0
    in_flight: int = 0
    max_in_flight: int = 0
    turn: int = 0
    #: called with each request before it is answered (a test's own checks)
    on_request: Callable[[Seen], None] | None = None
    #: headers added to every answer's start (an upstream's own headers)
    extra_headers: list[tuple[bytes, bytes]] = field(default_factory=list)

    def queue(self, *behaviours: Behaviour) -> None:
        self.script.extend(behaviours)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await serve_lifespan(receive, send)
            return
        body = await request_body(receive)
        try:
            sent = json.loads(body or b"{}")
        except ValueError:  # (a provider's 400: a 500 with no body hid the proxy's own)
            error = {"error": {"message": "the fake upstream: the body is not JSON"}}
            await _respond(send, 400, "application/json", json.dumps(error).encode())
            return
        seen = Seen(
            scope["path"],
            {k.decode().lower(): v.decode() for k, v in scope["headers"]},
            sent,
            tuple(scope["client"]) if scope.get("client") else None,
        )
        self.requests.append(seen)
        if self.on_request is not None:
            self.on_request(seen)
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if self.delay:
                await anyio.sleep(self.delay)
            await self._answer(seen, _adding(send, self.extra_headers))
        finally:
            self.in_flight -= 1

    async def _answer(self, seen: Seen, send: Any) -> None:
        self.turn += 1
        behaviour = self.script.pop(0) if self.script else Say(f"answer {self.turn}")
        anthropic = seen.path.endswith("/messages")
        responses = seen.path.endswith("/responses")
        if isinstance(behaviour, Failed) and not seen.json.get("stream"):
            behaviour = Error(400, behaviour.body())
        if isinstance(behaviour, Error):
            await _respond(
                send, behaviour.status, "application/json", json.dumps(behaviour.body).encode()
            )
            return
        if isinstance(behaviour, Failed):
            await _stream(send, failed_events(seen, behaviour, self.turn), self.event_delay)
            return
        if isinstance(behaviour, Raw):
            await _raw(send, behaviour)
            return
        say = (
            behaviour
            if isinstance(behaviour, Say)
            else Say(f"cut answer {self.turn} that is long enough")
        )
        prompt = seen.prompt_tokens()
        output = max(1, len(say.text) // 4)
        if not seen.json.get("stream"):
            doc = (
                _anthropic_json(seen, say, prompt, output)
                if anthropic
                else responses_json(seen, say, prompt, output, self.turn)
                if responses
                else _openai_json(seen, say, prompt, output)
            )
            await _respond(send, 200, "application/json", json.dumps(doc).encode())
            return
        events = (
            _anthropic_events(seen, say, prompt, output)
            if anthropic
            else responses_events(seen, say, prompt, output, self.turn)
            if responses
            else _openai_events(seen, say, prompt, output)
        )
        cut = isinstance(behaviour, Cut) and behaviour.after < len(events)
        if isinstance(behaviour, Cut):
            events = events[: behaviour.after]
        await _stream(send, events, self.event_delay, cut=cut)


def _adding(send: Any, headers: list[tuple[bytes, bytes]]) -> Any:
    """`send` with `headers` added to the response's start."""
    if not headers:
        return send

    async def sending(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*message.get("headers", []), *headers]}
        await send(message)

    return sending


async def _stream(send: Any, events: list[bytes], delay: float, *, cut: bool = False) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", b"text/event-stream; charset=utf-8")],
        }
    )
    for event in events:
        await send({"type": "http.response.body", "body": event, "more_body": True})
        if delay:
            await anyio.sleep(delay)
    if cut:
        raise RuntimeError("upstream connection cut mid-stream")
    await send({"type": "http.response.body", "body": b"", "more_body": False})


async def _raw(send: Any, raw: Raw) -> None:
    headers = [(b"content-type", raw.content_type.encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    for chunk in raw.chunks:
        await send({"type": "http.response.body", "body": chunk, "more_body": True})
    await send({"type": "http.response.body", "body": b"", "more_body": False})


async def _respond(send: Any, status: int, content_type: str, body: bytes) -> None:
    await respond(send, status, content_type, body, [(b"x-request-id", b"req-fake")])


def _openai_usage(prompt: int, output: int) -> dict[str, Any]:
    return {
        "prompt_tokens": prompt,
        "completion_tokens": output,
        "total_tokens": prompt + output,
        "prompt_tokens_details": {"cached_tokens": 0},
    }


def _openai_json(seen: Seen, say: Say, prompt: int, output: int) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": say.text}
    finish = "stop"
    if say.tool:
        message["tool_calls"] = [
            {
                "id": f"call_{len(seen.messages)}_{say.tool[0]}",
                "type": "function",
                "function": {"name": say.tool[0], "arguments": json.dumps(say.tool[1])},
            }
        ]
        finish = "tool_calls"
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 0,
        "model": seen.json.get("model"),
        "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
        "usage": _openai_usage(prompt, output),
    }


def _sse(data: Any, event: str | None = None) -> bytes:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(data) if not isinstance(data, str) else data}\n\n".encode()


def _openai_events(seen: Seen, say: Say, prompt: int, output: int) -> list[bytes]:
    base = {
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": seen.json.get("model"),
    }

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        return _sse({**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})

    out = [chunk({"role": "assistant", "content": ""})]
    words = say.text.split(" ")
    out += [chunk({"content": w if i == 0 else " " + w}) for i, w in enumerate(words)]
    finish = "stop"
    if say.tool:
        call_id = f"call_{len(seen.messages)}_{say.tool[0]}"
        args = json.dumps(say.tool[1])
        out.append(
            chunk(
                {
                    "tool_calls": [
                        {
                            "index": 0,
                            "id": call_id,
                            "type": "function",
                            "function": {"name": say.tool[0], "arguments": args[:5]},
                        }
                    ]
                }
            )
        )
        out.append(chunk({"tool_calls": [{"index": 0, "function": {"arguments": args[5:]}}]}))
        finish = "tool_calls"
    out.append(chunk({}, finish))
    if (seen.json.get("stream_options") or {}).get("include_usage"):
        out.append(_sse({**base, "choices": [], "usage": _openai_usage(prompt, output)}))
    out.append(b"data: [DONE]\n\n")
    return out


def _anthropic_json(seen: Seen, say: Say, prompt: int, output: int) -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "text", "text": say.text}]
    if say.tool:
        content.append(
            {
                "type": "tool_use",
                "id": f"toolu_{len(seen.messages)}",
                "name": say.tool[0],
                "input": say.tool[1],
            }
        )
    return {
        "id": "msg_fake",
        "type": "message",
        "role": "assistant",
        "model": seen.json.get("model"),
        "content": content,
        "stop_reason": "tool_use" if say.tool else "end_turn",
        "stop_sequence": None,
        "usage": {
            "input_tokens": prompt,
            "output_tokens": output,
            "cache_read_input_tokens": 0,
            "cache_creation_input_tokens": 0,
        },
    }


def _anthropic_events(seen: Seen, say: Say, prompt: int, output: int) -> list[bytes]:
    message = {
        "id": "msg_fake",
        "type": "message",
        "role": "assistant",
        "model": seen.json.get("model"),
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {
            "input_tokens": prompt,
            "output_tokens": 1,
            "cache_read_input_tokens": 0,
            "cache_creation_input_tokens": 0,
        },
    }
    out = [
        _sse({"type": "message_start", "message": message}, "message_start"),
        _sse(
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            },
            "content_block_start",
        ),
    ]
    for i, word in enumerate(say.text.split(" ")):
        delta = {"type": "text_delta", "text": word if i == 0 else " " + word}
        out.append(
            _sse({"type": "content_block_delta", "index": 0, "delta": delta}, "content_block_delta")
        )
    out.append(_sse({"type": "content_block_stop", "index": 0}, "content_block_stop"))
    if say.tool:
        out += _anthropic_tool_events(seen, say.tool)
    stop = "tool_use" if say.tool else "end_turn"
    out.append(
        _sse(
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": output},
            },
            "message_delta",
        )
    )
    out.append(_sse({"type": "message_stop"}, "message_stop"))
    return out


def _anthropic_tool_events(seen: Seen, tool: tuple[str, dict[str, Any]]) -> list[bytes]:
    """A tool_use block (index 1) whose input arrives in two JSON pieces."""
    block = {"type": "tool_use", "id": f"toolu_{len(seen.messages)}", "name": tool[0], "input": {}}
    args = json.dumps(tool[1])
    out = [
        _sse(
            {"type": "content_block_start", "index": 1, "content_block": block},
            "content_block_start",
        )
    ]
    for piece in (args[:4], args[4:]):
        delta = {"type": "input_json_delta", "partial_json": piece}
        out.append(
            _sse({"type": "content_block_delta", "index": 1, "delta": delta}, "content_block_delta")
        )
    out.append(_sse({"type": "content_block_stop", "index": 1}, "content_block_stop"))
    return out


# --------------------------------------------------------------------------- Responses


def _responses_output(seen: Seen, say: Say, turn: int) -> list[dict[str, Any]]:
    """The output items of a reply: reasoning, the message, a function call (as the API orders them)."""
    out: list[dict[str, Any]] = []
    if say.reasoning is not None:
        item: dict[str, Any] = {
            "id": f"rs_{turn}",
            "type": "reasoning",
            "summary": [{"type": "summary_text", "text": say.reasoning}],
        }
        if "reasoning.encrypted_content" in (seen.json.get("include") or []):
            item["encrypted_content"] = f"gAAAA-sealed-{turn}"
        out.append(item)
    out.append(
        {
            "id": f"msg_{turn}",
            "type": "message",
            "role": "assistant",
            "status": "completed",
            "content": [
                {"type": "output_text", "text": say.text, "annotations": [], "logprobs": []}
            ],
        }
    )
    if say.tool:
        out.append(
            {
                "id": f"fc_{turn}",
                "type": "function_call",
                "status": "completed",
                "call_id": f"call_{len(seen.items)}_{say.tool[0]}",
                "name": say.tool[0],
                "arguments": json.dumps(say.tool[1]),
            }
        )
    return out


def _responses_usage(prompt: int, output: int, reasoning: int) -> dict[str, Any]:
    return {
        "input_tokens": prompt,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": output + reasoning,
        "output_tokens_details": {"reasoning_tokens": reasoning},
        "total_tokens": prompt + output + reasoning,
    }


def _response(
    seen: Seen, turn: int, status: str, output: list[Any], usage: dict[str, Any] | None
) -> dict[str, Any]:
    body = seen.json
    return {
        "id": f"resp_fake{turn}",
        "object": "response",
        "created_at": 1764000000 + turn,
        "status": status,
        "background": False,
        "error": None,
        "incomplete_details": None,
        "instructions": body.get("instructions"),
        "max_output_tokens": body.get("max_output_tokens"),
        "model": body.get("model"),
        "output": output,
        "parallel_tool_calls": True,
        "previous_response_id": None,
        "reasoning": {"effort": None, "summary": None},
        "store": body.get("store", True),
        "temperature": 1.0,
        "text": {"format": {"type": "text"}},
        "tool_choice": "auto",
        "tools": body.get("tools") or [],
        "top_p": 1.0,
        "truncation": "disabled",
        "usage": usage,
        "metadata": {},
    }


def responses_json(seen: Seen, say: Say, prompt: int, output: int, turn: int) -> dict[str, Any]:
    reasoning = max(1, len(say.reasoning) // 4) if say.reasoning is not None else 0
    items = _responses_output(seen, say, turn)
    return _response(seen, turn, "completed", items, _responses_usage(prompt, output, reasoning))


def responses_events(seen: Seen, say: Say, prompt: int, output: int, turn: int) -> list[bytes]:
    """The named events of a streamed response, as the Responses API sends them."""
    done = responses_json(seen, say, prompt, output, turn)
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": _response(seen, turn, "in_progress", [], None)},
        {
            "type": "response.in_progress",
            "response": _response(seen, turn, "in_progress", [], None),
        },
    ]
    for index, item in enumerate(done["output"]):
        events += _item_events(index, item)
    events.append({"type": "response.completed", "response": done})
    return [
        _sse({**event, "sequence_number": seq}, event["type"]) for seq, event in enumerate(events)
    ]


def failed_events(seen: Seen, failed: Failed, turn: int) -> list[bytes]:
    """A stream that opens and fails before any output (response.failed with the error)."""
    response = _response(seen, turn, "failed", [], None)
    response["error"] = {"code": failed.code, "message": failed.message}
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": _response(seen, turn, "in_progress", [], None)},
        {
            "type": "response.in_progress",
            "response": _response(seen, turn, "in_progress", [], None),
        },
        {"type": "response.failed", "response": response},
    ]
    return [
        _sse({**event, "sequence_number": seq}, event["type"]) for seq, event in enumerate(events)
    ]


def _item_events(index: int, item: dict[str, Any]) -> list[dict[str, Any]]:
    at = {"output_index": index, "item_id": item["id"]}
    if item["type"] == "reasoning":
        text = item["summary"][0]["text"]
        added = {**item, "summary": []}
        middle = [
            {"type": "response.reasoning_summary_text.delta", **at, "summary_index": 0, "delta": t}
            for t in (text[:3], text[3:])
        ]
    elif item["type"] == "function_call":
        added = {**item, "status": "in_progress", "arguments": ""}
        args = item["arguments"]
        middle = [
            {"type": "response.function_call_arguments.delta", **at, "delta": piece}
            for piece in (args[:5], args[5:])
        ]
        middle.append(
            {
                "type": "response.function_call_arguments.done",
                **at,
                "name": item["name"],
                "arguments": args,
            }
        )
    else:
        added = {**item, "status": "in_progress", "content": []}
        part = item["content"][0]
        at = {**at, "content_index": 0}
        middle = [
            {"type": "response.content_part.added", **at, "part": {**part, "text": ""}},
            *(
                {
                    "type": "response.output_text.delta",
                    **at,
                    "delta": w if i == 0 else " " + w,
                    "logprobs": [],
                }
                for i, w in enumerate(part["text"].split(" "))
            ),
            {"type": "response.output_text.done", **at, "text": part["text"], "logprobs": []},
            {"type": "response.content_part.done", **at, "part": part},
        ]
    return [
        {"type": "response.output_item.added", "output_index": index, "item": added},
        *middle,
        {"type": "response.output_item.done", "output_index": index, "item": item},
    ]


__all__ = [
    "Cut",
    "Error",
    "Failed",
    "FakeUpstream",
    "Raw",
    "Say",
    "Seen",
    "request_body",
    "responses_events",
    "responses_json",
    "responses_prompt_tokens",
    "serve_lifespan",
]
