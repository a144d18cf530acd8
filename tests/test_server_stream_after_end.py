"""What an upstream sends after its stream's end marker (session 32 review).

The reply is recorded just before the end marker is sent. A stream that is then cut,
runs one endless event past the cap, or sends an event that cannot be read ended with
the face's error event "Nothing of its answer was recorded; send the turn again" (and,
when cut, the half event received): a client that resent would record the turn twice.
Now the stream ends cleanly after the end marker, and the server's log says why.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from test_server_upstream_transport import _SSE, _Chunks, _streamed

pytestmark = pytest.mark.anyio


def _event(data: dict[str, object] | str, name: str | None = None) -> bytes:
    text = data if isinstance(data, str) else json.dumps(data)
    return (f"event: {name}\n" if name else "").encode() + f"data: {text}\n\n".encode()


def _anthropic_event(data: dict[str, object]) -> bytes:
    return _event(data, str(data["type"]))


_MESSAGE = {"type": "message", "role": "assistant", "content": [], "model": "m", "id": "msg_1"}
_ENDED = {
    "openai": b"".join(
        [
            _event({"choices": [{"index": 0, "delta": {"role": "assistant", "content": "hi"}}]}),
            _event({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
            _event("[DONE]"),
        ]
    ),
    "responses": _event(
        {
            "type": "response.completed",
            "response": {
                "status": "completed",
                "output": [
                    {
                        "type": "message",
                        "role": "assistant",
                        "content": [{"type": "output_text", "text": "hi"}],
                    }
                ],
            },
        },
        "response.completed",
    ),
    "anthropic": b"".join(
        _anthropic_event(data)
        for data in (
            {"type": "message_start", "message": {**_MESSAGE, "usage": {"input_tokens": 3}}},
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            },
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": "hi"},
            },
            {"type": "content_block_stop", "index": 0},
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn"},
                "usage": {"output_tokens": 1},
            },
            {"type": "message_stop"},
        )
    ),
}
_END_MARKER = {"openai": "[DONE]", "responses": "response.completed", "anthropic": "message_stop"}


class _Then(httpx.AsyncByteStream):
    """`head`, then what `tail` gives, then (with `cut`) the error of a peer that left."""

    def __init__(self, head: bytes, tail: httpx.AsyncByteStream | None, cut: bool) -> None:
        self.head, self.tail, self.cut = head, tail, cut

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield self.head
        if self.tail is not None:
            async for chunk in self.tail:
                yield chunk
        if self.cut:
            raise httpx.RemoteProtocolError("peer closed connection without sending complete body")


def _tails() -> dict[str, tuple[bytes, httpx.AsyncByteStream | None, bool]]:
    return {
        "cut": (b'data: {"half', None, True),
        "cap": (b"", _Chunks(b"x" * 16 * 1024, 10_000), False),
        "garbage": (b"data: {not json\n\n", None, False),
    }


@pytest.mark.parametrize("after", ["cut", "cap", "garbage"])
@pytest.mark.parametrize("face", list(_ENDED))
async def test_what_comes_after_a_recorded_reply_ends_the_stream_cleanly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, face: str, after: str
) -> None:
    monkeypatch.setattr("ctxledger.server.proxy.MAX_EVENT_BYTES", 64 * 1024)
    extra, tail, cut = _tails()[after]
    stream = _Then(_ENDED[face] + extra, tail, cut)
    response, roles = await _streamed(
        tmp_path, face, lambda request: httpx.Response(200, headers=_SSE, stream=stream)
    )
    assert roles == ["user", "assistant"]
    text = response.text
    assert _END_MARKER[face] in text and "Nothing of its answer was recorded" not in text, text
    assert "half" not in text and "not json" not in text
    assert len(response.content) < len(_ENDED[face]) + 64  # (none of the endless event)


@pytest.mark.parametrize("face", list(_ENDED))
async def test_an_endless_event_before_the_end_is_cut_with_the_error_event(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, face: str
) -> None:
    monkeypatch.setattr("ctxledger.server.proxy.MAX_EVENT_BYTES", 64 * 1024)
    endless = _Chunks(b"x" * 16 * 1024, 10_000)
    response, roles = await _streamed(
        tmp_path, face, lambda request: httpx.Response(200, headers=_SSE, stream=endless)
    )
    assert endless.taken <= 24 and roles == ["user"]  # (Responses: a 256 KiB peek first)
    assert "runs past 65,536 bytes without ending" in response.text
    assert "Nothing of its answer was recorded" in response.text


def _tool_stream(partial_json: str, stop: str = "max_tokens") -> bytes:
    block = {"type": "tool_use", "id": "t1", "name": "f", "input": {}}
    delta = {"type": "input_json_delta", "partial_json": partial_json}
    return b"".join(
        _anthropic_event(data)
        for data in (
            {"type": "message_start", "message": {**_MESSAGE, "usage": {"input_tokens": 3}}},
            {"type": "content_block_start", "index": 0, "content_block": block},
            {"type": "content_block_delta", "index": 0, "delta": delta},
            {"type": "content_block_stop", "index": 0},
            {"type": "message_delta", "delta": {"stop_reason": stop}, "usage": {}},
            {"type": "message_stop"},
        )
    )


@pytest.mark.parametrize("partial", ["5", '"text"', "[1]", "null"])
async def test_a_streamed_tool_use_whose_input_is_json_but_no_object_is_a_bad_reply(
    tmp_path: Path, partial: str
) -> None:
    """As unstreamed (a 502 there): the Messages API's tool_use input is an object."""
    stream = _tool_stream(partial)
    response, roles = await _streamed(
        tmp_path, "anthropic", lambda request: httpx.Response(200, headers=_SSE, content=stream)
    )
    assert "a tool_use's input must be an object" in response.text and roles == ["user"]


@pytest.mark.parametrize(("stop", "recorded"), [("tool_use", True), ("max_tokens", False)])
async def test_a_streamed_tool_use_cut_mid_input_is_passed_on(
    tmp_path: Path, stop: str, recorded: bool
) -> None:
    """Fragments that are no JSON are what the model wrote: passed on, and recorded raw;
    when max_tokens cut them the reply is not recorded (session 42: no agent runs a cut
    call, Hermes asks again; ``test_server_unusable_replies.py``)."""
    stream = _tool_stream('{"path": "src/ap', stop)
    response, roles = await _streamed(
        tmp_path, "anthropic", lambda request: httpx.Response(200, headers=_SSE, content=stream)
    )
    assert "message_stop" in response.text
    assert roles == (["user", "assistant"] if recorded else ["user"])
