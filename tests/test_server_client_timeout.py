"""A client that hangs up (times out) while its turn waits for the upstream's answer.

Found in session 40 with the real ``openai`` client (``timeout=0.7``, its default two
retries) against ``ctxledger serve`` and a slow upstream, both under uvicorn: the first
try's turn went on without its client, held the session while the retries waited, and
recorded an answer the client never saw; the retry that got through was answered again
(a repeat, unrecorded), so the client's next turn branched the conversation. Now the
turn stops at the hang-up: the upstream request is dropped, nothing of it is recorded,
the session is free at once, and the retry continues the line.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import openai
import pytest
from helpers.fake_upstream import (
    Error,
    FakeUpstream,
    Say,
    Seen,
    request_body,
    serve_lifespan,
)
from helpers.serve_env import SERVE_ENV_KEYS
from helpers.server_rig import Rig, ask, rig
from helpers.uvicorn_thread import serving

from ctxledger import ContextService
from ctxledger.errors import CompressionError, ConcurrencyError, ConnectionLost
from ctxledger.events import MessageAppended, SessionStarted, SessionSwitched, UsageReported
from ctxledger.messages import content_text
from ctxledger.server import create_app

pytestmark = pytest.mark.anyio

SESSION = "hang-up"
ASK = {"role": "user", "content": "hello"}
#: (path, body) of each face the proxy serves on --api openai, JSON and streamed
CASES = [
    ("/v1/chat/completions", {"model": "m", "messages": [ASK]}),
    ("/v1/chat/completions", {"model": "m", "messages": [ASK], "stream": True}),
    ("/v1/responses", {"model": "m", "input": [ASK], "stream": True}),
]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def _hang_up_while_upstream_thinks(r: Rig, path: str, body: dict[str, Any]) -> int:
    """Call the proxy as a server would, the client hanging up once the upstream has the
    request (and is slow to answer); the status the proxy answered."""
    asked = anyio.Event()
    r.upstream.delay = 30.0  # never waited for: the hang-up cancels it
    r.upstream.on_request = lambda seen: asked.set()
    status = await _call_hanging_up(r.app, path, body, asked)
    r.upstream.delay, r.upstream.on_request = 0.0, None
    return status


async def _call_hanging_up(app: Any, path: str, body: dict[str, Any], when: anyio.Event) -> int:
    """Call `app` as a server would, the client hanging up once `when` is set; the
    status the app answered."""
    sent = [False]

    async def receive() -> dict[str, Any]:
        if not sent[0]:
            sent[0] = True
            return {"type": "http.request", "body": json.dumps(body).encode()}
        await when.wait()
        return {"type": "http.disconnect"}

    return await _call(app, path, receive)


async def _call(app: Any, path: str, receive: Any) -> int:
    """Call `app` as a server would, the client's messages from `receive`; the status
    the app answered."""
    started: list[int] = []

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            started.append(message["status"])

    headers = [(b"content-type", b"application/json"), (b"x-ctxledger-session", SESSION.encode())]
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "headers": [*headers, (b"authorization", b"Bearer sk-client")],
        "client": ("127.0.0.1", 5000),
        "server": ("proxy.test", 80),
        "root_path": "",
    }
    with anyio.fail_after(10):
        await app(scope, receive, send)
    return started[0]


def _events_of(service: ContextService) -> list[Any]:
    service.ledger.refresh()
    return [x.event for x in service.ledger.store.read_all()]


def _events(r: Rig) -> list[Any]:
    return _events_of(r.service)


@pytest.mark.parametrize(("path", "body"), CASES, ids=["chat-json", "chat-stream", "responses"])
async def test_a_hang_up_before_the_answer_records_nothing_and_the_retry_goes_on(
    tmp_path: Path, path: str, body: dict[str, Any]
) -> None:
    async with rig(tmp_path) as r:
        status = await _hang_up_while_upstream_thinks(r, path, body)
        assert status == 499
        assert r.state.families_locked() == 0  # the session is free for the retry
        kinds = [type(e) for e in _events(r)]
        assert kinds.count(MessageAppended) == 1 and UsageReported not in kinds  # the ask only
        await _the_retry_goes_on(r, path)


async def _the_retry_goes_on(r: Rig, path: str) -> None:
    """After a try dropped at its hang-up (the ask recorded, nothing else): the SDK's
    retry and the next turn continue the one session, no branch."""
    client = r.openai(**{"X-Ctxledger-Session": SESSION})
    seen: list[Seen] = r.upstream.requests
    if path == "/v1/responses":
        first = await client.responses.create(model="m", input=[ASK])
        answer = first.output_text
    else:
        reply = await client.chat.completions.create(model="m", messages=[ASK])
        answer = reply.choices[0].message.content or ""
    nxt = [ASK, {"role": "assistant", "content": answer}, {"role": "user", "content": "and?"}]
    if path == "/v1/responses":
        await client.responses.create(model="m", input=nxt)
    else:
        await client.chat.completions.create(model="m", messages=nxt)
    events = _events(r)
    assert {e.session_id for e in events} == {SESSION}  # no branch
    assert len([e for e in events if isinstance(e, SessionStarted)]) == 1
    texts = [content_text(e.message) for e in events if isinstance(e, MessageAppended)]
    assert texts[:3] == ["hello", answer, "and?"] and len(texts) == 4
    assert len(seen) == 3  # the dropped try, the retry, the next turn


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
async def test_an_upstream_silent_past_the_servers_own_wait_is_waited_for(
    tmp_path: Path, stream: bool
) -> None:
    """A turn waits for the upstream as long as its client does: a reasoning model that
    thinks in silence past the server's upstream-client timeout (600 s, 0.2 s here) is
    not cut with a 502 (a silence before the answer, or between two stream events)."""
    upstream = FakeUpstream(delay=0.0 if stream else 0.4, event_delay=0.4 if stream else 0.0)
    service = ContextService.open(tmp_path / "server.db")
    with serving(upstream) as port:
        app = create_app(service, upstream=f"http://127.0.0.1:{port}/v1")
        app.state.ctx.client.timeout = httpx.Timeout(0.2)  # what the passthrough waits
        transport = httpx2.ASGITransport(app=app)
        async with httpx2.AsyncClient(transport=transport, base_url="http://proxy.test") as http:
            client = openai.AsyncOpenAI(
                base_url="http://proxy.test/v1", api_key="k", max_retries=0, http_client=http
            )
            upstream.queue(Say("pondered"))
            if stream:
                chunks = await client.chat.completions.create(
                    model="m", messages=[ASK], stream=True
                )
                text = "".join(
                    [c.choices[0].delta.content or "" async for c in chunks if c.choices]
                )
            else:
                reply = await client.chat.completions.create(model="m", messages=[ASK])
                text = reply.choices[0].message.content or ""
        await app.state.ctx.aclose()
    assert text == "pondered"
    assert [type(e) for e in _events_of(service)].count(MessageAppended) == 2
    await service.aclose()


OVERFLOW = Error(
    400,
    {
        "error": {
            "message": "This model's maximum context length is 2000 tokens. "
            "However, your messages resulted in 5000 tokens.",
            "code": "context_length_exceeded",
            "type": "invalid_request_error",
        }
    },
)


@pytest.mark.parametrize(
    ("exc", "status", "code"),
    [
        (ConnectionLost("could not append in postgresql://db/x"), 503, "store_unavailable"),
        (CompressionError("the summarizer failed"), 502, "compression_failed"),
        (ConcurrencyError("s", 3, 4), 409, "version_conflict"),
    ],
    ids=["store-out-of-reach", "compaction-failed", "conflict"],
)
async def test_an_error_while_the_turn_waits_for_the_upstream_keeps_its_status(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, exc: Exception, status: int, code: str
) -> None:
    """(Review 1, F1.) An error raised while the turn waits under the hang-up watcher
    (here the overflow recovery) is answered as it is, not as the task group's 500."""
    async with rig(tmp_path) as r:

        async def failing(*args: Any, **kwargs: Any) -> Any:
            raise exc

        monkeypatch.setattr(r.service, "handle_provider_error", failing)
        r.upstream.queue(OVERFLOW)
        resp = await r.http.post("/v1/chat/completions", json={"model": "m", "messages": [ASK]})
        assert (resp.status_code, resp.json()["error"]["code"]) == (status, code)
        assert resp.headers.get("retry-after") == ("1" if status == 503 else None)
        assert r.state.families_locked() == 0


FIRST_CHUNK = (
    b'data: {"id":"c1","object":"chat.completion.chunk","created":0,"model":"m",'
    b'"choices":[{"index":0,"delta":{"role":"assistant","content":"hmm"},"finish_reason":null}]}'
    b"\n\n"
)


async def _silent_upstream(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """An upstream that takes the request and then says nothing more (a hung server, a
    half-open connection): no answer, or a stream's first event and then silence, until
    the proxy hangs up."""
    if scope["type"] == "lifespan":
        await serve_lifespan(receive, send)
        return
    if json.loads(await request_body(receive)).get("stream"):
        start = {"type": "http.response.start", "status": 200}
        await send({**start, "headers": [(b"content-type", b"text/event-stream")]})
        await send({"type": "http.response.body", "body": FIRST_CHUNK, "more_body": True})
    while (await receive())["type"] != "http.disconnect":
        pass


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
async def test_a_turn_gives_up_on_a_silent_upstream_after_the_turn_timeout(
    tmp_path: Path, stream: bool
) -> None:
    """(Review 1, F2.) A client with no timeout of its own and an upstream that never
    answers: the turn ends after ``turn_timeout`` (3600 s by default, 0.3 s here) with
    a 502, or a stream's error event; the session is freed, nothing of it recorded."""
    service = ContextService.open(tmp_path / "server.db")
    with serving(_silent_upstream) as port:
        app = create_app(service, upstream=f"http://127.0.0.1:{port}/v1", turn_timeout=0.3)
        transport = httpx2.ASGITransport(app=app)
        body = {"model": "m", "messages": [ASK], "stream": stream}
        async with httpx2.AsyncClient(
            transport=transport, base_url="http://proxy.test", timeout=None
        ) as http:
            with anyio.fail_after(20):  # (without the cap: no answer ever)
                resp = await http.post("/v1/chat/completions", json=body)
        locked = app.state.ctx.families_locked()
        await app.state.ctx.aclose()
    if stream:
        assert resp.status_code == 200 and resp.text.startswith(FIRST_CHUNK.decode())
        assert '"error"' in resp.text.removeprefix(FIRST_CHUNK.decode())
    else:
        assert resp.status_code == 502
        assert resp.json()["error"]["code"] == "upstream_unreachable"
    assert locked == 0
    assert [type(e) for e in _events_of(service)].count(MessageAppended) == 1  # the ask
    await service.aclose()


def test_serve_turn_timeout_reaches_the_app(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`serve --turn-timeout S` reaches every worker's app (through CTXLEDGER_SERVE_*);
    without it, a turn waits for the upstream up to an hour; connecting stays 10 s."""
    from click.testing import CliRunner

    from ctxledger.cli import serve as serve_module
    from ctxledger.cli.main import cli
    from ctxledger.server.app import app_from_env

    monkeypatch.setattr(serve_module, "_run", lambda *args: None)
    for key in SERVE_ENV_KEYS:  # what serve exports is undone after the test
        monkeypatch.delenv("CTXLEDGER_SERVE_" + key.upper(), raising=False)
    db = str(tmp_path / "s.db")
    read = []
    for options in ([], ["--turn-timeout", "2.5"]):
        result = CliRunner().invoke(cli, ["serve", "--db", db, *options])
        assert result.exit_code == 0, result.output
        state = app_from_env().state.ctx
        read.append((state.turn_timeout.read, state.turn_timeout.connect))
        anyio.run(state.aclose)
        anyio.run(state.service.aclose)
    assert read == [(3600, 10), (2.5, 10)]


async def test_a_hang_up_never_cuts_a_compaction_under_way(tmp_path: Path) -> None:
    """(Review 1, F3.) A client that hangs up while an overflow recovery compacts its
    session: the compaction is finished (shielded) and recorded, the retry it asked for
    is not sent, the turn answers 499 and the session is freed. (Over TCP: with the
    in-process upstream, the retried call reaches no checkpoint before it is answered.)"""
    upstream = FakeUpstream()
    service = ContextService.open(tmp_path / "server.db")
    messages: list[dict[str, Any]] = []
    for i in range(8):
        messages.append({"role": "user", "content": ask(i, 80)})
        if i < 7:
            messages.append({"role": "assistant", "content": f"done {i} " + "x " * 60})
    upstream.queue(OVERFLOW)
    started, finished = anyio.Event(), []
    recover = service.handle_provider_error

    async def slow_recovery(*args: Any, **kwargs: Any) -> Any:
        started.set()  # the client hangs up now
        await anyio.sleep(0.3)  # a summarizer's await
        result = await recover(*args, **kwargs)
        finished.append(result.action)
        return result

    service.handle_provider_error = slow_recovery  # type: ignore[method-assign]
    with serving(upstream) as port:
        app = create_app(service, upstream=f"http://127.0.0.1:{port}/v1")
        body = {"model": "m", "messages": messages}
        status = await _call_hanging_up(app, "/v1/chat/completions", body, started)
        locked = app.state.ctx.families_locked()
        await app.state.ctx.aclose()
    assert (status, finished, locked) == (499, ["retry"], 0)
    assert [type(e) for e in _events_of(service)].count(SessionSwitched) == 1
    assert len(upstream.requests) == 1  # the retry was not sent
    await service.aclose()


@pytest.mark.parametrize("name", ["turn_timeout", "stall_timeout"])
@pytest.mark.parametrize("seconds", [0.0, -1.0, float("inf"), float("nan")])
async def test_create_app_refuses_a_turn_timeout_that_is_no_cap(
    tmp_path: Path, name: str, seconds: float
) -> None:
    """``turn_timeout=`` and ``stall_timeout=`` of ``create_app`` must be finite positive
    numbers of seconds (a stall timeout of -1 or NaN was taken before session 41)."""
    service = ContextService.open(tmp_path / "server.db")
    with pytest.raises(ValueError, match=name):
        create_app(service, **{name: seconds})
    await service.aclose()


async def test_a_hang_up_as_the_answer_arrives_records_nothing(tmp_path: Path) -> None:
    """(Final review, F3.) A client that hangs up once the proxy has stopped watching
    (the whole answer arrived) and before it is recorded: the answer is not recorded
    (the client never sees it, and its retry would be a repeat that branches the next
    turn), 499, the session freed; the retry then continues the one line."""
    async with rig(tmp_path) as r:
        stopped = [False]  # the proxy's watch over the wait for the upstream has ended
        sent = [False]

        async def receive() -> dict[str, Any]:
            if not sent[0]:
                sent[0] = True
                body = {"model": "m", "messages": [ASK]}
                return {"type": "http.request", "body": json.dumps(body).encode()}
            if stopped[0]:  # gone by the time anyone looks again
                return {"type": "http.disconnect"}
            try:
                await anyio.sleep_forever()  # (until the proxy stops watching: cancelled)
            finally:
                stopped[0] = True
            return {"type": "http.disconnect"}

        status = await _call(r.app, "/v1/chat/completions", receive)
        assert stopped[0] and len(r.upstream.requests) == 1  # (answered, then the hang-up)
        assert status == 499 and r.state.families_locked() == 0
        kinds = [type(e) for e in _events(r)]
        assert kinds.count(MessageAppended) == 1 and UsageReported not in kinds  # the ask only
        await _the_retry_goes_on(r, "/v1/chat/completions")
