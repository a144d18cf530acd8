"""A per-chain compaction lease shared by every process using one ledger file.

Two services compacting the same chain both paid for a summarizer call, and each
attempt's ``CompressionChecked`` bumped the stream the other expected, so they
invalidated each other (up to 6 summarizer calls for one compaction). The lease
makes them take turns: the holder plans, summarizes and commits; the next one, once
it gets the lease, finds the session already continued and moves to the tip without
calling a model.

The lease is a BSD ``flock`` on a small file per chain root in ``<ledger>.leases/``
(named by a hash of the root, so ids never become paths). ``flock`` belongs to the
open file, so two services in one process exclude each other too, and a killed
holder releases it with its file descriptors. Waiting polls without blocking the
event loop; after `wait` seconds the caller proceeds without the lease (the log's
expected versions still keep the outcome correct, only a summarizer call may be
wasted).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
from collections.abc import AsyncIterator
from pathlib import Path

import anyio

_POLL_SECONDS = 0.02


def lease_path(db: str, root: str) -> Path:
    name = hashlib.sha256(root.encode()).hexdigest()[:32]
    return Path(db + ".leases") / name


def _try_lock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


@contextlib.asynccontextmanager
async def chain_lease(db: str | None, root: str, wait: float) -> AsyncIterator[bool]:
    """Hold the compaction lease of chain `root` of ledger file `db` (True if held).

    No file (an in-memory ledger) or no permission to create one: yields False at
    once. Polls for at most `wait` seconds.
    """
    if db is None or db == ":memory:":
        yield False
        return
    path = lease_path(db, root)
    try:
        path.parent.mkdir(mode=0o700, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError:
        yield False
        return
    try:
        held = _try_lock(fd)
        with anyio.move_on_after(wait):
            while not held:
                await anyio.sleep(_POLL_SECONDS)
                held = _try_lock(fd)
        yield held
    finally:
        os.close(fd)  # closing the descriptor releases the lock


__all__ = ["chain_lease", "lease_path"]
