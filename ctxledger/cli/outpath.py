"""The one check of a file a command writes (``export --out``, ``replay --out``, the OUT
of ``trajectories compress`` and the files it writes beside OUT).

Each command calls :func:`checked_out` before it reads the ledger or writes anything,
so a refusal (exit 2, one ``error:`` line) leaves everything as it was. The rules,
the same for every command (README, "Files written"):

- OUT's folder must exist: a missing one is refused, never made (``replay --out``
  made it, ``export --out`` refused it: session 41). A mistyped folder is an error to
  see, not a tree to find later.
- OUT is never the ledger or one of its files (``-wal``, ``.head``, ``.leases/`` …, a
  link of any kind to one: ``export --out ledger.db`` replaced the ledger, session 40),
  nor any other ledger (a file that starts with SQLite's header) or a side file of one,
  nor a file the command reads (``trajectories compress`` IN), nor are the files
  written beside OUT.
- ``-`` is stdout where the output is text (``export --out -``); elsewhere it is
  refused (a what-if ledger, a resumable OUT and its metrics are files).
- What an existing OUT gets is the command's own: ``export`` replaces it,
  ``trajectories compress`` resumes it, ``replay`` makes a new ledger and refuses one
  that exists (``new=True``).
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterable
from pathlib import Path

from ctxledger.errors import InvalidInput
from ctxledger.eventstore.files import (
    LEASES_SUFFIX,
    SIDE_SUFFIXES,
    is_sqlite_file,
    side_file_of,
)
from ctxledger.eventstore.opening import is_url, refuse_unfit_path
from ctxledger.inputfile import is_stream, shown_path, stat_of

__all__ = ["checked_out", "refuse_ledger_file"]


def checked_out(
    path: Path,
    option: str,
    *,
    ledger: str,
    new: bool = False,
    reads: Iterable[Path] = (),
    beside: Iterable[Path] = (),
) -> bool:
    """Check the file `path` a command is about to write (named `option` in messages),
    as the module says; `ledger` is the command's ledger (its files are refused), `new`
    refuses a file that exists, `reads` are files the command reads (refused as OUT),
    `beside` the other files it writes next to OUT (checked against the ledger and
    `reads` too).
    Returns whether OUT is a stream (a FIFO, ``/dev/null``: written, never read back).
    InvalidInput for every refusal; nothing is written here."""
    if str(path) == "-":  # (export takes "-" as stdout before it calls here)
        raise InvalidInput(f"{option} -: this command writes a file, not stdout; give a name")
    for target in (path, *beside):
        refuse_ledger_file(target, ledger, option)
        _refuse_any_ledger_file(target, option)
    if new:  # (`replay --out O.db-journal` was refused as "the ledger path", not --out)
        refuse_unfit_path(str(path), option)
    named = f"{option} {shown_path(path)}"
    folder = os.path.dirname(os.path.abspath(path))
    where = stat_of(folder, option)
    if where is None:
        raise InvalidInput(
            f"{named}: the folder {shown_path(folder)} does not exist (create it first; "
            "no folder is made for an output)"
        )
    if not stat.S_ISDIR(where.st_mode):
        raise InvalidInput(f"{named}: {shown_path(folder)} is a file, not a folder")
    for source in reads:
        for target in (path, *beside):  # (IN named run.metrics.jsonl was written over)
            with contextlib.suppress(OSError):
                if os.path.samefile(source, target):
                    raise InvalidInput(_is_read(named, path, target))
    if new and stat_of(path, option) is not None:
        raise InvalidInput(f"{named} already exists: give a new file name")
    return is_stream(path)


def _refuse_any_ledger_file(target: Path, option: str) -> None:
    """Refuse `target` when it is ANY ledger or one of its side files, not only the
    command's own: ``--db l.db export S --out o.db.head`` wrote JSON over o.db's head
    anchor (review of session 41). A ledger is never replaced by an output."""
    side = side_file_of(str(target))
    if side is not None:
        ledger, what = side
        raise InvalidInput(
            f"{option} {shown_path(target)} is {what} of the ledger {shown_path(ledger)}: "
            "give another file"
        )
    if is_sqlite_file(str(target)):
        raise InvalidInput(
            f"{option} {shown_path(target)} is a SQLite database (a ledger is never "
            "replaced by an output): give another file"
        )


def _is_read(named: str, path: Path, target: Path) -> str:
    if target == path:
        return f"{named} is the file the command reads: give another file"
    return (
        f"{named}: the command writes {shown_path(target)} beside it, the file it reads: "
        "give another OUT"
    )


def refuse_ledger_file(path: Path, ledger: str, option: str) -> None:
    """Refuse `path`, a file a command is about to write (`option`), when it is the
    ledger or one of its side files: ``export --out ledger.db`` replaced the ledger it
    had just read with the JSON (session 40). A symlinked ledger keeps some side files
    beside the link's name (``.lock``, ``.leases/``, ``.head``), others beside the
    file's: both forms are refused, and a link of any kind to one that exists."""
    if is_url(ledger):
        return
    if _names_a_ledger_file(os.path.abspath(path), os.path.realpath(path), ledger):
        raise InvalidInput(
            f"{option} {shown_path(path)} is the ledger or one of its files: give another file"
        )


def _names_a_ledger_file(absolute: str, real: str, ledger: str) -> bool:
    ledger = os.path.expanduser(ledger)
    for base in {os.path.abspath(ledger), os.path.realpath(ledger)}:
        leases = os.path.join(base + LEASES_SUFFIX, "")
        if any(p.startswith(leases) for p in (absolute, real)):
            return True
        for side in (base + s for s in ("", *SIDE_SUFFIXES)):
            if side in (absolute, real):
                return True
            with contextlib.suppress(OSError):  # (a hard link, or a name that differs in case)
                if os.path.samefile(real, side):
                    return True
    return False
