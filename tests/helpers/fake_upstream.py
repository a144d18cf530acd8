"""A fake model upstream as an ASGI app: OpenAI chat completions and Anthropic messages.

Drive it in-process (``httpx.ASGITransport(app=upstream, raise_app_exceptions=False)``)
or under uvicorn. Every request is recorded (path, headers, JSON body). Answers come
from a script, one per request, else ``default``:

* ``Say(text, tool=None)`` — a reply (``tool=(name, args)`` adds one tool call), JSON or
  SSE as the request asks, with usage computed from what the request sent
  (prompt tokens = exact token count of the messages it received);
* ``Error(status, body)`` — an error response with that JSON body;
* ``Cut(after)`` — a stream that stops (raises) after `after` events, mid-body.

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


@dataclass(frozen=True)
class Say:
    text: str
    tool: tuple[str, dict[str, Any]] | None = None


@dataclass(frozen=True)
class Error:
    status: int
    body: Mapping[str, Any]


@dataclass(frozen=True)
class Cut:
    after: int = 2


Behaviour = Say | Error | Cut


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

    def prompt_tokens(self) -> int:
        """Exact tokens of what this request sent (system + messages, as text)."""
        msgs = (
            [{"role": "system", "content": _text(self.json["system"])}]
            if self.json.get("system")
            else []
        )
        for m in self.messages:
            msgs.append({"role": m.get("role", "user"), "content": _text(m.get("content"))})
        return sum(count_messages(msgs)) if msgs else 0


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            json.dumps(p, sort_keys=True) if p.get("type") != "text" else p["text"] for p in content
        )
    return ""


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

    def queue(self, *behaviours: Behaviour) -> None:
        self.script.extend(behaviours)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        seen = Seen(
            scope["path"],
            {k.decode().lower(): v.decode() for k, v in scope["headers"]},
            json.loads(body or b"{}"),
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
            await self._answer(seen, send)
        finally:
            self.in_flight -= 1

    async def _answer(self, seen: Seen, send: Any) -> None:
        self.turn += 1
        behaviour = self.script.pop(0) if self.script else Say(f"answer {self.turn}")
        anthropic = seen.path.endswith("/messages")
        if isinstance(behaviour, Error):
            await _respond(
                send, behaviour.status, "application/json", json.dumps(behaviour.body).encode()
            )
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
                else _openai_json(seen, say, prompt, output)
            )
            await _respond(send, 200, "application/json", json.dumps(doc).encode())
            return
        events = (
            _anthropic_events(seen, say, prompt, output)
            if anthropic
            else _openai_events(seen, say, prompt, output)
        )
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"text/event-stream; charset=utf-8")],
            }
        )
        for i, event in enumerate(events):
            if isinstance(behaviour, Cut) and i == behaviour.after:
                raise RuntimeError("upstream connection cut mid-stream")
            await send({"type": "http.response.body", "body": event, "more_body": True})
            if self.event_delay:
                await anyio.sleep(self.event_delay)
        await send({"type": "http.response.body", "body": b"", "more_body": False})


async def _respond(send: Any, status: int, content_type: str, body: bytes) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", content_type.encode()), (b"x-request-id", b"req-fake")],
        }
    )
    await send({"type": "http.response.body", "body": body, "more_body": False})


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


__all__ = ["Cut", "Error", "FakeUpstream", "Say", "Seen"]
