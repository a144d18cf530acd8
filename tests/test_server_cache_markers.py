"""The prompt-cache markers a proxied request carries upstream are ones its wire accepts
(final review of session 31, F2): a tool-call-only assistant turn on the Anthropic face
never takes a message-level ``cache_control`` (the Messages API answers 400 "Extra inputs
are not permitted"), and on the OpenAI face a tool message's marker sits on a content
part, never on the message, when the server names no provider."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from helpers.fake_upstream import Say
from helpers.server_rig import Rig, rig

pytestmark = pytest.mark.anyio

CLAUDE = "claude-sonnet-4"
SYSTEM = "You are a careful coding agent."
TOOL = ("read_file", {"path": "a.py"})


def _block_marks(blocks: list[Any]) -> list[str]:
    """The type of each block holding a marker, itself or in its nested content."""
    return [
        b["type"]
        for b in blocks
        if "cache_control" in b
        or any("cache_control" in p for p in b.get("content") or () if isinstance(p, dict))
    ]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def _anthropic_tool_round(r: Rig, model: str = CLAUDE) -> list[dict[str, Any]]:
    """A tool-only assistant turn, its result, and the next request: the messages the
    upstream received for that next request."""
    return (await _tool_round_history(r, model))[1]


async def _tool_round_history(r: Rig, model: str) -> tuple[list[Any], list[dict[str, Any]]]:
    """As :func:`_anthropic_tool_round`; also the client's messages of the last request."""
    client = r.anthropic()
    r.upstream.queue(Say("", tool=TOOL), Say("done"))
    ask: Any = {"role": "user", "content": "read a.py"}
    first = await client.messages.create(model=model, max_tokens=256, system=SYSTEM, messages=[ask])
    call = next(b for b in first.content if b.type == "tool_use")
    result = {"type": "tool_result", "tool_use_id": call.id, "content": "x = 1"}
    turn: Any = {
        "role": "assistant",
        "content": [b.model_dump(exclude_none=True) for b in first.content],
    }
    history = [ask, turn, {"role": "user", "content": [result]}]
    await client.messages.create(model=model, max_tokens=256, system=SYSTEM, messages=history)
    messages: list[dict[str, Any]] = r.upstream.requests[-1].json["messages"]
    return history, messages


@pytest.mark.parametrize("provider", [None, "anthropic"])
async def test_anthropic_face_sends_markers_only_on_blocks(
    tmp_path: Path, provider: str | None
) -> None:
    async with rig(tmp_path, api="anthropic", provider=provider) as r:
        messages = await _anthropic_tool_round(r)
    assert [m for m in messages if "cache_control" in m] == []
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    # every message after the system prompt carries one breakpoint, on a block
    marked = [_block_marks(m["content"]) for m in messages]
    if provider == "anthropic":
        # the native layout marks the tool-only turn too: on its tool_use block
        assert marked == [["text"], ["tool_use"], ["tool_result"]]
        assert "cache_control" in messages[2]["content"][0]  # on the result itself
    else:
        # no provider: the envelope layout passes the content-less turn over
        assert marked == [["text"], [], ["tool_result"]]


async def test_openai_face_puts_no_marker_on_a_tool_message(tmp_path: Path) -> None:
    async with rig(tmp_path) as r:
        client = r.openai()
        r.upstream.queue(Say("", tool=TOOL), Say("done"))
        ask: Any = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "read a.py"}]
        first = await client.chat.completions.create(model=CLAUDE, messages=ask)
        reply = first.choices[0].message
        assert reply.tool_calls
        history: Any = [
            *ask,
            reply.model_dump(exclude_none=True),
            {"role": "tool", "tool_call_id": reply.tool_calls[0].id, "content": "x = 1"},
        ]
        await client.chat.completions.create(model=CLAUDE, messages=history)
        messages: list[dict[str, Any]] = r.upstream.requests[-1].json["messages"]
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool"]
    assert [m["role"] for m in messages if "cache_control" in m] == []
    parts = [
        [p for p in m["content"] if "cache_control" in p] if isinstance(m["content"], list) else []
        for m in messages
    ]
    # system, the ask and the tool result's text part; the content-less call turn none
    assert [len(p) for p in parts] == [1, 1, 0, 1]


BEDROCK_CLAUDE = "us.anthropic.claude-sonnet-4-20250514-v1:0"


@pytest.mark.parametrize(
    ("model", "marked"),
    [(BEDROCK_CLAUDE, [["text"], ["tool_use"], ["tool_result"]]), (CLAUDE, [[], [], []])],
)
async def test_a_repeated_turn_on_bedrock_keeps_its_route_s_markers(
    tmp_path: Path, model: str, marked: list[list[str]]
) -> None:
    """The proxy's repeat path on a Bedrock route (session 32): the client retries its
    last request, which goes upstream as the first time did and records nothing: with
    the native layout's markers for a Bedrock Claude id (the tool-only turn's on its
    ``tool_use`` block), with none for a bare ``claude-*`` id, which Bedrock does not
    run as Claude (hermes-agent 0.19 sends it to the Converse API, uncached)."""
    async with rig(tmp_path, api="anthropic", provider="bedrock") as r:
        history, first = await _tool_round_history(r, model)
        ledger = r.service.ledger
        before = ledger.store.last_seq()
        r.upstream.queue(Say("done"))
        again = await r.anthropic().messages.create(
            model=model, max_tokens=256, system=SYSTEM, messages=history
        )
        assert again.content[0].type == "text"
        repeat: list[dict[str, Any]] = r.upstream.requests[-1].json["messages"]
        assert ledger.store.last_seq() == before  # nothing of the repeat was recorded
    assert repeat == first
    assert [m for m in repeat if "cache_control" in m] == []
    blocks = [m["content"] if isinstance(m["content"], list) else [] for m in repeat]
    assert [_block_marks(b) for b in blocks] == marked
