"""``hermes_host.head_compacts`` places the host's head (the strict prefix Hermes hands
``compress`` for ``/compress here N``) by counting the tip's live view: the first
`count` live messages, after the system prompt. Session 43 left open whether a
``ReplyWithdrawn`` between two host calls shifts that count. It does not: a withdrawal
takes only the view's last messages (``eventcheck``), so every position before them
holds what it held, and the system prompt's offset is read from the same view. Only a
withdrawal of the host's own head messages would change the head, and no writer of a
Hermes session makes one (the engine never withdraws; the proxy withdraws only a
provisional reply it recorded, in its own sessions)."""

from __future__ import annotations

from typing import Any

import pytest

from ctxledger.compressor.config import CompressionConfig
from ctxledger.integrations import hermes_host
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
    planned: list[list[dict[str, Any]]] = []
    real = hermes_host.plan

    def spy(messages: list[dict[str, Any]], *args: Any, **kwargs: Any) -> Any:
        planned.append(list(messages))
        return real(messages, *args, **kwargs)

    monkeypatch.setattr(hermes_host, "plan", spy)
    count = len(host) - withdrawn  # the longest head the withdrawal leaves alone
    head = host[:count]  # (the head the host hands, as the engine passes it)
    before = hermes_host.head_compacts(svc, sid, count, None, WINDOW, head)

    # another writer goes on without the view's last messages and adds its own
    gone = svc.ledger.transcript.live_ids(sid)[-withdrawn:]
    other = [{"role": "user", "content": "another writer's ask"}]
    await svc.append(sid, other, withdraw=gone, withdraw_reason="refusal")
    assert len(svc.ledger.transcript.live_ids(sid)) == len(host) - withdrawn + 1

    # (with withdrawn=1 the other writer's ask follows the head's last user ask: the
    # view merges them for Hermes, which never took that view: the head is the host's)
    after = hermes_host.head_compacts(svc, sid, count, None, WINDOW, head)
    assert after == before
    assert planned[1] == planned[0]  # the same head, planned alike
    assert planned[1][0] == {"role": "system", "content": "Be brief."}
    assert planned[1][1:] == host[:count]  # the host's first `count` messages
