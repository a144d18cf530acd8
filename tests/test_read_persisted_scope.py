"""``read_persisted`` serves only the outputs the caller's own compression chain persisted."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from ctxledger import ContextService, Ledger, UnknownBlob
from ctxledger.clock import SequentialIds, StepClock
from ctxledger.events import ToolOutputPersisted

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def svc(tmp_path: Path) -> AsyncIterator[ContextService]:
    ledger = Ledger.open(
        tmp_path / "l.db", clock=StepClock(), ids=SequentialIds(), durability="normal"
    )
    yield ContextService(ledger)
    ledger.close()


def tool_turn(call_id: str, content: str) -> list[dict[str, Any]]:
    call = {"id": call_id, "type": "function", "function": {"name": "terminal", "arguments": "{}"}}
    return [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": call_id, "content": content},
    ]


async def session_with_output(svc: ContextService, secret: str) -> tuple[str, str]:
    sid = await svc.start_session(model="m", context_length=200_000)
    await svc.append(sid, [{"role": "user", "content": "run it"}])
    await svc.append(sid, tool_turn("c1", (secret + " padded to a long line\n") * 20_000))
    (event,) = [
        r.event
        for r in svc.ledger.store.read_stream(sid)
        if isinstance(r.event, ToolOutputPersisted)
    ]
    return sid, event.blob_ref


async def test_a_session_cannot_read_another_sessions_persisted_output(
    svc: ContextService,
) -> None:
    a, ref_a = await session_with_output(svc, "alpha private log line")
    b, ref_b = await session_with_output(svc, "bravo private log line")
    assert (await svc.read_persisted(a, ref_a, 0, 100)).text.startswith("alpha")
    assert (await svc.read_persisted(b, ref_b, 0, 100)).text.startswith("bravo")
    with pytest.raises(UnknownBlob):
        await svc.read_persisted(b, ref_a)
    with pytest.raises(UnknownBlob):
        await svc.read_persisted(a, ref_b)


async def test_a_blob_that_was_never_a_persisted_output_is_not_served(
    svc: ContextService,
) -> None:
    sid, _ = await session_with_output(svc, "x")
    big = "a user message large enough to go to the blob table " * 2_000
    await svc.append(sid, [{"role": "user", "content": big}])
    with sqlite3.connect(svc.ledger.store.path) as conn:  # type: ignore[attr-defined]
        refs = [r[0] for r in conn.execute("SELECT ref FROM blobs")]
    assert len(refs) >= 2
    served = 0
    for ref in refs:
        try:
            await svc.read_persisted(sid, ref, 0, 10)
            served += 1
        except UnknownBlob:
            pass
    assert served == 1  # the persisted tool output, not the message's content blob


async def test_the_chain_keeps_reading_its_output_after_a_compaction(svc: ContextService) -> None:
    sid, ref = await session_with_output(svc, "kept line")
    for i in range(6):
        await svc.append(sid, [{"role": "user", "content": f"next {i} " + "w " * 400}])
        await svc.append(sid, [{"role": "assistant", "content": json.dumps({"ok": i})}])
    outcome = await svc.compress(sid)
    tip = outcome.session_id
    assert tip != sid
    assert (await svc.read_persisted(tip, ref, 0, 9)).text == "kept line"
