"""A late result for a lost call (session 46): ``A(x)`` unanswered, a user message,
``B(x)`` re-using the id, then two results with ``x``. The first answers ``B`` (the
rule of session 45: ``A`` was lost when the user spoke); the second, which no waiting
call takes, answers the lost ``A`` instead of being refused, so a client that resends
its whole history every turn (the proxy) never gets the same refusal forever. The
planner pairs the raw list alike (``compressor.layout.Scanner``)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from helpers.ledger_helpers import make_ledger
from helpers.reused_ids import asks, call, chat_reply, pairs, result, user
from helpers.server_rig import rig
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxledger.analysis.replay import rebuild_check
from ctxledger.compressor.config import CompressionConfig
from ctxledger.compressor.layout import message_layout
from ctxledger.errors import InvalidMessage
from ctxledger.messages import CallLedger, repair_call_ids, validate_messages


def _fresh(i: int, j: int) -> str:
    return f"new_{i}_{j}"


def test_a_late_result_goes_to_a_lost_call_made_with_a_replacement_id() -> None:
    # A answered, B re-uses x in the same turn and is lost when C re-uses it after a
    # user message: the first result after C's own is B's (stored under B's new id)
    messages = [user("go"), asks("x"), result("x"), asks("x"), user(), asks("x"), result("x")]
    messages.append(result("x", "late"))
    fixed, repairs = repair_call_ids(messages, None, _fresh)
    validate_messages(fixed)
    assert fixed[7]["tool_call_id"] == fixed[3]["tool_calls"][0]["id"] == "new_3_0"
    assert repairs[-1].original == "x" and repairs[-1].replacement == "new_3_0"
    assert pairs(fixed) == pairs(messages) == {2: 1, 6: 5, 7: 3}


def test_lost_calls_take_late_results_earliest_first_and_a_surplus_is_refused(
    tmp_path: Path,
) -> None:
    with make_ledger(tmp_path / "l.db") as ledger:
        sid = ledger.start_session(model="m", context_length=32_000)
        ledger.append_messages(sid, [user("go"), asks("x"), user(), asks("x"), user()])
        ledger.append_messages(sid, [asks("x"), result("x", "c")])
        ledger.append_messages(sid, [result("x", "a")])  # A's (x itself)
        ledger.append_messages(sid, [result("x", "b")])  # B's (its replacement)
        view = ledger.api_messages(sid)
        before = ledger.version(sid)
        with pytest.raises(InvalidMessage, match="second tool result"):
            ledger.append_messages(sid, [result("x", "surplus")])
        assert ledger.version(sid) == before and ledger.api_messages(sid) == view
        assert rebuild_check(ledger, sid).equal
    ids = [m["tool_calls"][0]["id"] for m in view if m.get("tool_calls")]
    assert [m["tool_call_id"] for m in view[-3:]] == [ids[2], ids[0], ids[1]]
    assert ids[0] == "x" and len(set(ids)) == 3


_EVENTS = st.lists(
    st.one_of(
        st.just(user()),
        # (an id may come twice in one message: two calls, as the repair reads them)
        st.lists(st.sampled_from("xyz"), min_size=1, max_size=3).map(lambda ids: asks(*ids)),
        st.sampled_from("xyz").map(result),
    ),
    max_size=18,
)


def _results_have_calls(messages: list[dict[str, Any]]) -> bool:
    """Whether no result comes with an id more often than calls made it before."""
    made: Counter[str] = Counter()
    for m in messages:
        for c in m.get("tool_calls") or ():
            made[c["id"]] += 1
        if m["role"] == "tool":
            made[m["tool_call_id"]] -= 1
            if made[m["tool_call_id"]] < 0:
                return False
    return True


@settings(max_examples=600)  # (cheap: short lists, scanned twice)
@given(messages=_EVENTS)
def test_a_list_whose_results_all_have_calls_is_never_refused(
    messages: list[dict[str, Any]],
) -> None:
    """Wherever each result has a call made with its id before it, not yet answered by
    count, the ledger's repair accepts the list (no refusal a resend would meet again),
    every result answers its own call, and the planner pairs the raw list alike."""
    if not _results_have_calls(messages):
        return
    fixed, _ = repair_call_ids(messages, None, _fresh)
    validate_messages(fixed)  # raises on a result with no call or a second result
    owners = pairs(fixed)
    assert len(owners) == sum(m["role"] == "tool" for m in messages)
    assert owners == pairs(messages)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_a_client_resending_a_late_result_for_a_lost_call_is_never_stuck(
    tmp_path: Path,
) -> None:
    """Through the proxy: the model makes ``call_0``, the run stops, the user asks
    again, the model makes ``call_0`` again, and the client sends two results (the
    first call's late one, then the second's). Each turn resends the whole history:
    every turn is a 200 (session 45 answered 422 on this turn and every one after), on
    one line, and the upstream gets both calls with a result each. A result carries
    only its id: the ledger reads the first as the second call's and the second as the
    lost call's (README, orphan section)."""
    headers = {"X-Ctxledger-Session": "late", "authorization": "Bearer sk"}
    made = {"role": "assistant", "content": None, "tool_calls": [call("call_0")]}
    history: list[Any] = [{"role": "system", "content": "be brief"}, user("go")]
    steps: list[list[Any]] = [
        [],
        [user("again")],
        [result("call_0", "late one"), result("call_0", "its own")],
        [user("and?")],
        [user("once more")],
    ]
    async with rig(tmp_path) as r:
        for k, step in enumerate(steps):
            history += step
            reply = made if k < 2 else {"role": "assistant", "content": f"said {k}"}
            r.upstream.queue(chat_reply(reply))
            body = {"model": "m", "messages": history}
            res = await r.http.post("/v1/chat/completions", json=body, headers=headers)
            assert res.status_code == 200, res.text
            history.append({k: v for k, v in reply.items() if v is not None})
        sent = r.upstream.requests[-1].json["messages"]
        view = r.service.ledger.api_messages("late")
        assert len(r.service.ledger.chains.chain("late")) == 1  # no branch
    ids = [c["id"] for m in sent for c in m.get("tool_calls") or ()]
    answers = [m["tool_call_id"] for m in sent if m["role"] == "tool"]
    assert ids[0] == "call_0" != ids[1] and answers == [ids[1], ids[0]]
    assert [m["content"] for m in view if m["role"] == "tool"] == ["late one", "its own"]


def test_an_id_twice_in_one_message_is_two_calls_across_a_later_reuse() -> None:
    """``A(x, x)``, one result, a user message, ``B(x)``: the message stays answered (one
    key per message and id), its second call is lost, and a late result answers it
    after ``B``'s own, as the repair gives it the second call's new id."""
    messages = [user("go"), asks("x", "x"), result("x"), user(), asks("x"), result("x")]
    messages.append(result("x", "late"))
    layout = message_layout(messages, CompressionConfig())
    assert layout.is_answered(1, "x") and layout.is_answered(4, "x")
    assert layout.result_owner == {2: 1, 5: 4, 6: 1}
    fixed, _ = repair_call_ids(messages, None, _fresh)
    validate_messages(fixed)
    assert [fixed[k]["tool_call_id"] for k in (2, 5, 6)] == ["x", "new_4_0", "new_1_1"]


def test_a_call_re_used_every_turn_and_never_answered_is_lost_once_each() -> None:
    """The lost-call record grows by the calls lost, not by the turns squared (review
    of session 46: every re-use rebuilt the list and put the original in it again). The
    speed is in ``bench/lost_calls_bench.py``; here the sizes that made it quadratic."""
    turns = 300
    messages = [m for _ in range(turns) for m in (user(), asks("call_0"))]
    fixed, repairs = repair_call_ids(messages, None, _fresh)
    renames = {r.replacement: r.original for r in repairs}
    ledger = CallLedger()
    ledger.fold(fixed, renames)
    made = [c["id"] for m in fixed if m["role"] == "assistant" for c in m["tool_calls"]]
    assert ledger.lost_calls == {"call_0": made[:-1]}  # each call lost once, in order
    # an append's overlay holds only what it adds, on top of the base's record
    work = ledger.overlay()
    work.new_turn()
    work.supersede("call_0", "next")
    assert work.lost_calls == {"call_0": [made[-1]]}
    assert len(ledger.lost_calls["call_0"]) == turns - 1
    assert work.lost_owners("call_0") == made
    # the latest call takes the first result; late ones answer the lost calls earliest
    # first, each append starting past the ones answered
    for k, owner in enumerate([made[-1], *made[:3]]):
        late, _ = repair_call_ids([result("call_0", f"late {k}")], ledger, _fresh)
        assert late[0]["tool_call_id"] == owner
        ledger.fold(late, renames)
    assert ledger.late_owner("call_0") == made[3]
