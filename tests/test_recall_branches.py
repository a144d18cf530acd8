"""Recall and expand from a branch: a branch's conversation holds its parent's history up
to the branch point, less what the branch's copy dropped (Hermes's /compress here and
rewinds, pop_item, a proxy branch); the branch point's cache."""

from __future__ import annotations

import json

import anyio
import pytest
from helpers.ledger_helpers import deterministic_ledger

from ctxledger.analysis.agent_tools import handle_tool_call
from ctxledger.analysis.compactions import chain_compactions
from ctxledger.analysis.conversation import conversation_scopes
from ctxledger.analysis.recall import recall
from ctxledger.compressor.summarizers.offline import OfflineSummarizer
from ctxledger.ledger.compaction import compact
from ctxledger.ledger.facade import Ledger
from ctxledger.projections.transcript import read_bodies


def _branched(ledger: Ledger, keep: int) -> tuple[str, str, str]:
    """A chain compacted once, two more turns, then a branch of its tip holding the
    tip's view but its last `keep` messages dropped, and a message of its own (what
    Hermes's ``/compress here``, a rewind and ``pop_item`` do): (root, parent tip, branch)."""
    root = ledger.start_session(model="m", context_length=16_000)
    for i in range(10):
        ledger.append_messages(
            root,
            [
                {"role": "user", "content": f"where is walrus{i}"},
                {"role": "assistant", "content": f"walrus{i} is in crate{i}"},
            ],
        )
    tip = anyio.run(lambda: compact(ledger, root, OfflineSummarizer())).new_session_id or ""
    ledger.append_messages(
        tip, [{"role": "user", "content": "late okapi"}, {"role": "assistant", "content": "ok"}]
    )
    view = [dict(m) for m in ledger.transcript.api_messages(tip)]
    branch = ledger.start_session(
        model="m", context_length=16_000, parent_session_id=tip, reason="branch"
    )
    ledger.append_messages(
        branch, [*view[: len(view) - keep], {"role": "user", "content": "bison"}]
    )
    return root, tip, branch


def test_a_branch_recalls_its_parent_s_history_up_to_the_branch_point() -> None:
    ledger = deterministic_ledger()
    root, tip, branch = _branched(ledger, keep=2)
    ledger.append_messages(tip, [{"role": "user", "content": "gazelle after the branch"}])
    # compacted in the parent before the branch: found (before: the branch's chain only)
    hits = recall(ledger, branch, "walrus3 where").hits
    # the branch's copy of the summary, the parent's summary, the original
    assert [(h.session_id, h.origin) for h in hits] == [
        (branch, "appended"),
        (tip, "summary"),
        (root, "appended"),
    ]
    assert not hits[2].live
    assert hits[2].compacted_by == chain_compactions(ledger, tip)[0].compaction_id
    # dropped by the branch, or written to the parent after it: not this conversation
    assert recall(ledger, branch, "okapi").hits == []
    assert recall(ledger, branch, "gazelle").hits == []
    # the parent does not reach into its branch; the result names the branch's chain
    assert recall(ledger, tip, "bison").hits == []
    assert recall(ledger, branch, "bison").root == branch


def test_a_branch_that_kept_its_parent_s_whole_view_reaches_all_of_it() -> None:
    ledger = deterministic_ledger()
    _, _, branch = _branched(ledger, keep=0)
    assert [h.role for h in recall(ledger, branch, "okapi").hits] == ["user", "user"]


def test_an_agent_on_a_branch_expands_its_parent_s_earlier_compactions_only() -> None:
    ledger = deterministic_ledger()
    _, tip, branch = _branched(ledger, keep=2)
    before = chain_compactions(ledger, tip)[0].compaction_id
    later = anyio.run(lambda: compact(ledger, tip, OfflineSummarizer()))
    assert later.compaction_id is not None

    def expand_from(sid: str, cid: str) -> dict:
        args = json.dumps({"compaction_id": cid})
        return json.loads(handle_tool_call(ledger, sid, "expand_compaction", args))

    said = [m["message"]["content"] for m in expand_from(branch, before)["messages"]]
    assert "where is walrus3" in said  # before: "no compaction ... in this conversation"
    assert "no compaction" in expand_from(branch, later.compaction_id)["error"]


def _popped(ledger: Ledger, parent: str, drop: int) -> str:
    """A branch of `parent` holding its view less the last `drop` messages (pop_item)."""
    view = [dict(m) for m in ledger.transcript.api_messages(parent)]
    branch = ledger.start_session(
        model="m", context_length=16_000, parent_session_id=parent, reason="branch"
    )
    ledger.append_messages(branch, view[: len(view) - drop])
    return branch


def test_a_branch_that_drops_part_of_the_kept_tail_leaves_it_out() -> None:
    """The view after a compaction is [head, summary, kept tail]: the summary's seq is
    above the tail's, so a bound alone took the dropped tail messages back in."""
    ledger = deterministic_ledger()
    root, tip, branch = _branched(ledger, keep=4)  # late okapi, ok, walrus9's exchange
    # the kept tail: the branch's copy, the original (the tip's view carries it)
    assert [h.session_id for h in recall(ledger, branch, "crate8").hits] == [branch, root]
    # before: the parent's original "walrus9 is in crate9"
    assert recall(ledger, branch, "crate9").hits == []
    assert recall(ledger, branch, "okapi").hits == []
    # the parent's compaction (its seq above the dropped ones) is still this conversation's
    cid = chain_compactions(ledger, tip)[0].compaction_id
    args = json.dumps({"compaction_id": cid})
    assert "messages" in json.loads(handle_tool_call(ledger, branch, "expand_compaction", args))


def test_a_branch_of_a_branch_keeps_only_what_the_nearer_branch_kept() -> None:
    """Two pops: the second drops a copy the first kept; its original, two chains up,
    is left out too (before: the first branch's bound let it in)."""
    ledger = deterministic_ledger()
    _, _, first = _branched(ledger, keep=2)  # [..., walrus9's exchange, bison]
    second = _popped(ledger, first, drop=2)  # drops bison and "walrus9 is in crate9"
    third = _popped(ledger, second, drop=0)
    for sid in (second, third):
        assert recall(ledger, sid, "crate9").hits == []
        assert recall(ledger, sid, "bison").hits == []
    assert len(recall(ledger, third, "crate8").hits) == 4  # three copies, the original


def _walruses(ledger: Ledger, turns: int) -> str:
    root = ledger.start_session(model="m", context_length=16_000)
    for i in range(turns):
        ledger.append_messages(
            root,
            [
                {"role": "user", "content": f"where is walrus{i}"},
                {"role": "assistant", "content": f"walrus{i} is in crate{i}"},
            ],
        )
    return root


def test_a_branch_point_is_read_once_then_taken_from_the_cache(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ledger = deterministic_ledger()
    branch = _popped(ledger, _walruses(ledger, 5), drop=1)
    scopes = conversation_scopes(ledger, branch)
    calls: list[int] = []

    def counted(messages: list) -> list:
        calls.append(len(messages))
        return read_bodies(messages)

    monkeypatch.setattr("ctxledger.analysis.conversation.read_bodies", counted)
    assert conversation_scopes(ledger, branch) == scopes
    assert recall(ledger, branch, "crate3").hits
    assert calls == []  # before: both views' copied prefix read again on each call


def test_a_branch_still_copying_its_parent_gets_its_branch_point_again() -> None:
    """The cache holds a branch point only once later appends cannot move it."""
    ledger = deterministic_ledger()
    root = _walruses(ledger, 5)
    view = [dict(m) for m in ledger.transcript.api_messages(root)]
    branch = ledger.start_session(
        model="m", context_length=16_000, parent_session_id=root, reason="branch"
    )
    ledger.append_messages(branch, view[:3])
    assert recall(ledger, branch, "crate3").hits == []
    ledger.append_messages(branch, view[3:9])
    # the branch's copy and the parent's original
    assert [h.session_id for h in recall(ledger, branch, "crate3").hits] == [branch, root]


def test_a_copy_appended_while_the_branch_point_is_read_is_not_cut_off(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Another thread appending to the branch during the body reads: the point was marked
    final for a prefix shorter than the view it then measured (a cached, short bound)."""
    ledger = deterministic_ledger()
    root = _walruses(ledger, 5)
    view = [dict(m) for m in ledger.transcript.api_messages(root)]
    branch = ledger.start_session(
        model="m", context_length=16_000, parent_session_id=root, reason="branch"
    )
    ledger.append_messages(branch, view[:3])
    appended: list[bool] = []

    def interleaved(messages: list) -> list:
        if not appended:  # the other writer lands between reading the view and measuring it
            appended.append(True)
            ledger.append_messages(branch, view[3:9])
        return read_bodies(messages)

    monkeypatch.setattr("ctxledger.analysis.conversation.read_bodies", interleaved)
    conversation_scopes(ledger, branch)
    monkeypatch.undo()
    # the branch's copy and the parent's original (before: the branch's copy alone)
    assert [h.session_id for h in recall(ledger, branch, "crate3").hits] == [branch, root]


@pytest.mark.parametrize("cap", [0, 30, 80])
def test_the_branch_point_cache_is_bounded_and_answers_alike(
    monkeypatch: pytest.MonkeyPatch, cap: int
) -> None:
    """Six pops of a 20-message view: 6 points of about 40 pairs each. Under a cap
    points go (before: every point stayed for the ledger's life, 24.9 MB as (id, seq)
    tuples for 100 pops of a 2,000-message view) and the scopes are the same."""
    from ctxledger.analysis import conversation

    ledger = deterministic_ledger()
    sids = [_walruses(ledger, 10)]
    for _ in range(6):
        sids.append(_popped(ledger, sids[-1], drop=1))
    unbounded = [conversation_scopes(ledger, sid) for sid in sids]
    assert len(conversation._POINTS[ledger]) == 6
    conversation._POINTS.pop(ledger)
    monkeypatch.setattr(conversation, "POINT_CACHE_PAIRS", cap, raising=False)
    for _ in range(2):  # cold, then from what the cache kept
        assert [conversation_scopes(ledger, sid) for sid in sids] == unbounded
        points = conversation._POINTS[ledger]
        assert len(points) <= max(1, cap // 30)  # before: all 6
        assert points.cost <= cap or len(points) == 1  # one point larger than the cap
    assert sorted(h.session_id for h in recall(ledger, sids[-1], "crate3").hits) == sids


def _compacted_line(ledger: Ledger, hops: int) -> list[str]:
    """A chain compacted once, then `hops` branches, each of the last one's tip view
    plus ten turns of its own, each compacted once: the tips, oldest first."""
    tips = [_walruses(ledger, 10)]
    while True:
        done = anyio.run(lambda: compact(ledger, tips[-1], OfflineSummarizer()))
        tips[-1] = done.new_session_id or ""
        if len(tips) > hops:
            return tips
        tips.append(_popped(ledger, tips[-1], drop=0))
        ledger.append_messages(
            tips[-1],
            [{"role": r, "content": f"{r} {i}"} for i in range(10) for r in ("user", "assistant")],
        )


def test_recall_stops_at_its_cap_and_the_compaction_count_walks_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One walk, two caps: recall's (patched where it is read, on each call) and the
    Hermes engine's count (its ``compression_count``), which walks on (before, on this
    branch: one cap, the count 3; on main the count's cap was 10,000 too)."""
    from ctxledger.analysis import conversation
    from ctxledger.integrations.hermes_host import compactions

    ledger = deterministic_ledger()
    tips = _compacted_line(ledger, hops=4)
    assert compactions(ledger.chains, tips[-1]) == 5
    monkeypatch.setattr(conversation, "MAX_BRANCH_HOPS", 2)
    scopes = conversation_scopes(ledger, tips[-1])
    assert [s.root for s in scopes] == [ledger.chains.root(t) for t in tips[:-4:-1]]
    assert compactions(ledger.chains, tips[-1]) == 5


def test_more_leaves_out_what_the_branch_dropped() -> None:
    """`recall`'s `more` (one row past the limit) counts the branch's conversation only:
    the parent's "where is walrus9", below the branch point but dropped by the branch,
    would be the row past a limit of all 16 hits."""
    ledger = deterministic_ledger()
    _, tip, branch = _branched(ledger, keep=4)
    assert recall(ledger, branch, "walrus9").hits == [] != recall(ledger, tip, "walrus9").hits
    everything = recall(ledger, branch, "where", limit=100)
    assert (len(everything.hits), everything.more) == (16, False)
    for limit, more in [(15, True), (16, False)]:
        result = recall(ledger, branch, "where", limit=limit)
        assert (len(result.hits), result.more) == (limit, more)
