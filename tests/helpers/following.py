"""A ``follow()`` run beside a thread that disturbs it (holds a lock, appends): the
retry tests of both stores' followers."""

from __future__ import annotations

import threading
from collections.abc import Callable

import anyio

from ctxledger.eventstore.base import EventStore


def follow_beside(
    store: EventStore,
    seqs: list[int],
    count: int,
    beside: Callable[[], None],
    *,
    batch_size: int = 2000,
) -> None:
    """Appends to `seqs` each seq ``store.follow(poll_interval=0.05)`` yields until it
    holds `count` (60 s at most), while `beside` runs in a thread that may watch `seqs`
    grow; the thread is joined after (60 s at most)."""

    async def follow() -> None:
        with anyio.fail_after(60):
            async for recorded in store.follow(poll_interval=0.05, batch_size=batch_size):
                seqs.append(recorded.seq)
                if len(seqs) == count:
                    return

    thread = threading.Thread(target=beside)
    thread.start()
    try:
        anyio.run(follow)
    finally:
        thread.join(60)
