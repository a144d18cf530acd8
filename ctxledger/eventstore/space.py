"""Is a failed write out of space? Disk-full causes SQLite reports as plain I/O errors.

SQLite says ``SQLITE_FULL`` for ``ENOSPC`` and short writes, but a write refused by
the file-size limit (``ulimit -f``: ``EFBIG``, with ``SIGXFSZ`` ignored as Python
does) is ``SQLITE_IOERR_WRITE``, like a failing disk. :func:`out_of_space` tells them
apart after the fact: the ledger's files have reached the process's file-size limit,
or their filesystem has next to no free space left.
"""

from __future__ import annotations

import os
import resource

from ctxledger.errors import InvalidConfig, InvalidInput
from ctxledger.eventstore.base import check_durability
from ctxledger.inputfile import path_text
from ctxledger.integers import shown

#: the path of a private temporary SQLite log (SQLite's own temporary database: kept in
#: its page cache, spilled to an unnamed file, gone when closed); ``":memory:"`` keeps
#: everything in memory. An empty path is refused: it is a missing setting, not a choice.
#: It starts with a NUL, which no file path, command-line argument or environment
#: variable can hold: only code asks for it, a user's ``--db`` never lands there.
TEMPORARY = "\x00temporary"
#: paths that name no file
UNPERSISTED = (":memory:", TEMPORARY)
#: a one-event append dirties three pages (the row and two index leaves), all fsynced on
#: commit; 4 KiB pages made those ~7 % faster than 8 KiB ones, costing batches ~4 %
PAGE_SIZE = 4096
#: the most pages SQLite lets a database have (``PRAGMA max_page_count`` takes no more)
MAX_PAGE_COUNT = 4_294_967_294


def ledger_path(path: str | os.PathLike[str]) -> str:
    """`path` as text; refused by name (InvalidInput): an empty one (a missing setting, not
    a choice), and one no file can have (:func:`~ctxledger.inputfile.path_text`: a
    number, a NUL, a lone surrogate raised Python's own errors)."""
    if path == TEMPORARY:  # (the one name holding a NUL: only code asks for it)
        return TEMPORARY
    text = path_text(path, "the ledger path")
    if not text.strip():  # (an empty one, or only blanks: a file named by a blank)
        what = "is empty" if not text else f"{shown(text)} is only blank characters"
        raise InvalidInput(
            f"the ledger path {what}: give a file path (or ':memory:' for a private in-memory log)"
        )
    return text


def check_options(
    durability: object, busy_timeout_ms: object, blob_threshold: object, max_page_count: object
) -> None:
    """InvalidConfig unless a SQLite store's options are in range (a text or a float
    was a TypeError from the comparison; 2**70 an OverflowError from SQLite)."""
    check_durability(durability)
    for name, value, low, high in (
        ("busy_timeout_ms", busy_timeout_ms, 0, 2**31 - 1),
        ("blob_threshold", blob_threshold, 1, 2**31 - 1),
        ("max_page_count", 1 if max_page_count is None else max_page_count, 1, MAX_PAGE_COUNT),
    ):
        if type(value) is not int or not low <= value <= high:
            raise InvalidConfig(
                f"{name} must be an integer from {low} to {high:,}, got {shown(value)}"
            )


#: below this much free space on the ledger's filesystem a failed write counts as "full"
LOW_SPACE_BYTES = 1 << 20


def out_of_space(path: str, slack: int) -> bool:
    """True if a write to ledger `path` (or its WAL/journal) just failed for lack of space.

    `slack` is how close to the file-size limit a file must be (about one page write).
    """
    if path in UNPERSISTED:
        return False
    soft, _ = resource.getrlimit(resource.RLIMIT_FSIZE)
    if soft != resource.RLIM_INFINITY:
        for name in (path, path + "-wal", path + "-journal"):
            try:
                if os.path.getsize(name) + slack > soft:
                    return True
            except OSError:
                continue
    try:
        stat = os.statvfs(os.path.dirname(os.path.abspath(path)))
    except OSError:
        return False
    return stat.f_bavail * stat.f_frsize < LOW_SPACE_BYTES


__all__ = ["LOW_SPACE_BYTES", "out_of_space"]
