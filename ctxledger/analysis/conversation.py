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
from array import array
from collections import OrderedDict
from typing import NamedTuple

from ctxledger.ledger.facade import Ledger
from ctxledger.projections.transcript import grew_from, read_bodies

#: branches recall follows up from a chain (each hop costs a compare of the copied
#: prefix; a cycle or a deeper line stops there). The Hermes engine's compaction count
#: walks the same branches further (:func:`~ctxledger.integrations.hermes_host.compactions`)
MAX_BRANCH_HOPS = 100
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
    before the branch started (its ids, their seqs), the branch's first messages that
    are copies of as many of it (ids, seqs), and the branch's view length compared.
    Compact: an id is the transcript's own string (a reference), a seq 8 bytes. `last`
    and `parent_at` (length, last id) say which views it was computed on: a withdrawn
    reply shortens a view, and the point is computed again (:func:`grew_from`)."""

    theirs: tuple[str, ...]
    their_seqs: array[int]
    ours: tuple[str, ...]
    our_seqs: array[int]
    compared: int
    last: str | None = None
    parent_at: tuple[int, str | None] = (0, None)

    @property
    def final(self) -> bool:
        # a mismatch, or the parent's whole view matched: later appends change nothing
        return len(self.ours) < self.compared or len(self.ours) == len(self.theirs)

    @property
    def cost(self) -> int:
        """What the cache charges for it, in pairs: its (id, seq) pairs and
        :data:`POINT_FIXED_PAIRS`."""
        return len(self.theirs) + len(self.ours) + POINT_FIXED_PAIRS


#: what the branch-point cache of one ledger may hold, in (id, seq) pairs of 16 bytes
#: (an id reference, a seq), each point charged its own cost as well: about 12.8 MB
#: however short the points (what 200,000 pairs took as (id, seq) tuples)
POINT_CACHE_PAIRS = 800_000
#: what a point costs besides its pairs (its tuples, arrays, key and entry: about
#: 640 bytes), in pairs of 16 bytes
POINT_FIXED_PAIRS = 40


class _Points:
    """One ledger's branch points by (branch, parent), least recently used first, at
    most :data:`POINT_CACHE_PAIRS` pairs (each point charged :attr:`_Point.cost`, so
    many short points stay within it too). Scan-resistant: a walk asks for its points in
    the same order every time, so a plain LRU smaller than the walk evicts each point
    just before the next walk asks for it; a new point is not kept when keeping it would
    evict one the same walk used (the walk's first points stay and are hit next time).
    One point larger than the cap is still kept, alone, when no point of its walk is."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._points: OrderedDict[tuple[str, str], tuple[_Point, object]] = OrderedDict()
        self.cost = 0

    def get(self, key: tuple[str, str], walk: object) -> _Point | None:
        with self._lock:
            found = self._points.get(key)
            if found is None:
                return None
            self._points[key] = (found[0], walk)
            self._points.move_to_end(key)
            return found[0]

    def put(self, key: tuple[str, str], point: _Point, walk: object) -> None:
        with self._lock:
            old = self._points.pop(key, None)
            if old is not None:
                self.cost -= old[0].cost
            over = self.cost + point.cost - POINT_CACHE_PAIRS
            going: list[tuple[str, str]] = []
            for k, (p, used_by) in self._points.items():
                if over <= 0:
                    break
                if used_by is walk:
                    return  # keep this walk's points, not this one
                going.append(k)
                over -= p.cost
            for k in going:
                self.cost -= self._points.pop(k)[0].cost
            self._points[key] = (point, walk)
            self.cost += point.cost

    def held(self) -> list[tuple[str, str]]:
        """The points held, least recently used first."""
        with self._lock:
            return list(self._points)

    def __len__(self) -> int:
        return len(self._points)


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
    walk = object()  # what the cache keeps for this walk
    for parent, up in chains.branched_from(session_id, MAX_BRANCH_HOPS):
        point = _branch_point(ledger, (scopes[-1].root, parent), walk)
        kept = _kept(point, scopes[-1])
        if kept == 0:
            break
        bound = max(point.their_seqs[:kept])
        theirs = zip(point.theirs[kept:], point.their_seqs[kept:], strict=True)
        dropped = frozenset(m for m, seq in theirs if seq <= bound)
        scopes.append(Scope(up, bound, dropped))
    return scopes


def _kept(point: _Point, scope: Scope) -> int:
    """How many of a branch's first messages (copies of its parent's) are still in the
    conversation: all of them, or up to the first that `scope` leaves out."""
    if scope.bound == WHOLE and not scope.dropped:
        return len(point.ours)
    ours = enumerate(zip(point.ours, point.our_seqs, strict=True))
    out = (i for i, (m, seq) in ours if seq > scope.bound or m in scope.dropped)
    return next(out, len(point.ours))


def _branch_point(ledger: Ledger, key: tuple[str, str], walk: object) -> _Point:
    """Where `branch` (a chain's first session) starts on `parent`'s view, `key` being
    (branch, parent) (cached)."""
    branch, parent = key
    transcript = ledger.transcript
    with _POINTS_LOCK:
        points = _POINTS.setdefault(ledger, _Points())
    cached = points.get(key, walk)
    if cached is not None and not (
        grew_from(transcript.session(branch).live, cached.compared, cached.last)
        and grew_from(transcript.session(parent).live, *cached.parent_at)
    ):
        cached = None  # (a reply withdrawn from either view)
    if cached is not None and cached.final:  # (before the copy of the branch's whole view)
        return cached
    # a snapshot: the length compared must be the length read (another thread appending
    # to the branch during the body reads would otherwise mark a short prefix final)
    live = list(transcript.session(branch).live)
    if cached is not None and cached.compared == len(live):
        return cached
    stored = transcript.state.messages
    started = ledger.chains.lineage(branch).started_seq
    parent_live = list(transcript.session(parent).live)
    theirs = [m for m in parent_live if m in stored and stored[m].seq < started]
    ours = [m for m in live if m in stored]
    n = min(len(theirs), len(ours))
    bodies = zip(
        read_bodies([stored[m] for m in theirs[:n]]),
        read_bodies([stored[m] for m in ours[:n]]),
        strict=True,
    )
    same = next((i for i, (a, b) in enumerate(bodies) if a != b), n)
    point = _Point(
        theirs=tuple(theirs),
        their_seqs=array("q", (stored[m].seq for m in theirs)),
        ours=tuple(ours[:same]),
        our_seqs=array("q", (stored[m].seq for m in ours[:same])),
        compared=len(live),
        last=live[-1] if live else None,
        parent_at=(len(parent_live), parent_live[-1] if parent_live else None),
    )
    points.put(key, point, walk)
    return point


def in_conversation(ledger: Ledger, session_id: str, compacted: str, seq: int) -> bool:
    """Whether the compaction of `compacted` recorded at `seq` is in the history of
    `session_id`'s conversation: on its chain, or on a chain it branched from, made
    before the branch point."""
    root = ledger.chains.root(compacted)
    return any(root == s.root and seq <= s.bound for s in conversation_scopes(ledger, session_id))


__all__ = ["MAX_BRANCH_HOPS", "WHOLE", "Scope", "conversation_scopes", "in_conversation"]
