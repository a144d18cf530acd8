"""Real SDK clients through the proxy on long tool-using runs: every turn is recorded
once, with its usage, the line compacts and the client gets what the upstream sent."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from helpers.fake_upstream import Say
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
