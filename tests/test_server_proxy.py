"""The compacting proxy, driven by the real ``openai`` and ``anthropic`` SDKs in-process.

The upstream is a fake ASGI model server (``helpers/fake_upstream.py``) with scripted replies,
usage and errors; it also checks, on every request, that what it received is exactly
the ledger's compacted view of the session at that moment.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anthropic
import anyio
import openai
import pytest
from helpers.fake_upstream import Cut, Error, Say, Seen
from helpers.server_rig import Rig, ask, rig, switches

from ctxledger import CompressionConfig
from ctxledger.errors import ConnectionLost
from ctxledger.tokens import count_messages

pytestmark = pytest.mark.anyio

SYSTEM = "You are a careful coding agent. Answer briefly."


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _check_view(r: Rig, family: str) -> Any:
    """An upstream hook: what the upstream got is the ledger's compacted view, nothing more."""

    def check(seen: Seen) -> None:
        view = r.service.api_messages(family)
        sent = [{**m, "content": m["content"]} for m in seen.messages]
        assert sent[0]["role"] == "system"
        assert sent == view

    return check


async def test_openai_json_turns_append_only_the_new_suffix(tmp_path: Path) -> None:
    async with rig(tmp_path) as r:
        client = r.openai()
        history: list[Any] = [{"role": "system", "content": SYSTEM}]
        for i in range(3):
            history.append({"role": "user", "content": f"question {i}"})
            res = await client.chat.completions.create(model="gpt-4.1", messages=history)
            history.append({"role": "assistant", "content": res.choices[0].message.content})
        ledger = r.service.ledger
        [node] = ledger.sessions()
        live = ledger.transcript.live_messages(node.session_id)
        assert [m["content"] for m in live] == [m["content"] for m in history[1:]]
        assert ledger.usage(node.session_id).agent_calls == 3
        assert r.upstream.requests[-1].headers["authorization"] == "Bearer sk-client"


async def test_openai_stream_forwards_usage_chunk_only_when_asked_and_records_it(
    tmp_path: Path,
) -> None:
    async with rig(tmp_path) as r:
        client = r.openai()
        msgs: list[Any] = [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": "hello there"},
        ]
        stream = await client.chat.completions.create(model="gpt-4.1", messages=msgs, stream=True)
        chunks = [c async for c in stream]
        assert all(c.usage is None for c in chunks)  # the client did not ask for the usage chunk
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        msgs += [{"role": "assistant", "content": text}, {"role": "user", "content": "and now?"}]
        stream = await client.chat.completions.create(
            model="gpt-4.1", messages=msgs, stream=True, stream_options={"include_usage": True}
        )
        chunks = [c async for c in stream]
        usage = [c.usage for c in chunks if c.usage is not None]
        assert len(usage) == 1 and usage[0].prompt_tokens > 0
        ledger = r.service.ledger
        [node] = ledger.sessions()
        assert ledger.usage(node.session_id).agent_calls == 2  # both streams' real usage recorded
        assert ledger.usage(node.session_id).last_prompt_tokens == usage[0].prompt_tokens
        assert [m["role"] for m in ledger.transcript.live_messages(node.session_id)] == [
            "user",
            "assistant",
        ] * 2


async def test_openai_stream_tool_call_round_trip_continues_the_line(tmp_path: Path) -> None:
    async with rig(tmp_path) as r:
        client = r.openai()
        r.upstream.queue(Say("checking", tool=("read_file", {"path": "a.py"})))
        msgs: list[Any] = [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": "read a.py"},
        ]
        stream = await client.chat.completions.create(model="gpt-4.1", messages=msgs, stream=True)
        calls: dict[int, dict[str, str]] = {}
        async for chunk in stream:
            for tc in (chunk.choices[0].delta.tool_calls or []) if chunk.choices else []:
                slot = calls.setdefault(tc.index, {"id": "", "args": ""})
                slot["id"] = tc.id or slot["id"]
                slot["args"] += tc.function.arguments or "" if tc.function else ""
        call_id = calls[0]["id"]
        msgs += [
            {
                "role": "assistant",
                "content": "checking",
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": "read_file", "arguments": calls[0]["args"]},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": call_id, "content": "print('hi')"},
        ]
        await client.chat.completions.create(model="gpt-4.1", messages=msgs)
        ledger = r.service.ledger
        assert (
            len(ledger.sessions()) == 1
        )  # no branch: the resent tool call matched the recorded one
        roles = [
            m["role"] for m in ledger.transcript.live_messages(ledger.sessions()[0].session_id)
        ]
        assert roles == ["user", "assistant", "tool", "assistant"]


async def test_anthropic_json_and_stream_get_final_message(tmp_path: Path) -> None:
    async with rig(tmp_path, api="anthropic") as r:
        client = r.anthropic()
        r.upstream.queue(Say("let me look", tool=("read_file", {"path": "a.py"})))
        first = await client.messages.create(
            model="claude-sonnet-4",
            max_tokens=256,
            system=SYSTEM,
            messages=[{"role": "user", "content": "read a.py"}],
        )
        tool_use = first.content[1]
        assert tool_use.type == "tool_use"
        msgs: list[Any] = [
            {"role": "user", "content": "read a.py"},
            {
                "role": "assistant",
                "content": [b.model_dump(exclude_none=True) for b in first.content],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": tool_use.id, "content": "x = 1"},
                    {
                        "type": "text",
                        "text": "what does it do?",
                        "cache_control": {"type": "ephemeral"},
                    },
                ],
            },
        ]
        async with client.messages.stream(
            model="claude-sonnet-4", max_tokens=256, system=SYSTEM, messages=msgs
        ) as s:
            final = await s.get_final_message()
        assert final.content[0].text == "answer 2"
        seen = r.upstream.requests[-1]
        # the client's own auth (this SDK release sends it as a bearer token) and API version
        assert "sk-ant-client" in (
            seen.headers.get("x-api-key"),
            seen.headers.get("authorization", "")[7:],
        )
        assert "anthropic-version" in seen.headers
        assert seen.json["messages"][1]["content"][1]["type"] == "tool_use"
        ledger = r.service.ledger
        [node] = ledger.sessions()
        live = ledger.transcript.live_messages(node.session_id)
        assert [m["role"] for m in live] == ["user", "assistant", "tool", "user", "assistant"]
        assert live[-1]["content"] == "answer 2"
        assert ledger.usage(node.session_id).agent_calls == 2
        assert ledger.usage(node.session_id).last_prompt_tokens == final.usage.input_tokens


async def test_two_hundred_turns_stay_under_the_threshold_and_replay(tmp_path: Path) -> None:
    config = CompressionConfig(context_length=8192)
    async with rig(tmp_path, config=config) as r:
        client = r.openai(**{"X-Ctxledger-Session": "long-run"})
        r.upstream.on_request = _check_view(r, "long-run")
        threshold = config.threshold_tokens(8192)
        history: list[Any] = [{"role": "system", "content": SYSTEM}]
        for i in range(200):
            history.append({"role": "user", "content": ask(i)})
            stream = i % 2 == 1
            if stream:
                chunks = await client.chat.completions.create(
                    model="gpt-4.1", messages=history, stream=True
                )
                text = "".join(
                    [c.choices[0].delta.content or "" async for c in chunks if c.choices]
                )
            else:
                res = await client.chat.completions.create(model="gpt-4.1", messages=history)
                text = res.choices[0].message.content or ""
            history.append({"role": "assistant", "content": text})
        sent = [sum(count_messages(seen.messages)) for seen in r.upstream.requests]
        assert max(sent) < threshold
        assert sum(count_messages(history)) > 3 * threshold  # the client's list grew far past it
        assert len(switches(r)) >= 3
        ledger = r.service.ledger
        assert len(ledger.chains.chain("long-run")) == len(switches(r)) + 1  # one line, no branch
        replay = (
            await r.http.get("/v1/sessions/long-run/replay", params={"verify": "true"})
        ).json()
        assert replay["equal"] is True and replay["drifted"] is False
        assert ledger.verify().ok


async def test_a_stream_cut_mid_body_loses_nothing_recorded(tmp_path: Path) -> None:
    async with rig(tmp_path) as r:
        client = r.openai()
        msgs: list[Any] = [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": "first"},
        ]
        res = await client.chat.completions.create(model="gpt-4.1", messages=msgs)
        msgs += [
            {"role": "assistant", "content": res.choices[0].message.content},
            {"role": "user", "content": "second"},
        ]
        r.upstream.queue(Cut(after=3))
        with pytest.raises(openai.APIError):  # the SDK notices the stream ended without a finish
            stream = await client.chat.completions.create(
                model="gpt-4.1", messages=msgs, stream=True
            )
            got = [c async for c in stream]
            assert not any(c.choices and c.choices[0].finish_reason for c in got)
            raise openai.APIError("stream ended early", request=None, body=None)  # type: ignore[arg-type]
        ledger = r.service.ledger
        [node] = ledger.sessions()
        sid = node.session_id
        assert [m["content"] for m in ledger.transcript.live_messages(sid)] == [
            "first",
            "answer 1",
            "second",
        ]
        assert ledger.usage(sid).agent_calls == 1
        assert ledger.verify().ok
        # the client retries the turn: it continues from what was recorded, nothing doubled
        stream = await client.chat.completions.create(model="gpt-4.1", messages=msgs, stream=True)
        text = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
        assert [m["content"] for m in ledger.transcript.live_messages(sid)] == [
            "first",
            "answer 1",
            "second",
            text,
        ]
        assert len(ledger.sessions()) == 1


def _long_history(n: int = 24) -> list[Any]:
    msgs: list[Any] = [{"role": "system", "content": SYSTEM}]
    for i in range(n // 2):
        msgs += [
            {"role": "user", "content": ask(i, 80)},
            {"role": "assistant", "content": f"done with step {i}. " * 20},
        ]
    msgs.append({"role": "user", "content": "what next?"})
    return msgs


async def test_upstream_413_leads_to_one_compaction_and_a_successful_retry(tmp_path: Path) -> None:
    async with rig(tmp_path) as r:
        client = r.openai(**{"X-Ctxledger-Session": "big", "X-Ctxledger-Context-Length": "8192"})
        r.upstream.queue(
            Error(
                413, {"error": {"message": "Request entity too large", "type": "request_too_large"}}
            )
        )
        msgs = _long_history()
        res = await client.chat.completions.create(model="gpt-4.1", messages=msgs)
        assert res.choices[0].message.content == "answer 2"
        first, retry = r.upstream.requests
        assert len(retry.messages) < len(first.messages)
        [switch] = switches(r)
        ledger = r.service.ledger
        tip = ledger.tip("big")
        assert switch.new_session_id == tip and ledger.chains.compression_count(tip) == 1
        assert ledger.transcript.live_messages(tip)[-1]["content"] == "answer 2"


async def test_max_tokens_error_lowers_the_cap_without_compacting(tmp_path: Path) -> None:
    async with rig(tmp_path) as r:
        client = r.openai()
        message = (
            "max_tokens is too large: 9000. This model supports at most 4096 completion tokens."
        )
        r.upstream.queue(
            Error(400, {"error": {"message": message, "type": "invalid_request_error"}})
        )
        msgs = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "hi"}]
        res = await client.chat.completions.create(model="gpt-4.1", messages=msgs, max_tokens=9000)  # type: ignore[arg-type]
        assert res.choices[0].message.content == "answer 2"
        assert [s.json["max_tokens"] for s in r.upstream.requests] == [9000, 4096]
        assert switches(r) == []


async def test_overflow_that_never_clears_returns_the_upstream_error_after_bounded_retries(
    tmp_path: Path,
) -> None:
    async with rig(tmp_path) as r:
        client = r.openai(**{"X-Ctxledger-Session": "stuck", "X-Ctxledger-Context-Length": "8192"})
        too_long = {
            "error": {
                "message": "prompt is too long",
                "type": "invalid_request_error",
                "code": "context_length_exceeded",
            }
        }
        r.upstream.queue(*[Error(400, too_long)] * 10)
        with pytest.raises(openai.BadRequestError):
            await client.chat.completions.create(model="gpt-4.1", messages=_long_history())
        attempts = r.service.config.max_compression_attempts  # 3, as HERMES_SPEC §2
        # the first call, then one compress-and-retry per attempt (each made progress), no more
        assert len(r.upstream.requests) == 1 + attempts
        assert len(switches(r)) == attempts


async def test_concurrent_requests_on_one_session_are_serialized(tmp_path: Path) -> None:
    async with rig(tmp_path) as r:
        r.upstream.delay = 0.02
        headers = {"X-Ctxledger-Session": "shared", "X-Ctxledger-Context-Length": "8192"}
        client = r.openai(**headers)
        base = _long_history(50)[:-1]
        results: list[str] = []

        async def one(i: int) -> None:
            res = await client.chat.completions.create(
                model="gpt-4.1", messages=[*base, {"role": "user", "content": f"task {i}"}]
            )
            results.append(res.choices[0].message.content or "")

        async with anyio.create_task_group() as tg:
            for i in range(4):
                tg.start_soon(one, i)
        assert len(results) == 4
        assert r.upstream.max_in_flight == 1  # one turn of the session at a time, streams included
        assert r.state.families_locked() == 0  # no lock outlives its family's last turn
        ledger = r.service.ledger
        lines = [
            s.session_id
            for s in ledger.sessions()
            if ledger.chains.kind(s.session_id) in ("root", "branch")
        ]
        assert (
            len(lines) == 4
        )  # the first continued "shared"; the three that diverged from it branched
        switched = [s.session_id for s in switches(r)]
        assert len(switched) == len(set(switched)) == 4  # one compaction per line, none doubled
        assert ledger.verify().ok


async def test_diverging_history_gets_a_branch(tmp_path: Path) -> None:
    async with rig(tmp_path) as r:
        client = r.openai()
        msgs: list[Any] = [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": "plan the work"},
        ]
        for ask in ("step one", "step two"):
            res = await client.chat.completions.create(model="gpt-4.1", messages=msgs)
            msgs += [
                {"role": "assistant", "content": res.choices[0].message.content},
                {"role": "user", "content": ask},
            ]
        edited = [
            *msgs[:2],
            {"role": "assistant", "content": "an edited answer"},
            {"role": "user", "content": "redo"},
        ]
        await client.chat.completions.create(model="gpt-4.1", messages=edited)
        ledger = r.service.ledger
        kinds = sorted(ledger.chains.kind(s.session_id) for s in ledger.sessions())
        assert kinds == ["branch", "root"]
        branch = next(
            s.session_id for s in ledger.sessions() if ledger.chains.kind(s.session_id) == "branch"
        )
        root = ledger.chains.lineage(branch).parent_session_id
        assert root is not None
        assert [m["content"] for m in ledger.transcript.live_messages(root)][:3] == [
            "plan the work",
            "answer 1",
            "step one",
        ]
        assert [m["content"] for m in ledger.transcript.live_messages(branch)][:3] == [
            "plan the work",
            "an edited answer",
            "redo",
        ]
        # the next turn of the edited conversation continues the branch
        edited += [
            {"role": "assistant", "content": "answer 3"},
            {"role": "user", "content": "more"},
        ]
        await client.chat.completions.create(model="gpt-4.1", messages=edited)
        assert len(ledger.sessions()) == 2
        assert ledger.transcript.live_messages(branch)[-1]["content"] == "answer 4"


async def test_bad_proxy_input_appends_nothing(tmp_path: Path) -> None:
    async with rig(tmp_path) as r:
        client = r.openai()
        before = r.last_seq()
        with pytest.raises(openai.UnprocessableEntityError) as err:
            await client.chat.completions.create(
                model="gpt-4.1",
                messages=[
                    {"role": "user", "content": "hi"},
                    {"role": "tool", "tool_call_id": "nope", "content": "x"},
                ],
            )
        assert err.value.body["code"] == "invalid_message"  # type: ignore[index]
        with pytest.raises(openai.UnprocessableEntityError):
            await client.chat.completions.create(model="gpt-4.1", messages=[])
        resp = await r.http.post(
            "/v1/chat/completions",
            content=b"{not json",
            headers={"content-type": "application/json"},
        )
        assert resp.status_code == 400 and resp.json()["error"]["code"] == "bad_json"
        assert r.last_seq() == before and r.upstream.requests == []


async def test_guarded_proxy_rejects_a_missing_token_and_appends_nothing(tmp_path: Path) -> None:
    token = "t" * 32
    async with rig(tmp_path, token=token, guard_proxy=True) as r:
        before = r.last_seq()
        with pytest.raises(openai.AuthenticationError):
            await r.openai().chat.completions.create(
                model="gpt-4.1", messages=[{"role": "user", "content": "hi"}]
            )
        with pytest.raises(openai.AuthenticationError):
            await r.openai(**{"X-Ctxledger-Token": "wrong"}).chat.completions.create(
                model="gpt-4.1", messages=[{"role": "user", "content": "hi"}]
            )
        assert r.last_seq() == before and r.upstream.requests == []
        res = await r.openai(**{"X-Ctxledger-Token": token}).chat.completions.create(
            model="gpt-4.1", messages=[{"role": "user", "content": "hi"}]
        )
        assert res.choices[0].message.content == "answer 1"
        assert r.upstream.requests[0].headers["authorization"] == "Bearer sk-client"
        assert "x-ctxledger-token" not in r.upstream.requests[0].headers


async def test_upstream_errors_reach_the_client_unchanged(tmp_path: Path) -> None:
    async with rig(tmp_path, api="anthropic") as r:
        r.upstream.queue(
            Error(
                401,
                {
                    "type": "error",
                    "error": {"type": "authentication_error", "message": "invalid x-api-key"},
                },
            )
        )
        with pytest.raises(anthropic.AuthenticationError) as err:
            await r.anthropic().messages.create(
                model="claude-sonnet-4", max_tokens=10, messages=[{"role": "user", "content": "hi"}]
            )
        assert "invalid x-api-key" in str(err.value)
        assert len(r.upstream.requests) == 1  # not an overflow: no retry
        resp = await r.http.post(
            "/v1/chat/completions",
            json={"model": "m", "messages": [{"role": "user", "content": "x"}]},
        )
        assert resp.status_code == 404 and resp.json()["error"]["code"] == "wrong_api"


async def test_anthropic_prompt_too_long_learns_the_window_compacts_and_retries(
    tmp_path: Path,
) -> None:
    async with rig(tmp_path, api="anthropic") as r:
        client = r.anthropic(
            **{"X-Ctxledger-Session": "claude", "X-Ctxledger-Context-Length": "9000"}
        )
        too_long = {
            "type": "error",
            "error": {
                "type": "invalid_request_error",
                "message": "prompt is too long: 8500 tokens > 8192 maximum",
            },
        }
        r.upstream.queue(Error(400, too_long))
        history = _long_history()
        msgs = [m for m in history[1:]]
        async with client.messages.stream(
            model="claude-sonnet-4", max_tokens=256, system=SYSTEM, messages=msgs
        ) as s:
            final = await s.get_final_message()
        assert final.content[0].text == "answer 2"
        first, retry = r.upstream.requests
        assert len(retry.messages) < len(first.messages)
        ledger = r.service.ledger
        tip = ledger.tip("claude")
        assert ledger.transcript.session(tip).context_length == 8192  # the stated window, learned
        assert ledger.chains.compression_count(tip) == 1
        assert ledger.transcript.live_messages(tip)[-1]["content"] == "answer 2"


async def test_a_repeated_turn_is_not_recorded_and_keeps_the_full_set_of_cache_markers(
    tmp_path: Path,
) -> None:
    async with rig(tmp_path, api="anthropic") as r:
        client = r.anthropic()
        msgs: list[Any] = []
        for i in range(4):
            msgs.append({"role": "user", "content": f"question {i}"})
            reply = await client.messages.create(
                model="claude-sonnet-4", max_tokens=64, system=SYSTEM, messages=msgs
            )
            msgs.append({"role": "assistant", "content": reply.content[0].text})
        ledger = r.service.ledger
        [node] = ledger.sessions()
        before = ledger.store.last_seq()
        first = r.upstream.requests[-1].json
        # the client retries its last request (it never saw the answer): a repeat
        again = await client.messages.create(
            model="claude-sonnet-4", max_tokens=64, system=SYSTEM, messages=msgs[:-1]
        )
        assert again.content[0].text
        repeat = r.upstream.requests[-1].json
        assert repeat["messages"] == first["messages"]  # the same prompt as the first time
        assert str(repeat).count("cache_control") == str(first).count("cache_control") == 4
        assert ledger.store.last_seq() == before  # nothing of the repeat was recorded
        assert [m["content"] for m in ledger.transcript.live_messages(node.session_id)][-1] == (
            msgs[-1]["content"]
        )


@pytest.mark.parametrize(
    ("api", "path", "body", "said"),
    [
        ("openai", "/v1/chat/completions", {"model": "gpt-4.1"}, "server_error"),
        ("anthropic", "/v1/messages", {"model": "claude-x", "max_tokens": 64}, "api_error"),
    ],
)
async def test_a_store_server_out_of_reach_is_a_503_to_retry_on_the_proxy_face(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    api: str,
    path: str,
    body: dict[str, Any],
    said: str,
) -> None:
    """(Review F3: only the state API's 503 was tested.) A turn whose ledger server is
    out of reach is 503 ``store_unavailable`` with ``Retry-After`` in the provider's
    error shape; nothing goes upstream."""
    async with rig(tmp_path, api=api) as r:

        async def unreachable(*args: Any, **kwargs: Any) -> Any:
            raise ConnectionLost("could not append in postgresql://db/x: the server could not")

        monkeypatch.setattr(r.service, "start_session", unreachable)
        messages = [{"role": "user", "content": "hi"}]
        resp = await r.http.post(path, json={**body, "messages": messages})
        assert resp.status_code == 503 and resp.headers["retry-after"] == "1"
        assert resp.json()["error"]["code"] == "store_unavailable"
        assert resp.json()["error"]["type"] == said and r.upstream.requests == []


def test_the_faces_moved_out_of_proxy_still_import_from_it() -> None:
    """(Session 40, review 1, F5.) The faces moved to ``proxyfaces`` are re-exported by
    ``proxy``, ``Resolver`` (the type of a face's session resolver) among them."""
    from ctxledger.server import proxy, proxyfaces

    for name in proxyfaces.__all__:
        assert getattr(proxy, name) is getattr(proxyfaces, name)
        assert name in proxy.__all__
