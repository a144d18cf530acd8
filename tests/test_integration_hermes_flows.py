"""The Hermes engine through Hermes's CLI session flows (``/new``, ``/resume <id>``,
``/branch``), a resume under another model, and old ledgers: each flow's ledger read
back. The flows run under ``.venv-hermes`` (``tests/hermes_engine_flows.py``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.hermes_run import run_hermes_script

from ctxledger import Ledger
from ctxledger.events import MessageAppended, ModelSwitched, SessionStarted, UsageReported

MARK = "_db_persisted"


@pytest.fixture(scope="module")
def flows(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("hermes-flows")
    run_hermes_script("hermes_engine_flows.py", workdir)
    return workdir, json.loads((workdir / "flows.json").read_text())


def _chains(workdir: Path, name: str) -> list[tuple[str, list[dict], str]]:
    """Each root's title, the messages appended anywhere on its chain in order, its tip."""
    ledger = Ledger.open(workdir / name)
    try:
        events = [r.event for r in ledger.store.read_all()]
        chains: dict[str, tuple[str, list[dict]]] = {
            e.session_id: (e.title or "", [])
            for e in events
            if isinstance(e, SessionStarted) and e.parent_session_id is None
        }
        for e in events:
            if isinstance(e, MessageAppended):
                chains[ledger.chains.root(e.session_id)][1].append(e.message)
        return [(title, said, ledger.tip(root)) for root, (title, said) in chains.items()]
    finally:
        ledger.close()


def _said(messages: list[dict]) -> list[str]:
    return [m.get("content") or "" for m in messages]


def _talk(first: int, turns: int) -> list[str]:
    return [t for i in range(first, first + turns) for t in (f"ask {i}", f"answer {i}")]


def _roots_and_branches(ledger: Ledger) -> tuple[list[SessionStarted], dict[str, list[str]]]:
    """The chains started as a conversation or a branch, and what each appended."""
    events = [r.event for r in ledger.store.read_all()]
    starts = [e for e in events if isinstance(e, SessionStarted) and e.reason in ("new", "branch")]
    appended: dict[str, list[str]] = {e.session_id: [] for e in starts}
    for e in events:
        if isinstance(e, MessageAppended):
            appended[ledger.chains.root(e.session_id)].append(e.message.get("content") or "")
    return starts, appended


def test_branch_after_a_reset_only_is_a_new_chain_and_resume_continues_the_old(flows):
    workdir, _ = flows
    chains = _chains(workdir, "branch.db")
    # before: the branch's turn landed on chain A (resumed by A's title after the reset)
    assert [title for title, _, _ in chains] == ["hermes session A", "hermes session B"]
    (_, a, _), (_, b, _) = chains
    assert _said(a) == _talk(0, 2) + _talk(5, 1)  # /resume A: A's chain goes on
    assert _said(b) == _talk(0, 3)


def test_new_with_the_same_opening_is_a_new_chain(flows):
    workdir, _ = flows
    chains = _chains(workdir, "new.db")
    assert [title for title, _, _ in chains] == ["hermes session C", "hermes session D"]
    assert _said(chains[1][1]) == [*_talk(0, 1), "a new topic", "sure"]


def test_a_reset_with_no_new_id_never_continues_the_old_chain(flows):
    workdir, _ = flows
    chains = _chains(workdir, "reset.db")
    assert [(title, _said(said)) for title, said, _ in chains] == [
        ("hermes session F", _talk(0, 1)),
        ("hermes session F", _talk(0, 2)),
    ]


def test_a_resume_under_another_model_switches_the_tip_and_keeps_the_count(flows):
    workdir, out = flows
    assert out["resume_other_model"] == {"compacted": 1, "resumed_count": 1}
    ((_, said, tip),) = _chains(workdir, "model.db")
    assert _said(said)[-2:] == _talk(12, 1)
    ledger = Ledger.open(workdir / "model.db")
    try:
        session = ledger.transcript.session(tip)
        assert (session.model, session.context_length) == ("m2", 200_000)
    finally:
        ledger.close()


def test_a_root_with_no_message_is_not_a_conversation_to_continue(flows):
    workdir, _ = flows
    chains = _chains(workdir, "empty.db")
    assert [(title, _said(said)) for title, said, _ in chains] == [
        ("hermes session E", []),
        ("hermes session E", _talk(0, 1)),
    ]


def test_an_old_ledger_holding_the_mark_is_resumed_on_one_chain(flows):
    workdir, out = flows
    ((_, said, _),) = _chains(workdir, "marks.db")  # one root: marks ignored on both sides
    assert _said(said) == _talk(0, 3)
    assert [MARK in m for m in said] == [True] * 4 + [False] * 2  # nothing new marked
    assert out["old_marks"]["view_marked"] is False


def test_a_compaction_keeps_digests_of_the_list_not_a_copy(flows):
    _, out = flows
    assert out["memory"] == {"handed_dicts": 0, "handed": 24, "unmarked_shares_values": True}


def test_a_rotated_conversation_resumed_on_its_tip_id_continues_its_chain(flows):
    workdir, out = flows
    # Hermes moved the conversation R -> X -> Y at its compactions; the resume lands on Y
    assert out["rotated"] == {"tip": "Y", "count": 2}
    # before: a second root titled "hermes session Y" with the compacted view again
    ((title, said, _),) = _chains(workdir, "rotated.db")
    assert title == "hermes session R"
    assert _said(said) == _talk(0, 26)  # each message once, in order


def test_a_branch_of_a_rotated_conversation_is_a_chain_of_its_own(flows):
    workdir, _ = flows
    chains = _chains(workdir, "branched.db")
    # X ended "compression" after the branch: only B's mark keeps it off R's chain
    # (before, with the mark not read: one chain, B's turns on R's)
    assert [title for title, _, _ in chains] == ["hermes session R", "hermes session B"]
    assert _said(chains[0][1]) == _talk(0, 13)
    assert _said(chains[1][1])[-4:] == _talk(12, 2)


def test_a_reset_after_a_rotation_with_no_new_id_never_continues_the_chain(flows):
    workdir, _ = flows
    chains = _chains(workdir, "reset-rot.db")
    # before: X (still current) taken for a new id to resume, its lineage led to R
    assert [title for title, _, _ in chains] == ["hermes session R", "hermes session X"]
    assert _said(chains[0][1]) == _talk(0, 12)


def test_after_a_reset_the_gateway_s_id_is_read_in_the_agent_s_thread(flows):
    workdir, _ = flows
    chains = _chains(workdir, "gateway.db")
    # a guard: the chat's id is its ContextVar's (which the engine's loop thread sees
    # too: run_coroutine_threadsafe copies the caller's context), never os.environ's
    assert [(title, _said(said)) for title, said, _ in chains] == [
        ("hermes session G1", _talk(0, 1)),
        ("hermes session G2", _talk(0, 2)),
    ]


def test_a_model_switch_zeroes_the_last_response_s_figures_as_hermes_does(flows):
    workdir, out = flows
    said = out["model_switch"]
    # Hermes's own compressor, given the same calls, is the expectation
    assert said["builtin"] == {"figures": [0, 0, 0], "progress": False, "status": [0, 0]}
    # before: [90000, 500, 90500], and get_status showed 100 % of the new 64K window
    assert said["ours"] == said["builtin"]
    ledger = Ledger.open(workdir / "switch.db")
    try:  # the old model's report is written to the ledger (accounting), under the old model
        said_in_order = [
            ("usage", r.event.usage.prompt)
            if isinstance(r.event, UsageReported)
            else ("switch", r.event.model)
            for r in ledger.store.read_all()
            if isinstance(r.event, UsageReported | ModelSwitched)
        ]
        # before: [("switch", "m2"), ("usage", 90000)]: 90K against the new 64K window
        assert said_in_order == [("usage", 90_000), ("switch", "m2")]
    finally:
        ledger.close()


def test_a_store_that_raises_resumes_by_the_own_id_and_says_so_once(flows):
    workdir, out = flows
    ((title, said, _),) = _chains(workdir, "broken.db")
    assert (title, _said(said)) == ("hermes session F", _talk(0, 2))
    # before: logged at debug, so a rotated conversation's second root went unexplained
    (line,) = out["failing_store"]["logged"]
    assert line.startswith("WARNING ") and "database is locked" in line


def test_a_rotated_conversation_that_delegated_a_task_resumes_its_chain(flows):
    workdir, out = flows
    # Hermes's own lineage of X misses R (it walks down from R into the sub-agent's row)
    assert out["rotated_after_a_sub_agent"] == {"lineage": ["X"]}
    ((title, said, _),) = _chains(workdir, "delegated.db")
    assert title == "hermes session R"
    assert _said(said) == _talk(0, 14)


def test_compress_here_goes_on_as_a_branch_of_the_conversation_as_hermes_compacts_it(flows):
    """``/compress here 2`` after a recall call: Hermes hands the head only (a strict
    prefix of what the ledger holds) and re-appends the last two exchanges."""
    workdir, out = flows
    said = out["partial_compress"]
    # the head compacted as Hermes compacts it: as a conversation of its own
    assert said["as_alone"] and said["tail"] == 4
    # one conversation: the resume in a new process continued the branch, and the
    # count is the conversation's (one compaction before the branch, one on it)
    assert said["same_chain"] and said["count"] == [2, 2]
    # recall and expand_compaction reach what the chain compacted before the branch
    # (before: only summaries were found, and the parent's compaction was refused)
    assert said["recalled"] == ["user", "appended", False]
    assert "ask 5" in said["expanded"]
    ledger = Ledger.open(workdir / "partial.db")
    try:
        starts, appended = _roots_and_branches(ledger)
        # before: a second root holding the head again, the tail then appended there
        assert [(e.reason, e.title) for e in starts] == [
            ("new", "hermes session P"),
            ("branch", "hermes session P"),
        ]
        root, branch = (e.session_id for e in starts)
        old_tip = ledger.tip(root)
        assert starts[1].parent_session_id == old_tip
        assert ledger.chains.lineage(old_tip).end_reason == "branched"
        assert appended[root] == _talk(0, 15)  # as recorded before, each once
        assert appended[branch] == [*said["head"], *_talk(13, 4)]
    finally:
        ledger.close()


def test_the_gateway_s_compress_here_on_a_temporary_agent_keeps_one_conversation(flows):
    workdir, out = flows
    said = out["gateway_compress_here"]
    assert said["same_chain"]
    ledger = Ledger.open(workdir / "gateway-here.db")
    try:
        starts, appended = _roots_and_branches(ledger)
        # before: the temporary agent found no chain its head continues (the ledger's
        # view was longer): a second root held the head again
        assert [(e.reason, e.title) for e in starts] == [
            ("new", "hermes session G"),
            ("branch", "hermes session G"),
        ]
        root, branch = (e.session_id for e in starts)
        assert starts[1].parent_session_id == ledger.tip(root)
        assert appended[root] == _talk(0, 15)
        assert appended[branch] == [*said["head"], *_talk(13, 3)]
    finally:
        ledger.close()


def test_hermes_s_own_compress_here_keeps_one_conversation(flows):
    """Hermes's CLI ``/compress here 2`` on a real agent compacting with rotation, after
    a recall call; then the conversation goes on and is resumed on the id Hermes
    resolves."""
    workdir, out = flows
    assert out["cli_compress_here"] == {
        "engine": "CtxLedgerEngine",
        "rotated": True,
        "same_chain": True,
    }
    ledger = Ledger.open(workdir / "cli-home" / "ctxledger.ledger.db")
    try:
        starts, appended = _roots_and_branches(ledger)
        # before: a second root (the head again, then the tail and each later turn)
        assert [(e.reason, e.title) for e in starts] == [
            ("new", "hermes session H"),
            ("branch", "hermes session H"),
        ]
        # the re-appended tail, then the later turns
        assert appended[starts[1].session_id][-8:] == _talk(13, 4)
    finally:
        ledger.close()


def test_a_compress_here_that_compacts_nothing_starts_no_branch(flows):
    """``/compress here 7`` reaching back to the summary: nothing in the head compacts
    and Hermes keeps its list; the tip goes on, each message recorded once."""
    workdir, out = flows
    said = out["compress_here_no_progress"]
    assert said["head"] == ["ask 0", "answer 0", "ask 1", "[ctxledger h"]
    assert said["unchanged"] and not said["progress"]
    ledger = Ledger.open(workdir / "here-noop.db")
    try:
        starts, appended = _roots_and_branches(ledger)
        # before: a branch of the tip holding the head, then the whole tail again
        assert [e.reason for e in starts] == ["new"]
        root = starts[0].session_id
        assert not ledger.transcript.session(ledger.tip(root)).ended
        assert appended[root] == _talk(0, 16)
    finally:
        ledger.close()


def test_a_bad_message_after_a_foreign_write_is_refused_not_crashed(flows):
    """Session 46's review: a message the ledger refuses in Hermes's list after another
    writer's note raised TypeError out of the engine's repair; now ``compress`` fails
    with the ledger's reason (Hermes keeps its list) and nothing is appended."""
    _, out = flows
    said = out["hostile_after_a_foreign_write"]
    assert set(said) == {"result_id_list", "result_id_object", "calls_number"}
    for name, got in said.items():
        assert got["kept"] and got["aborted"] and got["appended"] == 0, name
        assert got["error"].startswith("ctxledger: "), name
        assert ("tool_calls" if name == "calls_number" else "tool_call_id") in got["error"]


def test_a_result_left_out_keeps_the_engine_on_hermes_s_list(flows):
    """Session 46's review (L1): a result whose call another writer withdrew is left out,
    and a ``/compress`` failing after the append left the engine knowing a list Hermes
    never held: Hermes's end started a second root with the whole conversation. Now the
    end goes on as a branch of the view Hermes held (session 39's rule), one root."""
    workdir, out = flows
    said = out["left_out_then_failed"]
    assert said == {"kept": True, "aborted": True, "known": True}
    ledger = Ledger.open(workdir / "left-out.db")
    try:
        starts, appended = _roots_and_branches(ledger)
        assert [e.reason for e in starts] == ["new", "branch"]
        root = starts[0].session_id
        assert appended[root][-2:] == ["a note from a script", "ok"]
        assert "found" not in appended[root]  # (the result: left out)
        assert appended[starts[1].session_id][-4:] == ["found", "ok", "next", "done"]
    finally:
        ledger.close()


def test_a_resume_beside_a_branch_skips_the_chain_whose_tip_ended(flows):
    """The list from before ``/compress here`` matches the old chain, whose tip ended
    when the branch started: a new root, and the compaction goes through."""
    workdir, out = flows
    # before (the ended tip taken): "session ... has ended (branched)", aborted
    said = out["resume_beside_a_branch"]
    assert (said["aborted"], said["error"]) == (False, None)
    ledger = Ledger.open(workdir / "beside.db")
    try:
        starts, appended = _roots_and_branches(ledger)
        assert [e.reason for e in starts] == ["new", "branch", "new"]
        assert appended[starts[2].session_id] == said["handed"]
    finally:
        ledger.close()


def test_a_branch_takes_its_parent_s_system_prompt_and_window(flows):
    """The agent's model has no known window (0): the branch keeps the parent's (and
    the parent's prompt in its role, session 38)."""
    workdir, _ = flows
    ledger = Ledger.open(workdir / "inherits.db")
    try:
        starts, appended = _roots_and_branches(ledger)
        assert [e.reason for e in starts] == ["new", "branch"]
        parent, branch = starts
        assert branch.parent_session_id == ledger.tip(parent.session_id)
        # before: no system prompt, no window (the agent's 0 taken for "none")
        assert ledger.transcript.session(branch.session_id).system_prompt == "be brief"
        assert ledger.transcript.session(branch.session_id).system_role == "developer"
        assert branch.context_length == 64_000
        assert appended[branch.session_id] == _talk(0, 3)
    finally:
        ledger.close()


def test_recall_after_undo_then_compress_leaves_the_undone_answer_out(flows):
    """The branch's bound is the summary's seq, above the undone kept-tail messages."""
    _, out = flows
    said = out["undo_then_compress"]
    assert said["undone"] == "answer 11"
    assert said["recalled"]  # the answers still in the conversation ("any" word)
    # before: the undone answer too, from the parent's chain
    assert not [s for s in said["recalled"] if "11" in s]
