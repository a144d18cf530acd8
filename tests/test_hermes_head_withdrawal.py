"""``hermes_host.head_compacts`` plans the head Hermes handed (the strict prefix of its
list given to ``compress`` for ``/compress here N``) after the tip's system part, with
the tip's stored token count for each head message that is one of the view's as
Hermes holds it, and a fresh count for a merged one (session 46). Session 43 left open
whether a ``ReplyWithdrawn`` between two host calls shifts the head. It does not: the
messages planned are the host's, and a withdrawal takes only the view's last messages
(``eventcheck``), so every head message keeps its stored count. Only where another
writer's ask follows the head's last ask (the view as Hermes holds it merges the two)
is that message counted again, by itself. No writer of a Hermes session withdraws the
host's own head messages (the engine never withdraws; the proxy withdraws only a
provisional reply it recorded, in its own sessions)."""

from __future__ import annotations

from typing import Any

import pytest

from ctxledger.compressor.config import CompressionConfig
from ctxledger.compressor.recording import token_counts
from ctxledger.integrations import hermes_host
from ctxledger.ledger.compaction import compaction_input
from ctxledger.runtime.service import ContextService

pytestmark = pytest.mark.anyio

CONFIG = CompressionConfig(threshold_floor_tokens=0)
WINDOW = 128_000


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _talk(turns: int) -> list[dict[str, Any]]:
    return [
        m
        for i in range(turns)
        for m in (
            {"role": "user", "content": f"ask {i}: " + " ".join(f"w{i}_{j}" for j in range(40))},
            {"role": "assistant", "content": f"answer {i}"},
        )
    ]


@pytest.mark.parametrize("withdrawn", [1, 2, 8])
async def test_a_withdrawal_between_host_calls_leaves_the_head_in_place(
    svc: ContextService, monkeypatch: pytest.MonkeyPatch, withdrawn: int
) -> None:
    sid = await svc.start_session(model="m", context_length=WINDOW, system_prompt="Be brief.")
    host = _talk(10)
    await svc.append(sid, host)
    stored = token_counts(compaction_input(svc.ledger, sid), svc.config)
    planned: list[tuple[list[dict[str, Any]], list[int]]] = []
    counted: list[dict[str, Any]] = []
    plan, count = hermes_host.plan, hermes_host.count_message

    def plan_spy(messages: list[dict[str, Any]], config: Any, tokens: Any, **kw: Any) -> Any:
        planned.append((list(messages), list(tokens)))
        return plan(messages, config, tokens, **kw)

    def count_spy(message: dict[str, Any], *args: Any) -> int:
        counted.append(message)
        return count(message, *args)

    monkeypatch.setattr(hermes_host, "plan", plan_spy)
    monkeypatch.setattr(hermes_host, "count_message", count_spy)
    head = host[: len(host) - withdrawn]  # the longest head the withdrawal leaves alone
    before = hermes_host.head_compacts(svc, sid, head, None, WINDOW)
    assert counted == []  # every head message is one of the view's: its stored count
    assert planned[0] == (
        [{"role": "system", "content": "Be brief."}, *head],
        stored[: len(head) + 1],
    )

    # another writer goes on without the view's last messages and adds its own
    gone = svc.ledger.transcript.live_ids(sid)[-withdrawn:]
    other = [{"role": "user", "content": "another writer's ask"}]
    await svc.append(sid, other, withdraw=gone, withdraw_reason="refusal")
    assert len(svc.ledger.transcript.live_ids(sid)) == len(host) - withdrawn + 1

    after = hermes_host.head_compacts(svc, sid, head, None, WINDOW)
    assert after == before
    assert planned[1][0] == planned[0][0]  # the host's head, after the system prompt
    # the stored counts are taken across the withdrawal; with withdrawn=1 the other
    # writer's ask follows the head's last ask, merged with it in the view as Hermes
    # holds it: that head message alone is counted again (to what it was stored with)
    assert counted == ([head[-1]] if withdrawn == 1 else [])
    assert planned[1][1] == planned[0][1]
