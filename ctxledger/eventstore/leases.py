"""Leases: named locks shared by every process that uses one event store.

A lease serializes work that the log's expected versions would only *detect* as a
conflict after the fact: two processes compacting one chain (both would pay for a
summarizer call), two worker processes of ``ctxledger serve`` proxying one session's
turn (both would record a reply). The log stays correct without a lease; the lease
only makes the second process wait instead of wasting work.

Each backend implements one non-blocking primitive, :meth:`EventStore.try_lease`
(``key`` -> a release function, or ``None`` when another holder has it):

* a SQLite file: a BSD ``flock`` on a file per key under ``<ledger>.leases/`` (named
  by a hash of the key, so keys never become paths). ``flock`` belongs to the open
  file, so two holders in one process exclude each other too, and a killed holder
  releases it with its file descriptors;
* PostgreSQL: a session-level ``pg_try_advisory_lock`` on a connection of a small
  pool of its own, kept by the holder until release (a killed holder's connection
  closes and the server drops the lock with it);
* anything else (an in-memory store): a process-local lock.

This module builds the waiting forms on that primitive: :func:`hold` (blocking, for
scripts) and :func:`acquire` / :func:`hold_async` (poll in a worker thread, so the
event loop never blocks; cancelling the waiter leaves nothing held).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import logging
import os
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Protocol

from ctxledger.eventstore.files import (
    LEASES_SUFFIX,
    open_side_file,
    open_side_folder,
    side_folder,
)
from ctxledger.eventstore.readonly import belongs_to_another, owner_name, side_file_remedy

#: releases a held lease (idempotent)
Release = Callable[[], None]


class Leasable(Protocol):
    """What the waiting forms need of a store (every EventStore is one)."""

    def try_lease(self, key: str) -> Release | None: ...


_FIRST_POLL, _MAX_POLL = 0.005, 0.05

log = logging.getLogger(__name__)

#: why a lease file can never be made here (a read-only or foreign directory, a file in
#: the way): the store then leases per process for good
_NO_LEASE_FILES = frozenset(
    {errno.EACCES, errno.EPERM, errno.EROFS, errno.EEXIST, errno.ENOTDIR, errno.ENOENT}
)


def _once(fn: Callable[[], None]) -> Release:
    done = threading.Lock()

    def release() -> None:
        if done.acquire(blocking=False):
            fn()

    return release


class LocalLeases:
    """Process-local leases (one owner per key at a time) for stores without a shared medium."""

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._held: set[str] = set()

    def try_lease(self, key: str) -> Release | None:
        with self._mutex:
            if key in self._held:
                return None
            self._held.add(key)

        def release() -> None:
            with self._mutex:
                self._held.discard(key)

        return _once(release)


def lease_file(ledger_path: str, key: str) -> Path:
    """The lock file of lease `key` of the SQLite ledger at `ledger_path`."""
    name = hashlib.sha256(key.encode()).hexdigest()[:32]
    return Path(ledger_path + LEASES_SUFFIX) / name


def try_file_lease(ledger_path: str, key: str) -> Release | None:
    """``flock`` the lease file of `key` without waiting; raises OSError if it cannot be
    made, StoreError if ``<ledger>.leases`` or the file is a link (see :mod:`.files`)."""
    with side_folder(ledger_path) as (folder, name, owner):
        inside = open_side_folder(folder, name + LEASES_SUFFIX, owner)
        try:
            if owner is not None and os.fstat(inside).st_uid != owner[0]:
                owner = None  # (a lease folder that is not theirs: nothing is handed over in it)
            fd = open_side_file(inside, lease_file(name, key).name, os.O_RDWR | os.O_CREAT, owner)
        finally:
            os.close(inside)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    except BaseException:
        os.close(fd)
        raise
    return _once(lambda: os.close(fd))  # closing the descriptor releases the lock


class FileLeases:
    """The leases of a ledger file: ``flock`` files beside it (:func:`try_file_lease`).

    Where they can never be made (read-only or foreign directory), the store leases per
    process (`fallback`) *for good*, never a file lease for one call and a process lock
    for the next (two holders of one key could then overlap); other processes are then
    kept honest by expected versions alone. A passing failure (out of descriptors,
    EINTR, a full disk) leaves the lease untaken this time: the waiting forms retry.
    """

    def __init__(self, ledger_path: str, fallback: Callable[[str], Release | None]) -> None:
        self.ledger_path = ledger_path
        self._fallback = fallback
        self._files = True

    def try_lease(self, key: str) -> Release | None:
        if self._files:
            try:
                return try_file_lease(self.ledger_path, key)
            except OSError as exc:
                if exc.errno not in _NO_LEASE_FILES:
                    log.debug("lease %s of %s not taken: %s", key, self.ledger_path, exc)
                    return None
                self._files = False
                log.warning(
                    "leases of %s are per process from now on (other processes are not kept "
                    "out): cannot make a lease file (%s)",
                    self.ledger_path,
                    _why_no_lease_files(self.ledger_path, key, exc),
                )
        return self._fallback(key)


def _why_no_lease_files(ledger_path: str, key: str, exc: OSError) -> str:
    """`exc`'s reason, and a file or folder of another user's in the way (a lease file
    root left there in an older version, say), with what to do."""
    why = exc.strerror or str(exc)
    for path in (str(lease_file(ledger_path, key)), ledger_path + LEASES_SUFFIX):
        if belongs_to_another(path, follow=False):
            return (
                f"{why}: {path} belongs to {owner_name(path) or 'another user'}; "
                f"{side_file_remedy(path)} for this ledger's processes to share leases again"
            )
    return why


def _polls(wait: float | None) -> Iterator[float]:
    """Pauses between tries (growing to `_MAX_POLL`) until `wait` seconds have passed."""
    deadline = None if wait is None else time.monotonic() + wait
    pause = _FIRST_POLL
    while deadline is None or time.monotonic() < deadline:
        left = pause if deadline is None else min(pause, max(0.0, deadline - time.monotonic()))
        yield left
        pause = min(pause * 2, _MAX_POLL)


@contextlib.contextmanager
def hold(store: Leasable, key: str, wait: float | None = None) -> Iterator[bool]:
    """Hold lease `key` (blocking); yields False when `wait` seconds passed without it."""
    release = store.try_lease(key)
    if release is None:
        for pause in _polls(wait):
            time.sleep(pause)
            release = store.try_lease(key)
            if release is not None:
                break
    try:
        yield release is not None
    finally:
        if release is not None:
            release()


async def acquire(store: Leasable, key: str, wait: float | None = None) -> Release | None:
    """Wait for lease `key` without blocking the event loop; None when `wait` ran out.

    Every try runs in a worker thread (a PostgreSQL try is a network round trip).
    Cancelled while waiting, it raises the cancellation with nothing held.
    """
    import anyio
    import anyio.lowlevel

    polls = _polls(wait)
    while True:
        release = await anyio.to_thread.run_sync(store.try_lease, key)  # not abandoned: see below
        if release is not None:
            try:
                await anyio.lowlevel.checkpoint_if_cancelled()
            except BaseException:
                release()  # the try finished after the waiter was cancelled
                raise
            return release
        pause = next(polls, None)
        if pause is None:
            return None
        await anyio.sleep(pause)


@contextlib.asynccontextmanager
async def hold_async(store: Leasable, key: str, wait: float | None = None) -> AsyncIterator[bool]:
    """Hold lease `key` without blocking the event loop; yields False when `wait` ran out."""
    release = await acquire(store, key, wait)
    try:
        yield release is not None
    finally:
        if release is not None:
            release()


__all__ = [
    "FileLeases",
    "Leasable",
    "LocalLeases",
    "Release",
    "acquire",
    "hold",
    "hold_async",
    "lease_file",
    "try_file_lease",
]
