"""An undo after a continuation withdrew a reply a compaction carried into it (session 44).

The ended session's own view still holds the reply (a view is never changed after its
switch); an undo restores views of ended sessions, so it leaves out the carried ids
the chain's continuations withdrew (:mod:`ctxledger.ledger.carried`), as the proxy's
recorded line does: the reply does not come back into the model's view, and the next
turn continues the line."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from helpers.ledger_helpers import deterministic_ledger
from helpers.provisional_lines import ASK, PROMPT, ProvisionalLine, provisional_line

from ctxledger.analysis.undo import undo
from ctxledger.compressor.config import CompressionConfig
from ctxledger.ledger.carried import withdrawn_carried
from ctxledger.projections import Projector
from ctxledger.runtime.service import ContextService
from ctxledger.server.history import PROVISIONAL, HistoryIndex

pytestmark = pytest.mark.anyio

CONFIG = CompressionConfig(threshold_floor_tokens=0)
NEXT = {"role": "user", "content": "Say it whole."}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def svc() -> AsyncIterator[ContextService]:
    async with ContextService(deterministic_ledger(config=CONFIG), config=CONFIG) as service:
        yield service


async def _carry_and_withdraw(
    svc: ContextService, index: HistoryIndex, line: ProvisionalLine, client: list[Any]
) -> str:
    """Compacts (carrying the line's last reply, provisional) and goes on without that
    reply as the proxy does; the compaction's id."""
    await svc.compress(line.root)
    tip = svc.ledger.tip(line.root)
    assert svc.ledger.transcript.live_ids(tip)[-1] == line.reply != tip
    gone = index.superseded(line.root, client, PROMPT)
    assert gone is not None and gone.withdrawn == [line.reply]
    await svc.append(gone.session_id, client[gone.suffix_start :], withdraw=gone.withdrawn)
    compaction_id = svc.ledger.chains.lineage(tip).compaction_id
    assert compaction_id is not None
    return compaction_id


def _goes_on(svc: ContextService, index: HistoryIndex, line: ProvisionalLine) -> None:
    """The reply is out of the tip's view for good, the tip's view ends with the line's
    history (after a summary still in effect: all of it without one), a next turn
    continues the tip, and the log verifies and folds alike."""
    ledger = svc.ledger
    tip = ledger.tip(line.root)
    assert ledger.chains.lineage(tip).reason == "revert"
    live = ledger.transcript.live_ids(tip)
    assert line.reply not in live
    assert line.reply in withdrawn_carried(ledger, ledger.chains.chain(tip))
    recorded = index.line_messages(line.root)
    kept = [ledger.transcript.stored(mid) for mid in live]
    after = next((i + 1 for i in reversed(range(len(kept))) if kept[i].origin != "appended"), 0)
    view = [m.message for m in kept[after:]]
    assert view == recorded[len(recorded) - len(view) :]
    assert after or view == recorded
    assert HistoryIndex(ledger).line_messages(line.root) == recorded
    later = [*recorded, {"role": "assistant", "content": "Three steps."}]
    match = index.match(line.root, later, PROMPT)
    assert (match.session_id, match.suffix_start, match.branch) == (tip, len(recorded), False)
    assert ledger.verify().ok
    rebuilt = Projector.rebuild(ledger.store, use_checkpoint=False)
    assert rebuilt.fingerprint() == ledger.projector.fingerprint()


async def test_an_undo_leaves_a_withdrawn_carried_reply_out(svc: ContextService) -> None:
    line = await provisional_line(svc)
    index = HistoryIndex(svc.ledger)
    client = [*line.client, ASK, NEXT]
    compaction_id = await _carry_and_withdraw(svc, index, line, client)
    restored = svc.ledger.transcript.live_ids(line.root)
    assert restored[-1] == line.reply  # (the ended session's view keeps it)

    result = undo(svc.ledger, compaction_id)
    assert result.restored_messages == len(restored) - 1
    assert svc.ledger.transcript.live_ids(result.new_session_id) == [
        *restored[:-1],
        *svc.ledger.transcript.live_ids(result.previous_tip)[-1:],  # NEXT
    ]
    _goes_on(svc, index, line)


@pytest.mark.parametrize("undone", ["first", "second"])
async def test_an_undo_leaves_out_a_reply_a_later_compaction_carried(
    svc: ContextService, undone: str
) -> None:
    """The reply was appended after the first compaction (in its continuation) and
    carried by the second one: undoing the first restores it with the messages appended
    since (``appended_since``), undoing the second with the view that compaction
    compacted; it stays out either way."""
    line = await provisional_line(svc, turns=12)
    await svc.compress(line.root)  # (the first: the reply is not provisional yet, kept)
    first = svc.ledger.chains.lineage(svc.ledger.tip(line.root)).compaction_id
    index = HistoryIndex(svc.ledger)
    held = [*line.client, ASK, NEXT]
    tip = svc.ledger.tip(line.root)
    gone = index.superseded(line.root, held, PROMPT)
    assert gone is not None and gone.session_id == tip
    await svc.append(tip, held[gone.suffix_start :], withdraw=gone.withdrawn)
    for i in range(6):  # (enough for the second compaction to summarise something)
        text = f"More {i}: " + " ".join(f"more{i}_{j}" for j in range(60))
        turn = [{"role": "assistant", "content": "ok"}, {"role": "user", "content": text}]
        await svc.append(svc.ledger.tip(line.root), turn)
        held += turn
    half = {"role": "assistant", "content": "Half", PROVISIONAL: "max_output_tokens"}
    late = (await svc.append(svc.ledger.tip(line.root), [half])).message_ids[0]
    again = ProvisionalLine(root=line.root, client=held, reply=late)
    second = await _carry_and_withdraw(svc, index, again, [*held, NEXT])
    assert first is not None

    undo(svc.ledger, first if undone == "first" else second)
    _goes_on(svc, index, again)
    assert line.reply not in svc.ledger.transcript.live_ids(svc.ledger.tip(line.root))
