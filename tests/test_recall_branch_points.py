"""The branch-point cache of recall (which point it lets go, a walk larger than its cap,
threads) and the walk of a conversation's branches (its caps, a log whose lineage loops)."""

from __future__ import annotations

import random
import sys
import threading
import time
from array import array

import anyio
import pytest
from helpers.ledger_helpers import deterministic_ledger
from test_recall_branches import _popped, _walruses

from ctxledger.analysis import conversation
from ctxledger.analysis.conversation import conversation_scopes
from ctxledger.compressor.summarizers.offline import OfflineSummarizer
from ctxledger.events import SessionStarted
from ctxledger.eventstore import AppendRequest
from ctxledger.integrations.hermes_host import compactions
from ctxledger.ledger.compaction import compact
from ctxledger.ledger.facade import Ledger
from ctxledger.projections.transcript import read_bodies


def _point(pairs: int) -> conversation._Point:
    ids = tuple(f"m{i}" for i in range(pairs))
    return conversation._Point(ids, array("q", range(pairs)), (), array("q"), 0)


def test_the_cache_lets_the_least_recently_used_point_go_and_keeps_a_walk_s_points(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A FIFO (a hit not moving the point) or a cache letting its newest point go fails
    the first check; a plain LRU fails the second (a walk larger than the cap evicted
    each point just before the next walk asked for it: no hit at all)."""
    cost = _point(10).cost  # 10 pairs and the fixed cost
    monkeypatch.setattr(conversation, "POINT_CACHE_PAIRS", 3 * cost)
    points = conversation._Points()
    first, second, third = object(), object(), object()
    for key in ("a", "b", "c"):
        points.put((key, "p"), _point(10), first)
    assert points.get(("a", "p"), second) is not None
    points.put(("d", "p"), _point(10), second)
    assert points.held() == [("c", "p"), ("a", "p"), ("d", "p")]  # b was the least recent
    points.put(("e", "p"), _point(10), second)  # c: the first walk's
    points.put(("f", "p"), _point(10), second)  # would evict a, which this walk used
    assert points.held() == [("a", "p"), ("d", "p"), ("e", "p")]
    assert points.cost == 3 * cost
    big = _point(4 * cost)
    points.put(("g", "p"), big, third)  # larger than the cap: kept, alone
    assert (points.held(), points.cost) == ([("g", "p")], big.cost)


def test_many_short_points_stay_within_the_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    """A point costs its pairs and a fixed 40 (about 640 bytes: its tuples, arrays, key,
    entry): 1,000 points of 2 pairs under a cap of 4,200 pairs keep 100 (before: all
    1,000, some 650 kB where 4,200 pairs of 16 bytes stand for 67 kB)."""
    monkeypatch.setattr(conversation, "POINT_CACHE_PAIRS", 4200)
    points = conversation._Points()
    for n in range(1000):
        points.put((f"b{n}", "p"), _point(2), object())
    assert (len(points), points.cost) == (100, 4200)


def test_a_walk_larger_than_the_cache_still_finds_half_of_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Six pops under a cap of three points: the next walk computes three points again
    (before: all six, each evicted just before it was asked for)."""
    ledger = deterministic_ledger()
    sids = [_walruses(ledger, 10)]
    for _ in range(6):
        sids.append(_popped(ledger, sids[-1], drop=1))
    scopes = conversation_scopes(ledger, sids[-1])
    cost = conversation._POINTS.pop(ledger).cost
    monkeypatch.setattr(conversation, "POINT_CACHE_PAIRS", cost // 2)
    assert conversation_scopes(ledger, sids[-1]) == scopes
    reads: list[int] = []

    def counted(messages: list) -> list:
        reads.append(len(messages))
        return read_bodies(messages)

    monkeypatch.setattr(conversation, "read_bodies", counted)
    for _ in range(2):
        reads.clear()
        assert conversation_scopes(ledger, sids[-1]) == scopes
        assert len(reads) == 2 * 3  # two views read a point


class _Yielding(conversation._Point):
    @property
    def cost(self) -> int:
        time.sleep(0)  # another thread runs here, mid-update
        return super().cost


def test_threads_walking_under_a_small_cap_answer_alike_and_count_its_pairs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Six threads walk four lines of nine sessions 100 times under a cap holding about
    five points, switching every microsecond, each read of a point's cost yielding to
    another thread (inside ``_Points``'s lock none can get in). Without the lock the
    eviction loop meets an ``OrderedDict`` another thread changed, or the cost count
    drifts from a recount (Review 2: the earlier, lighter workload passed without the
    lock)."""
    ledger = deterministic_ledger()
    sids = []
    for _ in range(4):
        line = [_walruses(ledger, 15)]
        for _ in range(8):
            line.append(_popped(ledger, line[-1], drop=1))
        sids += line
    expected = {sid: conversation_scopes(ledger, sid) for sid in sids}
    conversation._POINTS.pop(ledger)
    monkeypatch.setattr(conversation, "POINT_CACHE_PAIRS", 500)
    monkeypatch.setattr(conversation, "_Point", _Yielding)
    wrong: list[str] = []
    failed: list[BaseException] = []

    def walks(seed: int) -> None:
        draw = random.Random(seed)
        try:
            for _ in range(100):
                sid = draw.choice(sids)
                if conversation_scopes(ledger, sid) != expected[sid]:
                    wrong.append(sid)
        except Exception as error:  # a thread's exception would otherwise be only printed
            failed.append(error)

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=walks, args=(n,)) for n in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(interval)
    assert (failed, wrong) == ([], [])
    points = conversation._POINTS[ledger]
    assert points.cost == sum(p.cost for p, _ in points._points.values())
    assert points.cost <= 500 or len(points) == 1


def _compacted_then_popped(hops: int) -> tuple[Ledger, list[str]]:
    ledger = deterministic_ledger()
    done = anyio.run(lambda: compact(ledger, _walruses(ledger, 10), OfflineSummarizer()))
    sids = [done.new_session_id or ""]
    for _ in range(hops):
        sids.append(_popped(ledger, sids[-1], drop=0))
    return ledger, sids


def test_the_compaction_count_does_not_drop_past_recall_s_cap() -> None:
    """One compaction, then 101 branches: still one (before: 0 once the walk's 100 hops
    no longer reached the compacted chain)."""
    ledger, sids = _compacted_then_popped(conversation.MAX_BRANCH_HOPS + 1)
    assert compactions(ledger.chains, sids[-1]) == 1


def test_a_log_whose_branches_loop_ends_the_walk() -> None:
    """Events appended as given (not through ``start_session``, which wants a parent
    already in the log): A a branch of B, B a branch of A. The walk from B meets B's
    chain again and stops (without the guard: A, B, A, ... up to the cap)."""
    ledger = deterministic_ledger()
    for sid, parent in (("A", "B"), ("B", "A")):
        started = SessionStarted(
            **ledger.event_fields(sid),
            model="m",
            context_length=16_000,
            parent_session_id=parent,
            reason="branch",
        )
        ledger.append([AppendRequest(sid, [started], 0)])
        ledger.append_messages(sid, [{"role": "user", "content": f"hello {sid}"}])
    assert list(ledger.chains.branched_from("B", 100)) == [("A", "A")]
    assert [s.root for s in conversation_scopes(ledger, "B")] == ["B"]  # A copied nothing
    assert compactions(ledger.chains, "B") == 0


def test_a_final_cached_point_is_answered_without_reading_the_branch_s_view(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Review s34 #10: a cached point that later appends cannot change (a mismatch: an
    edited last message) was answered only after a copy of the branch's whole view, per hop per recall."""
    ledger = deterministic_ledger()
    parent = _walruses(ledger, 10)
    branch = _popped(ledger, parent, drop=1)
    ledger.append_messages(branch, [{"role": "user", "content": "an edited last ask"}])
    scopes = conversation_scopes(ledger, branch)
    points = conversation._POINTS[ledger]
    (key,) = points.held()
    walk = object()
    cached = points.get(key, walk)
    assert cached is not None and cached.final
    sessions: list[str] = []
    session = ledger.transcript.session

    def counted(sid: str) -> object:
        sessions.append(sid)
        return session(sid)

    monkeypatch.setattr(ledger.transcript, "session", counted)
    assert conversation._branch_point(ledger, key, walk) is cached
    # both views are looked at (their length and the last id compared: no withdrawal
    # shortened them, s43), not copied
    assert sessions == [branch, parent]
    assert conversation_scopes(ledger, branch) == scopes
