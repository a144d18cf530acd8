"""The Hermes engine's view of another writer's append into the session Hermes holds
(session 45), without Hermes: ``hermes_host.moved`` sees an append or a withdrawal in
that session (not only a moved tip), and ``hermes_repair`` gives a view as Hermes's
agent holds it once it repaired it (adjacent user texts merged; session 46: adjacent
assistants merged, a result parted from its call dropped), counts a head of it in the
ledger's messages and leaves out of an append what Hermes drops."""

from __future__ import annotations

import itertools
import operator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxledger.compressor.config import CompressionConfig
from ctxledger.errors import InvalidMessage
from ctxledger.integrations import hermes_host, hermes_repair
from ctxledger.runtime.service import ContextService

CONFIG = CompressionConfig(threshold_floor_tokens=0)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
@pytest.mark.parametrize("withdraw", [False, True])
async def test_a_write_into_the_held_session_moves_it(svc: ContextService, withdraw: bool) -> None:
    sid = await svc.start_session(model="m", context_length=64_000)
    await svc.append(
        sid, [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]
    )
    key = hermes_host.view_key(svc, sid)
    assert not hermes_host.moved(svc, sid, sid, key)
    assert not hermes_host.moved(svc, sid, None, None)  # (the host holds no view yet)
    last = svc.ledger.transcript.live_ids(sid)[-1]
    note = [{"role": "user", "content": "a note"}]
    await svc.append(sid, note, withdraw=[last] if withdraw else [])
    assert svc.tip(sid) == sid and hermes_host.moved(svc, sid, sid, key)
    assert not hermes_host.moved(svc, sid, sid, hermes_host.view_key(svc, sid))


def test_adjacent_user_texts_are_merged_as_hermes_merges_them() -> None:
    view: list[dict[str, Any]] = [
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": "b"},
        {"role": "user", "content": "note"},
        {"role": "user", "content": "ask"},
        {"role": "user", "content": ""},
        {"role": "user", "content": [{"type": "text", "text": "blocks"}]},
    ]
    held = hermes_repair.as_hermes_holds(view)
    assert held == [
        view[0],
        view[1],
        {"role": "user", "content": "note\n\nask"},
        view[5],  # (a list of blocks is left alone)
    ]
    assert view[2] == {"role": "user", "content": "note"}  # (the view is not changed)


_MESSAGES = st.lists(
    st.fixed_dictionaries(
        {"role": st.sampled_from(["user", "assistant", "tool"]), "content": st.text(max_size=5)},
        optional={
            "tool_call_id": st.sampled_from(["c1", "c2"]),
            "tool_calls": st.lists(
                st.sampled_from(["c1", "c2"]).map(lambda c: {"id": c, "type": "function"}),
                max_size=2,
                unique_by=lambda c: c["id"],
            ),
        },
    ),
    max_size=12,
)


@given(_MESSAGES)
def test_holding_leaves_no_pair_and_counts_its_sources(messages: list[dict[str, Any]]) -> None:
    """No user or assistant pair and no result without its open call is left; each
    message held comes from a run of the view's messages, in order, every message used
    at most once; the form is one Hermes's repair keeps; a head of it takes the view's
    counts for its unmerged messages; an append keeps those the repair uses."""
    items = hermes_repair.repaired(messages)
    held = [item.message for item in items]
    for before, after in itertools.pairwise(held):
        assert not (before["role"] == after["role"] in {"user", "assistant"})
    sources = [i for item in items for i in item.sources]
    assert sources == sorted(set(sources)) and all(item.sources for item in items)
    assert hermes_repair.as_hermes_holds(held) == held
    stored = [100 + i for i in range(len(messages))]
    counts = hermes_repair.head_counts(messages, stored, held, same=operator.eq, count=len)
    assert counts == [
        stored[item.sources[0]] if len(item.sources) == 1 else len(item.message) for item in items
    ]
    # an append after the first half leaves out no message Hermes's repair keeps
    cut = len(messages) // 2
    made = {c["id"] for m in messages[:cut] for c in m.get("tool_calls", [])}
    gone = hermes_repair.unasked(messages[cut:], made.__contains__)
    assert not {cut + i for i in gone} & set(sources)


def test_an_assistant_note_after_a_reply_is_merged_with_it() -> None:
    ask = {"role": "user", "content": "ask"}
    reply = {"role": "assistant", "content": "done "}
    aside = {"role": "assistant", "content": " an aside"}
    held = hermes_repair.as_hermes_holds([ask, reply, aside])
    assert held == [ask, {"role": "assistant", "content": "done\nan aside"}]


def _call(ident: str, **extra: Any) -> dict[str, Any]:
    function = {"name": "clarify", "arguments": "{}"}
    call = {"id": ident, "type": "function", "function": function, **extra}
    return {"role": "assistant", "content": None, "tool_calls": [call]}


NOTE = {"role": "user", "content": "a note from another writer"}


async def _parted(svc: ContextService, withdraw: bool) -> str:
    """A session whose call another writer parted from its result: a user note after
    the call, or the call withdrawn and the note in its place."""
    sid = await svc.start_session(model="m", context_length=64_000)
    await svc.append(sid, [{"role": "user", "content": "delete it?"}, _call("c1")])
    call = svc.ledger.transcript.live_ids(sid)[-1]
    await svc.append(sid, [NOTE], withdraw=[call] if withdraw else [])
    return sid


@pytest.mark.anyio
@pytest.mark.parametrize("withdraw", [False, True])
async def test_a_result_is_recorded_unless_its_call_was_withdrawn(
    svc: ContextService, withdraw: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """Review of session 46: a result parted from its call by a note (it may be the
    user's own answer, a ``clarify``) is recorded, though Hermes's repair drops it and
    the view handed back leaves it out; only a result whose call is no longer in the
    view (withdrawn: the ledger would refuse it) is left out, logged by its call."""
    sid = await _parted(svc, withdraw)
    result = {"role": "tool", "tool_call_id": "c1", "content": "user said: yes"}
    later = [_call("c2"), {"role": "tool", "tool_call_id": "c2", "content": "ok"}]
    kept = hermes_repair.answerable(svc, sid, [result, *later])
    assert kept == ([*later] if withdraw else [result, *later])
    said = [r.getMessage() for r in caplog.records if "left out" in r.getMessage()]
    assert said == (
        [
            "ctxledger: tool result for call 'c1' left out: its call is no longer in "
            f"the view another writer moved (withdrawn, compacted away) ({sid})"
        ]
        if withdraw
        else []
    )
    await svc.append(sid, kept)
    view = _view(svc, sid)
    assert (result in view) is not withdraw
    assert result not in hermes_repair.as_hermes_holds(view)


@pytest.mark.anyio
@pytest.mark.parametrize(
    "bad",
    [
        {"role": "tool", "tool_call_id": ["c1"], "content": "x"},
        {"role": "tool", "tool_call_id": {"id": "c1"}, "content": "x"},
        {"role": "assistant", "content": "x", "tool_calls": 5},
    ],
)
async def test_a_bad_message_after_a_moved_view_is_named_not_crashed(
    svc: ContextService, bad: dict[str, Any]
) -> None:
    """Review of session 46: Hermes's new messages after another writer's note reached
    the repair before the ledger's checks and raised TypeError; now the ledger names
    them (InvalidMessage) and nothing is appended."""
    sid = await _parted(svc, False)
    before = svc.ledger.transcript.live_ids(sid)
    kept = hermes_repair.answerable(svc, sid, [bad])
    with pytest.raises(InvalidMessage):
        await svc.append(sid, kept)
    assert svc.ledger.transcript.live_ids(sid) == before
    view = _view(svc, sid)
    assert hermes_repair.as_hermes_holds([*view, bad])[:2] == view[:2]  # (read, no raise)


@pytest.mark.anyio
async def test_a_stored_call_id_of_any_shape_is_read(svc: ContextService) -> None:
    """Review of session 46: the ledger checks a call's ``id``, not a ``call_id`` it
    carries; one stored as a list made every hand-back, resume and head plan raise
    TypeError. Only non-empty strings are read as ids."""
    sid = await svc.start_session(model="m", context_length=64_000, title=hermes_host.title("H"))
    talk = [
        {"role": "user", "content": "delete it?"},
        _call("c1", call_id=["x"]),
        {"role": "tool", "tool_call_id": "c1", "content": "yes"},
        {"role": "assistant", "content": "deleted"},
    ]
    await svc.append(sid, talk)
    view = _view(svc, sid)
    assert hermes_repair.as_hermes_holds(view) == view
    hermes_host.head_compacts(svc, sid, view[:3], None, 64_000)
    found = await hermes_host.resumed_chain(svc, view, {hermes_host.title("H")}, "m", 64_000)
    assert found is not None and found[0] == sid


@pytest.mark.anyio
async def test_a_resume_finds_a_chain_holding_a_merged_note(svc: ContextService) -> None:
    """A resumed Hermes (``hermes --resume``, the gateway after an eviction) holds the
    merged form of a view with another writer's note: the chain is still its own."""
    titles = {hermes_host.title("H1")}
    sid = await svc.start_session(model="m", context_length=64_000, title=hermes_host.title("H1"))
    await svc.append(
        sid, [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]
    )
    await svc.append(sid, [{"role": "user", "content": "a note"}])  # (another writer)
    await svc.append(sid, [{"role": "user", "content": "ask 2"}])  # (Hermes's, synced)
    merged = {"role": "user", "content": "a note\n\nask 2"}
    hermes_list = [
        *hermes_repair.as_hermes_holds(_view(svc, sid)),
        {"role": "assistant", "content": "2"},
    ]
    assert hermes_list[2] == merged
    found = await hermes_host.resumed_chain(svc, hermes_list, titles, "m", 64_000)
    assert found is not None and found[0] == sid and found[1] == hermes_list[:3]
    # (a list as recorded, the note not merged, is found too)
    found = await hermes_host.resumed_chain(svc, _view(svc, sid), titles, "m", 64_000)
    assert found is not None and found[0] == sid and len(found[1]) == 4


def _view(svc: ContextService, sid: str) -> list[dict[str, Any]]:
    return hermes_host.unmarked(svc.ledger.transcript.live_messages(sid))
