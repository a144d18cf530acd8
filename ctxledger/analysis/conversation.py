"""What a conversation held across its branches, for recall and the expand tool.

A ``branch`` session starts a chain of its own (a chain root) that goes on from a
point of its parent's history: Hermes's ``/compress here`` (the head, compacted on its
own) and a rewind, the proxy's diverging history, the OpenAI Agents session's
``pop_item``. In each the branch begins with a copy of the start of its parent's
view, and what the parent's chain held up to the last message copied (every message
a compaction had removed by then, its summaries) is this conversation's history too.
Past that point the parent went on without the branch (the tail Hermes re-appends,
the item popped, the history the proxy's client rewrote), so it is left out.

:func:`conversation_scopes` gives each chain root to search with the last event seq
that belongs to the conversation: the branch's own chain whole, then its parent's
chain up to the branch point, and so on up (at most :data:`MAX_BRANCH_HOPS`).
"""

from __future__ import annotations

from ctxledger.ledger.facade import Ledger
from ctxledger.projections.transcript import read_bodies

#: branches followed up from a chain (a cycle or a deeper line stops there)
MAX_BRANCH_HOPS = 100
#: the bound of a chain searched whole
WHOLE = 2**62

Scope = tuple[str, int]


def conversation_scopes(ledger: Ledger, session_id: str) -> list[Scope]:
    """``(chain root, last seq)`` pairs: `session_id`'s chain whole, then each chain it
    branched from up to the branch point (the nearest first)."""
    chains = ledger.chains
    root = chains.root(session_id)
    scopes: list[Scope] = [(root, WHOLE)]
    bound, node = WHOLE, chains.lineage(root)
    for _ in range(MAX_BRANCH_HOPS):
        parent = node.parent_session_id
        if node.reason != "branch" or parent is None or parent not in chains.state.sessions:
            break
        cut = _branch_point(ledger, node.session_id, parent)
        up = chains.root(parent)
        if cut is None or any(up == r for r, _ in scopes):
            break
        bound = min(bound, cut)
        scopes.append((up, bound))
        node = chains.lineage(up)
    return scopes


def _branch_point(ledger: Ledger, branch: str, parent: str) -> int | None:
    """The last seq among the messages of `parent`'s view (as the branch started) that
    `branch` begins with, copies of them; None when it begins with none."""
    transcript, chains = ledger.transcript, ledger.chains
    stored = transcript.state.messages
    started = chains.lineage(branch).started_seq
    theirs = [
        stored[m]
        for m in transcript.session(parent).live
        if m in stored and stored[m].seq < started
    ]
    ours = [stored[m] for m in transcript.session(branch).live if m in stored]
    n = min(len(theirs), len(ours))
    if n == 0:
        return None
    pairs = zip(read_bodies(theirs[:n]), read_bodies(ours[:n]), strict=True)
    same = next((i for i, (a, b) in enumerate(pairs) if a != b), n)
    # the latest of them (a view is not in seq order: a summary comes before the
    # messages it was written after)
    return max(m.seq for m in theirs[:same]) if same else None


def in_conversation(ledger: Ledger, session_id: str, compacted: str, seq: int) -> bool:
    """Whether the compaction of `compacted` recorded at `seq` is in the history of
    `session_id`'s conversation: on its chain, or on a chain it branched from, made
    before the branch point."""
    root = ledger.chains.root(compacted)
    return any(root == r and seq <= bound for r, bound in conversation_scopes(ledger, session_id))


__all__ = ["MAX_BRANCH_HOPS", "WHOLE", "Scope", "conversation_scopes", "in_conversation"]
