"""A SQLite ledger's files on disk: the database created private, and its side files.

The ledger and its WAL files are readable by their owner only (0600); the side lock
file (``<ledger>.lock``) is what the fair write lock of :mod:`.sqlite` ``flock``s, and
``<ledger>.leases/`` holds the lease files of :mod:`.leases`. Side files are opened
relative to the folder's descriptor and never through a link; those root makes beside
another user's ledger in that user's folder are handed to them (``fchown`` of the open
descriptor), as SQLite hands root's ``-wal`` and ``-shm`` to the database's owner: only
a file or folder that very call made, never one found under the name.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import stat
import sys
from collections.abc import Iterator
from typing import NamedTuple

from ctxledger.errors import IntegrityError, InvalidInput, StoreError
from ctxledger.inputfile import shown_path

log = logging.getLogger(__name__)

__all__ = [
    "HEAD_SUFFIX",
    "JOURNAL_SUFFIX",
    "LEASES_SUFFIX",
    "LOCK_SUFFIX",
    "SHM_SUFFIX",
    "SIDE_SUFFIXES",
    "SQLITE_HEADER",
    "SQLITE_SIDES",
    "WAL_SUFFIX",
    "NewFile",
    "close_side_lock",
    "create_ledger_file",
    "create_new_file",
    "create_private_file",
    "is_sqlite_file",
    "lock_made_here",
    "open_side_file",
    "open_side_folder",
    "open_side_lock",
    "side_file_of",
    "side_folder",
]

#: ``<ledger>-wal``, ``<ledger>-shm``, ``<ledger>-journal``: SQLite's write-ahead log, its
#: shared-memory index, and its rollback journal
WAL_SUFFIX, SHM_SUFFIX, JOURNAL_SUFFIX = "-wal", "-shm", "-journal"
#: the files SQLite itself keeps beside a database
SQLITE_SIDES = (WAL_SUFFIX, SHM_SUFFIX, JOURNAL_SUFFIX)
#: ``<ledger>.lock``: the side lock file (:func:`open_side_lock`)
LOCK_SUFFIX = ".lock"
#: ``<ledger>.leases/``: the folder of lease files (:mod:`.leases`)
LEASES_SUFFIX = ".leases"
#: ``<ledger>.head``: the sealed head anchor (:mod:`ctxledger.ledger.anchor`)
HEAD_SUFFIX = ".head"
#: every file a SQLite ledger keeps beside itself (besides the folder
#: :data:`LEASES_SUFFIX` names): a command writing a file refuses these names
SIDE_SUFFIXES = (*SQLITE_SIDES, LOCK_SUFFIX, HEAD_SUFFIX)

#: what each side file is, in words (:func:`side_file_of`)
_SIDE_ROLES = {
    WAL_SUFFIX: "SQLite's write-ahead log",
    SHM_SUFFIX: "SQLite's shared-memory index",
    JOURNAL_SUFFIX: "SQLite's rollback journal",
    LOCK_SUFFIX: "the write-lock file",
    HEAD_SUFFIX: "the sealed head anchor",
    LEASES_SUFFIX: "the folder of lease files",
}


def side_file_of(path: str) -> tuple[str, str] | None:
    """``(ledger, what the file is)`` when `path` names a file a SQLite ledger that
    exists keeps beside itself (its ``-wal``, ``.lock``, ``.head``, its ``.leases/``
    folder or a file in it), else None. ``--db L.db.lock`` made the lock file a ledger
    (session 41): a ledger is never opened, nor made, in one of these names.

    The name alone does not decide: the file it would belong to must be a SQLite
    database (it starts with :data:`SQLITE_HEADER`), and a file that is one itself is
    never a side file (a ledger copied to ``notes.head`` beside a text ``notes``, or
    ``proj-journal`` beside a folder's ``proj``, opens as the ledger it is)."""
    path = os.path.abspath(path)
    if _is_sqlite(path):
        return None
    folder = os.path.dirname(path)
    if folder.endswith(LEASES_SUFFIX) and _is_sqlite(folder[: -len(LEASES_SUFFIX)]):
        return folder[: -len(LEASES_SUFFIX)], "a lease file"
    for suffix, role in _SIDE_ROLES.items():
        if path.endswith(suffix) and _is_sqlite(path[: -len(suffix)]):
            return path[: -len(suffix)], role
    return None


def is_sqlite_file(path: str) -> bool:
    """Whether `path` is a regular file starting with :data:`SQLITE_HEADER`: a command
    writing an output never replaces one (it may be a ledger)."""
    return _is_sqlite(path)


def _is_sqlite(path: str) -> bool:
    """Whether `path` is a regular file starting with :data:`SQLITE_HEADER` (False for
    anything else, and for a file this user cannot read: its name is then no clue)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except (OSError, ValueError):
        return False
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return False
        return os.read(fd, len(SQLITE_HEADER)) == SQLITE_HEADER
    except OSError:
        return False
    finally:
        os.close(fd)


#: the first 16 bytes of every SQLite database file
SQLITE_HEADER = b"SQLite format 3\x00"


def open_side_lock(ledger: str) -> int | None:
    """The descriptor of the side lock file ``<ledger>.lock`` (created 0600), or None
    where there is none (no ``fcntl``, or a folder this user cannot write: writes then
    rely on busy_timeout alone). A link in its place is refused (:func:`open_side_file`)."""
    if sys.platform == "win32":
        return None
    try:
        with side_folder(ledger) as (folder, name, owner):
            fd, made = _open_or_make(folder, name + LOCK_SUFFIX, os.O_RDWR | os.O_CREAT, owner)
    except OSError:  # (a link's StoreError is no OSError: it goes to the caller)
        return None
    if made:
        _LOCKS_MADE.add(_identity(os.fstat(fd)))
    return fd


#: the side lock files an open in this process made with ``O_EXCL`` (device, inode, and
#: status change time: a file made since under the name, even on a reused inode, is not one)
_LOCKS_MADE: set[tuple[int, int, int]] = set()


def _identity(found: os.stat_result) -> tuple[int, int, int]:
    return found.st_dev, found.st_ino, found.st_ctime_ns


def lock_made_here(found: os.stat_result) -> bool:
    """Whether `found` (the ``fstat`` of a ``.lock``) is a side lock file that an open in
    this process made (:func:`open_side_lock`), not one it found there."""
    return _identity(found) in _LOCKS_MADE


def close_side_lock(fd: int | None) -> None:
    """Close :func:`open_side_lock`'s descriptor (None: there was none); errors dropped."""
    if fd is not None:
        with contextlib.suppress(OSError):
            os.close(fd)


#: a folder opened to name files in it: ``O_PATH`` where there is one (a folder this user
#: may search but not list, as the files were opened by path before)
_FOLDER_FLAGS = getattr(os, "O_PATH", os.O_RDONLY) | os.O_DIRECTORY | os.O_CLOEXEC


@contextlib.contextmanager
def side_folder(ledger: str) -> Iterator[tuple[int, str, tuple[int, int] | None]]:
    """(a descriptor of the ledger's folder, the ledger's name in it, the owner to hand
    the files made beside it to: see :func:`_owner_to_hand_to`); OSError if the folder
    cannot be opened. The files beside a ledger are opened relative to that descriptor,
    so a folder swapped for a link meanwhile cannot move them."""
    path, name = os.path.split(os.path.abspath(ledger))
    folder = os.open(path, _FOLDER_FLAGS)
    try:
        yield folder, name, _owner_to_hand_to(folder, name)
    finally:
        os.close(folder)


def _owner_to_hand_to(folder: int, name: str) -> tuple[int, int] | None:
    """The (uid, gid) that the lock and lease files root makes beside another user's
    ledger are handed to (else they would lock the owner out): only where that user
    owns the folder too, so they are given nothing they could not make themselves (and
    only files made then: see :func:`open_side_file`). None for any other process,
    ledger or folder."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return None
    try:
        ledger, where = os.stat(name, dir_fd=folder), os.fstat(folder)
    except OSError:
        return None
    if ledger.st_uid == 0 or where.st_uid != ledger.st_uid:
        return None  # (root's own ledger: its files stay root's, group too)
    return ledger.st_uid, ledger.st_gid


def open_side_file(folder: int, name: str, flags: int, owner: tuple[int, int] | None) -> int:
    """Open `name` in the `folder` descriptor, never following a link (StoreError for
    one: anyone who can write the folder could point it at a file of their choosing, and
    ``O_CREAT`` would make its target). With ``O_CREAT``, the file is made here when it is
    missing (``O_EXCL``) and only a file this very call made is handed to `owner`: what
    is found under the name is whatever the folder's owner put there (they could rename
    any of root's files in their folders to it), so it keeps its owner."""
    return _open_or_make(folder, name, flags, owner)[0]


def _open_or_make(
    folder: int, name: str, flags: int, owner: tuple[int, int] | None
) -> tuple[int, bool]:
    """:func:`open_side_file`, and whether this call made the file (``O_EXCL``)."""
    flags |= os.O_NOFOLLOW | os.O_CLOEXEC
    for _ in range(3):  # (a file removed between the two opens is made again)
        made = bool(flags & os.O_CREAT)
        try:
            fd = _open_beside(folder, name, flags | os.O_EXCL if made else flags)
        except FileExistsError:
            made = False
            try:
                fd = _open_beside(folder, name, flags & ~os.O_CREAT)
            except FileNotFoundError:
                continue
        if made and owner is not None:
            _hand_over(fd, owner, name)
        return fd, made
    return _open_beside(folder, name, flags), False


def open_side_folder(folder: int, name: str, owner: tuple[int, int] | None) -> int:
    """A descriptor of the folder `name` in `folder` (made 0700 when missing; a link in its
    place is refused), handed to `owner` only when this call made it and it is, when
    opened, still empty, root's and private. (Between the ``mkdir`` and the open, the
    folder's owner could put another folder under the name: only one from this same
    folder, since moving a folder elsewhere needs write access to it; and an empty
    folder of root's there is one they could remove and make as their own anyway.)"""
    try:
        os.mkdir(name, 0o700, dir_fd=folder)
        made = True
    except FileExistsError:
        made = False
    fd = _open_beside(folder, name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    if made and owner is not None:
        try:
            st = os.fstat(fd)
            if st.st_uid == 0 and not stat.S_IMODE(st.st_mode) & 0o077 and not os.listdir(fd):
                _hand_over(fd, owner, name)
        except BaseException:
            os.close(fd)
            raise
    return fd


def _open_beside(folder: int, name: str, flags: int) -> int:
    try:
        return os.open(name, flags, 0o600, dir_fd=folder)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EMLINK, errno.ENOTDIR) and _is_link(folder, name):
            raise StoreError(
                f"{name} beside the ledger is a symbolic link: ctxledger follows no link for "
                "the files it makes beside a ledger (one could point anywhere); remove it; "
                "nothing was written"
            ) from exc
        raise


def _hand_over(fd: int, owner: tuple[int, int], name: str) -> None:
    """``fchown`` `fd` to `owner`; where the file system refuses (vfat or exfat mounted
    with a fixed ``uid=``, some FUSE and NFS mounts), a warning: root's write goes on, and
    the file stays as that file system shows it. The caller keeps (and closes) `fd`."""
    try:
        os.fchown(fd, *owner)
    except OSError as exc:
        log.warning(
            "ctxledger: %s beside the ledger could not be handed to uid %d: %s",
            name,
            owner[0],
            exc.strerror or exc,
        )


def _is_link(folder: int, name: str) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=folder, follow_symlinks=False).st_mode)
    except OSError:
        return False


def create_ledger_file(path: str) -> None:
    """:func:`create_private_file`, a failure as the StoreError a user can act on."""
    try:
        create_private_file(path)
    except OSError as exc:
        raise _cannot_create(path, exc) from exc


def _cannot_create(path: str, exc: OSError) -> StoreError:
    return StoreError(
        f"cannot create the ledger {shown_path(path)}: {exc.strerror}; "
        "check the directory exists and is writable"
    )


class NewFile(NamedTuple):
    """A file :func:`create_new_file` made: nothing else can have made it (``O_EXCL``)."""

    path: str
    #: (device, inode) of the file made
    identity: tuple[int, int]
    #: the folders made on the way to it, deepest first
    folders: tuple[str, ...]
    #: the names beside it (:data:`SIDE_SUFFIXES`, :data:`LEASES_SUFFIX`) already there
    sides: frozenset[str]


def create_new_file(path: str) -> NewFile:
    """Make an empty private (0600) file at `path` where nothing is, with the folders on
    the way (as :func:`_make_folders`): FileExistsError when a file or link is at `path` (kept as it is);
    StoreError for any other failure, worded as :func:`create_ledger_file`'s (a folder
    on the way that is a file is named), with the folders this call made removed again."""
    made: list[str] = []
    try:
        made = _make_folders(os.path.dirname(path))
        sides = frozenset(s for s in (*SIDE_SUFFIXES, LEASES_SUFFIX) if os.path.lexists(path + s))
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    except FileExistsError:
        raise
    except OSError as exc:
        for folder in made:  # (deepest first; one that holds anything stays)
            with contextlib.suppress(OSError):
                os.rmdir(folder)
        raise _cannot_create(path, exc) from exc
    try:
        found = os.fstat(fd)
    finally:
        os.close(fd)
    return NewFile(path, (found.st_dev, found.st_ino), tuple(made), sides)


#: the most folders one path may have made: more than SQLite's longest path (512 bytes)
#: could hold (``os.makedirs`` hit the recursion limit past ~900, after making none)
_MOST_FOLDERS = 256


def _make_folders(folder: str) -> list[str]:
    """Make each missing folder on the way to (and of) `folder`, one by one (named as
    given: ``new/../x`` makes ``new`` and ``x``, as the kernel walks it); the ones this
    call made, deepest first. As ``os.makedirs(folder, 0o700)`` (what main called): the
    ledger's own folder 0700, those on the way 0777 less the umask. OSError naming a name
    on the way that is no folder, or when more than :data:`_MOST_FOLDERS` are missing
    (none is made)."""
    missing: list[str] = []
    while folder and not os.path.isdir(folder):
        if os.path.lexists(folder):
            raise _not_a_folder(folder)
        if len(missing) == _MOST_FOLDERS:
            raise OSError(errno.ENAMETOOLONG, "the path names too many folders", folder)
        missing.append(folder)
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
    made: list[str] = []
    for name in reversed(missing):
        try:
            os.mkdir(name, 0o700 if name == missing[0] else 0o777)
        except FileExistsError:  # (made meanwhile by someone else: not ours)
            if not os.path.isdir(name):
                raise _not_a_folder(name) from None
            continue
        made.insert(0, name)
    return made


def _not_a_folder(name: str) -> OSError:
    what = "is a file, not a folder" if os.path.isfile(name) else "is not a folder"
    return NotADirectoryError(errno.ENOTDIR, f"{shown_path(name)} {what}", name)


def create_private_file(path: str) -> None:
    """Create an empty database file readable by its owner only; an existing one of ours
    that others may read (0644 from an older version or a copy) is made private too.

    Changes nothing and raises InvalidInput when `path` is a directory (``--db /tmp``),
    IntegrityError when it is a file that is no SQLite database (``--db notes.txt``, or
    a ledger whose first page is gone): before, such a path had its mode cut to the
    owner's (a directory too) and then failed as a "damaged" ledger.
    """
    _make_folders(os.path.dirname(path))
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        _check_database_file(path)
        for name in (path, path + WAL_SUFFIX, path + SHM_SUFFIX):
            with contextlib.suppress(OSError):  # not ours, or gone: leave it to its owner
                st = os.stat(name)
                if st.st_uid == os.getuid() and st.st_mode & 0o077 and stat.S_ISREG(st.st_mode):
                    os.chmod(name, stat.S_IMODE(st.st_mode) & 0o700)
        return
    os.close(fd)


def _check_database_file(path: str) -> None:
    """Raise unless `path` is a regular file that is empty or an SQLite database."""
    try:
        st = os.stat(path)
    except OSError:
        return  # gone meanwhile, or unreadable: the open reports it
    if not stat.S_ISREG(st.st_mode):
        kind = "a directory" if stat.S_ISDIR(st.st_mode) else "not a regular file"
        raise InvalidInput(f"{path} is {kind}, not a ledger file; nothing was changed")
    try:
        with open(path, "rb") as f:
            head = f.read(len(SQLITE_HEADER))
    except OSError:
        return  # not readable by us: the open reports it
    if head and head != SQLITE_HEADER:
        raise IntegrityError(
            f"{path} is not an SQLite database: a file that is no ledger (check the path), "
            "or a ledger damaged past its first page (restore it from a backup); "
            "nothing was changed"
        )
