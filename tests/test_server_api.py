"""The state API over HTTP: every ContextService call, the reads, the event feed, errors, auth."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import pytest
from openapi_spec_validator import validate as validate_openapi
from starlette.routing import Route

from ctxledger import CompressionConfig, ContextService
from ctxledger.errors import ConnectionLost
from ctxledger.events import UsageReported
from ctxledger.server import create_app, endpoints
from ctxledger.server.openapi import build_schema

pytestmark = pytest.mark.anyio
TOKEN = "s3cret-token-for-tests-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Api:
    def __init__(self, client: httpx.AsyncClient, service: ContextService) -> None:
        self.client, self.service = client, service

    async def call(self, method: str, path: str, status: int = 200, **kwargs: Any) -> Any:
        resp = await self.client.request(method, path, headers=AUTH, **kwargs)
        assert resp.status_code == status, resp.text
        return resp.json()

    def last_seq(self) -> int:
        return self.service.ledger.store.last_seq()


@pytest.fixture
async def api(tmp_path: Path) -> AsyncIterator[Api]:
    service = ContextService.open(
        tmp_path / "api.db", config=CompressionConfig(context_length=8192)
    )
    app = create_app(service, token=TOKEN)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://ledger.test"
    ) as client:
        yield Api(client, service)
    await app.state.ctx.aclose()
    await service.aclose()


async def _session(api: Api, turns: int = 0, words: int = 60) -> str:
    out = await api.call(
        "POST", "/v1/sessions", 201, json={"model": "gpt-4.1", "system_prompt": "Be brief."}
    )
    sid: str = out["session_id"]
    for i in range(turns):
        text = (
            f"step {i}: the deploy key is K-{i:04d} and the file is src/mod_{i}.py "
            + "word " * words
        )
        await api.call(
            "POST",
            f"/v1/sessions/{sid}/messages",
            json={
                "messages": [
                    {"role": "user", "content": text},
                    {"role": "assistant", "content": f"done {i} " * 30},
                ]
            },
        )
    return sid


async def test_append_with_expected_version_conflict_writes_nothing(api: Api) -> None:
    started = await api.call(
        "POST", "/v1/sessions", 201, json={"model": "gpt-4.1", "system_prompt": "Be brief."}
    )
    sid, start = started["session_id"], started["version"]
    first = await api.call(
        "POST",
        f"/v1/sessions/{sid}/messages",
        json={"messages": [{"role": "user", "content": "hi"}], "expected_version": start},
    )
    version = first["version"]
    assert first["session_id"] == sid and len(first["message_ids"]) == 1 and version == start + 1
    before = api.last_seq()
    err = await api.call(
        "POST",
        f"/v1/sessions/{sid}/messages",
        409,
        json={"messages": [{"role": "assistant", "content": "x"}], "expected_version": start},
    )
    assert err["error"]["code"] == "version_conflict"
    assert err["error"]["current_version"] == version and err["error"]["session_id"] == sid
    assert api.last_seq() == before
    ok = await api.call(
        "POST",
        f"/v1/sessions/{sid}/messages",
        json={"messages": [{"role": "assistant", "content": "x"}], "expected_version": version},
    )
    assert ok["version"] == version + 1


async def test_the_schema_says_a_write_on_an_ended_session_is_a_409(api: Api) -> None:
    # a generated client must know every write on a session can answer 409 session_ended
    schema = await api.call("GET", "/openapi.json")
    writes = {
        path: ops["post"]
        for path, ops in schema["paths"].items()
        if "post" in ops and path.startswith("/v1/sessions/{session_id}/")
    }
    names = {path.rsplit("/", 1)[-1] for path in writes}
    assert names >= {"messages", "usage", "preflight", "system-prompt", "hygiene", "compress"}
    assert names >= {"provider-error", "end"}
    for path, op in writes.items():
        assert "session_ended" in op["responses"]["409"]["description"], path
        assert "507" in op["responses"], path
    assert "507" in schema["paths"]["/v1/sessions"]["post"]["responses"]  # a write too
    assert "version_conflict" not in writes["/v1/sessions/{session_id}/usage"]["responses"]["409"]
    sid = await _session(api)
    await api.call("POST", f"/v1/sessions/{sid}/end", json={})
    err = await api.call("POST", f"/v1/sessions/{sid}/usage", 409, json={"usage": {}})
    assert err["error"]["code"] == "session_ended"


async def test_a_field_sent_to_a_call_that_takes_none_is_named_in_one_clear_line(
    api: Api,
) -> None:
    sid = await _session(api)
    err = await api.call("POST", f"/v1/sessions/{sid}/preflight", 422, json={"x": 1})
    assert err["error"]["message"] == "unknown field(s) 'x'; this call takes no fields"


async def test_dry_run_and_end_answer_the_version_like_every_write(api: Api) -> None:
    # README: each write "answers the session to continue on and its version"
    sid = await _session(api, turns=8)
    version = (await api.call("GET", f"/v1/sessions/{sid}"))["version"]
    plan = await api.call("POST", f"/v1/sessions/{sid}/compress", json={"dry_run": True})
    assert plan["session_id"] == sid and plan["version"] == version
    ended = await api.call("POST", f"/v1/sessions/{sid}/end", json={})
    assert ended["ended"] is True and ended["version"] == version + 1


async def test_a_stale_append_to_a_compacted_session_names_the_tip(api: Api) -> None:
    # A client that read GET /v1/sessions/OLD (which answers the tip and its version) and
    # appends to OLD with that version gets a 409 saying where to go, not "at version 2,
    # not the expected 2".
    sid = await _session(api, turns=8)
    tip = (await api.call("POST", f"/v1/sessions/{sid}/compress", json={}))["session_id"]
    status = await api.call("GET", f"/v1/sessions/{sid}")
    assert status["session_id"] == tip
    before = api.last_seq()
    err = await api.call(
        "POST",
        f"/v1/sessions/{sid}/messages",
        409,
        json={
            "messages": [{"role": "user", "content": "x"}],
            "expected_version": status["version"],
        },
    )
    assert err["error"]["session_id"] == tip
    assert err["error"]["current_version"] == status["version"]
    message = err["error"]["message"]
    assert f"session {sid!r} continues as {tip!r}" in message and "not the expected" not in message
    assert api.last_seq() == before


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        (b"{nope", 400, "bad_json"),
        (b"[1, 2]", 400, "bad_json"),
        (b'{"messages": "hi"}', 422, "invalid_input"),
        (b'{"messages": [{"role": "robot", "content": "x"}]}', 422, "invalid_message"),
        (
            b'{"messages": [{"role": "tool", "tool_call_id": "c1", "content": "x"}]}',
            422,
            "invalid_message",
        ),
        (b'{"messages": [], "expected_version": "3"}', 422, "invalid_input"),
        (b'{"messages": [], "extra": 1}', 422, "invalid_input"),
    ],
)
async def test_bad_input_is_rejected_with_a_code_and_nothing_appended(
    api: Api, body: bytes, status: int, code: str
) -> None:
    sid = await _session(api)
    before = api.last_seq()
    err = await api.call("POST", f"/v1/sessions/{sid}/messages", status, content=body)
    assert err["error"]["code"] == code and "\n" not in err["error"]["message"]
    assert api.last_seq() == before


async def test_unknown_session_and_route_are_404(api: Api) -> None:
    err = await api.call("POST", "/v1/sessions/ses_missing/messages", 404, json={"messages": []})
    assert err["error"]["code"] == "unknown_session"
    assert (await api.call("GET", "/v1/sessions/ses_missing/chain", 404))["error"][
        "code"
    ] == "unknown_session"
    assert (await api.call("GET", "/v1/nowhere", 404))["error"]["code"] == "not_found"
    assert (await api.call("DELETE", "/v1/sessions", 405))["error"]["code"] == "method_not_allowed"


async def test_missing_or_wrong_token_is_401_and_appends_nothing(api: Api) -> None:
    before = api.last_seq()
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Basic {TOKEN}"}):
        resp = await api.client.post("/v1/sessions", json={"model": "m"}, headers=headers)
        assert resp.status_code == 401 and resp.json()["error"]["code"] == "unauthorized"
        assert resp.headers["www-authenticate"] == "Bearer"
    assert api.last_seq() == before
    assert (await api.client.get("/healthz")).status_code == 200  # liveness needs no token


async def test_agent_loop_over_http(api: Api) -> None:
    sid = await _session(api, turns=14, words=450)
    pre = await api.call("POST", f"/v1/sessions/{sid}/preflight")
    assert (
        pre["compactions"] and pre["session_id"] != sid
    )  # over the 8192-window threshold: compacted
    tip = pre["session_id"]
    view = await api.call("GET", f"/v1/sessions/{sid}/api-messages")
    assert view["session_id"] == tip and view["messages"][0]["role"] == "system"
    turn = await api.call(
        "POST",
        f"/v1/sessions/{tip}/usage",
        json={"usage": {"prompt_tokens": 900, "completion_tokens": 20}},
    )
    assert turn["session_id"] == tip
    assert (await api.call("POST", f"/v1/sessions/{tip}/hygiene"))["session_id"] == tip
    usage = await api.call("GET", f"/v1/sessions/{tip}/usage")
    assert usage["chain"]["agent_calls"] == 1
    status = await api.call("GET", f"/v1/sessions/{sid}")
    assert status["session_id"] == tip and status["compactions"] == 1 and status["version"] >= 1


async def test_usage_says_whether_the_response_asked_for_tools(api: Api) -> None:
    """``tool_calls`` reaches ``report_usage``: after a final answer over the threshold the
    in-loop check waits for the next preflight; a bad value is refused, nothing appended."""
    sid = await _session(api, turns=2)
    over = {"prompt_tokens": 7_900, "completion_tokens": 20}
    turn = await api.call(
        "POST", f"/v1/sessions/{sid}/usage", json={"usage": over, "tool_calls": False}
    )
    assert turn["session_id"] == sid and not turn["compactions"]
    before = api.last_seq()
    err = await api.call(
        "POST", f"/v1/sessions/{sid}/usage", 422, json={"usage": over, "tool_calls": "yes"}
    )
    assert err["error"]["code"] == "invalid_input" and api.last_seq() == before
    recorded = [
        rec.event.asked_for_tools
        for rec in api.service.ledger.store.read_all()
        if isinstance(rec.event, UsageReported)
    ]
    assert recorded == [False]
    turn = await api.call(
        "POST", f"/v1/sessions/{sid}/usage", json={"usage": over, "tool_calls": True}
    )
    assert turn["compactions"]  # the in-loop check ran (the plan's outcome is not the point)


async def test_compress_dry_run_appends_nothing_then_compresses_with_focus(api: Api) -> None:
    sid = await _session(api, turns=8)
    before = api.last_seq()
    plan = await api.call(
        "POST", f"/v1/sessions/{sid}/compress", json={"dry_run": True, "focus": "deploy key"}
    )
    assert (
        plan["action"] == "dry_run"
        and plan["plan"]["middle_ids"]
        and plan["plan"]["focus"] == "deploy key"
    )
    assert api.last_seq() == before
    done = await api.call("POST", f"/v1/sessions/{sid}/compress", json={"focus": "deploy key"})
    assert done["compactions"][0]["action"] == "compressed" and done["session_id"] != sid
    cid = done["compactions"][0]["compaction_id"]
    expanded = await api.call("GET", f"/v1/compactions/{cid}/expand")
    assert len(expanded["messages"]) == len(plan["plan"]["middle_ids"])
    audit = await api.call("GET", f"/v1/compactions/{cid}/audit")
    assert audit["compaction_id"] == cid
    chain = await api.call("GET", f"/v1/sessions/{sid}/chain")
    assert chain["tip"] == done["session_id"] and chain["compression_count"] == 1
    replay = await api.call("GET", f"/v1/sessions/{sid}/replay", params={"verify": "true"})
    assert replay["equal"] is True and replay["drifted"] is False
    assert (await api.call("GET", f"/v1/sessions/{sid}/audit"))["compactions"]
    hits = await api.call("GET", f"/v1/sessions/{sid}/recall", params={"query": "K-0001"})
    assert hits["hits"]
    trace = await api.call("GET", f"/v1/sessions/{sid}/trace", params={"fact": "src/mod_1.py"})
    assert trace["appearances"]
    diff = await api.call("GET", "/v1/diff", params={"a": sid, "b": done["session_id"]})
    assert diff["counts"]
    assert (await api.call("GET", "/v1/diff", 422))["error"]["code"] == "invalid_input"
    sessions = await api.call("GET", "/v1/sessions")
    assert {s["session_id"] for s in sessions["sessions"]} == {sid, done["session_id"]}


async def test_provider_error_returns_the_recovery(api: Api) -> None:
    sid = await _session(api, turns=10, words=400)
    rec = await api.call(
        "POST",
        f"/v1/sessions/{sid}/provider-error",
        json={
            "status": 400,
            "requested_max_tokens": 9000,
            "body": {
                "error": {
                    "message": "max_tokens is too large: 9000. This model supports at most 4096 completion tokens."
                }
            },
        },
    )
    assert rec["action"] == "retry" and rec["max_tokens"] == 4096 and rec["session_id"] == sid
    rec = await api.call(
        "POST",
        f"/v1/sessions/{sid}/provider-error",
        json={"status": 413, "body": "Request Entity Too Large"},
    )
    assert (
        rec["action"] == "retry" and rec["kind"] == "payload_too_large" and rec["session_id"] != sid
    )
    rec = await api.call(
        "POST", f"/v1/sessions/{sid}/provider-error", json={"status": 429, "body": "rate limited"}
    )
    assert rec["action"] == "fail"
    err = await api.call("POST", f"/v1/sessions/{sid}/provider-error", 422, json={"status": 9999})
    assert err["error"]["code"] == "invalid_input"
    tiny = await _session(api, turns=1)
    err = await api.call(
        "POST",
        f"/v1/sessions/{tiny}/provider-error",
        422,
        json={"status": 413, "body": "too large"},
    )
    assert err["error"]["code"] == "context_overflow"  # nothing left to compact: recovery gives up


async def test_persisted_tool_output_reads_in_slices(api: Api) -> None:
    sid = await _session(api)
    call = {
        "id": "c1",
        "type": "function",
        "function": {"name": "terminal", "arguments": '{"command": "cat big.log"}'},
    }
    big = "\n".join(f"line {i} " + "x" * 40 for i in range(2000))
    out = await api.call(
        "POST",
        f"/v1/sessions/{sid}/messages",
        json={
            "messages": [
                {"role": "user", "content": "show the log"},
                {"role": "assistant", "content": None, "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "c1", "content": big},
            ]
        },
    )
    assert out["notices"] and "stored outside the context" in out["notices"][0]
    view = await api.call("GET", f"/v1/sessions/{sid}/api-messages")
    block = view["messages"][-1]["content"]
    ref = next(w for w in block.replace("'", " ").replace('"', " ").split() if len(w) == 64)
    part = await api.call(
        "GET", f"/v1/sessions/{sid}/persisted/{ref}", params={"offset": 0, "limit": 100}
    )
    assert part["text"] == big[:100] and part["total_chars"] == len(big)
    assert (await api.call("GET", f"/v1/sessions/{sid}/persisted/not-a-ref", 422))["error"][
        "code"
    ] == "invalid_input"
    # another session cannot read this session's persisted output
    other = await _session(api)
    err = await api.call("GET", f"/v1/sessions/{other}/persisted/{ref}", 404)
    assert err["error"]["code"] == "unknown_blob"


async def _events(api: Api, path: str, **params: Any) -> list[dict[str, str]]:
    resp = await api.client.get(path, params=params, headers=AUTH)
    assert resp.status_code == 200 and resp.headers["content-type"].startswith("text/event-stream")
    events = []
    for block in resp.text.split("\n\n"):
        fields = dict(
            line.split(": ", 1)
            for line in block.splitlines()
            if not line.startswith(":") and ": " in line
        )
        if fields:
            events.append(fields)
    return events


async def test_event_feed_streams_a_sessions_family_after_a_sequence_number(api: Api) -> None:
    other = await _session(api, turns=1)
    sid = await _session(api, turns=8)
    done = await api.call("POST", f"/v1/sessions/{sid}/compress", json={})
    events = await _events(api, f"/v1/sessions/{sid}/events", follow="false")
    streams = {json.loads(e["data"])["stream"] for e in events}
    assert streams == {sid, done["session_id"]} and other not in streams
    seqs = [int(e["id"]) for e in events]
    assert seqs == sorted(seqs) and events[0]["event"] == "SessionStarted"
    later = await _events(api, f"/v1/sessions/{sid}/events", after=seqs[-3], follow="false")
    assert [int(e["id"]) for e in later] == seqs[-2:]
    two = await _events(api, "/v1/events", limit=2)
    assert [e["id"] for e in two] == ["1", "2"]
    assert (await api.call("GET", "/v1/events", 422, params={"after": "x"}))["error"][
        "code"
    ] == "invalid_input"


async def test_openapi_schema_is_served_and_lists_every_route(api: Api) -> None:
    schema = (await api.client.get("/openapi.json")).json()
    assert schema == build_schema(endpoints())
    assert schema["openapi"].startswith("3.1")
    documented = {(path, method.upper()) for path, ops in schema["paths"].items() for method in ops}
    app = api.client._transport.app  # type: ignore[attr-defined]
    served = {
        (r.path, m)
        for r in app.routes
        if isinstance(r, Route)
        for m in (r.methods or ())
        if m != "HEAD"
    }
    assert documented == served
    for path, ops in schema["paths"].items():
        for op in ops.values():
            assert op["summary"] and op["responses"] and op["operationId"]
            names = {p["name"] for p in op.get("parameters", []) if p["in"] == "path"}
            assert names == set(re.findall(r"{(\w+)}", path))
    ids = [op["operationId"] for ops in schema["paths"].values() for op in ops.values()]
    assert len(ids) == len(set(ids))


async def test_openapi_schema_is_valid_and_agrees_with_the_server(api: Api) -> None:
    schema = (await api.client.get("/openapi.json")).json()
    validate_openapi(schema)  # a valid OpenAPI 3.1 document (client generators can read it)
    append = schema["paths"]["/v1/sessions/{session_id}/messages"]["post"]
    body_schema = append["requestBody"]["content"]["application/json"]["schema"]
    error_schema = schema["components"]["schemas"]["Error"]
    assert {"409", "413", "422", "404", "401"} <= set(append["responses"])
    sid = await _session(api)
    good = {"messages": [{"role": "user", "content": "hi"}], "expected_version": 2}
    jsonschema.validate(good, body_schema)
    await api.call("POST", f"/v1/sessions/{sid}/messages", json=good)
    # what the schema rejects, the server rejects too, with an error the schema describes
    for bad in ({"messages": "hi"}, {"messages": [], "extra": 1}, {"expected_version": 1}):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, body_schema)
        err = await api.call("POST", f"/v1/sessions/{sid}/messages", 422, json=bad)
        jsonschema.validate(err, error_schema)
    conflict = await api.call("POST", f"/v1/sessions/{sid}/messages", 409, json=good)
    jsonschema.validate(conflict, error_schema)


async def test_an_oversized_body_is_413_and_appends_nothing(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ctxledger.server import routing

    sid = await _session(api)
    before = api.last_seq()
    monkeypatch.setattr(routing, "MAX_BODY_BYTES", 1000)
    body = json.dumps({"messages": [{"role": "user", "content": "x" * 5000}]}).encode()

    async def chunked() -> AsyncIterator[bytes]:  # no Content-Length: counted as it arrives
        for i in range(0, len(body), 256):
            yield body[i : i + 256]

    for content in (body, chunked()):
        err = await api.call("POST", f"/v1/sessions/{sid}/messages", 413, content=content)
        assert err["error"]["code"] == "body_too_large"
    assert api.last_seq() == before


async def test_a_declared_length_of_more_than_18_digits_is_413_before_the_body() -> None:
    """A Content-Length of 19 or more digits (which uvicorn takes) was read as no length,
    so the server waited for the body until the client gave up."""
    from starlette.requests import Request

    from ctxledger.server import routing
    from ctxledger.server.errors import HTTPError

    async def receive() -> Any:
        raise AssertionError("the body was read")

    for declared in (b"9" * 19, b" " + b"1" * 40):
        scope = {"type": "http", "method": "POST", "headers": [(b"content-length", declared)]}
        with pytest.raises(HTTPError) as caught:
            await routing.read_body(Request(scope, receive))
        assert caught.value.status == 413 and caught.value.code == "body_too_large"


async def test_a_changed_system_prompt_is_recorded_once_and_counted(api: Api) -> None:
    sid = await _session(api, turns=2)
    before = (await api.call("GET", f"/v1/sessions/{sid}"))["version"]
    same = await api.call(
        "POST", f"/v1/sessions/{sid}/system-prompt", json={"system_prompt": "Be brief."}
    )
    assert same["session_id"] == sid and same["version"] == before
    new = "Be brief. Answer in French."
    out = await api.call("POST", f"/v1/sessions/{sid}/system-prompt", json={"system_prompt": new})
    assert out["version"] == before + 1
    view = await api.call("GET", f"/v1/sessions/{sid}/api-messages")
    assert view["messages"][0] == {"role": "system", "content": new}
    err = await api.call(
        "POST", f"/v1/sessions/{sid}/system-prompt", 422, json={"system_prompt": 3}
    )
    assert err["error"]["code"] == "invalid_input"
    assert (await api.call("GET", f"/v1/sessions/{sid}"))["version"] == before + 1


async def test_diff_refuses_a_ref_that_is_a_whole_id_and_a_session_at_a_seq(api: Api) -> None:
    """Sessions ``v`` and ``v@2``: ``b=v@2`` is refused as ambiguous (a JSON 422 naming
    both spellings); ``v@2@SEQ`` and ``v@02`` each name one reading."""
    for sid in ("v", "v@2"):
        await api.call("POST", "/v1/sessions", 201, json={"model": "m", "session_id": sid})
        message = {"role": "user", "content": f"hello from {sid}"}
        await api.call("POST", f"/v1/sessions/{sid}/messages", json={"messages": [message]})
    last = api.last_seq()
    refused = await api.call("GET", "/v1/diff", 422, params={"a": "v", "b": "v@2"})
    assert f"'v@2@{last}' for session 'v@2'" in refused["error"]["message"]
    assert "'v@02' for session 'v' at seq 2" in refused["error"]["message"]
    for b, said in [(f"v@2@{last}", "v@2"), ("v@02", "v")]:
        got = await api.call("GET", "/v1/diff", params={"a": "v", "b": b})
        assert got["b"]["session_id"] == said


async def test_a_store_server_out_of_reach_is_a_503_to_retry_logged_in_one_line(
    api: Api, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """(Session 37: a PostgreSQL server restarting for longer than the pool's timeout
    answered 500 ``ledger_error`` and logged a traceback per request.) 503
    ``store_unavailable`` with ``Retry-After``, one warning line; the schema says so."""
    sid = await _session(api)

    async def unreachable(*args: Any, **kwargs: Any) -> Any:
        raise ConnectionLost("could not append in postgresql://db/x: the server could not be")

    monkeypatch.setattr(api.service, "append", unreachable)
    resp = await api.client.post(
        f"/v1/sessions/{sid}/messages", headers=AUTH, json={"messages": [{"role": "user"}]}
    )
    assert resp.status_code == 503 and resp.headers["retry-after"] == "1"
    assert resp.json()["error"]["code"] == "store_unavailable"
    logged = [r for r in caplog.records if "could not append" in r.getMessage()]
    assert len(logged) == 1 and logged[0].exc_info is None
    schema = await api.call("GET", "/openapi.json")
    assert (
        "store_unavailable"
        in schema["paths"]["/v1/sessions/{session_id}/messages"]["post"]["responses"]["503"][
            "description"
        ]
    )
