"""Real SDK clients through the proxy on long tool-using runs: every turn is recorded
once, with its usage, the line compacts and the client gets what the upstream sent."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest
from helpers.fake_upstream import Error, Raw, Say
from helpers.server_rig import ask, rig, switches

from ctxledger import CompressionConfig
from ctxledger.clock import SequentialIds
from ctxledger.events import MessageAppended, ToolCallIdsRepaired, UsageReported

pytestmark = pytest.mark.anyio

#: a small window; no pause after a compaction without a summarizer (a wall-clock pause
#: would make where the compactions fall depend on the machine's speed)
CONFIG = CompressionConfig(context_length=4096, cooldown_no_summarizer=0, cooldown_generic=0)

TOOLS = [
    {
        "name": "read",
        "description": "Read a file.",
        "input_schema": {"type": "object", "properties": {"p": {"type": "string"}}},
    }
]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _chain_events(r: Any, family: str) -> list[Any]:
    chain = set(r.service.ledger.chains.chain(r.service.tip(family)))
    return [x.event for x in r.service.ledger.store.read_all() if x.event.session_id in chain]


async def test_anthropic_streamed_tool_use_across_compactions_with_position_numbered_ids(
    tmp_path: Path,
) -> None:
    """The fake model numbers its tool_use ids by the position of the reply (as some local
    models number calls), so after a compaction shortened the view an id comes again: the
    ledger repairs the re-used one, and a compaction that falls between that call and its
    result (the in-loop check after a tool-use reply) must not orphan the result."""
    turns = 14
    ids = {"ids": SequentialIds()}  # repaired ids are counted as tokens: the same each run
    async with rig(tmp_path, api="anthropic", config=CONFIG, ledger=ids) as r:
        client = r.anthropic(**{"X-Ctxledger-Session": "an"})
        messages: list[Any] = []
        for i in range(turns):
            r.upstream.queue(Say("", tool=("read", {"p": f"f{i}.py"})), Say(f"a{i}"))
            messages.append({"role": "user", "content": ask(i, 40)})
            for _ in range(2):
                async with client.messages.stream(
                    model="claude-x",
                    max_tokens=300,
                    system="Be brief.",
                    messages=messages,
                    tools=TOOLS,
                ) as stream:
                    reply = await stream.get_final_message()
                blocks = [b.model_dump(exclude_none=True) for b in reply.content]
                messages.append({"role": "assistant", "content": blocks})
                if reply.stop_reason != "tool_use":
                    break
                use = next(b for b in reply.content if b.type == "tool_use")
                assert use.input == {"p": f"f{i}.py"}
                result = {"type": "tool_result", "tool_use_id": use.id, "content": "x " * 200}
                messages.append({"role": "user", "content": [result]})
            assert reply.content[-1].text == f"a{i}"
        events = _chain_events(r, "an")
        # the case this is about happened: a result repaired in another session than its call
        fixes = [
            (e.session_id, f)
            for e in events
            if isinstance(e, ToolCallIdsRepaired)
            for f in e.repairs
        ]
        calls = {f.replacement: sid for sid, f in fixes if f.call_index is not None}
        assert any(f.call_index is None and calls[f.replacement] != sid for sid, f in fixes)
        appended = [e for e in events if isinstance(e, MessageAppended)]
        assert len(appended) == 4 * turns  # each message once, no branch
        assert len([e for e in events if isinstance(e, UsageReported)]) == 2 * turns
        assert len(r.service.ledger.chains.chain(r.service.tip("an"))) == len(switches(r)) + 1
        assert len(switches(r)) >= 2
        replay = (await r.http.get("/v1/sessions/an/replay", params={"verify": "true"})).json()
        assert replay["equal"] is True and replay["drifted"] is False


def _raw(doc: dict[str, Any]) -> Raw:
    return Raw((json.dumps(doc).encode(),))


async def test_models_and_embeddings_pass_through_to_the_upstream_unrecorded(
    tmp_path: Path,
) -> None:
    """A client whose base URL points at the proxy lists models and makes embeddings
    through it (they answered 404 ``no route``): passed on as sent, nothing recorded."""
    async with rig(tmp_path) as r:
        client = r.openai()
        seq = r.last_seq()
        models = {
            "object": "list",
            "data": [{"id": "gpt-x", "object": "model", "created": 1, "owned_by": "o"}],
        }
        one = models["data"][0]
        vector = {
            "object": "list",
            "data": [{"object": "embedding", "index": 0, "embedding": [0.5, -0.25]}],
            "model": "emb",
            "usage": {"prompt_tokens": 2, "total_tokens": 2},
        }
        r.upstream.queue(
            _raw(models), _raw(one), _raw(vector), Error(401, {"error": {"message": "bad key"}})
        )
        assert [m.id for m in (await client.models.list()).data] == ["gpt-x"]
        assert (await client.models.retrieve("gpt-x")).id == "gpt-x"
        made = await client.embeddings.create(
            model="emb", input="two words", encoding_format="float"
        )
        assert made.data[0].embedding == [0.5, -0.25]
        with pytest.raises(openai.AuthenticationError):
            await client.models.list()
        seen = r.upstream.requests
        assert [s.path for s in seen] == [
            "/v1/models",
            "/v1/models/gpt-x",
            "/v1/embeddings",
            "/v1/models",
        ]
        assert all(s.headers["authorization"] == "Bearer sk-client" for s in seen)
        assert seen[2].json == {"model": "emb", "input": "two words", "encoding_format": "float"}
        assert r.last_seq() == seq  # nothing recorded
        assert (await r.http.post("/v1/messages/count_tokens", json={})).status_code == 404


async def test_anthropic_count_tokens_passes_through_to_the_upstream(tmp_path: Path) -> None:
    async with rig(tmp_path, api="anthropic") as r:
        client = r.anthropic()
        seq = r.last_seq()
        r.upstream.queue(_raw({"input_tokens": 12}))
        counted = await client.messages.count_tokens(
            model="claude-x", messages=[{"role": "user", "content": "hi"}], tools=[TOOLS[0]]
        )
        assert counted.input_tokens == 12
        [seen] = r.upstream.requests
        assert seen.path == "/v1/messages/count_tokens"
        assert seen.headers["authorization"] == "Bearer sk-ant-client"  # the client's own
        assert "anthropic-version" in seen.headers
        assert seen.json["tools"] == TOOLS
        assert r.last_seq() == seq
        with pytest.raises(anthropic.NotFoundError):  # an OpenAI endpoint: not this face's
            await client.post("/v1/embeddings", body={}, cast_to=object)


@pytest.mark.parametrize("base", ["http://upstream.test", "http://upstream.test/v1"])
async def test_an_anthropic_base_with_or_without_v1_serves_every_path_the_same(
    tmp_path: Path, base: str
) -> None:
    """An Anthropic ``--upstream`` ending in ``/v1``: the pass-through and the summarizer
    took it, but the proxy's own turns went to ``/v1/v1/messages`` (a 404 upstream)."""
    async with rig(tmp_path, api="anthropic", base=base) as r:
        client = r.anthropic()
        r.upstream.queue(_raw({"input_tokens": 12}), _raw({"data": []}))
        await client.messages.count_tokens(
            model="claude-x", messages=[{"role": "user", "content": "hi"}]
        )
        await client.models.list()
        r.upstream.queue(Say("hello"))
        await client.messages.create(
            model="claude-x", max_tokens=10, messages=[{"role": "user", "content": "hi"}]
        )
        paths = [seen.path for seen in r.upstream.requests]
        assert paths == ["/v1/messages/count_tokens", "/v1/models", "/v1/messages"]


async def test_a_guarded_proxy_gates_what_it_passes_through(tmp_path: Path) -> None:
    token = "t" * 32
    async with rig(tmp_path, token=token, guard_proxy=True) as r:
        with pytest.raises(openai.AuthenticationError):
            await r.openai().models.list()
        assert r.upstream.requests == []
        r.upstream.queue(_raw({"object": "list", "data": []}))
        assert (await r.openai(**{"X-Ctxledger-Token": token}).models.list()).data == []
        assert "x-ctxledger-token" not in r.upstream.requests[0].headers


BAD_KEY = [(b"authorization", "Bearer sk-\xe9".encode("latin-1"))]


@pytest.mark.parametrize(
    ("api", "method", "path"),
    [
        ("openai", "GET", "/v1/models"),
        ("openai", "GET", "/v1/models/gpt-x"),
        ("openai", "POST", "/v1/embeddings"),
        ("anthropic", "GET", "/v1/models"),
        ("anthropic", "POST", "/v1/messages/count_tokens"),
    ],
)
async def test_a_non_ascii_key_is_refused_before_it_is_passed_on(
    tmp_path: Path, api: str, method: str, path: str
) -> None:
    """The proxy's ASCII rule of the forwarded headers: a pass-through endpoint skipped
    it, and httpx's encoding error was a 500 with a traceback in the log."""
    async with rig(tmp_path, api=api) as r:
        resp = await r.http.request(method, path, headers=BAD_KEY, json={"input": "x"})
        assert resp.status_code == 422
        assert "the authorization header must be ASCII text" in resp.text
        assert r.upstream.requests == []


@pytest.mark.parametrize("model_id", ["%2e%2e", "%2E%2E", "%2e"])
async def test_a_model_id_that_is_a_dot_segment_is_refused(tmp_path: Path, model_id: str) -> None:
    """``/v1/models/%2e%2e`` matched the route with the id ``..``, and the upstream's URL
    climbed out of ``/models``: ``GET /v1`` reached the upstream."""
    async with rig(tmp_path) as r:
        resp = await r.http.get(f"/v1/models/{model_id}?x=1")
        assert resp.status_code == 400 and resp.json()["error"]["code"] == "bad_path"
        assert r.upstream.requests == []


async def test_a_model_id_is_one_path_segment_upstream(tmp_path: Path) -> None:
    async with rig(tmp_path) as r:
        r.upstream.queue(_raw({"id": "x"}), _raw({"id": "y"}))
        assert (await r.http.get("/v1/models/ft:gpt-x:org:1?limit=2")).status_code == 200
        assert (await r.http.get("/v1/models/a%3Fb%23c%25")).status_code == 200
        # the upstream decodes its path: each character of the id is in it, none a query
        assert [s.path for s in r.upstream.requests] == [
            "/v1/models/ft:gpt-x:org:1",
            "/v1/models/a?b#c%",
        ]


async def test_an_anthropic_proxy_answers_model_errors_in_anthropic_shape(tmp_path: Path) -> None:
    """``/v1/models`` is served by both faces: its errors took OpenAI's shape from the
    path even on an Anthropic proxy (and its own 502s took Anthropic's)."""
    async with rig(tmp_path, api="anthropic", token="t" * 32, guard_proxy=True) as r:
        for path in ("/v1/models", "/v1/models/claude-x"):
            resp = await r.http.get(path)
            assert resp.status_code == 401
            assert resp.json()["type"] == "error"
            assert resp.json()["error"]["type"] == "authentication_error"
        with pytest.raises(anthropic.AuthenticationError) as caught:
            await r.anthropic().models.list()
        assert isinstance(caught.value.body, dict) and caught.value.body["type"] == "error"
    async with rig(tmp_path / "o", token="t" * 32, guard_proxy=True) as r:
        assert "type" not in (await r.http.get("/v1/models")).json()  # OpenAI's shape


async def test_an_unreachable_upstream_or_a_too_large_body_records_nothing(tmp_path: Path) -> None:
    import httpx
    import httpx2

    from ctxledger import ContextService
    from ctxledger.server import create_app
    from ctxledger.server.routing import MAX_BODY_BYTES

    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused")

    service = ContextService.open(tmp_path / "s.db")
    app = create_app(
        service, api="openai", upstream="http://up.test/v1", transport=httpx.MockTransport(refuse)
    )
    transport = httpx2.ASGITransport(app=app)
    async with httpx2.AsyncClient(transport=transport, base_url="http://proxy.test") as http:
        seq = service.ledger.store.last_seq()
        resp = await http.get("/v1/models")
        assert resp.status_code == 502 and "up.test" in resp.text
        resp = await http.post("/v1/embeddings", content=b"x" * (MAX_BODY_BYTES + 1))
        assert resp.status_code == 413 and resp.json()["error"]["code"] == "body_too_large"
        assert service.ledger.store.last_seq() == seq
    await app.state.ctx.aclose()
    await service.aclose()
