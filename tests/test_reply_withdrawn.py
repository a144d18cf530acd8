"""``ReplyWithdrawn``: a reply the client went on without leaves the live view, in the
append of the messages the client sent instead; the original stays in the log."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest
from helpers.provisional_lines import ASK, provisional_line

from ctxledger.analysis import conversation
from ctxledger.analysis.conversation import conversation_scopes
from ctxledger.analysis.history import AppendStep, history
from ctxledger.analysis.recall import recall
from ctxledger.analysis.whatif import whatif
from ctxledger.clock import SequentialIds, StepClock
from ctxledger.compressor.config import CompressionConfig
from ctxledger.errors import InvalidInput, InvalidMessage, UnknownMessage
from ctxledger.events import ReplyWithdrawn
from ctxledger.eventstore import AppendRequest
from ctxledger.ledger.facade import Ledger
from ctxledger.projections import Projector
from ctxledger.runtime.service import ContextService
from ctxledger.server.history import HistoryIndex

pytestmark = pytest.mark.anyio

CONFIG = CompressionConfig(threshold_floor_tokens=0)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def svc(tmp_path: Path) -> AsyncIterator[ContextService]:
    ledger = Ledger.open(tmp_path / "l.db", clock=StepClock(), ids=SequentialIds(), config=CONFIG)
    async with ContextService(ledger, config=CONFIG) as service:
        yield service


async def _asked_and_half_answered(svc: ContextService) -> tuple[str, str]:
    sid = await svc.start_session(model="gpt-4.1", context_length=128_000, system_prompt="Hi.")
    await svc.append(sid, [{"role": "user", "content": "Plan?"}])
    result = await svc.append(sid, [{"role": "assistant", "content": "The plan has"}])
    return sid, result.message_ids[0]


async def test_a_withdrawn_reply_leaves_the_view_and_stays_in_the_log(
    svc: ContextService,
) -> None:
    sid, half = await _asked_and_half_answered(svc)
    index = HistoryIndex(svc.ledger)
    assert len(index.session_messages(sid)) == 2  # (cached, then read again below)
    tokens = svc.ledger.transcript.total_tokens(sid)
    await svc.append(
        sid, [{"role": "user", "content": "Again?"}, {"role": "user", "content": "Hm?"}],
        withdraw=[half],
    )  # fmt: skip
    view = svc.api_messages(sid)
    assert [m["content"] for m in view] == ["Hi.", "Plan?", "Again?", "Hm?"]
    assert svc.ledger.transcript.original(half)["content"] == "The plan has"
    assert [m["content"] for m in index.session_messages(sid)] == ["Plan?", "Again?", "Hm?"]
    transcript = svc.ledger.transcript  # the reply's tokens left the view's count too
    added = [transcript.state.messages[m].tokens for m in transcript.live_ids(sid)[-2:]]
    gone = transcript.state.messages[half].tokens
    assert transcript.total_tokens(sid) == sum(transcript.api_tokens(sid))
    assert transcript.total_tokens(sid) == tokens - gone + sum(added)
    fresh = Projector.rebuild(svc.ledger.store, use_checkpoint=False)
    assert fresh.fingerprint() == svc.ledger.projector.fingerprint()
    assert svc.ledger.verify().ok
    withdrawn = [
        r.event for r in svc.ledger.store.read_all() if isinstance(r.event, ReplyWithdrawn)
    ]
    assert [w.message_ids for w in withdrawn] == [[half]]
    hist = history(svc.ledger, sid)  # the withdrawal goes with its append's first step
    assert hist.notes == []
    steps = [st for st in hist.steps if isinstance(st, AppendStep) and st.withdraw]
    assert [(st.messages[0]["content"], st.withdraw) for st in steps] == [("Again?", [half])]


@pytest.mark.parametrize(
    "which", ["unknown", "not live", "another session's", "not the end", "twice", "none"]
)
async def test_withdrawing_what_the_view_does_not_show_appends_nothing(
    svc: ContextService, which: str
) -> None:
    sid, half = await _asked_and_half_answered(svc)
    other = await svc.start_session(model="gpt-4.1", context_length=128_000)
    await svc.append(other, [{"role": "user", "content": "Elsewhere."}])
    target = sid
    if which == "not live":
        await svc.append(sid, [{"role": "user", "content": "On."}], withdraw=[half])
    elif which == "another session's":
        target = other
    named = {"unknown": ["msg_nobody"], "twice": [half, half], "none": [""]}.get(which, [half])
    if which == "not the end":
        await svc.append(sid, [{"role": "user", "content": "On."}])
    before = svc.ledger.store.last_seq()
    said = "last messages" if which in ("not the end", "twice") else "not in the live view"
    with pytest.raises(UnknownMessage, match=said):
        await svc.append(target, [{"role": "user", "content": "Next."}], withdraw=named)
    assert svc.ledger.store.last_seq() == before


@pytest.mark.parametrize(
    ("given", "said"),
    [
        ("msg_6", "withdraw must be a list, got str"),  # was read one character at a time
        (5, "withdraw must be a list, got int"),
        ([["a"]], "withdraw must be a list of str"),  # was an unhashable TypeError
        ([{"id": "a"}], "withdraw must be a list of str"),
    ],
)
async def test_withdraw_of_the_wrong_type_is_refused_by_name(
    svc: ContextService, given: object, said: str
) -> None:
    sid, _half = await _asked_and_half_answered(svc)
    before = svc.ledger.store.last_seq()
    with pytest.raises(InvalidInput, match=said):
        await svc.append(sid, [{"role": "user", "content": "Next."}], withdraw=given)  # type: ignore[arg-type]
    assert svc.ledger.store.last_seq() == before


# --- caches keyed on a view's length: a withdrawal, then as many appends --------------


def _call(cid: str) -> dict[str, object]:
    return {"id": cid, "type": "function", "function": {"name": "f", "arguments": "{}"}}


async def test_the_call_cache_forgets_a_withdrawn_call_in_a_long_process(
    svc: ContextService,
) -> None:
    """Withdraw one, append one: the view's length is as before. The cached calls caught
    up on the new message only and kept the withdrawn call, so a result for it was
    accepted here while a fresh process refused it."""
    sid = await svc.start_session(model="gpt-4.1", context_length=128_000)
    await svc.append(sid, [{"role": "user", "content": "Plan?"}])
    reply = await svc.append(sid, [{"role": "assistant", "content": None, "tool_calls": [_call("call_x")]}])  # fmt: skip
    assert svc.ledger.call_ledger(sid).issued == {"call_x"}  # (cached)
    await svc.append(sid, [{"role": "user", "content": "Again"}], withdraw=reply.message_ids)
    assert svc.ledger.call_ledger(sid).issued == set()
    before = svc.ledger.store.last_seq()
    with pytest.raises(InvalidMessage, match="call_x"):
        await svc.append(sid, [{"role": "tool", "tool_call_id": "call_x", "content": "r"}])
    assert svc.ledger.store.last_seq() == before


async def test_recall_marks_a_withdrawn_reply_not_live_in_a_long_process(
    svc: ContextService, tmp_path: Path
) -> None:
    sid = await svc.start_session(model="gpt-4.1", context_length=128_000)
    await svc.append(sid, [{"role": "user", "content": "Plan zebra?"}])
    reply = await svc.append(sid, [{"role": "assistant", "content": "The zebra plan has"}])
    assert all(h.live for h in recall(svc.ledger, sid, "zebra").hits)  # (cached)
    await svc.append(sid, [{"role": "user", "content": "zebra again"}], withdraw=reply.message_ids)
    flags = {h.message_id: h.live for h in recall(svc.ledger, sid, "zebra").hits}
    assert flags[reply.message_ids[0]] is False
    fresh = Ledger.open(tmp_path / "l.db", config=CONFIG)
    assert {h.message_id: h.live for h in recall(fresh, sid, "zebra").hits} == flags


async def test_a_branch_point_is_found_again_after_a_withdrawal(svc: ContextService) -> None:
    """A branch that differed from its parent at its last message (a cached final point)
    withdraws it and appends the parent's: the point now covers the whole copy."""
    ledger = svc.ledger
    root = await svc.start_session(model="gpt-4.1", context_length=128_000)
    turns = [
        {"role": "user", "content": "where is walrus1"},
        {"role": "assistant", "content": "walrus1 is in crate1"},
    ]
    await svc.append(root, turns)
    branch = ledger.start_session(
        model="gpt-4.1", context_length=128_000, parent_session_id=root, reason="branch"
    )
    odd = await svc.append(branch, [turns[0], {"role": "assistant", "content": "no idea"}])
    before = conversation_scopes(ledger, branch)
    await svc.append(branch, [turns[1]], withdraw=odd.message_ids[1:])
    after = conversation_scopes(ledger, branch)
    conversation._POINTS.pop(ledger)
    assert after == conversation_scopes(ledger, branch) != before


async def test_a_result_for_a_call_withdrawn_in_the_same_append_is_refused(
    svc: ContextService,
) -> None:
    """The batch is checked against the view without the withdrawn reply (it was checked
    against the view before the withdrawal: the result went in, its call gone)."""
    sid = await svc.start_session(model="gpt-4.1", context_length=128_000)
    await svc.append(sid, [{"role": "user", "content": "Plan?"}])
    reply = await svc.append(sid, [{"role": "assistant", "content": None, "tool_calls": [_call("call_x")]}])  # fmt: skip
    before = svc.ledger.store.last_seq()
    batch = [{"role": "user", "content": "Go"}, {"role": "tool", "tool_call_id": "call_x", "content": "r"}]  # fmt: skip
    with pytest.raises(InvalidMessage, match="call_x"):
        await svc.append(sid, batch, withdraw=reply.message_ids)
    assert svc.ledger.store.last_seq() == before
    assert svc.ledger.call_ledger(sid).issued == {"call_x"}  # (the check cached nothing)


async def test_a_provisional_reply_a_compaction_carried_is_withdrawn_there(
    svc: ContextService,
) -> None:
    """A compaction that carried the reply verbatim leaves it at the end of the
    continuation's view: the withdrawal goes there (session 44; it branched before), and
    the line's history leaves the reply out of the ended session's messages, so the
    next turn continues the line too."""
    line = await provisional_line(svc)
    sid, client, ask, reply = line.root, line.client, ASK, line.reply
    index = HistoryIndex(svc.ledger)
    nxt = {"role": "user", "content": "Say it whole."}
    assert index.superseded(sid, [*client, ask, nxt], "Hi.") is not None  # (before)
    await svc.compress(sid)
    tip = svc.ledger.tip(sid)
    assert tip != sid and svc.ledger.transcript.live_ids(tip)[-1] == reply

    gone = index.superseded(sid, [*client, ask, nxt], "Hi.")
    assert gone is not None and (gone.session_id, gone.withdrawn) == (tip, [reply])
    assert gone.suffix_start == len(client) + 1
    await svc.append(tip, [nxt], withdraw=gone.withdrawn)
    assert reply in svc.ledger.transcript.live_ids(sid)  # (the ended view)
    assert index.line_messages(sid) == [*client, ask, nxt]
    later = [*client, ask, nxt, {"role": "assistant", "content": "Three steps."}]
    match = index.match(sid, later, "Hi.")
    assert (match.session_id, match.suffix_start, match.branch) == (tip, len(later) - 1, False)


@pytest.mark.parametrize("loop", ["hermes", "every_call", "per_run"])
async def test_a_what_if_plays_the_withdrawal(svc: ContextService, loop: str) -> None:
    """Under the recorded config a what-if reproduces the recorded prompts: it kept the
    withdrawn reply (430 tokens sent where 30 were recorded)."""
    sid = await svc.start_session(model="gpt-4.1", context_length=128_000, system_prompt="Hi.")
    await svc.append(sid, [{"role": "user", "content": "Plan?"}])
    usage = {"prompt_tokens": 20, "completion_tokens": 400, "total_tokens": 420}
    await svc.report_usage(sid, usage, model="gpt-4.1", tool_calls=False)
    long = "The plan has " + "many words " * 200
    reply = await svc.append(sid, [{"role": "assistant", "content": long}])
    await svc.append(sid, [{"role": "user", "content": "Again?"}], withdraw=reply.message_ids)
    usage = {"prompt_tokens": 30, "completion_tokens": 5, "total_tokens": 35}
    await svc.report_usage(sid, usage, model="gpt-4.1", tool_calls=False)
    await svc.append(sid, [{"role": "assistant", "content": "Done."}])
    report = await anyio.to_thread.run_sync(lambda: whatif(svc.ledger, sid, loop=loop))
    assert [(t.recorded, t.whatif) for t in report.turns] == [(20, 20), (30, 30)]
    assert report.reproduces_recorded
    assert not any("withdrawal" in note for note in report.notes)


async def test_a_withdrawal_says_a_known_reason(svc: ContextService) -> None:
    sid, half = await _asked_and_half_answered(svc)
    before = svc.ledger.store.last_seq()
    with pytest.raises(InvalidInput, match="withdraw_reason must be one of"):
        await svc.append(sid, [{"role": "user", "content": "On."}], withdraw=[half], withdraw_reason="\x1b[2J")  # fmt: skip
    fields = svc.ledger.event_fields(sid)
    odd = ReplyWithdrawn(**fields, message_ids=[half], reason="because")  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match="wrong type or value"):
        svc.ledger.append([AppendRequest(sid, [odd], svc.ledger.version(sid))])
    assert svc.ledger.store.last_seq() == before
