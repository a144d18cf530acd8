"""A recorded line that ends with a provisional reply (an incomplete answer the client
may go on without), long enough for a manual compaction to carry that reply verbatim
into a continuation."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ctxledger.runtime.service import ContextService
from ctxledger.server.history import PROVISIONAL

PROMPT = "Hi."
ASK = {"role": "user", "content": "What is the plan?"}


@dataclass
class ProvisionalLine:
    root: str
    #: what the client holds before `ASK` (it keeps every earlier turn)
    client: list[dict[str, Any]]
    #: the provisional reply's message id
    reply: str


async def provisional_line(svc: ContextService, turns: int = 12) -> ProvisionalLine:
    """`turns` user/assistant pairs appended one message at a time, then `ASK` and a
    provisional reply to it."""
    sid = await svc.start_session(model="gpt-4.1", context_length=128_000, system_prompt=PROMPT)
    client: list[dict[str, Any]] = []
    for i in range(turns):
        text = f"Step {i}: " + " ".join(f"detail{i}_{j}" for j in range(60))
        turn = [{"role": "user", "content": text}, {"role": "assistant", "content": "ok " + text}]
        for message in turn:
            await svc.append(sid, [message])
        client += turn
    await svc.append(sid, [ASK])
    reply = await svc.append(
        sid, [{"role": "assistant", "content": "The plan has", PROVISIONAL: "max_output_tokens"}]
    )
    return ProvisionalLine(root=sid, client=client, reply=reply.message_ids[0])
