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

#: below this much free space on the ledger's filesystem a failed write counts as "full"
LOW_SPACE_BYTES = 1 << 20


def out_of_space(path: str, slack: int) -> bool:
    """True if a write to ledger `path` (or its WAL/journal) just failed for lack of space.

    `slack` is how close to the file-size limit a file must be (about one page write).
    """
    if path in (":memory:", ""):
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
