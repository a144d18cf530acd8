"""What a failed command leaves beside a SQLite ledger: removed only where provably its own (session 42).

A command that opens a SQLite ledger to write makes files: the ledger itself when there
was none (or only an empty file), and its side lock (``<ledger>.lock``) where there was
none. Before, an ``import`` refused after the open (``--model ''``, a repeat) left a new
48 KB ledger holding no event and its ``.lock``; Ctrl-C did the same. :func:`taken`
notes what was there before the open, :func:`opened` the file the open used, and
:func:`tidy`, once the command failed and the ledger is closed, removes what it made.

The rule: nothing is deleted or truncated unless it is proven, at that moment, to be
what this command made and to hold no event. So the ledger file is removed (or an empty
file that was there is emptied again, keeping its mode) only when all of these hold:

* the open succeeded and recorded the file's identity (device, inode): an open that
  failed proves nothing (another process may have filled or made the file meanwhile),
  and there the ledger file is left;
* the path is not a symbolic link, and the same file (same inode) is still there;
* ``<ledger>.lock`` is held by this process (``flock`` without waiting) across the
  checks and the removal: a writer of the ledger holds it for every write, so none can
  commit meanwhile (busy: everything is kept);
* no ``-wal`` beside the path nor beside its real path (another connection is open:
  SQLite removes the WAL only when the last one closes);
* the file is empty, or a SQLite file whose ``events`` table is empty, read after this
  command's close.

Beside a ledger that was there (or one that cannot be proven), only a ``.lock`` the
command made is removed, while held (it orders writers and holds no data: a process that
opened it meanwhile loses only its fairness, ``eventstore.sqlite``). Folders the open
made are removed only when empty (``rmdir``). A URL (PostgreSQL) makes no file.

Left, said plainly: between the last ``-wal`` check and the unlink (microseconds) a
process could open the file; it would then write to a removed file.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import stat
from typing import NamedTuple
from urllib.parse import quote

from ctxledger.eventstore.files import (
    HEAD_SUFFIX,
    LEASES_SUFFIX,
    LOCK_SUFFIX,
    SQLITE_SIDES,
    WAL_SUFFIX,
    is_sqlite_file,
)
from ctxledger.eventstore.opening import is_url, target_text
from ctxledger.eventstore.space import UNPERSISTED

try:
    import fcntl
except ImportError:  # pragma: no cover  (Windows: no side lock is made there)
    fcntl = None  # type: ignore[assignment]

__all__ = ["Before", "create", "opened", "taken", "tidy"]

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
    #: (device, inode) of the file the open used, set by :func:`opened`; None: unproven
    made: tuple[int, int] | None = None


def taken(target: str, *, makes: bool = True) -> Before | None:
    """What is at `target` now (None for a URL or a ledger in memory: no file). With
    `makes` False (an open that makes no ledger: a read) only a side lock is removed."""
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


def opened(before: Before | None) -> Before | None:
    """`before` with the identity of the file now at its path (call right after a
    successful open: the ledger file that open used)."""
    if before is None or not before.new:
        return before
    try:
        found = os.lstat(before.path)
    except OSError:
        return before
    if not stat.S_ISREG(found.st_mode):
        return before
    return before._replace(made=(found.st_dev, found.st_ino))


def _missing_folders(path: str) -> tuple[str, ...]:
    """Each folder on the way to `path` that does not exist, by its real path (so
    ``new/../x/l.db`` names both ``new`` and ``x``), deepest first."""
    missing: list[str] = []
    prefix = ""
    for part in os.path.dirname(os.path.join(os.getcwd(), path)).split(os.sep):
        prefix = os.path.join(prefix, part) if prefix else (part or os.sep)
        if part in ("", ".", "..") or os.path.lexists(prefix):
            continue
        real = os.path.realpath(prefix)
        if real not in missing and len(missing) < 64:
            missing.append(real)
    return tuple(reversed(missing))


def tidy(before: Before) -> None:
    """Remove what the command that opened `before.path` made, where proven (see the
    module docstring). Errors are dropped: the command has failed already and said why."""
    with contextlib.suppress(OSError):
        if before.new and before.made is not None:
            _remove_made_ledger(before)
        elif LOCK_SUFFIX not in before.sides:
            _remove_lock(before.path + LOCK_SUFFIX)
    for folder in before.folders:  # (deepest first; one holding anything stays)
        with contextlib.suppress(OSError):
            os.rmdir(folder)


def _remove_made_ledger(before: Before) -> None:
    if fcntl is None:
        return
    lock = before.path + LOCK_SUFFIX
    flags = os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW
    try:
        fd = os.open(lock, flags)
    except FileNotFoundError:  # (an open cut short before it made one: made here)
        fd = os.open(lock, flags | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # (busy: OSError, keep all)
        if not _ours_and_empty(before):
            return
        for suffix in _SIDES:
            if suffix in before.sides or suffix == LOCK_SUFFIX:
                continue
            side = before.path + suffix
            if os.path.isdir(side) and not os.path.islink(side):
                shutil.rmtree(side, ignore_errors=True)
            elif os.path.lexists(side):
                os.unlink(side)
        if _wal_beside(before.path):  # (checked again, last, before the file goes)
            return
        if before.empty_file is not None:
            os.truncate(before.path, 0)
            os.chmod(before.path, before.empty_file)
        else:
            os.unlink(before.path)
        if LOCK_SUFFIX not in before.sides and os.path.isfile(lock):
            os.unlink(lock)  # (still held: no writer took it meanwhile)
    finally:
        os.close(fd)  # (closing drops the flock)


def _wal_beside(path: str) -> bool:
    """Whether a ``-wal`` is beside `path` or beside its real path (SQLite names it by
    the real path of a symlinked ledger): another connection is open on it."""
    return any(os.path.lexists(p + WAL_SUFFIX) for p in (path, os.path.realpath(path)))


def _ours_and_empty(before: Before) -> bool:
    """Whether the file at `before.path` is the one the open used and holds no event."""
    if _wal_beside(before.path):
        return False
    found = os.lstat(before.path)
    if not stat.S_ISREG(found.st_mode) or (found.st_dev, found.st_ino) != before.made:
        return False
    if found.st_size == 0:
        return True
    return is_sqlite_file(before.path) and _no_event(before.path)


def _no_event(path: str) -> bool:
    """Whether the SQLite file at `path` has an ``events`` table holding no row (False
    when it cannot say). Read as immutable: no ``-wal`` is there (checked), and an
    ordinary read would make one."""
    uri = f"file:{quote(os.path.abspath(path))}?mode=ro&immutable=1"
    try:
        conn = sqlite3.connect(uri, uri=True)
    except sqlite3.Error:
        return False
    try:
        row = conn.execute("SELECT EXISTS (SELECT 1 FROM events)").fetchone()
    except sqlite3.Error:
        return False
    finally:
        conn.close()
    return row is not None and row[0] == 0


def _remove_lock(lock: str) -> None:
    """Remove the side lock at `lock`, while holding it (held by a writer: kept)."""
    if fcntl is None or not os.path.isfile(lock) or os.path.islink(lock):
        return
    fd = os.open(lock, os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        if os.path.samestat(os.fstat(fd), os.lstat(lock)):
            os.unlink(lock)
    finally:
        os.close(fd)


def create(before: Before) -> Before:
    """Make an empty file at `before.path` (and its folders) that nothing else can have
    made: ``O_EXCL`` (FileExistsError when a file or link is there). Its identity is
    recorded, so :func:`tidy` can remove it even after an open of it that failed."""
    folder = os.path.dirname(before.path)
    if folder:
        os.makedirs(folder, exist_ok=True)
    fd = os.open(before.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        found = os.fstat(fd)
    finally:
        os.close(fd)
    return before._replace(new=True, made=(found.st_dev, found.st_ino))
