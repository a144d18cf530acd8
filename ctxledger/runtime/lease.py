"""The per-chain compaction lease, shared by every process using one ledger.

Two services compacting the same chain both paid for a summarizer call, and each
attempt's ``CompressionChecked`` bumped the stream the other expected, so they
invalidated each other (up to 6 summarizer calls for one compaction). The lease
makes them take turns: the holder plans, summarizes and commits; the next one, once
it gets the lease, finds the session already continued and moves to the tip without
calling a model.

The lease is the event store's (:meth:`EventStore.try_lease
<ctxledger.eventstore.EventStore.try_lease>`, key ``compaction:<chain root>``): a
``flock`` beside a SQLite file, a session-level advisory lock on PostgreSQL, a
process-local lock for an in-memory log. Waiting never blocks the event loop; after
`wait` seconds the caller proceeds without the lease (the log's expected versions
still keep the outcome correct, only a summarizer call may be wasted).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from ctxledger.errors import StoreError
from ctxledger.eventstore import EventStore, leases


def compaction_key(root: str) -> str:
    return "compaction:" + root


@contextlib.asynccontextmanager
async def chain_lease(store: EventStore, root: str, wait: float) -> AsyncIterator[bool]:
    """Hold the compaction lease of chain `root` (True if held, False when `wait` ran out
    or the store could not give one: compaction goes on, guarded by expected versions)."""
    try:
        release = await leases.acquire(store, compaction_key(root), wait)
    except StoreError:  # e.g. PostgreSQL unreachable for the lease: the append will say more
        release = None
    try:
        yield release is not None
    finally:
        if release is not None:
            release()


__all__ = ["chain_lease", "compaction_key"]
