"""A call that never got a result, then a user turn, then a call re-using its id
(session 45): the ledger's repair gives the later result to the later call, as the
planner's scan pairs it (``tests/test_parity_orphans.py``,
``tests/test_planner_properties.py``). Calls made before any result came wait first in,
first out; a tool result ends their round (session 46: a re-use after it loses a call
still unanswered, as a user message does).

Ledgers written before hold repairs made by the older rule (the result went to the
lost call): they replay and verify as stored, and a new append follows the new rule.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from helpers.ledger_helpers import chain_events, compact_now, make_ledger
from helpers.reused_ids import asks, call, pairs, result, user
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxledger.analysis.replay import rebuild_check, verify_compactions
from ctxledger.errors import InvalidMessage
from ctxledger.events import ToolCallIdsRepaired
from ctxledger.messages import CallLedger, repair_call_ids, validate_messages


def _fresh(i: int, j: int) -> str:
    return f"new_{i}"


def test_a_call_lost_across_a_user_turn_leaves_the_result_to_the_later_call() -> None:
    messages = [user("go"), asks("x"), user(), asks("x"), result("x")]
    fixed, repairs = repair_call_ids(messages, None, _fresh)
    assert [(r.index, r.call_index, r.replacement) for r in repairs] == [
        (3, 0, "new_3"),
        (4, None, "new_3"),
    ]
    assert pairs(fixed) == pairs(messages) == {4: 3}


def test_within_one_user_turn_results_still_go_first_in_first_out() -> None:
    messages = [user("go"), asks("x"), asks("x"), result("x", "r1"), result("x", "r2")]
    fixed, _ = repair_call_ids(messages, None, _fresh)
    assert [m.get("tool_call_id") for m in fixed[3:]] == ["x", "new_2"]
    assert pairs(fixed) == pairs(messages) == {3: 1, 4: 2}


def test_a_user_turn_after_the_reuse_does_not_make_the_earlier_call_lost() -> None:
    # the rule is decided at the re-use: both calls were made in one turn
    messages = [user("go"), asks("x"), asks("x"), user(), result("x", "r1"), result("x", "r2")]
    fixed, _ = repair_call_ids(messages, None, _fresh)
    assert [m.get("tool_call_id") for m in fixed[4:]] == ["x", "new_2"]
    assert pairs(fixed) == pairs(messages) == {4: 1, 5: 2}


def test_calls_waiting_before_a_lost_one_are_lost_with_it() -> None:
    # A and B (one turn) both wait; after a user turn C re-uses the id: its result is C's
    messages = [user("go"), asks("x"), asks("x"), user(), asks("x"), result("x")]
    fixed, _ = repair_call_ids(messages, None, _fresh)
    assert fixed[5]["tool_call_id"] == fixed[4]["tool_calls"][0]["id"] == "new_4"
    assert pairs(fixed) == pairs(messages) == {5: 4}


def test_a_call_whose_round_of_results_ended_without_its_own_is_lost() -> None:
    # A and B wait; rA answers A and ends the round without B's, so C's re-use loses B:
    # the next result is C's (session 45's first in, first out gave it to B), a later
    # one B's late result
    messages = [user("go"), asks("x"), asks("x"), result("x", "a"), asks("x"), result("x", "b")]
    fixed, _ = repair_call_ids(messages, None, _fresh)
    assert [fixed[5]["tool_call_id"], fixed[4]["tool_calls"][0]["id"]] == ["new_4", "new_4"]
    assert pairs(fixed) == pairs(messages) == {3: 1, 5: 4}
    late = [*messages, result("x", "late")]
    fixed, _ = repair_call_ids(late, None, _fresh)
    assert fixed[6]["tool_call_id"] == fixed[2]["tool_calls"][0]["id"] == "new_2"
    assert pairs(fixed) == pairs(late) == {3: 1, 5: 4, 6: 2}


def test_a_ledger_stored_in_flight_pairs_its_next_result_by_the_round_rule(
    tmp_path: Path,
) -> None:
    """Compatibility (review of session 46): a ledger holding ``A(x)``, ``B(x_1)``,
    ``rA``, ``C(x_2)`` as stored (the same messages the older code stored) reopens
    and replays as written, but the next result with ``x`` now answers ``C`` (session
    45 gave it to ``B``): ``rA`` ended the round without ``B``'s, so ``B`` is lost."""
    path = tmp_path / "l.db"
    with make_ledger(path) as ledger:
        sid = ledger.start_session(model="m", context_length=32_000)
        ledger.append_messages(sid, [user("go"), asks("x"), asks("x"), result("x", "a")])
        ledger.append_messages(sid, [asks("x")])
        made = [c["id"] for m in ledger.api_messages(sid) for c in m.get("tool_calls") or ()]
    with make_ledger(path, namespace="u") as ledger:  # reopened: the pending state is folded again
        ledger.append_messages(sid, [result("x", "c")])
        assert ledger.api_messages(sid)[-1]["tool_call_id"] == made[2]  # C's, not B's
        ledger.append_messages(sid, [result("x", "late")])
        assert ledger.api_messages(sid)[-1]["tool_call_id"] == made[1]  # B's late one
        assert rebuild_check(ledger, sid).equal


def test_a_late_result_for_a_lost_call_answers_it(tmp_path: Path) -> None:
    # (session 45 refused it, and the planner dropped it as a second result for B)
    with make_ledger(tmp_path / "l.db") as ledger:
        sid = ledger.start_session(model="m", context_length=32_000)
        ledger.append_messages(sid, [user("go"), asks("x"), user(), asks("x"), result("x")])
        ledger.append_messages(sid, [result("x", "late")])
        view = ledger.api_messages(sid)
        assert view[-1]["tool_call_id"] == "x" == view[1]["tool_calls"][0]["id"]  # A's
        assert rebuild_check(ledger, sid).equal
    assert pairs([user("go"), asks("x"), user(), asks("x"), result("x"), result("x")]) == {
        4: 3,
        5: 1,
    }


_EVENTS = st.lists(
    st.one_of(
        st.just(user()),
        st.lists(st.sampled_from("xyz"), min_size=1, max_size=2, unique=True).map(
            lambda ids: {"role": "assistant", "content": "a", "tool_calls": [call(c) for c in ids]}
        ),
        st.sampled_from("xyz").map(result),
    ),
    max_size=16,
)


@settings(max_examples=600)  # (cheap: a few short lists scanned twice)
@given(messages=_EVENTS)
def test_the_repair_pairs_results_as_the_planner_does(messages: list[dict[str, Any]]) -> None:
    """One rule in both: wherever the ledger takes a list with re-used ids, each result
    answers the call the planner's scan gives it (the repaired list, ids unique, reads
    the same), and no result answers two calls."""
    try:
        fixed, _ = repair_call_ids(messages, None, _fresh)
        validate_messages(fixed)
    except InvalidMessage:
        return
    assert pairs(fixed) == pairs(messages)


def test_the_rule_holds_across_batches_and_the_stored_view() -> None:
    stored = CallLedger()
    stored.fold([user("go"), asks("x")], {})
    fixed, _ = repair_call_ids(
        [user(), asks("x")], stored, _fresh
    )  # one batch: the turn, the re-use
    stored.fold(fixed, {"new_1": "x"})
    later, repairs = repair_call_ids([result("x")], stored, _fresh)
    assert later[0]["tool_call_id"] == "new_1" and repairs[0].replacement == "new_1"
    # without the user turn in between, the stored original still waits for it
    same_turn = CallLedger()
    same_turn.fold([user("go"), asks("x"), {**asks("new_2")}], {"new_2": "x"})
    assert repair_call_ids([result("x")], same_turn, _fresh)[0][0]["tool_call_id"] == "x"


def test_the_ledger_stores_the_pair_across_appends_and_reopening(tmp_path: Path) -> None:
    db = tmp_path / "l.db"
    with make_ledger(db) as ledger:
        sid = ledger.start_session(model="m", context_length=32_000)
        ledger.append_messages(sid, [user("go"), asks("call_0")])  # the run stopped here
        ledger.append_messages(sid, [user()])
        ledger.append_messages(sid, [asks("call_0", text="once more")])  # repaired
    with make_ledger(db, namespace="u") as again:
        again.append_messages(sid, [result("call_0")])
        stored = again.api_messages(sid)
        (fix_call,), (fix_result,) = (
            e.repairs for e in chain_events(again, sid, ToolCallIdsRepaired)
        )
        assert rebuild_check(again, sid).equal
    assert stored[-1]["tool_call_id"] == stored[-2]["tool_calls"][0]["id"] != "call_0"
    assert fix_result.replacement == fix_call.replacement


def _old_rename_for(self: CallLedger, call_id: str) -> str | None:
    """``CallLedger.rename_for`` as main had it before session 45 (first in, first out
    whatever the turns): to write a ledger the way today's main writes it."""
    pending = self.pending_rename(call_id)
    if pending is None or self.was_answered(pending):
        return None
    return pending if self.was_answered(call_id) or not self.was_issued(call_id) else None


def _turns(n: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for k in range(n):
        out += [user(f"ask {k} " + "u" * 3_000), {"role": "assistant", "content": "a" * 3_000}]
    return out


def test_a_ledger_written_by_the_older_rule_replays_verifies_and_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "old.db"
    with monkeypatch.context() as old:
        old.setattr(CallLedger, "rename_for", _old_rename_for)
        old.setattr(CallLedger, "was_lost", lambda self, call_id: False)  # (no such thing)
        with make_ledger(db) as ledger:
            sid = ledger.start_session(model="m", context_length=16_000)
            ledger.append_messages(sid, [user("go"), asks("call_0"), user(), asks("call_0")])
            ledger.append_messages(sid, [result("call_0", "old rule")])  # went to the lost call
            ledger.append_messages(sid, _turns(6))
            written = ledger.api_messages(sid)
            outcome = compact_now(ledger, sid)
            assert outcome.action == "compressed" and outcome.new_session_id is not None
            sid = outcome.new_session_id
            compacted = ledger.api_messages(sid)
    assert written[4]["tool_call_id"] == "call_0" == written[1]["tool_calls"][0]["id"]
    assert written[3]["tool_calls"][0]["id"] != "call_0"
    with make_ledger(db, namespace="u") as ledger:
        assert ledger.api_messages(sid) == compacted  # as stored, nothing re-derived
        assert rebuild_check(ledger, sid).equal
        assert not verify_compactions(ledger, sid).drifted
        # a new re-use after a new user turn follows the new rule
        ledger.append_messages(sid, [asks("call_7"), user(), asks("call_7", "again")])
        ledger.append_messages(sid, [result("call_7")])
        view = ledger.api_messages(sid)
        assert view[-1]["tool_call_id"] == view[-2]["tool_calls"][0]["id"] != "call_7"
        assert rebuild_check(ledger, sid).equal
