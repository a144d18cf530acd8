"""Requests a client can send that used to end in a 500 (or after a partial write).

Review (session 26), each now a 422 with nothing appended: an output cap
(``max_tokens``, ``max_completion_tokens``, ``max_output_tokens``) out of [1, 10**9];
tool definitions of the wrong shape (a tool or its ``function`` not an object, a name
that is not a string, parameters that are not an object); non-object messages;
``stream_options`` that is not an object (the request was recorded, then the upstream
payload failed to build, at every retry); a ``stream`` that is not a boolean; a
non-ASCII value in a header the proxy forwards (recorded, then the upstream call
failed); superscript digits in a numeric header (``str.isdigit`` takes "²", ``int``
does not); a session id the state API's own routes could not name again.

Session 29: a body with bytes that are not UTF-8 inside a string, and a message whose
``role`` is a list or an object, were 500s; now a 400 ``bad_json`` and a 422. A client
that closed its connection mid-body was a 500 with a traceback in the log; now a 499.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from helpers.server_rig import rig

TOKEN = "hostile-test-token-0123456789abcdef"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
USER = {"role": "user", "content": "hello"}


def _proxied(
    tmp_path: Path,
    body: dict[str, Any],
    headers: list[tuple[bytes, bytes]],
    path: str = "/v1/chat/completions",
) -> tuple[int, str, int, int]:
    async def main() -> tuple[int, str, int, int]:
        async with rig(tmp_path, api="anthropic" if path == "/v1/messages" else "openai") as r:
            before = r.last_seq()
            response = await r.http.post(path, json=body, headers=headers)
            return _outcome(r, response, before)

    return anyio.run(main)


def _outcome(r: Any, response: Any, before: int) -> tuple[int, str, int, int]:
    """(status, text, events appended since `before`, requests sent upstream)."""
    return response.status_code, response.text, r.last_seq() - before, len(r.upstream.requests)


@pytest.mark.parametrize(
    ("extra", "headers", "says"),
    [
        ({"messages": [1, 2]}, [], "messages[0] must be a JSON object"),
        ({"messages": [USER, None]}, [], "messages[1] must be a JSON object"),
        ({"stream": True, "stream_options": 5}, [], "'stream_options' must be an object"),
        ({"stream": "yes"}, [], "'stream' must be true or false"),
        ({}, [(b"authorization", b"Bearer \xc3\xa9")], "authorization header must be ASCII"),
        ({}, [(b"x-ctxledger-context-length", b"2048\xc2\xb3")], "must be an integer"),
        ({}, [(b"x-ctxledger-context-length", b"1023")], "must be an integer \u2265 1024"),
        ({}, [(b"x-ctxledger-context-length", b"1" + b"0" * 15)], "is out of range"),
        # 19 digits were "must be an integer" (an 18-digit cap of its own), a 5,000-byte
        # value was quoted whole
        ({}, [(b"x-ctxledger-context-length", b"9" * 19)], "is out of range"),
        ({}, [(b"x-ctxledger-context-length", b"x" * 5000)], "(5,000 characters)"),
        ({"max_tokens": 10**30}, [], "'max_tokens' must be a positive integer up to 1,0"),
        ({"max_tokens": -5}, [], "'max_tokens' must be a positive integer up to"),
        ({"max_completion_tokens": 0}, [], "'max_completion_tokens' must be a positive"),
        ({"max_tokens": 1.5}, [], "'max_tokens' must be a positive integer"),
        ({"tools": [{"function": 5}]}, [], "tools[0].function must be a JSON object"),
        ({"tools": [5]}, [], "tools[0] must be a JSON object, got an integer"),
        ({"tools": [{"type": "function"}]}, [], "tools[0].function must be a JSON object"),
        ({"tools": [{"function": {"name": 5}}]}, [], "tools[0].function.name must be a non-"),
        ({"tools": [{"type": 5}]}, [], "tools[0].type must be a string"),
        (
            {"tools": [{"function": {"name": "f", "parameters": "x"}}]},
            [],
            "tools[0].function.parameters must be a JSON object",
        ),
    ],
)
def test_a_bad_proxy_request_is_refused_before_anything_is_recorded(
    tmp_path: Path, extra: dict[str, Any], headers: list[tuple[bytes, bytes]], says: str
) -> None:
    body = {"model": "m", "messages": [USER], **extra}
    status, text, appended, sent = _proxied(tmp_path, body, headers)
    assert status == 422 and says in text, text
    assert appended == 0 and sent == 0


@pytest.mark.parametrize(
    ("path", "extra", "says"),
    [
        ("/v1/responses", {"max_output_tokens": 10**30}, "'max_output_tokens' must be a posi"),
        ("/v1/responses", {"max_output_tokens": -1}, "'max_output_tokens' must be a positive"),
        ("/v1/responses", {"tools": [5]}, "tools[0] must be a JSON object"),
        ("/v1/responses", {"tools": [{"type": "function", "name": 5}]}, "tools[0].name must"),
        ("/v1/messages", {"max_tokens": 10**30}, "'max_tokens' must be a positive integer"),
        ("/v1/messages", {"tools": [{"name": 5, "input_schema": {}}]}, "tools[0].name must"),
        ("/v1/messages", {"tools": [{"name": "f", "input_schema": 5}]}, "input_schema must"),
        (
            "/v1/messages",
            {"tools": [{"name": ""}]},
            "name must be a non-empty string, got an empty",
        ),
        ("/v1/messages", {"tools": [{"type": "mcp_toolset", "name": 5}]}, "tools[0].name must"),
    ],
)
def test_the_other_faces_refuse_bad_caps_and_tools_before_recording(
    tmp_path: Path, path: str, extra: dict[str, Any], says: str
) -> None:
    body = {"model": "m", "max_tokens": 64, "messages": [USER], **extra}
    if path == "/v1/responses":
        body = {"model": "m", "input": "hello", **extra}
    status, text, appended, sent = _proxied(tmp_path, body, [], path)
    assert status == 422 and says in text, text
    assert appended == 0 and sent == 0


def test_well_formed_tools_of_every_face_go_through(tmp_path: Path) -> None:
    fn = {"name": "f", "parameters": {"type": "object"}}
    chat = {"model": "m", "messages": [USER], "max_tokens": 10**9}
    chat["tools"] = [{"type": "function", "function": fn}, {"type": "custom", "custom": {}}]
    assert _proxied(tmp_path / "a", chat, [])[0] == 200
    responses = {"model": "m", "input": "hi", "tools": [{"type": "function", **fn}]}
    responses["tools"].append({"type": "web_search"})
    assert _proxied(tmp_path / "b", responses, [], "/v1/responses")[0] == 200
    tools = [{"name": "f", "input_schema": {}}, {"type": "web_search_20250305", "name": "w"}]
    tools.append({"type": "mcp_toolset", "mcp_server_name": "x"})  # a server tool: no name
    anthropic = {"model": "m", "max_tokens": 64, "messages": [USER], "tools": tools}
    assert _proxied(tmp_path / "c", anthropic, [], "/v1/messages")[0] == 200


def test_a_good_proxy_request_still_goes_through(tmp_path: Path) -> None:
    body = {"model": "m", "messages": [USER], "stream": False, "stream_options": None}
    status, text, appended, sent = _proxied(tmp_path, body, [(b"authorization", b"Bearer sk-x")])
    assert status == 200, text
    assert appended > 0 and sent == 1


def test_superscript_digits_in_last_event_id_are_a_clear_error(tmp_path: Path) -> None:
    async def main() -> tuple[int, str]:
        async with rig(tmp_path, token=TOKEN) as r:
            response = await r.http.get(
                "/v1/events?follow=false",
                headers=[
                    *[(k.encode(), v.encode()) for k, v in AUTH.items()],
                    (b"last-event-id", b"1\xb2"),
                ],
            )
            return response.status_code, response.text

    status, text = anyio.run(main)
    assert status == 422 and "Last-Event-ID" in text


def test_a_long_last_event_id_is_quoted_short(tmp_path: Path) -> None:
    """A 5,000-digit Last-Event-ID was quoted whole in the 422 (a query value was
    already quoted short)."""

    async def main() -> tuple[int, str]:
        async with rig(tmp_path, token=TOKEN) as r:
            headers = {**AUTH, "last-event-id": "9" * 5000}
            response = await r.http.get("/v1/events?follow=false", headers=headers)
            return response.status_code, response.json()["error"]["message"]

    status, message = anyio.run(main)
    assert status == 422 and message.startswith("Last-Event-ID must be"), message
    assert "(5,000 characters)" in message and len(message) < 200, message


@pytest.mark.parametrize(
    "sid", [" ", " pad ", "a/b", "../../etc/passwd", "a\nb", "é", "s" * 201, 5]
)
def test_the_state_api_refuses_a_session_id_its_routes_cannot_name(
    tmp_path: Path, sid: object
) -> None:
    async def main() -> tuple[int, str, int]:
        async with rig(tmp_path, token=TOKEN) as r:
            response = await r.http.post(
                "/v1/sessions", headers=AUTH, json={"model": "m", "session_id": sid}
            )
            return response.status_code, response.text, r.last_seq()

    status, text, seq = anyio.run(main)
    assert status == 422 and "session_id" in text, text
    assert seq == 0


def test_the_state_api_takes_a_well_formed_session_id(tmp_path: Path) -> None:
    async def main() -> tuple[int, int]:
        async with rig(tmp_path, token=TOKEN) as r:
            made = await r.http.post(
                "/v1/sessions", headers=AUTH, json={"model": "m", "session_id": "team.a:run-1@x"}
            )
            read = await r.http.get("/v1/sessions/team.a:run-1@x", headers=AUTH)
            return made.status_code, read.status_code

    assert anyio.run(main) == (201, 200)


def test_responses_parts_and_stubs_of_odd_shapes_do_not_fail() -> None:
    # review (session 26): an unhashable part type was a 500; a chat client's own
    # ``responses_items`` key was stored and failed every later Responses turn
    from ctxledger.importers.responses import STUBS, items_to_messages, message_to_items
    from ctxledger.server.formats import openai_turn

    odd = {"type": "message", "role": "user", "content": [{"type": ["x"], "text": "a"}]}
    (message,) = items_to_messages([odd])
    assert message["role"] == "user"
    poisoned = {"role": "user", "content": "x", STUBS: [5]}
    assert message_to_items(poisoned) == message_to_items({"role": "user", "content": "x"})
    turn = openai_turn({"model": "m", "messages": [dict(poisoned)]})
    assert turn.messages == [{"role": "user", "content": "x"}]


@pytest.mark.parametrize(
    ("usage", "says"),
    [
        ({"prompt_tokens": -1}, "'prompt_tokens' must not be negative"),
        ({"prompt_tokens": "3"}, "'prompt_tokens' must be a number, got str"),
        ({"prompt_tokens": 10**30}, "'prompt_tokens' is out of range"),
        ({"prompt_tokens": 1.5}, "must be a whole number of tokens"),
        ({"input_tokens": [1]}, "'input_tokens' must be a number, got list"),
        ({"surprise": 1}, "unrecognised usage shape"),
        ([1], "field 'usage' must be of type object"),
    ],
)
def test_a_client_sent_usage_with_bad_figures_is_refused_and_records_nothing(
    tmp_path: Path, usage: Any, says: str
) -> None:
    async def main() -> tuple[int, str, int]:
        async with rig(tmp_path, token=TOKEN) as r:
            await r.http.post("/v1/sessions", headers=AUTH, json={"model": "m", "session_id": "s"})
            before = r.last_seq()
            response = await r.http.post(
                "/v1/sessions/s/usage", headers=AUTH, json={"usage": usage}
            )
            return response.status_code, response.text, r.last_seq() - before

    status, text, appended = anyio.run(main)
    assert status == 422 and says in text, text
    assert appended == 0


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        ({"model": ""}, "model must be None or a non-empty string, got ''"),
        ({"model": "   "}, "model must be None or a non-empty string"),
        ({"cost_usd": -1}, "cost_usd must be a finite number ≥ 0, got -1"),
    ],
)
def test_a_usage_report_for_a_blank_model_is_refused_and_records_nothing(
    tmp_path: Path, extra: dict[str, Any], says: str
) -> None:
    # session 29 left it: a usage report naming the model "" was recorded with no model
    async def main() -> tuple[int, str, int]:
        async with rig(tmp_path, token=TOKEN) as r:
            await r.http.post("/v1/sessions", headers=AUTH, json={"model": "m", "session_id": "s"})
            before = r.last_seq()
            body = {"usage": {"prompt_tokens": 5, "completion_tokens": 1}, **extra}
            response = await r.http.post("/v1/sessions/s/usage", headers=AUTH, json=body)
            return response.status_code, response.text, r.last_seq() - before

    status, text, appended = anyio.run(main)
    assert status == 422 and says in text, text
    assert appended == 0


def test_an_empty_client_usage_is_the_documented_no_usage_report(tmp_path: Path) -> None:
    # ctxledger.usage: an empty block is how many servers say "no usage"; it is recorded
    # as such (shape "none", the ledger's own estimate), not refused
    from ctxledger.events import UsageReported

    async def main() -> tuple[int, list[str]]:
        async with rig(tmp_path, token=TOKEN) as r:
            await r.http.post("/v1/sessions", headers=AUTH, json={"model": "m", "session_id": "s"})
            response = await r.http.post("/v1/sessions/s/usage", headers=AUTH, json={"usage": {}})
            events = [rec.event for rec in r.service.ledger.store.read_all()]
            return response.status_code, [e.shape for e in events if isinstance(e, UsageReported)]

    assert anyio.run(main) == (200, ["none"])


def _post_raw(tmp_path: Path, path: str, content: bytes) -> tuple[int, str, int, int]:
    """Post `content` as a JSON body to `path` of a rig holding session ``s``: (status,
    text, events appended by the post, requests sent upstream)."""

    async def main() -> tuple[int, str, int, int]:
        api = "anthropic" if path == "/v1/messages" else "openai"
        async with rig(tmp_path, api=api, token=TOKEN) as r:
            await r.http.post("/v1/sessions", headers=AUTH, json={"model": "m", "session_id": "s"})
            before = r.last_seq()
            response = await r.http.post(
                path, content=content, headers={**AUTH, "content-type": "application/json"}
            )
            return _outcome(r, response, before)

    return anyio.run(main)


@pytest.mark.parametrize(
    "path", ["/v1/sessions/s/messages", "/v1/chat/completions", "/v1/messages", "/v1/responses"]
)
@pytest.mark.parametrize("text", [b"\xff\xfe", "caf\u00e9".encode("latin-1")])
def test_a_body_that_is_not_utf8_is_bad_json_not_a_500(
    tmp_path: Path, path: str, text: bytes
) -> None:
    # session 29: msgspec 0.22 raises UnicodeDecodeError (not a DecodeError) for bytes
    # that are not UTF-8 inside a string: every endpoint answered a 500 "internal error";
    # 0.23 raises a DecodeError that did not name the byte
    body = b'{"model": "m", "max_tokens": 9, "messages": [{"role": "user", "content": "'
    body += text + b'"}], "input": "x"}'
    status, answer, appended, sent = _post_raw(tmp_path, path, body)
    assert status == 400 and "bad_json" in answer, answer
    assert "not UTF-8 text (it holds the byte 0x" in answer
    assert appended == 0 and sent == 0


@pytest.mark.parametrize("role", [["user"], {"role": "user"}])
@pytest.mark.parametrize("path", ["/v1/sessions/s/messages", "/v1/chat/completions"])
def test_a_role_of_the_wrong_type_is_a_422_not_a_500(
    tmp_path: Path, path: str, role: object
) -> None:
    # session 29: an unhashable role was looked up in the set of roles (TypeError: 500)
    message = {"role": role, "content": "x"}
    body: dict[str, Any] = {"messages": [USER, {"role": "assistant", "content": "y"}, message]}
    if path == "/v1/chat/completions":
        body["model"] = "m"
    status, answer, appended, sent = _post_raw(tmp_path, path, json.dumps(body).encode())
    assert status == 422 and "unknown role" in answer, answer
    assert appended == 0 and sent == 0


@pytest.mark.parametrize("path", ["/v1/sessions", "/v1/chat/completions"])
def test_a_client_that_leaves_mid_body_is_no_server_error(
    tmp_path: Path, path: str, caplog: pytest.LogCaptureFixture
) -> None:
    # session 29: starlette's ClientDisconnect was a 500 "internal" with a traceback in
    # the server's log, for a client that only closed its connection
    async def main() -> tuple[list[dict[str, Any]], int]:
        async with rig(tmp_path, token=TOKEN) as r:
            pieces = [
                {"type": "http.request", "body": b'{"model": "m", "mess', "more_body": True},
                {"type": "http.disconnect"},
            ]

            async def receive() -> dict[str, Any]:
                return pieces.pop(0) if pieces else {"type": "http.disconnect"}

            sent: list[dict[str, Any]] = []

            async def send(message: dict[str, Any]) -> None:
                sent.append(message)

            headers = [(b"authorization", AUTH["Authorization"].encode())]
            scope = {"type": "http", "method": "POST", "path": path, "headers": headers}
            scope.update(query_string=b"", root_path="", scheme="http", http_version="1.1")
            await r.app(scope, receive, send)
            return sent, r.last_seq()

    with caplog.at_level("ERROR", logger="ctxledger.server"):
        sent, seq = anyio.run(main)
    assert sent[0]["status"] == 499 and b"client_closed" in sent[1]["body"]
    assert seq == 0 and not caplog.records


@pytest.mark.parametrize("path", ["/v1/sessions/s/messages", "/v1/chat/completions"])
def test_an_escaped_lone_surrogate_is_named_not_called_truncated(tmp_path: Path, path: str) -> None:
    # msgspec reports a lone "\ud800" escape as "Input data was truncated"
    body = b'{"model": "m", "messages": [{"role": "user", "content": "a \\ud800 b"}]}'
    status, answer, appended, sent = _post_raw(tmp_path, path, body)
    assert status == 400 and "truncated" not in answer, answer
    assert "the escape \\\\ud800 is half of an escaped emoji pair, not valid Unicode" in answer
    assert appended == 0 and sent == 0


def test_a_server_error_logs_and_answers_the_path_and_message_escaped(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The log line of a 500 named the request's decoded path raw (``%1b]0;pwn%07``
    set the operator's terminal title), and an error's text reached the log and the
    client with its control characters."""

    def boom(*args: object, **kwargs: object) -> None:
        raise RuntimeError("broke on \x1b[2J")

    async def main() -> tuple[int, str]:
        async with rig(tmp_path, token=TOKEN) as r:
            monkeypatch.setattr(r.service.ledger, "resolve", boom)
            answer = await r.http.get("/v1/sessions/%1b]0;pwn%07/usage", headers=AUTH)
            return answer.status_code, answer.json()["error"]["message"]

    with caplog.at_level("ERROR", logger="ctxledger.server"):
        status, message = anyio.run(main)
    assert status == 500 and message == "internal error: broke on \\x1b[2J"
    (record,) = caplog.records
    assert record.getMessage() == "GET /v1/sessions/\\x1b]0;pwn\\x07/usage failed"


@pytest.mark.parametrize(
    "calls",
    [1.5, "c1", [{"id": "c1", "function": "f"}], [5]],
    ids=["number", "string", "function-not-object", "call-not-object"],
)
def test_a_resent_turn_with_malformed_tool_calls_is_a_422_not_a_500(
    tmp_path: Path, calls: Any
) -> None:
    # the proxy compares a request with the line it continues before validating it; the
    # comparison iterated tool_calls (1.5: "'float' object is not iterable", a 500) and
    # skipped calls that were not objects (a malformed call could match a recorded one)
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    first = [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "r"},
        {"role": "user", "content": "next"},
    ]
    again = [dict(m) for m in first]
    again[2]["tool_calls"] = calls

    async def main() -> tuple[int, str, int]:
        async with rig(tmp_path) as r:
            ok = await r.http.post("/v1/chat/completions", json={"model": "m", "messages": first})
            assert ok.status_code == 200
            before = r.last_seq()
            response = await r.http.post(
                "/v1/chat/completions", json={"model": "m", "messages": again}
            )
            return response.status_code, response.text, r.last_seq() - before

    status, text, appended = anyio.run(main)
    assert status == 422 and ("tool call" in text or "'tool_calls'" in text), text
    assert appended == 0


@pytest.mark.parametrize(
    ("query", "says"),
    [
        ("after=1_000", "'after' must be an integer, got '1_000'"),
        ("after=%2B1", "'after' must be an integer, got '+1'"),
        ("limit=%D9%A3", "'limit' must be an integer, got '٣'"),
        ("limit=1%205", "'limit' must be an integer, got '1 5'"),
        ("limit=5%C2%A0", "'limit' must be an integer, got '5\\xa0'"),
        (
            "after=" + "9" * 5000,
            "got '9999999999999999999999999999999999999999'… (5,000 characters)",
        ),
        ("follow=" + "x" * 300, "'follow' must be true or false, got 'xxxx"),
        ("limit=0", "'limit' must be ≥ 1, got 0"),
    ],
)
def test_a_query_integer_is_ascii_digits_and_an_error_quotes_it_short(
    tmp_path: Path, query: str, says: str
) -> None:
    """Session 37's fuzzing: ``int()`` took "1_000", "+1", a no-break space and
    Arabic-Indic digits as numbers, and a 5,000-digit value was quoted whole in the
    error. Spaces and tabs around the digits are allowed (as around a header's)."""

    async def main() -> tuple[int, str]:
        async with rig(tmp_path, token=TOKEN) as r:
            response = await r.http.get(f"/v1/events?follow=false&{query}", headers=AUTH)
            return response.status_code, response.json()["error"]["message"]

    status, message = anyio.run(main)
    assert status == 422 and says in message and len(message) < 200, message
