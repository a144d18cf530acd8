"""A failed command leaves the ledger's folder as it found it (session 42).

A command that opens a SQLite ledger to write makes files: the ledger itself when there
was none (or only an empty file), and its side lock (``<ledger>.lock``) where there was
none. Before, an ``import`` refused after the open (``--model ''``, a message the
import's checks refuse, a repeat) left a new 48 KB ledger holding no event and its
``.lock``; Ctrl-C did the same. :func:`taken` notes what was there before the open;
:func:`tidy`, called once the command failed and the ledger is closed, removes what the
command made, when nothing was appended:

* a ledger the command made holding no event is removed, with every side file and
  folder it made (a file that was empty before is emptied again, keeping its mode). A ledger another
  process opened meanwhile is kept: its ``-wal`` file outlives our close then (SQLite
  removes it when the last connection closes), and so is one that holds an event;
* beside a ledger that was there, a ``.lock`` the command made is removed unless a
  writer holds it (the lock only orders writers, ``eventstore.sqlite``: a process that
  opened the file meanwhile loses its fairness, never a write).

A ledger a failed command appended to (a demo interrupted mid-way) keeps its events and
its files: they are what was recorded. A URL (PostgreSQL) makes no file: nothing to do.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
from typing import NamedTuple

from ctxledger.eventstore.files import (
    HEAD_SUFFIX,
    LEASES_SUFFIX,
    LOCK_SUFFIX,
    SQLITE_SIDES,
    WAL_SUFFIX,
)
from ctxledger.eventstore.opening import is_url, target_text
from ctxledger.eventstore.space import UNPERSISTED

try:
    import fcntl
except ImportError:  # pragma: no cover  (Windows: no side lock is made there)
    fcntl = None  # type: ignore[assignment]

__all__ = ["Before", "taken", "tidy"]

#: every name a ledger keeps beside itself
_SIDES = (*SQLITE_SIDES, LOCK_SUFFIX, HEAD_SUFFIX, LEASES_SUFFIX)


class Before(NamedTuple):
    """What was at a SQLite ledger's path before a command opened it to write."""

    path: str
    #: no ledger there: no file, or an empty one (``mktemp``'s)
    new: bool
    #: the permission bits of an empty file that was there (emptied again and given
    #: them back, not removed: the open made it private), else None
    empty_file: int | None
    #: the side names (suffixes) that existed
    sides: frozenset[str]
    #: the folders on the way that did not exist (the open makes them), deepest first
    folders: tuple[str, ...]


def taken(target: str, *, makes: bool = True) -> Before | None:
    """What is at `target` now (None for a URL or a ledger in memory: no file). With
    `makes` False (an open that makes no ledger: a read, which a file another process
    makes a ledger meanwhile must not lose) only a side lock is ever removed."""
    path = target_text(target)
    if is_url(path) or path in ("", *UNPERSISTED) or path.startswith("file:"):
        return None
    try:
        found = os.stat(path)
        mode = stat.S_IMODE(found.st_mode) if stat.S_ISREG(found.st_mode) else None
        empty = mode if found.st_size == 0 else None
    except OSError:
        empty = None
    there = os.path.lexists(path)
    sides = frozenset(s for s in _SIDES if os.path.lexists(path + s))
    new = makes and (not there or empty is not None)
    return Before(path, new, empty, sides, _missing_folders(path) if not there else ())


def _missing_folders(path: str) -> tuple[str, ...]:
    missing: list[str] = []
    folder = os.path.dirname(os.path.abspath(path))
    while folder and not os.path.lexists(folder) and len(missing) < 64:
        missing.append(folder)
        folder = os.path.dirname(folder)
    return tuple(missing)


def tidy(before: Before, events: int) -> None:
    """Remove what the command that opened `before.path` made (see the module
    docstring); `events` is how many the ledger held when it was closed. Errors are
    dropped: the command has failed already and said why."""
    with contextlib.suppress(OSError):
        if before.new and events == 0:
            _remove_made_ledger(before)
        elif LOCK_SUFFIX not in before.sides:
            _remove_lock(before.path + LOCK_SUFFIX)


def _remove_made_ledger(before: Before) -> None:
    if os.path.lexists(before.path + WAL_SUFFIX):  # another connection is open on it
        return
    lock = before.path + LOCK_SUFFIX
    if LOCK_SUFFIX not in before.sides and not _free(lock):
        return  # a writer holds it now: another process took the new ledger
    for suffix in _SIDES:
        if suffix in before.sides:
            continue
        side = before.path + suffix
        if os.path.isdir(side) and not os.path.islink(side):
            shutil.rmtree(side, ignore_errors=True)
        elif os.path.lexists(side):
            os.unlink(side)
    if before.empty_file is not None:
        os.truncate(before.path, 0)
        os.chmod(before.path, before.empty_file)
    elif os.path.lexists(before.path):
        os.unlink(before.path)
    for folder in before.folders:  # (deepest first; one holding anything else stays)
        os.rmdir(folder)


def _remove_lock(lock: str) -> None:
    if os.path.isfile(lock) and not os.path.islink(lock) and _free(lock):
        os.unlink(lock)


def _free(lock: str) -> bool:
    """Whether no process holds `lock`'s ``flock`` now (True when there is no such
    file, or no ``fcntl``)."""
    if fcntl is None or not os.path.isfile(lock):
        return True
    fd = os.open(lock, os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False
    finally:
        os.close(fd)  # (closing drops the flock)
    return True
