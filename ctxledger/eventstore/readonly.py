"""Opening a SQLite ledger read-only: an archived ledger, read-only media, a file or a
folder this process may not write.

A normal open writes: it creates the file, makes it private, opens the side lock
file, switches to WAL and applies migrations, and SQLite in WAL mode makes the
``-wal`` and ``-shm`` files beside the ledger. A read-only open does none of that:

- the reader's own file in a folder it may write and search: SQLite's ``mode=ro``,
  whose locks keep a writer from tearing the read, and which sees what a writer appends
  meanwhile. It joins the ``-wal``/``-shm`` there or makes them; those it made (none
  were there) it removes at its close as SQLite does, when nobody else has them open
  (:func:`tidy_side_files`). A file it may not write (its own ``0444``) is read so too:
  the empty ``-wal`` and the ``-shm`` it made are left (this user's, whose ledger it
  is), since ``immutable`` there gave a false "changed" whenever a writer that may
  write it (root, a group) opened it during a read (session 35, review 2);
- a ``-wal`` and a ``-shm`` this user can read (a writer has the ledger open, or left
  them): ``mode=ro`` too, which makes nothing then (both exist) and reads the ``-wal``'s
  events; SQLite 3.22+ reads a ``-shm`` it may not write without writing it;
- otherwise (another user's file, a folder or medium this user cannot write, a ``-shm``
  it cannot read): SQLite's ``immutable=1`` URI, which reads the main file and writes
  nothing anywhere. ``mode=ro`` there would make ``-wal``/``-shm`` files owned by the
  reader beside another user's ledger (their next write then fails, and a sticky
  folder keeps them from deleting those), or fail when the folder refuses them.
  ``immutable`` takes no locks, so what it saw of the file is kept (:class:`Unchanged`)
  and checked after a read that could be torn: a change is "run the command again",
  not damage. A non-empty ``-wal`` (or ``-journal``) with no ``-shm`` this user can
  read holds what the main file lacks, which ``immutable`` would not see: refused,
  naming the file;
- a missing file: refused (nothing is created);
- an empty file: an empty ledger, built in memory (the file is never written);
- a ledger at an older schema cannot be migrated here: refused, saying so.

The store refuses every write (``SQLiteEventStore._writing``).
"""

from __future__ import annotations

import errno
import os
import sqlite3
import stat
import urllib.parse

from ctxledger.errors import LedgerChanged, StorageFullError, StoreError
from ctxledger.eventstore.files import (
    JOURNAL_SUFFIX,
    LEASES_SUFFIX,
    LOCK_SUFFIX,
    SHM_SUFFIX,
    SQLITE_SIDES,
    WAL_SUFFIX,
)
from ctxledger.inputfile import shown_path

__all__ = [
    "CHANGED",
    "READ_ONLY_WRITE",
    "SQLITE_FAILURES",
    "Unchanged",
    "belongs_to_another",
    "connect_read_only",
    "is_writable",
    "only_writing_failed",
    "read_only_target",
    "refuse_old_schema",
    "refuse_unwritable",
    "side_file_remedy",
    "tidy_side_files",
]

#: what a call into SQLite may raise: its errors, and UnicodeDecodeError when its message
#: quotes bytes of a damaged schema that are not UTF-8 (the message is decoded by Python)
SQLITE_FAILURES = (sqlite3.Error, UnicodeDecodeError)

#: what a write on a read-only store says (after "the ledger <path> ")
READ_ONLY_WRITE = (
    "is open read-only (a read command, or a file or folder this process cannot write): "
    "nothing was written; run the writing command where the ledger can be written"
)


def _writable(path: str, mode: int = os.W_OK) -> bool:
    """``os.access`` for this process's effective ids where the system supports it."""
    if os.access in os.supports_effective_ids:
        return os.access(path, mode, effective_ids=True)
    return os.access(path, mode)


def belongs_to_another(path: str | os.PathLike[str], *, follow: bool = True) -> bool:
    """Whether `path` exists and belongs to another user than this process's effective
    one (`follow`: a link's target, else the link). False for a missing path and on a
    system without file owners."""
    if not hasattr(os, "geteuid"):
        return False
    try:
        return os.stat(path, follow_symlinks=follow).st_uid != os.geteuid()
    except OSError:
        return False


def is_writable(path: str) -> bool:
    """Whether this process may write the ledger at `path` (its real file: SQLite
    follows a symlink and keeps the side files beside the target), its folder (the
    ``-wal``, ``-shm`` and lock files are made there) and the ``-wal`` / ``-shm`` /
    ``.lock`` already there; a ``.leases`` folder of another user it may not write
    counts too. ``os.access`` sees read-only mounts (EROFS)."""
    return unwritable_part(path) is None


def unwritable_part(path: str) -> str | None:
    """The first of :func:`is_writable`'s paths this process may not write (None: all)."""
    real = os.path.realpath(path)
    if not _writable(real):
        return real
    if not _writable(os.path.dirname(real), os.W_OK | os.X_OK):
        return os.path.dirname(real)
    sides = [real + s for s in (WAL_SUFFIX, SHM_SUFFIX, LOCK_SUFFIX) if os.path.lexists(real + s)]
    leases = real + LEASES_SUFFIX
    if os.path.isdir(leases) and belongs_to_another(leases, follow=False):
        sides.append(leases)
    # (a side that vanished since it was listed — SQLite removes the -wal and -shm when
    # another opener's last connection closes — is no cause: only one still there is)
    return next((s for s in sides if not _writable(s) and os.path.lexists(s)), None)


def owner_name(path: str) -> str:
    """Who owns `path`: a user's name where there is one, else ``uid N`` ("" if unknown)."""
    try:
        uid = os.stat(path, follow_symlinks=False).st_uid
    except OSError:
        return ""
    try:
        import pwd

        return pwd.getpwuid(uid).pw_name
    except (ImportError, KeyError):
        return f"uid {uid}"


def _size(path: str) -> int:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return 0
    return st.st_size if stat.S_ISREG(st.st_mode) else 0


def _readable(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.R_OK)


def _locking_read_makes_nothing_foreign(real: str) -> bool:
    """Whether SQLite's ``mode=ro`` may read `real` (see the module docstring): the
    reader's own file in a folder it may write and search (what it makes there is its
    own), or a ``-wal`` and ``-shm`` there it can read (it makes nothing then)."""
    own = os.path.exists(real) and not belongs_to_another(real)
    if own and _writable(os.path.dirname(real), os.W_OK | os.X_OK):
        return True
    return _readable(real + SHM_SUFFIX) and _readable(real + WAL_SUFFIX)


def _wal_with_no_side_files(real: str) -> bool:
    """Whether `real` is a database in WAL mode (its header's bytes 18 and 19 are 2) with
    no ``-wal``, ``-shm`` or ``-journal`` beside it: nothing unmerged, nobody has it open
    (a connection to a WAL database keeps its ``-shm``), and SQLite's ``mode=ro`` would
    make a ``-wal`` and ``-shm`` there that it cannot remove."""
    if any(os.path.lexists(real + s) for s in SQLITE_SIDES):
        return False
    try:
        with open(real, "rb") as file:
            header = file.read(20)
    except OSError:
        return False
    return header[18:20] == b"\x02\x02"


def tidy_side_files(path: str) -> None:
    """Remove the ``-wal`` and ``-shm`` a read-only connection (which may not remove
    them) left beside a database in WAL mode, as SQLite itself does: a connection that
    may write, closed last. Only with an empty ``-wal`` (nothing to merge into the file:
    this writes nothing to it) and a folder this process may write; never while another
    has it open. Through a symlink, beside the file it names (where SQLite put them)."""
    real = os.path.realpath(path)
    wal = real + WAL_SUFFIX
    try:
        if os.path.getsize(wal) != 0 or not os.access(os.path.dirname(wal) or ".", os.W_OK):
            return
        uri = "file:" + urllib.parse.quote(os.fsencode(real)) + "?mode=rw"
        conn = sqlite3.connect(uri, uri=True)
        try:
            conn.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()
        finally:
            conn.close()
    except (OSError, *SQLITE_FAILURES):
        return  # (SQLite removed both unless another connection had them open)


class _Tidying(sqlite3.Connection):
    """A ``mode=ro`` connection that found no ``-wal``/``-shm`` beside the ledger: its
    close removes those it made (:func:`tidy_side_files`), leaving the folder as it was."""

    tidy_path = ""

    def close(self) -> None:
        super().close()
        if self.tidy_path:
            path, self.tidy_path = self.tidy_path, ""
            tidy_side_files(path)


#: what a read-only open says when the file moved under an ``immutable=1`` read
CHANGED = "changed while it was read read-only; run the command again"


class Unchanged:
    """What an ``immutable=1`` open saw of the file (SQLite takes no locks then: a
    writer that starts meanwhile can tear the read). `check` raises StoreError when the
    file, its size or time, or its side files differ from then."""

    def __init__(self, path: str, real: str) -> None:
        self.path, self.real = path, real
        self.seen = self._stamp()

    def _stamp(self) -> tuple[object, ...]:
        try:
            st = os.stat(self.real)
        except OSError:
            return ()
        sides = tuple(_side_stamp(self.real + s) for s in SQLITE_SIDES)
        return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, *sides)

    def changed(self) -> bool:
        return self._stamp() != self.seen

    def error(self) -> LedgerChanged:
        return LedgerChanged(f"the ledger {self.path} {CHANGED}")

    def check(self) -> None:
        if self.changed():
            raise self.error()


def _side_stamp(path: str) -> tuple[int, int] | None:
    """A side file's (size, mtime_ns), None when there is none: an empty ``-wal`` there
    at the open that a writer then fills is a change too."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns


def read_only_target(path: str) -> str | None:
    """The SQLite URI that reads `path` writing nothing, or None for an empty file (read
    as an empty ledger). StoreError for a missing file, and for a ledger whose
    write-ahead log or rollback journal cannot be read without writing."""
    real = os.path.realpath(path)
    if not os.path.isfile(real):
        raise StoreError(
            f"no ledger file at {shown_path(path)}: a read-only open reads an existing ledger; nothing "
            "was created"
        )
    if _size(real) == 0 and not os.path.lexists(real + WAL_SUFFIX):
        return None
    uri = "file:" + urllib.parse.quote(os.fsencode(real))
    if _locking_read_makes_nothing_foreign(real):
        return uri + "?mode=ro"
    for side, what in ((WAL_SUFFIX, "write-ahead log"), (JOURNAL_SUFFIX, "rollback journal")):
        if _size(real + side) > 0:
            raise StoreError(
                f"the ledger {path} has a {what} ({real}{side}) not yet merged into it "
                f"and no {real}-shm this user can read: it cannot be read without "
                f"writing; {_unmerged_hint(real, side)}"
            )
    return uri + "?immutable=1"


def _unmerged_hint(real: str, side: str) -> str:
    """What a reader can do about an unmerged `side` file: the owner of another user's
    ledger can (this user cannot upgrade it, and a copy made while a writer runs tears)."""
    if belongs_to_another(real):
        return (
            f"ask the owner to make {real}-shm readable, or to stop its writers; or copy "
            f"the ledger with its {side} while no writer runs"
        )
    return (
        "open it once where it can be written (`ctxledger upgrade`), or copy the ledger "
        f"with its {side} to such a folder while no writer runs"
    )


def refuse_old_schema(path: str, pending: list[str]) -> None:
    """StoreError when a ledger opened read-only needs `pending` migrations first."""
    if pending:
        raise StoreError(
            f"the ledger {path} was written by an older ctxledger (migration {pending[0]!r} "
            "is not applied) and is open read-only: it cannot be migrated here; run "
            "`ctxledger upgrade` on it where it can be written, or on a copy; nothing was written"
        )


def connect_read_only(path: str) -> tuple[sqlite3.Connection, Unchanged | None]:
    """A connection reading `path` (see the module docstring); ``":memory:"`` for an
    empty file, whose caller creates the empty schema in that memory. With it, what an
    ``immutable=1`` open saw of the file (None for the others).

    What the file was is stamped *before* the choice: a writer that appears after the
    look for side files (which chose ``immutable``) is a change, never the baseline. A
    change before the connection was made is looked at again (a writer now there: its
    ``-shm`` makes it ``mode=ro``, which reads what the writer committed)."""
    real = os.path.realpath(path)
    for _ in range(2):
        unchanged = Unchanged(path, real)
        target = read_only_target(path)
        if target is None:
            conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
            return conn, None
        tidy = "mode=ro" in target and _wal_with_no_side_files(real)
        conn = sqlite3.connect(
            target, uri=True, isolation_level=None, check_same_thread=False, factory=_Tidying
        )
        conn.tidy_path = path if tidy else ""
        if "immutable" not in target:
            return conn, None
        if not unchanged.changed():
            return conn, unchanged
        conn.close()
    raise unchanged.error()


def side_file_remedy(path: str) -> str:
    """What to do about `path`, a file beside a ledger that another user owns: a lock or
    lease file holds no data and may be removed; any other (a -wal file) must not be."""
    if path.endswith((LOCK_SUFFIX, LEASES_SUFFIX)) or LEASES_SUFFIX + os.sep in path:
        return "remove it as its owner or root (it holds only locks, no data)"
    return (
        "run the command as its owner, or have the file given to you (chown); never "
        "remove a -wal file: it may hold the last writes"
    )


def refuse_unwritable(path: str) -> None:
    """StoreError, before anything is touched, when an open for writing finds a ledger
    file this process cannot write (SQLite would open it read-only and fail at the first
    write, after the file was made private and a lock file made beside it); a file beside
    the ledger that is the cause is named, with what to do."""
    if not os.path.isfile(os.path.realpath(path)):
        return
    part = unwritable_part(path)
    if part is None:
        return
    real = os.path.realpath(path)
    if part.startswith(real) and part != real:
        owner = owner_name(part)
        what = side_file_remedy(part)
        raise StoreError(
            f"the ledger {path} cannot be written by this user: {part} beside it "
            f"{f'belongs to {owner}' if owner else 'is not writable'} and this user may not "
            f"write it; {what}; then run the command again; nothing was written"
        )
    raise StoreError(
        f"the ledger {path} cannot be written by this user (a read-only file, folder or "
        "medium): a command that writes needs it writable; commands that only read "
        "open it read-only; nothing was written"
    )


#: SQLite's primary codes of an open that could not write: READONLY, CANTOPEN
_WRITE_CODES = (8, 14)
#: an OSError's codes of an open that could not write (ELOOP, EMLINK: a link in place of
#: the lock file, which only a writable open refuses)
_WRITE_ERRNOS = (errno.ENOSPC, errno.EROFS, errno.EACCES, errno.ELOOP, errno.EMLINK)


def only_writing_failed(exc: StoreError) -> bool:
    """Whether a failed open for writing could still be read read-only: a full disk, a
    medium or file SQLite found read-only or could not open for writing, a link in place
    of the lock file (a read-only open makes no lock file)."""
    cause = exc.__cause__
    if isinstance(exc, StorageFullError):
        return True
    if isinstance(cause, sqlite3.Error):
        return (getattr(cause, "sqlite_errorcode", 0) or 0) & 0xFF in _WRITE_CODES
    return isinstance(cause, OSError) and cause.errno in _WRITE_ERRNOS
