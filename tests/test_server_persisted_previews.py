"""A big tool output sent through a proxy face is stored out of the view (HERMES_SPEC
§6); its preview told the upstream model to call ``read_persisted``, a tool the client's
own agent does not have (an Agents SDK run then ended with ModelBehaviorError). The
upstream now gets a preview naming no such tool, unless the client declares it; the
ledger keeps the standard block (replay and what-if read that)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from helpers.server_rig import rig

from ctxledger.runtime.toolbudget import (
    READ_PERSISTED_TOOL_NAME,
    for_client_tools,
    preview_block,
    read_persisted_tool,
)

pytestmark = pytest.mark.anyio

AUTH = {"authorization": "Bearer sk", "X-Ctxledger-Session": "big"}
CALL = {"id": "call_1", "type": "function", "function": {"name": "grep", "arguments": "{}"}}
GREP = {"type": "function", "function": {"name": "grep", "parameters": {"type": "object"}}}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.parametrize("declared", [False, True])
async def test_a_proxied_preview_names_no_tool_the_client_lacks(
    tmp_path: Path, declared: bool
) -> None:
    output = "".join(f"match {i}: some line of the repository\n" for i in range(3000))
    messages: list[Any] = [
        {"role": "user", "content": "find it"},
        {"role": "assistant", "content": None, "tool_calls": [CALL]},
        {"role": "tool", "tool_call_id": "call_1", "content": output},
    ]
    tools = [GREP, read_persisted_tool()] if declared else [GREP]
    async with rig(tmp_path) as r:
        body = {"model": "gpt-4.1", "messages": messages, "tools": tools}
        res = await r.http.post("/v1/chat/completions", json=body, headers=AUTH)
        assert res.status_code == 200, res.text
        sent = r.upstream.requests[-1].json["messages"][-1]["content"]
        sent = sent if isinstance(sent, str) else sent[0]["text"]
        assert sent.startswith("[tool output stored outside the context") and len(sent) < 5000
        assert (f"call {READ_PERSISTED_TOOL_NAME} with" in sent) is declared
        honest = "No tool in this conversation reads it" in sent
        assert honest is not declared
        if honest:
            assert "GET /v1/sessions/big/persisted/REF" in sent
        kept = r.service.ledger.api_messages("big")[-2]["content"]  # the reply is last
        assert f"call {READ_PERSISTED_TOOL_NAME} with" in kept  # the ledger's block is unchanged


async def test_the_preview_names_the_chain_root_after_a_compaction(tmp_path: Path) -> None:
    """The rewritten preview names the chain's first session, not its tip: a compaction
    does not change the bytes of a preview still in the view (a prompt-cache hit)."""
    output = "".join(f"match {i}: some line of the repository\n" for i in range(3000))
    messages: list[Any] = []
    for i in range(6):
        messages += [
            {"role": "user", "content": f"step {i}"},
            {"role": "assistant", "content": "ok"},
        ]
    messages += [
        {"role": "user", "content": "find it"},
        {"role": "assistant", "content": None, "tool_calls": [CALL]},
        {"role": "tool", "tool_call_id": "call_1", "content": output},
    ]
    async with rig(tmp_path) as r:
        body = {"model": "gpt-4.1", "messages": messages, "tools": [GREP]}
        res = await r.http.post("/v1/chat/completions", json=body, headers=AUTH)
        assert res.status_code == 200, res.text
        messages.append(res.json()["choices"][0]["message"])
        res = await r.http.post("/v1/sessions/big/compress", json={})
        assert res.status_code == 200, res.text
        assert r.service.ledger.tip("big") != "big"
        body["messages"] = [*messages, {"role": "user", "content": "next"}]
        res = await r.http.post("/v1/chat/completions", json=body, headers=AUTH)
        assert res.status_code == 200, res.text
        assert "branch" not in res.headers.get("x-ctxledger-notice", "")
        sent = [m["content"] for m in r.upstream.requests[-1].json["messages"]]
        previews = [c for c in sent if isinstance(c, str) and "No tool in this" in c]
        assert previews and "GET /v1/sessions/big/persisted/REF" in previews[0]
        ref = re.search(r"[0-9a-f]{64}", previews[0])
        assert ref is not None  # and the route named reads it
        got = await r.http.get(f"/v1/sessions/big/persisted/{ref.group()}", headers=AUTH)
        assert got.status_code == 200, got.text


def _tool(shape: str, name: str) -> dict[str, Any]:
    schema = {"type": "object"}
    if shape == "chat":  # nested under "function"
        return {"type": "function", "function": {"name": name, "parameters": schema}}
    if shape == "anthropic":
        return {"name": name, "input_schema": schema}
    return {"type": "function", "name": name, "parameters": schema}  # Responses: flat


@pytest.mark.parametrize("shape", ["chat", "anthropic", "responses"])
@pytest.mark.parametrize("marked", [False, True], ids=["text", "cache-marked parts"])
def test_the_preview_rewrite_reads_each_tool_shape_and_marked_parts(
    shape: str, marked: bool
) -> None:
    """Each face's tool shape is read for a declared ``read_persisted``; a preview whose
    content the cache marker turned into parts is rewritten in its first part, marker kept."""
    block = preview_block("x" * 5000, ref="a" * 64, tool_call_id="call_1")
    marker = {"type": "ephemeral"}
    content: Any = [{"type": "text", "text": block, "cache_control": marker}] if marked else block
    message = {"role": "tool", "tool_call_id": "call_1", "content": content}
    [kept] = for_client_tools(
        [message], [_tool(shape, "grep"), _tool(shape, "read_persisted")], "r"
    )
    assert kept is message
    [out] = for_client_tools([message], [_tool(shape, "grep")], "r")
    text = out["content"][0]["text"] if marked else out["content"]
    assert text.startswith(block.split("\n", 1)[0])
    assert (
        "No tool in this conversation reads it" in text
        and f"call {READ_PERSISTED_TOOL_NAME}" not in text
    )
    assert "GET /v1/sessions/r/persisted/REF" in text
    if marked:
        assert out["content"][0]["cache_control"] == marker
