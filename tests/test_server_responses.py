"""The proxy's ``/v1/responses`` face, driven by the real ``openai`` SDK in-process.

The upstream is the fake ASGI model server (``helpers/fake_upstream.py``) answering with
real-shaped Responses objects and named stream events; a hook checks that what it
receives is exactly the ledger's compacted view, converted back to input items.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import openai
import pytest
from helpers.fake_upstream import Cut, Error, Failed, Say, Seen, responses_prompt_tokens
from helpers.server_rig import Rig, ask, rig, switches

from ctxledger import CompressionConfig
from ctxledger.importers import responses as converter
from ctxledger.importers.responses import STUBS, messages_to_items
from ctxledger.integrations import responses as old_path
from ctxledger.tokens import count_messages

pytestmark = pytest.mark.anyio

SYSTEM = "You are a careful coding agent. Answer briefly."
MODEL = "gpt-4.1"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _only_session(r: Rig) -> str:
    [node] = r.service.ledger.sessions()
    return node.session_id


def _check_view(r: Rig, family: str) -> Any:
    """An upstream hook: it got the ledger's compacted view as items, nothing more."""

    def check(seen: Seen) -> None:
        view = r.service.api_messages(family)
        assert view[0]["role"] == "system"
        assert seen.json["instructions"] == view[0]["content"]
        assert seen.json["input"] == messages_to_items(view[1:])

    return check


def test_the_converter_moved_and_its_old_path_re_exports_it() -> None:
    assert old_path.items_to_messages is converter.items_to_messages
    assert old_path.messages_to_items is converter.messages_to_items
    assert old_path.STUBS == converter.STUBS


async def test_json_and_stream_turns_append_only_the_new_suffix(tmp_path: Path) -> None:
    async with rig(tmp_path) as r:
        client = r.openai()
        history: list[Any] = [{"role": "user", "content": "question 0"}]
        res = await client.responses.create(model=MODEL, instructions=SYSTEM, input=history)
        assert res.output_text == "answer 1"
        history += res.output  # the SDK's own pattern: the output items, sent back as they are
        history.append({"role": "user", "content": "question 1"})
        stream = await client.responses.create(
            model=MODEL, instructions=SYSTEM, input=history, stream=True
        )
        kinds = [event.type async for event in stream]
        assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
        assert "response.output_text.delta" in kinds
        history += [
            {"role": "assistant", "content": "answer 2"},  # an easy-input message this time
            {"role": "user", "content": "question 2"},
        ]
        async with client.responses.stream(model=MODEL, instructions=SYSTEM, input=history) as s:
            final = await s.get_final_response()
        assert final.output_text == "answer 3"
        sid = _only_session(r)  # one line: each turn continued it
        ledger = r.service.ledger
        live = ledger.transcript.live_messages(sid)
        assert [m["content"] for m in live] == [
            "question 0",
            "answer 1",
            "question 1",
            "answer 2",
            "question 2",
            "answer 3",
        ]
        assert live[1][STUBS][0]["id"] == "msg_1"  # the item's id rides along
        usage = ledger.usage(sid)
        assert usage.agent_calls == 3  # the JSON usage and both streams' response.completed
        assert usage.last_prompt_tokens == final.usage.input_tokens  # type: ignore[union-attr]
        seen = r.upstream.requests[-1]
        assert seen.path == "/v1/responses"
        assert seen.headers["authorization"] == "Bearer sk-client"
        assert seen.json["instructions"] == SYSTEM
        assert ledger.transcript.session(sid).system_prompt == SYSTEM


async def test_a_leading_developer_message_is_the_system_prompt_and_keeps_its_role(
    tmp_path: Path,
) -> None:
    async with rig(tmp_path) as r:
        client = r.openai()
        dev = {"role": "developer", "content": [{"type": "input_text", "text": SYSTEM}]}
        await client.responses.create(model=MODEL, input=[dev, {"role": "user", "content": "hi"}])
        sid = _only_session(r)
        assert r.service.ledger.transcript.session(sid).system_prompt == SYSTEM
        sent = r.upstream.requests[0].json
        assert "instructions" not in sent
        assert sent["input"][0] == {"role": "developer", "content": SYSTEM}
        assert sent["input"][1:] == [{"role": "user", "content": "hi"}]


async def test_function_call_round_trip_keeps_reasoning_items(tmp_path: Path) -> None:
    async with rig(tmp_path) as r:
        client = r.openai()
        r.upstream.queue(Say("checking", tool=("read_file", {"path": "a.py"}), reasoning="need it"))
        extra: dict[str, Any] = {"store": False, "include": ["reasoning.encrypted_content"]}
        tools: Any = [
            {
                "type": "function",
                "name": "read_file",
                "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
                "strict": False,
            }
        ]
        history: list[Any] = [{"role": "user", "content": "read a.py"}]
        async with client.responses.stream(
            model=MODEL, instructions=SYSTEM, input=history, tools=tools, **extra
        ) as s:
            deltas = [
                e.delta async for e in s if e.type == "response.function_call_arguments.delta"
            ]
            first = await s.get_final_response()
        assert "".join(deltas) == '{"path": "a.py"}'
        reasoning, message, call = first.output
        assert message.type == "message"
        assert reasoning.type == "reasoning" and call.type == "function_call"
        history += [item.model_dump(exclude_none=True) for item in first.output]
        history.append(
            {"type": "function_call_output", "call_id": call.call_id, "output": "print('hi')"}
        )
        second = await client.responses.create(
            model=MODEL, instructions=SYSTEM, input=history, tools=tools, **extra
        )
        assert second.output_text == "answer 2"
        sent = r.upstream.requests[1].json
        # the reasoning item went back upstream exactly as the provider made it (sealed content too)
        assert sent["input"][1] == {
            "id": "rs_1",
            "type": "reasoning",
            "summary": [{"type": "summary_text", "text": "need it"}],
            "encrypted_content": "gAAAA-sealed-1",
        }
        assert [i.get("type", "message") for i in sent["input"]] == [
            "message",
            "reasoning",
            "message",
            "function_call",
            "function_call_output",
        ]
        assert sent["input"][3]["call_id"] == call.call_id
        assert sent["tools"] == tools and sent["store"] is False
        sid = _only_session(r)  # no branch: the resent output matched the recorded reply
        live = r.service.ledger.transcript.live_messages(sid)
        assert [m["role"] for m in live] == ["user", "assistant", "tool", "assistant"]
        assert live[1]["tool_calls"][0]["id"] == call.call_id
        assert [stub.get("type") for stub in live[1][STUBS]] == [
            "reasoning",
            "message",
            "function_call",
        ]
        assert r.service.ledger.verify().ok


async def test_a_long_conversation_stays_under_the_threshold(tmp_path: Path) -> None:
    config = CompressionConfig(context_length=8192)
    async with rig(tmp_path, config=config) as r:
        client = r.openai(**{"X-Ctxledger-Session": "long-resp"})
        r.upstream.on_request = _check_view(r, "long-resp")
        threshold = config.threshold_tokens(8192)
        history: list[Any] = []
        for i in range(60):
            history.append({"role": "user", "content": ask(i, 110)})
            if i % 6 == 0:  # a tool round trip: the call, then its output in the next request
                r.upstream.queue(Say("looking", tool=("grep", {"pattern": f"x{i}"})))
                res = await client.responses.create(model=MODEL, instructions=SYSTEM, input=history)
                call = res.output[-1]
                assert call.type == "function_call"
                history += [item.model_dump(exclude_none=True) for item in res.output]
                history.append(
                    {"type": "function_call_output", "call_id": call.call_id, "output": f"hit {i}"}
                )
            if i % 2:
                async with client.responses.stream(
                    model=MODEL, instructions=SYSTEM, input=history
                ) as s:
                    res = await s.get_final_response()
            else:
                res = await client.responses.create(model=MODEL, instructions=SYSTEM, input=history)
            history += [item.model_dump(exclude_none=True) for item in res.output]
        sent = [responses_prompt_tokens(SYSTEM, seen.items) for seen in r.upstream.requests]
        assert max(sent) < threshold
        assert responses_prompt_tokens(SYSTEM, history) > 3 * threshold
        assert len(switches(r)) >= 3
        ledger = r.service.ledger
        assert len(ledger.chains.chain("long-resp")) == len(switches(r)) + 1  # one line
        replay = (
            await r.http.get("/v1/sessions/long-resp/replay", params={"verify": "true"})
        ).json()
        assert replay["equal"] is True and replay["drifted"] is False
        assert ledger.verify().ok


async def test_a_cut_stream_records_nothing_of_its_reply(tmp_path: Path) -> None:
    async with rig(tmp_path) as r:
        client = r.openai()
        history: list[Any] = [{"role": "user", "content": "first"}]
        res = await client.responses.create(model=MODEL, instructions=SYSTEM, input=history)
        history += [*res.output, {"role": "user", "content": "second"}]
        r.upstream.queue(Cut(after=5))
        with pytest.raises(RuntimeError, match=r"response\.completed"):
            async with client.responses.stream(
                model=MODEL, instructions=SYSTEM, input=history
            ) as s:
                await s.get_final_response()
        sid = _only_session(r)
        ledger = r.service.ledger
        assert [m["content"] for m in ledger.transcript.live_messages(sid)] == [
            "first",
            "answer 1",
            "second",
        ]
        assert ledger.usage(sid).agent_calls == 1
        # the client retries the turn: it continues from what was recorded, nothing doubled
        again = await client.responses.create(model=MODEL, instructions=SYSTEM, input=history)
        contents = [m["content"] for m in ledger.transcript.live_messages(sid)]
        assert contents == ["first", "answer 1", "second", again.output_text]
        assert len(ledger.sessions()) == 1 and ledger.verify().ok


def _long_history(n: int = 24) -> list[Any]:
    items: list[Any] = []
    for i in range(n // 2):
        items += [
            {"role": "user", "content": ask(i, 80)},
            {"role": "assistant", "content": f"done with step {i}. " * 20},
        ]
    items.append({"role": "user", "content": "what next?"})
    return items


async def test_an_overflow_error_leads_to_one_compaction_and_a_retry(tmp_path: Path) -> None:
    async with rig(tmp_path) as r:
        client = r.openai(**{"X-Ctxledger-Session": "big", "X-Ctxledger-Context-Length": "8192"})
        overflow = {
            "error": {
                "message": "Your input exceeds the context window of this model. "
                "Please adjust your input and try again.",
                "type": "invalid_request_error",
                "param": "input",
                "code": "context_length_exceeded",
            }
        }
        r.upstream.queue(Error(400, overflow))
        res = await client.responses.create(model=MODEL, instructions=SYSTEM, input=_long_history())
        assert res.output_text == "answer 2"
        first, retry = r.upstream.requests
        assert len(retry.items) < len(first.items)
        [switch] = switches(r)
        ledger = r.service.ledger
        tip = ledger.tip("big")
        assert switch.new_session_id == tip and ledger.chains.compression_count(tip) == 1
        assert ledger.transcript.live_messages(tip)[-1]["content"] == "answer 2"


OVERFLOW = Failed(
    "context_length_exceeded",
    "Your input exceeds the context window of this model. Please adjust your input and try again.",
)


async def test_an_overflow_reported_inside_a_stream_is_recovered_from(tmp_path: Path) -> None:
    async with rig(tmp_path) as r:
        client = r.openai(**{"X-Ctxledger-Session": "big", "X-Ctxledger-Context-Length": "8192"})
        r.upstream.queue(OVERFLOW)  # a 200 stream: created, in_progress, response.failed
        async with client.responses.stream(
            model=MODEL, instructions=SYSTEM, input=_long_history()
        ) as s:
            kinds = [event.type async for event in s]
            final = await s.get_final_response()
        assert "response.failed" not in kinds  # the client only saw the retried stream
        assert final.output_text == "answer 2"
        first, retry = r.upstream.requests
        assert len(retry.items) < len(first.items)
        ledger = r.service.ledger
        tip = ledger.tip("big")
        assert len(switches(r)) == 1 and ledger.chains.compression_count(tip) == 1
        assert ledger.transcript.live_messages(tip)[-1]["content"] == "answer 2"
        assert ledger.usage(tip).agent_calls == 1


async def test_in_stream_failures_that_persist_or_are_not_overflows(tmp_path: Path) -> None:
    async with rig(tmp_path) as r:
        client = r.openai(**{"X-Ctxledger-Session": "s", "X-Ctxledger-Context-Length": "8192"})
        r.upstream.queue(*[OVERFLOW] * 10)
        with pytest.raises(openai.BadRequestError) as err:  # the last failure, as a JSON error
            await client.responses.create(
                model=MODEL, instructions=SYSTEM, input=_long_history(), stream=True
            )
        assert err.value.code == "context_length_exceeded"
        assert len(r.upstream.requests) == 1 + r.service.config.max_compression_attempts
        # a failure that is not an overflow reaches the client as the provider sent it
        before = len(r.upstream.requests)
        r.upstream.script[:] = [
            Failed("server_error", "The server had an error processing your request.")
        ]
        stream = await client.responses.create(
            model=MODEL, instructions=SYSTEM, input=_long_history(), stream=True
        )
        kinds = [event.type async for event in stream]
        assert kinds == ["response.created", "response.in_progress", "response.failed"]
        assert len(r.upstream.requests) == before + 1  # no retry
        tip = r.service.ledger.tip("s")
        assert r.service.ledger.transcript.live_messages(tip)[-1]["role"] == "user"  # no reply


async def test_a_diverging_history_gets_a_branch(tmp_path: Path) -> None:
    async with rig(tmp_path) as r:
        client = r.openai()
        history: list[Any] = [{"role": "user", "content": "plan the work"}]
        res = await client.responses.create(model=MODEL, instructions=SYSTEM, input=history)
        history += [*res.output, {"role": "user", "content": "step one"}]
        await client.responses.create(model=MODEL, instructions=SYSTEM, input=history)
        edited = [
            history[0],
            {"role": "assistant", "content": "an edited answer"},
            {"role": "user", "content": "redo"},
        ]
        await client.responses.create(model=MODEL, instructions=SYSTEM, input=edited)
        ledger = r.service.ledger
        kinds = sorted(ledger.chains.kind(s.session_id) for s in ledger.sessions())
        assert kinds == ["branch", "root"]


async def test_bad_input_is_refused_and_appends_nothing(tmp_path: Path) -> None:
    async with rig(tmp_path) as r:
        client = r.openai()
        before = r.last_seq()
        with pytest.raises(openai.UnprocessableEntityError) as err:
            await client.responses.create(
                model=MODEL,
                input=[
                    {"role": "user", "content": "hi"},
                    {"type": "function_call_output", "call_id": "nope", "output": "x"},
                ],
            )
        assert err.value.body["code"] == "invalid_message"  # type: ignore[index]
        bad: list[dict[str, Any]] = [
            {"model": MODEL, "input": []},
            {"model": MODEL, "input": ["not an item"]},
            {"model": MODEL, "input": [{"type": "function_call", "name": "f"}]},
            {"model": MODEL, "input": "hi", "max_output_tokens": 0},
            {"model": MODEL, "input": "hi", "instructions": ["not", "text"]},
            {"model": "", "input": "hi"},
            {"model": MODEL, "input": "hi", "previous_response_id": 5},
        ]
        for body in bad:
            resp = await r.http.post("/v1/responses", json=body)
            assert resp.status_code == 422, body
            error = resp.json()["error"]
            assert error["type"] == "invalid_request_error" and error["code"] == "invalid_input"
        resp = await r.http.post(
            "/v1/responses", content=b"{not json", headers={"content-type": "application/json"}
        )
        assert resp.status_code == 400 and resp.json()["error"]["code"] == "bad_json"
        assert r.last_seq() == before and r.upstream.requests == []


async def test_previous_response_id_continues_the_recorded_line(tmp_path: Path) -> None:
    async with rig(tmp_path) as r:
        client = r.openai()
        r.upstream.queue(Say("checking", tool=("read_file", {"path": "a.py"})))
        first = await client.responses.create(model=MODEL, instructions=SYSTEM, input="read a.py")
        call = first.output[-1]
        assert call.type == "function_call"
        output = {"type": "function_call_output", "call_id": call.call_id, "output": "x = 1"}
        second = await client.responses.create(
            model=MODEL, instructions=SYSTEM, input=[output], previous_response_id=first.id
        )
        async with client.responses.stream(
            model=MODEL,
            instructions=SYSTEM,
            input=[{"role": "user", "content": "and then?"}],
            previous_response_id=second.id,
        ) as s:
            third = await s.get_final_response()
        assert third.output_text == "answer 3"
        # the upstream got the whole conversation, never the provider-side chain
        sent = r.upstream.requests[-1].json
        assert "previous_response_id" not in sent
        assert [i.get("type", "message") for i in sent["input"]] == [
            "message",
            "message",
            "function_call",
            "function_call_output",
            "message",
            "message",
        ]
        assert sent["input"][2]["call_id"] == call.call_id
        sid = _only_session(r)  # one line, no branch
        live = r.service.ledger.transcript.live_messages(sid)
        roles = ["user", "assistant", "tool", "assistant", "user", "assistant"]
        assert [m["role"] for m in live] == roles
        # chaining from an older response forks a branch holding that history
        await client.responses.create(
            model=MODEL,
            instructions=SYSTEM,
            input=[{"role": "user", "content": "another way"}],
            previous_response_id=second.id,
        )
        ledger = r.service.ledger
        kinds = sorted(ledger.chains.kind(x.session_id) for x in ledger.sessions())
        assert kinds == ["branch", "root"]
        forked = r.upstream.requests[-1].json["input"]
        assert len(forked) == 6 and forked[-1]["content"] == "another way"
        # the same chain through a session header; a header naming another session is refused
        with pytest.raises(openai.UnprocessableEntityError, match="continues session"):
            await r.openai(**{"X-Ctxledger-Session": "other"}).responses.create(
                model=MODEL, input="more", previous_response_id=third.id
            )
        assert ledger.verify().ok


async def test_provider_side_state_is_refused_with_a_clear_400(tmp_path: Path) -> None:
    async with rig(tmp_path) as r:
        client = r.openai()
        before = r.last_seq()
        with pytest.raises(openai.BadRequestError) as err:
            await client.responses.create(model=MODEL, input="and then?", previous_response_id="r1")
        body: Any = err.value.body
        assert body["code"] == "provider_state_unsupported"
        assert "previous_response_id 'r1' is not a response this proxy recorded" in body["message"]
        assert "send the whole conversation in 'input'" in body["message"]
        refused: list[tuple[dict[str, Any], str]] = [
            ({"conversation": "conv_1"}, "provider_state_unsupported"),
            ({"background": True}, "background_unsupported"),
            (
                {
                    "input": [
                        {"role": "user", "content": "x"},
                        {"type": "item_reference", "id": "a"},
                    ]
                },
                "provider_state_unsupported",
            ),
        ]
        for extra, code in refused:
            resp = await r.http.post("/v1/responses", json={"model": MODEL, "input": "x", **extra})
            assert resp.status_code == 400 and resp.json()["error"]["code"] == code, extra
        assert r.last_seq() == before and r.upstream.requests == []
    async with rig(tmp_path / "anthropic", api="anthropic") as r:
        resp = await r.http.post("/v1/responses", json={"model": MODEL, "input": "hi"})
        assert resp.status_code == 404 and resp.json()["error"]["code"] == "wrong_api"


async def test_upstream_errors_reach_the_client_unchanged(tmp_path: Path) -> None:
    async with rig(tmp_path) as r:
        r.upstream.queue(
            Error(401, {"error": {"message": "Incorrect API key", "type": "invalid_request_error"}})
        )
        with pytest.raises(openai.AuthenticationError, match="Incorrect API key"):
            await r.openai().responses.create(model=MODEL, input="hi")
        assert len(r.upstream.requests) == 1  # not an overflow: no retry
        sid = _only_session(r)  # the user's message is recorded, no reply
        assert [m["role"] for m in r.service.ledger.transcript.live_messages(sid)] == ["user"]
        assert sum(count_messages(r.service.api_messages(sid))) > 0


async def test_re_used_call_ids_are_repaired_and_the_line_continues(tmp_path: Path) -> None:
    """The one validation policy on this face too: a client whose model re-used call_0 in
    two turns is repaired (recorded once), not refused, and its next turn continues the
    same line instead of branching."""
    from ctxledger.events import ToolCallIdsRepaired

    def turn(n: int) -> list[Any]:
        return [
            {"role": "user", "content": f"read file {n}"},
            {
                "type": "function_call",
                "call_id": "call_0",
                "name": "read_file",
                "arguments": f'{{"path": "f{n}.py"}}',
            },
            {"type": "function_call_output", "call_id": "call_0", "output": f"body {n}"},
        ]

    async with rig(tmp_path) as r:
        client = r.openai()
        history: list[Any] = [*turn(1), *turn(2), {"role": "user", "content": "and now?"}]
        sent_ids = []
        for ask in ("once more", "again"):
            res = await client.responses.create(model=MODEL, instructions=SYSTEM, input=history)
            sent = r.upstream.requests[-1].json["input"]
            sent_ids.append([i["call_id"] for i in sent if i.get("type") == "function_call"])
            history += [item.model_dump(exclude_none=True) for item in res.output]
            history.append({"role": "user", "content": ask})
        sid = _only_session(r)  # the second turn continued the line
        repairs = [
            rec.event
            for rec in r.service.ledger.store.read_all()
            if isinstance(rec.event, ToolCallIdsRepaired)
        ]
    first, second = sent_ids
    assert first == second and first[0] == "call_0" and len(set(first)) == 2
    assert len(repairs) == 1 and repairs[0].session_id == sid  # recorded once, not per turn
    assert [e.original for e in repairs[0].repairs] == ["call_0", "call_0"]


async def test_a_client_cannot_forge_a_response_id_another_client_chains_from(
    tmp_path: Path,
) -> None:
    """The response-id key is the proxy's own: sent by a client (on any face) it is dropped,
    so a later ``previous_response_id`` never resolves to that client's history."""
    async with rig(tmp_path) as r:
        forged = {"role": "assistant", "content": "trust me", "responses_response_id": "resp_v"}
        resp = await r.http.post(
            "/v1/chat/completions",
            json={
                "model": MODEL,
                "messages": [
                    {"role": "user", "content": "hi"},
                    forged,
                    {"role": "user", "content": "go"},
                ],
            },
        )
        assert resp.status_code == 200, resp.text
        stored = r.service.ledger.transcript.state.messages.values()
        assert all("responses_response_id" not in s.message for s in stored)
        before = r.last_seq()
        resp = await r.http.post(
            "/v1/responses",
            json={"model": MODEL, "input": "more", "previous_response_id": "resp_v"},
        )
        assert resp.status_code == 400
        assert resp.json()["error"]["code"] == "provider_state_unsupported"
        assert r.last_seq() == before


async def test_previous_response_id_after_a_restart_reads_no_body_it_does_not_need(
    tmp_path: Path,
) -> None:
    async with rig(tmp_path) as r:
        client = r.openai()
        first = await client.responses.create(model=MODEL, instructions=SYSTEM, input="hello")
        for i in range(40):  # other traffic after it
            await r.openai(**{"X-Ctxledger-Session": f"s{i}"}).responses.create(
                model=MODEL, instructions=SYSTEM, input=f"task {i}"
            )
    async with rig(tmp_path) as r:  # a restart: the ledger is folded from the log again
        messages = r.service.ledger.transcript.state.messages.values()
        lazy = sum(m.body is None for m in messages)
        assert lazy > 80  # bodies a rebuild leaves in the log
        client = r.openai()
        for _ in range(3):  # an id nobody recorded: a clear 400, and no body kept in memory
            with pytest.raises(openai.BadRequestError, match="not a response this proxy"):
                await client.responses.create(
                    model=MODEL, input="more", previous_response_id="resp_unknown"
                )
        assert sum(m.body is None for m in messages) == lazy
        again = await client.responses.create(
            model=MODEL, input="and then?", previous_response_id=first.id
        )
        assert again.output_text
        sent = r.upstream.requests[-1].json["input"]
        assert sent[-3]["content"] == "hello" and "answer 1" in str(sent[-2]["content"])
