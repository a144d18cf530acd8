"""An upstream that answers 200 with something that is not the reply asked for.

Review (session 26): a non-JSON body, JSON that is not an object, or ``choices`` /
``output`` of the wrong type was forwarded as a success (or a 500 with a Python
message) and a streamed event of the wrong shape killed the stream with a traceback.
Now a non-streamed one is a 502 ``bad_upstream_reply`` naming what was wrong, a
streamed one ends with an error event in the face's shape, and in both cases nothing
of the answer is recorded: the ledger keeps the user's turn, as after any upstream
failure, and the client's resend continues from it.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest
from helpers.fake_upstream import Raw
from helpers.server_rig import Rig, rig

from ctxledger.events import MessageAppended, UsageReported

pytestmark = pytest.mark.anyio

CHAT = {"model": "m", "messages": [{"role": "user", "content": "hello"}]}
RESPONSES = {"model": "m", "input": "hello"}
ANTHROPIC = {"model": "m", "max_tokens": 64, "messages": [{"role": "user", "content": "hello"}]}
SSE = "text/event-stream"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _recorded(r: Rig) -> list[Any]:
    return [rec.event for rec in r.service.ledger.store.read_all()]


def _roles(r: Rig) -> list[str]:
    return [e.message["role"] for e in _recorded(r) if isinstance(e, MessageAppended)]


def _usages(r: Rig) -> int:
    return sum(isinstance(e, UsageReported) for e in _recorded(r))


async def _refused(r: Rig, path: str, request: dict[str, Any], body: bytes, says: str) -> Any:
    """Post `request` while the upstream answers `body`: a 502 ``bad_upstream_reply``
    saying `says`, with the user's turn recorded and nothing of the reply (the error)."""
    r.upstream.queue(Raw((body,)))
    response = await r.http.post(path, json=request)
    assert response.status_code == 502, response.text
    error = response.json()["error"]
    assert error["code"] == "bad_upstream_reply" and says in error["message"]
    assert _roles(r) == ["user"] and _usages(r) == 0
    return error


def _events(*data: Any) -> tuple[bytes, ...]:
    return tuple(f"data: {d if isinstance(d, str) else json.dumps(d)}\n\n".encode() for d in data)


_STOP = {"choices": [{"index": 0, "delta": {"content": "hi"}, "finish_reason": "stop"}]}


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (b"<html>gateway</html>", "the body is not JSON"),
        (b"[1, 2]", "the body must be a JSON object, got a list"),
        (b'{"choices": 5}', "'choices' must be a list, got an integer"),
        (b'{"choices": [5]}', "choices[0] must be a JSON object"),
        (b'{"choices": [{"message": "x"}]}', "choices[0].message must be a JSON object"),
        (
            b'{"choices": [{"message": {"content": "x", "tool_calls": [{"function": 5}]}}]}',
            "tool_calls[0].function must be a JSON object",
        ),
    ],
)
async def test_a_malformed_chat_reply_is_a_502_and_records_no_reply(
    tmp_path: Path, body: bytes, says: str
) -> None:
    async with rig(tmp_path) as r:
        error = await _refused(r, "/v1/chat/completions", CHAT, body, says)
        assert "Nothing of its answer was recorded" in error["message"]
        # the client sends the turn again: it continues from what was recorded
        again = await r.http.post("/v1/chat/completions", json=CHAT)
        assert again.status_code == 200 and _roles(r) == ["user", "assistant"]


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (b"not json", "the body is not JSON"),
        (b'"a string"', "the body must be a JSON object, got a string"),
        (b'{"status": "completed", "output": 5}', "'output' must be a list, got an integer"),
        (b'{"status": "completed", "output": [5]}', "'output': item 0 must be an object"),
        (b'{"status": ["completed"], "output": []}', "'status' must be a string"),
        # session 32: forwarded as a 200 the ledger then refused ("reply not recorded")
        (
            b'{"output": [{"type": "function_call", "call_id": "c", "name": "f", '
            b'"arguments": {"a": 1}}]}',
            "'output': item 0: function_call arguments must be a string, got an object",
        ),
        (
            b'{"output": [{"type": "function_call", "call_id": "c", "name": "f", "arguments": 5}]}',
            "'output': item 0: function_call arguments must be a string, got an integer",
        ),
        (
            b'{"output": [{"type": "function_call", "call_id": 7, "name": "f", "arguments": ""}]}',
            "'output': item 0: function_call without a string call_id",
        ),
    ],
)
async def test_a_malformed_response_is_a_502_and_records_no_reply(
    tmp_path: Path, body: bytes, says: str
) -> None:
    async with rig(tmp_path) as r:
        await _refused(r, "/v1/responses", RESPONSES, body, says)


async def test_a_malformed_anthropic_reply_is_a_502_and_records_no_reply(tmp_path: Path) -> None:
    async with rig(tmp_path, api="anthropic") as r:
        body = b'{"type": "message", "content": 5}'
        says = "'content' must be a list or a string, got an integer"
        error = await _refused(r, "/v1/messages", ANTHROPIC, body, says)
        assert error["type"] == "api_error"


@pytest.mark.parametrize(
    ("events", "says"),
    [
        (_events("{not json"), "a stream event's data is not JSON"),
        (_events("[1]"), "a stream event's data must be a JSON object, got a list"),
        (_events({"choices": 5}), "a chunk's 'choices' must be a list"),
        (_events({"choices": [{"delta": 5}]}), "a chunk's delta must be a JSON object"),
        (
            _events({"choices": [{"delta": {"tool_calls": [{"index": [1]}]}}]}),
            "tool call index must be a non-negative integer",
        ),
        (
            _events({"choices": [{"delta": {"tool_calls": [{"function": {"name": 5}}]}}]}),
            "function.name must be a string",
        ),
    ],
)
async def test_a_malformed_chat_stream_ends_with_an_error_event_and_records_no_reply(
    tmp_path: Path, events: tuple[bytes, ...], says: str
) -> None:
    first = _events({"choices": [{"index": 0, "delta": {"content": "partial"}}]})
    async with rig(tmp_path) as r:
        r.upstream.queue(Raw(first + events + _events(_STOP, "[DONE]"), SSE))
        response = await r.http.post("/v1/chat/completions", json={**CHAT, "stream": True})
        assert response.status_code == 200
        blocks = response.text.split("\n\n")
        assert blocks[0] == first[0].decode().strip() and blocks[-1] == ""  # then a clean end
        error = json.loads(blocks[-2].removeprefix("data: "))["error"]
        assert error["code"] == "bad_upstream_reply" and says in error["message"]
        assert "[DONE]" not in response.text
        assert _roles(r) == ["user"] and _usages(r) == 0


async def test_the_openai_sdk_raises_the_stream_error_event(tmp_path: Path) -> None:
    async with rig(tmp_path) as r:
        r.upstream.queue(Raw(_events({"choices": [{"delta": 5}]}), SSE))
        stream = await r.openai().chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hello"}], stream=True
        )
        with pytest.raises(openai.APIError, match="delta must be a JSON object"):
            async for _ in stream:
                pass
        assert _roles(r) == ["user"]


def _responses_events(*data: Any) -> tuple[bytes, ...]:
    return tuple(
        f"event: {d.get('type')}\ndata: {json.dumps(d)}\n\n".encode()
        if isinstance(d, dict)
        else f"data: {d}\n\n".encode()
        for d in data
    )


_CREATED = {"type": "response.created", "response": {"id": "resp_1", "status": "in_progress"}}


@pytest.mark.parametrize(
    ("event", "says"),
    [
        ("{bad", "a stream event's data is not JSON"),
        ({"type": "response.output_item.done", "item": 5}, "'item' must be a JSON object"),
        (
            {"type": "response.completed", "response": {"status": "completed", "output": 5}},
            "response.completed's output must be a list",
        ),
        (
            {"type": "response.completed", "response": {"status": "completed", "output": [5]}},
            "'output': item 0 must be an object",
        ),
        (
            {
                "type": "response.completed",
                "response": {
                    "status": "completed",
                    "output": [
                        {"type": "function_call", "call_id": "c", "name": "f", "arguments": None}
                    ],
                },
            },
            "'output': item 0: function_call arguments must be a string, got null",
        ),
    ],
)
async def test_a_malformed_responses_stream_ends_with_an_error_event_and_records_no_reply(
    tmp_path: Path, event: Any, says: str
) -> None:
    async with rig(tmp_path) as r:
        r.upstream.queue(Raw(_responses_events(_CREATED, event), SSE))
        stream = await r.openai().responses.create(model="m", input="hello", stream=True)
        with pytest.raises(openai.APIError, match=says.replace("[", r"\[")) as caught:
            async for _ in stream:
                pass
        assert caught.value.code == "bad_upstream_reply"
        assert _roles(r) == ["user"] and _usages(r) == 0


async def test_a_malformed_anthropic_stream_ends_with_an_error_event(tmp_path: Path) -> None:
    start = {"type": "message_start", "message": {"id": "m", "content": [], "usage": {}}}
    bad = {"type": "content_block_delta", "index": "zero", "delta": {"type": "text_delta"}}
    body = tuple(f"event: {d['type']}\ndata: {json.dumps(d)}\n\n".encode() for d in (start, bad))
    async with rig(tmp_path, api="anthropic") as r:
        r.upstream.queue(Raw(body, SSE))
        response = await r.http.post("/v1/messages", json={**ANTHROPIC, "stream": True})
        assert response.status_code == 200
        assert response.text.endswith("\n\n") and "event: error\n" in response.text
        r.upstream.queue(Raw(body, SSE))
        with pytest.raises(anthropic.APIStatusError, match="index must be a non-negative"):
            async with r.anthropic().messages.stream(**ANTHROPIC) as stream:
                async for _ in stream:
                    pass
        assert _roles(r) == ["user"]


@pytest.mark.parametrize(
    ("value", "shown"), [('"a text"', "a string"), ("[1]", "a list"), ("5", "an integer")]
)
async def test_an_anthropic_tool_input_that_is_no_object_is_a_502(
    tmp_path: Path, value: str, shown: str
) -> None:
    # session 32: a string input was recorded as the call's arguments '"a text"'
    async with rig(tmp_path, api="anthropic") as r:
        body = (
            '{"type": "message", "role": "assistant", "model": "m", "content": [{"type": '
            f'"tool_use", "id": "tu", "name": "f", "input": {value}}}], '
            '"usage": {"input_tokens": 5, "output_tokens": 1}}'
        ).encode()
        says = f"content[0].input of a tool_use must be an object, got {shown}"
        await _refused(r, "/v1/messages", ANTHROPIC, body, says)


@pytest.mark.parametrize(
    ("value", "shown"), [("NaN", "nan"), ("1e999", "inf"), ("-Infinity", "-inf")]
)
async def test_an_anthropic_tool_input_json_cannot_carry_is_a_502_not_a_null(
    tmp_path: Path, value: str, shown: str
) -> None:
    # Python servers write NaN and Infinity; json.loads reads them (and 1e999 as inf): the
    # call was recorded with its arguments as '{"a":null}', not what the model asked for
    async with rig(tmp_path, api="anthropic") as r:
        body = (
            '{"type": "message", "role": "assistant", "model": "m", "content": [{"type": '
            f'"tool_use", "id": "tu", "name": "f", "input": {{"a": {value}}}}}], '
            '"usage": {"input_tokens": 5, "output_tokens": 1}}'
        ).encode()
        says = f"tool-call arguments.a is {shown}: JSON has no NaN or infinity"
        await _refused(r, "/v1/messages", ANTHROPIC, body, says)


@pytest.mark.parametrize(
    "usage",
    [
        {"prompt_tokens": -5, "completion_tokens": 1},
        {"prompt_tokens": "12", "completion_tokens": 1},
        {"prompt_tokens": 10**30, "completion_tokens": 1},
        {"surprise": 1},
        [1, 2],
        # Python servers write NaN and Infinity (json.dumps allows them): recorded with
        # null in their place before, the report read back was not the one received
        {"prompt_tokens": 5, "completion_tokens": 1, "cost": math.nan},
        {"prompt_tokens": 5, "completion_tokens": 1, "details": {"x": -math.inf}},
    ],
)
async def test_an_upstream_usage_that_is_malformed_is_dropped_and_the_reply_kept(
    tmp_path: Path, usage: Any
) -> None:
    reply = {"choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}}]}
    chunk = {"choices": [], "usage": usage}
    async with rig(tmp_path) as r:
        r.upstream.queue(Raw((json.dumps({**reply, "usage": usage}).encode(),)))
        response = await r.http.post("/v1/chat/completions", json=CHAT)
        assert response.status_code == 200 and response.json()["choices"][0]["message"]
        assert _roles(r) == ["user", "assistant"] and _usages(r) == 0
        r.upstream.queue(Raw(_events(_STOP, chunk, "[DONE]"), SSE))
        again = {**CHAT, "messages": [*CHAT["messages"], {"role": "assistant", "content": "ok"}]}
        again["messages"].append({"role": "user", "content": "more"})
        stream = await r.http.post("/v1/chat/completions", json={**again, "stream": True})
        assert stream.status_code == 200 and stream.text.endswith("data: [DONE]\n\n")
        assert _roles(r) == ["user", "assistant", "user", "assistant"] and _usages(r) == 0


def test_a_clients_function_call_with_arguments_not_a_string_is_refused_by_the_same_check() -> None:
    """One check (items_to_messages) for an upstream's output and a client's input."""
    from ctxledger.errors import InvalidInput
    from ctxledger.importers.responses import items_to_messages

    item = {"type": "function_call", "call_id": "c", "name": "f", "arguments": {"a": 1}}
    with pytest.raises(InvalidInput, match="function_call arguments must be a string, got an"):
        items_to_messages([item])
    assert items_to_messages([{**item, "arguments": "{}"}])[0]["tool_calls"][0]["id"] == "c"
