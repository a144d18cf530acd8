"""What a failed command removes beside a SQLite ledger: only what is provably its own (session 42).

The rule: nothing is deleted unless it is proven to be what this command made, and no
ledger file is ever deleted, nor emptied, by an ordinary command. A ledger made on a new
path by a command that then failed stays, with its side files, as before session 42:
another process may have opened it meanwhile (nothing can prove it did not without a
lock every opener takes), and removing it would lose what that process committed.

Two things are removed:

* ``<ledger>.lock`` that a failed command's open made beside a ledger that was there
  without one (a refused ``show nope``, a repeated ``import``): :func:`lock_to_make`
  before the open, :func:`remove_made_lock` after the close. It is unlinked only if an
  open in this process made that very file (``O_EXCL``: a writer that made it between
  :func:`lock_to_make` and the open keeps it; :func:`ctxledger.eventstore.files.lock_made_here`),
  only while this process holds it (``flock`` without waiting: a writer holding it keeps
  it) and only if it is still the file locked. It holds no data: a process that opened
  it meanwhile loses only its fairness (``eventstore.sqlite``: SQLite's own lock keeps
  writes correct); so does a writer in this same process (a host running the command
  in its own process), whose open is not told apart from the command's.
* the what-if ``--out`` file (:func:`remove_new_file`), which the what-if made itself
  with ``O_EXCL`` (:func:`ctxledger.eventstore.files.create_new_file`): it is removed,
  whatever it holds, when the what-if does not finish, with the side files made beside
  it and the empty folders made on the way (``rmdir``: one holding anything stays).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat

from ctxledger.eventstore.files import (
    LEASES_SUFFIX,
    LOCK_SUFFIX,
    SIDE_SUFFIXES,
    NewFile,
    lock_made_here,
)
from ctxledger.eventstore.opening import is_url, target_text
from ctxledger.eventstore.space import UNPERSISTED

try:
    import fcntl
except ImportError:  # pragma: no cover  (Windows: no side lock is made there)
    fcntl = None  # type: ignore[assignment]

__all__ = ["lock_to_make", "remove_made_lock", "remove_new_file"]


def lock_to_make(target: str) -> str | None:
    """``<target>.lock`` when a ledger file (not empty) is at `target` without one: the
    lock an open of it makes. None for a URL, a ledger in memory, a new path, an empty
    file, or a lock already there: nothing will be removed."""
    path = target_text(target)
    if is_url(path) or path in ("", *UNPERSISTED) or path.startswith("file:"):
        return None
    try:
        found = os.stat(path)
    except OSError:
        return None
    lock = path + LOCK_SUFFIX
    if not stat.S_ISREG(found.st_mode) or found.st_size == 0 or os.path.lexists(lock):
        return None
    return lock


def remove_made_lock(lock: str | None) -> None:
    """Remove `lock` (from :func:`lock_to_make`) if an open in this process made that
    very file, while holding it; one another process made meanwhile, one held by a
    writer, a link, or no lock: kept. Errors are dropped: the command has failed already."""
    if lock is None or fcntl is None:
        return
    with contextlib.suppress(OSError):
        fd = os.open(lock, os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            found = os.fstat(fd)
            if lock_made_here(found) and os.path.samestat(found, os.lstat(lock)):
                os.unlink(lock)
        finally:
            os.close(fd)  # (closing drops the flock)


def remove_new_file(made: NewFile) -> None:
    """Remove the file `made`, the side files and lease folder made beside it since, and
    the empty folders made on its way; only while that very file is still at its path.
    Checked first (another file there: nothing is removed, its side files are its own)
    and again right before the unlink (swapped meanwhile: it stays)."""
    if not _still_made(made):
        return
    for suffix in (*SIDE_SUFFIXES, LEASES_SUFFIX):
        side = made.path + suffix
        if suffix in made.sides:
            continue
        with contextlib.suppress(OSError):
            if os.path.isdir(side) and not os.path.islink(side):
                shutil.rmtree(side, ignore_errors=True)
            elif os.path.lexists(side):
                os.unlink(side)
    with contextlib.suppress(OSError):
        if _still_made(made):
            os.unlink(made.path)
    for folder in made.folders:  # (deepest first)
        with contextlib.suppress(OSError):
            os.rmdir(folder)


def _still_made(made: NewFile) -> bool:
    """Whether the file at `made`'s path is the one made (not followed through a link)."""
    try:
        found = os.lstat(made.path)
    except OSError:
        return False
    return (found.st_dev, found.st_ino) == made.identity
