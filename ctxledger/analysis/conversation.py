"""What a conversation held across its branches, for recall and the expand tool.

A ``branch`` session starts a chain of its own (a chain root) that goes on from a
point of its parent's history: Hermes's ``/compress here`` (the head, compacted on its
own) and a rewind, the proxy's diverging history, the OpenAI Agents session's
``pop_item``. In each the branch begins with a copy of the start of its parent's
view, and what the parent's chain held up to the last message copied (every message
a compaction had removed by then, its summaries) is this conversation's history too.
Past that point the parent went on without the branch (the tail Hermes re-appends,
the item popped, the history the proxy's client rewrote), so it is left out, and so
are the messages of the parent's view the branch did not copy: a compacted view is
not in seq order (its summary comes before the kept tail it was written after), so
a dropped message of the kept tail can lie below the branch point's seq.

:func:`conversation_scopes` gives each chain root to search with the last event seq
that belongs to the conversation and the message ids below it that do not: the
branch's own chain whole, then its parent's chain up to the branch point, and so on
up (at most :data:`MAX_BRANCH_HOPS`). A chain two hops up keeps only what the nearer
branch kept of it (the copies its own copy still holds).
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from typing import NamedTuple

from ctxledger.ledger.facade import Ledger
from ctxledger.projections.chains import MAX_BRANCH_HOPS
from ctxledger.projections.transcript import read_bodies

#: the bound of a chain searched whole
WHOLE = 2**62


class Scope(NamedTuple):
    """A chain (its root), the last seq of it in the conversation, and the ids of its
    messages at or below that seq that are not (those a branch dropped)."""

    root: str
    bound: int
    dropped: frozenset[str] = frozenset()


class _Point(NamedTuple):
    """How a branch's first session starts on its parent's view: the parent's view
    before the branch started ``(id, seq)``, the branch's first ``same`` messages
    (copies of as many of it) ``(id, seq)``, and the branch's view length compared."""

    theirs: tuple[tuple[str, int], ...]
    ours: tuple[tuple[str, int], ...]
    compared: int

    @property
    def final(self) -> bool:
        # a mismatch, or the parent's whole view matched: later appends change nothing
        return len(self.ours) < self.compared or len(self.ours) == len(self.theirs)


#: what the branch-point cache of one ledger may hold, in (id, seq) pairs (a point
#: holds the parent's view and the branch's copied prefix: about 100 bytes a pair); past
#: it the least recently used points go and are computed again when asked for
POINT_CACHE_PAIRS = 200_000


class _Points:
    """One ledger's branch points by (branch, parent), least recently used first, at
    most :data:`POINT_CACHE_PAIRS` pairs (one point larger than that is still kept, alone:
    the walk asking for it reuses it on the next call)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._points: OrderedDict[tuple[str, str], _Point] = OrderedDict()
        self.pairs = 0

    def get(self, key: tuple[str, str]) -> _Point | None:
        with self._lock:
            point = self._points.get(key)
            if point is not None:
                self._points.move_to_end(key)
            return point

    def put(self, key: tuple[str, str], point: _Point) -> None:
        with self._lock:
            old = self._points.pop(key, None)
            if old is not None:
                self.pairs -= _size(old)
            self._points[key] = point
            self.pairs += _size(point)
            while self.pairs > POINT_CACHE_PAIRS and len(self._points) > 1:
                self.pairs -= _size(self._points.popitem(last=False)[1])

    def __len__(self) -> int:
        return len(self._points)


def _size(point: _Point) -> int:
    return len(point.theirs) + len(point.ours)


#: branch points per ledger: both views' first messages never change (a session's view
#: is appended to; a compaction starts a new session), so a point is computed again only
#: while the branch may still be copying its parent, or once the bound evicted it
_POINTS: weakref.WeakKeyDictionary[Ledger, _Points] = weakref.WeakKeyDictionary()
_POINTS_LOCK = threading.Lock()


def conversation_scopes(ledger: Ledger, session_id: str) -> list[Scope]:
    """`session_id`'s chain whole, then each chain it branched from up to the branch
    point (the nearest first)."""
    chains = ledger.chains
    scopes = [Scope(chains.root(session_id), WHOLE)]
    branch = scopes[0].root
    for parent in chains.branched_from(session_id):
        point = _branch_point(ledger, branch, parent)
        kept = _kept(point.ours, scopes[-1])
        if kept == 0:
            break
        bound = max(seq for _, seq in point.theirs[:kept])
        dropped = frozenset(m for m, seq in point.theirs[kept:] if seq <= bound)
        branch = chains.root(parent)
        scopes.append(Scope(branch, bound, dropped))
    return scopes


def _kept(ours: tuple[tuple[str, int], ...], scope: Scope) -> int:
    """How many of a branch's first messages (copies of its parent's) are still in the
    conversation: all of them, or up to the first that `scope` leaves out."""
    if scope.bound == WHOLE and not scope.dropped:
        return len(ours)
    out = (i for i, (m, seq) in enumerate(ours) if seq > scope.bound or m in scope.dropped)
    return next(out, len(ours))


def _branch_point(ledger: Ledger, branch: str, parent: str) -> _Point:
    """Where `branch` (a chain's first session) starts on `parent`'s view (cached)."""
    transcript = ledger.transcript
    with _POINTS_LOCK:
        points = _POINTS.setdefault(ledger, _Points())
    cached = points.get((branch, parent))
    # a snapshot: the length compared must be the length read (another thread appending
    # to the branch during the body reads would otherwise mark a short prefix final)
    live = list(transcript.session(branch).live)
    if cached is not None and (cached.final or cached.compared == len(live)):
        return cached
    stored = transcript.state.messages
    started = ledger.chains.lineage(branch).started_seq
    theirs = [m for m in transcript.session(parent).live if m in stored and stored[m].seq < started]
    ours = [m for m in live if m in stored]
    n = min(len(theirs), len(ours))
    bodies = zip(
        read_bodies([stored[m] for m in theirs[:n]]),
        read_bodies([stored[m] for m in ours[:n]]),
        strict=True,
    )
    same = next((i for i, (a, b) in enumerate(bodies) if a != b), n)
    point = _Point(
        theirs=tuple((m, stored[m].seq) for m in theirs),
        ours=tuple((m, stored[m].seq) for m in ours[:same]),
        compared=len(live),
    )
    points.put((branch, parent), point)
    return point


def in_conversation(ledger: Ledger, session_id: str, compacted: str, seq: int) -> bool:
    """Whether the compaction of `compacted` recorded at `seq` is in the history of
    `session_id`'s conversation: on its chain, or on a chain it branched from, made
    before the branch point."""
    root = ledger.chains.root(compacted)
    return any(root == s.root and seq <= s.bound for s in conversation_scopes(ledger, session_id))


__all__ = ["MAX_BRANCH_HOPS", "WHOLE", "Scope", "conversation_scopes", "in_conversation"]
