"""Choosing a backend from what the user typed: a file path or a URL.

``postgresql://`` and ``postgres://`` URLs open the PostgreSQL store (the
``ctxledger[postgres]`` extra); anything else without a scheme is a SQLite file (or
``":memory:"``). Any other ``scheme://`` is an error, never a path: a URL taken for a
path would silently create a directory named after its scheme.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from ctxledger.errors import InvalidConfig, InvalidInput, StoreError
from ctxledger.eventstore.base import Durability, EventStore
from ctxledger.eventstore.files import side_file_of
from ctxledger.eventstore.migrations import unmade_ledger, written_by_older
from ctxledger.eventstore.postgres_url import NoLedger
from ctxledger.eventstore.readonly import belongs_to_another, is_writable, only_writing_failed
from ctxledger.eventstore.space import TEMPORARY
from ctxledger.eventstore.sqlite import SQLiteEventStore
from ctxledger.inputfile import file_kind, path_text, shown_path, stat_of
from ctxledger.integers import shown
from ctxledger.shownurl import shown_url

__all__ = [
    "cannot_write",
    "close_quietly",
    "default_db_path",
    "env_db",
    "is_url",
    "open_for_reading",
    "open_store",
    "opens_read_only",
    "read_as_is_notice",
    "read_only_reason",
    "refuse_unfit_path",
    "require_ledger_file",
    "target_text",
]

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
#: what a ``Path`` makes of a URL: ``Path("postgresql://h/db")`` is ``postgresql:/h/db``
_COLLAPSED = re.compile(r"^(postgres|postgresql):/(?!/)")
POSTGRES_SCHEMES = ("postgresql", "postgres")
T = TypeVar("T")


def is_url(target: str | os.PathLike[str]) -> bool:
    """Whether `target` names a server (``scheme://…``) rather than a file."""
    return isinstance(target, str) and _SCHEME.match(target) is not None


def _refuse_collapsed_url(text: str) -> None:
    if _COLLAPSED.match(text):
        raise InvalidInput(
            f"{shown(text)} looks like a PostgreSQL URL whose '//' was lost (a Path "
            "collapses it): pass the URL as a string"
        )


def _kind(text: str) -> str:
    return "URL" if is_url(text) else "file name"


def _named(text: str) -> str:
    """`text` as an error names it: a URL (without its password) or a path."""
    return (
        f"the ledger URL {shown_url(text)!r}" if is_url(text) else f"the ledger path {shown(text)}"
    )


def target_text(target: object) -> str:
    """A ledger target as text: a path (str, bytes or path-like, ``~`` expanded) or a URL;
    a number, a path holding NUL or a lone surrogate (no file name can) or a SQLite
    ``file:`` URI is InvalidInput, not a TypeError / ValueError / UnicodeEncodeError / a
    stray folder."""
    if target == TEMPORARY:  # (the private temporary log's name: the one with a NUL)
        return TEMPORARY
    text = path_text(
        target,
        "a ledger",
        expected="is a file path or a postgresql:// URL",
        named=_named,
        noun=_kind,
    )
    if text and not text.strip():  # " " made a file named by a blank, and its lock file
        raise InvalidInput(
            f"the ledger path {shown(text)} is only blank characters: give a file path or a "
            "postgresql:// URL"
        )
    if not is_url(text) and is_url(text.strip()):  # (a pasted URL: folders named by it)
        raise InvalidInput(
            f"the ledger URL {shown(shown_url(text.strip()))} has blank characters around "
            "it: give it without them"
        )
    if text.startswith("file:"):  # taken as a relative path, it left ./file:/... behind
        raise InvalidInput(
            f"{shown(text)} is a SQLite URI, not a ledger path: give the file's path (a ledger "
            "opens its file itself)"
        )
    # "~/x.db" from a .env file or a quoted --db: the home folder, not a folder named ~
    return os.path.expanduser(text) if text.startswith("~") else text


def require_ledger_file(target: str | os.PathLike[str], option: str | None = None) -> None:
    """Refuse (InvalidInput, nothing created) a SQLite ledger file that does not exist.

    For commands that only read a ledger: opening a store creates a missing file (and
    its folders), which would turn a mistyped path into an empty ledger. A URL passes:
    its store's open refuses a database and schema holding no ledger
    (``open_store(existing=...)``, on the open's own connection). `option` names a
    second ledger (``--b-db``, ``--from``) in the message; else it is the ledger (``--db``).
    """
    text = target_text(target)
    if is_url(text):
        return
    refuse_unfit_path(text, option)
    if _is_file(text):
        return
    _refuse_collapsed_url(text)
    if option is not None:
        raise InvalidInput(f"{option} {shown_path(text)}: no such ledger file")
    raise InvalidInput(
        f"no ledger file at {shown_path(text)} (the ledger is --db, else $CTXLEDGER_DB, else ctxledger.db "
        "in the user data dir); `ctxledger import FILE` or `ctxledger demo` creates one"
    )


def refuse_unfit_path(text: str, option: str | None = None) -> None:
    """Refuse the SQLite ledger path `text` when no ledger can be there, whether it is
    read or about to be made (nothing is created): a directory (``--db /tmp`` said "no
    ledger file"), a device, FIFO or socket, a side file of a ledger (``--db L.db.lock``
    made the lock file a ledger), a file this user cannot read. InvalidInput, but
    StoreError for the unreadable file (a matter of rights, not of the name). Nothing
    there, or a regular file, passes; `option` names a second ledger (``--b-db``)."""
    if text in (":memory:", TEMPORARY):
        return
    what = option or "the ledger path"
    named = f"{what} {shown_path(text)}"
    side = side_file_of(text)
    if side is not None:
        ledger, what = side
        raise InvalidInput(
            f"{named} is {what} of the ledger {shown_path(ledger)}, not a ledger: "
            f"give the ledger's own path ({shown_path(ledger)}); nothing was changed"
        )
    found = _stat_within_rights(text, what, named)
    if found is None:
        if text.endswith(("/", os.sep)):  # (`--db L.db/` said "no ledger file" beside L.db)
            raise InvalidInput(
                f"{named} ends with {shown(text[-1])}, a folder's name: give a file's path"
            )
        return
    if stat.S_ISDIR(found.st_mode):
        inside = shown_path(os.path.join(text, "ctxledger.db"))
        raise InvalidInput(
            f"{named} is a directory, not a ledger file: give a file's path (such as "
            f"{inside}); nothing was changed"
        )
    if not stat.S_ISREG(found.st_mode):
        raise InvalidInput(
            f"{named} is {file_kind(found.st_mode)}, not a ledger file; nothing was changed"
        )
    if not os.access(text, os.R_OK):
        mode = stat.S_IMODE(found.st_mode)
        if found.st_uid == os.geteuid():  # (a user's own 0200 file was told to run as its owner)
            raise StoreError(
                f"{named} cannot be read by this user, its owner (mode {mode:04o}): "
                f"chmod u+r {shown_path(text)}"
            )
        raise StoreError(
            f"{named} cannot be read by this user (the file is uid {found.st_uid}'s, mode "
            f"{mode:04o}): run as its owner or ask them for read access"
        )


def _stat_within_rights(text: str, what: str, named: str) -> os.stat_result | None:
    """:func:`stat_of` of the ledger path, but a folder on its way this user may not
    search is a matter of rights (StoreError, exit 1, as the unreadable file is), not of
    the name: it was InvalidInput, exit 2."""
    try:
        os.stat(text)
    except PermissionError as exc:
        raise StoreError(
            f"{named} cannot be reached by this user ({exc.strerror}): a folder on its way "
            "may not be searched; run as its owner or ask them for access"
        ) from None
    except (OSError, ValueError):
        pass  # (stat_of names the rest)
    return stat_of(text, what)


def _is_file(text: str) -> bool:
    """Whether `text` names a file; InvalidInput for a path no file can have."""
    found = stat_of(text, "the ledger path")
    return found is not None and stat.S_ISREG(found.st_mode)


#: why a command that only reads opens a SQLite ledger read-only (:func:`read_only_reason`)
OLDER = "written by an older ctxledger"
UNWRITABLE = "not writable by this process"


def read_only_reason(target: str | os.PathLike[str]) -> str | None:
    """Why a command that only reads opens the SQLite ledger `target` read-only, or None
    (it opens it for writing): :data:`UNWRITABLE` for an empty file, a file of another
    user (root's writable open left a root-owned 0600 ``.lock`` that locked the owner
    out), a file, folder or medium this process cannot write; :data:`OLDER` for a ledger
    an older ctxledger wrote (a read must not migrate it: that older ctxledger would
    refuse it then; session 39). None for a URL and for a file that is not there."""
    text = target_text(target)
    if is_url(text) or not _is_file(text):
        return None
    if cannot_write(text):
        return UNWRITABLE
    return OLDER if written_by_older(text) else None


def opens_read_only(target: str | os.PathLike[str]) -> bool:
    """Whether a command that only reads opens the SQLite ledger `target` read-only
    (:func:`read_only_reason`)."""
    return read_only_reason(target) is not None


def cannot_write(text: str) -> bool:
    """Whether a read of the SQLite file `text` (there) must write nothing to it or
    beside it: an empty file, another user's, or one this process cannot write."""
    return os.path.getsize(text) == 0 or belongs_to_another(text) or not is_writable(text)


def read_as_is_notice(target: str) -> str:
    """The one line a command says when it reads a ledger an older ctxledger wrote
    (:data:`OLDER`) as it is: nothing the reads computed (the recall index, a
    checkpoint) is kept in it, so each read does that work again (session 39)."""
    return (
        f"{shown_path(target)} was written by an older ctxledger and is read as it is; "
        "`ctxledger upgrade` makes later reads faster, but an older ctxledger still "
        "writing it would then refuse it"
    )


def open_for_reading(
    target: str, open_: Callable[[bool], T], tell: Callable[[str], None] | None = None
) -> tuple[T, str | None]:
    """``open_(read_only)`` for a command that only reads the ledger `target`, and why
    it is read-only (:func:`read_only_reason`; None when writable, or read-only again
    because an open for writing failed for writing only: a full disk, a medium that
    turned read-only). A ledger read as an older ctxledger wrote it is told to `tell`
    (:func:`read_as_is_notice`). The caller checks ``check_unchanged()`` after its
    reads (see :mod:`.readonly`)."""
    reason = read_only_reason(target)
    try:
        opened = open_(reason is not None)
    except StoreError as exc:
        if reason is not None or is_url(target) or not only_writing_failed(exc):
            raise
        return open_(True), None
    if reason == OLDER and tell is not None:
        tell(read_as_is_notice(target))
    return opened, reason


def open_store(
    target: str | os.PathLike[str],
    *,
    durability: Durability = "full",
    read_only: bool = False,
    existing: bool | str = False,
    **options: Any,
) -> EventStore:
    """Open the event store `target` names: a PostgreSQL URL or a SQLite file path.

    `options` go to the backend's constructor. `read_only` opens a SQLite file writing
    nothing (:mod:`.readonly`); a PostgreSQL URL with it is InvalidConfig. `existing`
    (a command that only reads): a missing file (:func:`require_ledger_file`), an empty
    one or a SQLite database holding no table opened for writing (it would be made a
    ledger; read-only it reads as an empty ledger, session 32's choice for the read
    commands) or a URL holding no ledger is
    refused, nothing created; a str names the option. Raises
    InvalidInput for an unknown scheme, and InvalidConfig when the PostgreSQL extra is
    not installed.
    """
    text = target_text(target)
    match = _SCHEME.match(text)
    if match is None:
        _refuse_collapsed_url(text)
        option = existing if isinstance(existing, str) else None
        if existing:  # (a missing file is refused, not created; it checks the path too)
            require_ledger_file(text, option)
            if not read_only and os.path.getsize(text) == 0:
                raise unmade_ledger(text, "an empty file", "; the read commands read it as empty")
        else:
            refuse_unfit_path(text, option)
        must_hold = bool(existing) and not read_only  # (a table-less database: the store's peek)
        return SQLiteEventStore(
            text, durability=durability, read_only=read_only, existing=must_hold, **options
        )
    scheme = match.group(1).lower()
    if scheme not in POSTGRES_SCHEMES:
        raise InvalidInput(
            f"unknown ledger URL scheme {shown(scheme)} in {shown(shown_url(text))}: give a file path for "
            "a SQLite ledger or a postgresql://user@host/db URL for PostgreSQL"
        )
    if read_only:  # (it would run migrations and accept appends)
        raise InvalidConfig(
            f"read-only opens are SQLite only: {shown_url(text)!r} is a PostgreSQL ledger; "
            "connect as a role with read-only grants to read it without writing"
        )
    try:
        from ctxledger.eventstore.postgres import PostgresEventStore
    except ImportError as exc:
        raise InvalidConfig(
            f"a PostgreSQL ledger needs the postgres extra ({exc.name} is missing): "
            "pip install 'ctxledger[postgres]'"
        ) from exc
    try:
        return PostgresEventStore(text, durability=durability, create=not existing, **options)
    except NoLedger as exc:
        if isinstance(existing, str):
            raise NoLedger(exc.where, existing) from None
        raise


def close_quietly(store: EventStore) -> None:
    """Close `store` while another error is raised: an error of the close itself is
    dropped, so the one that made the caller give up is the one reported."""
    with contextlib.suppress(Exception):
        store.close()


def env_db() -> str | None:
    """``$CTXLEDGER_DB`` (a path or a URL); None when unset or empty. One of only blank
    characters is InvalidInput naming the variable (it made a file named by a blank)."""
    env = os.environ.get("CTXLEDGER_DB")
    if env and not env.strip():
        raise InvalidInput(
            f"CTXLEDGER_DB is only blank characters ({shown(env)}): set it to a file path or a "
            "postgresql:// URL, or unset it"
        )
    return env or None


def default_db_path() -> str:
    """``$CTXLEDGER_DB`` (a path or a URL), else ``ctxledger.db`` in the user's data directory."""
    env = env_db()
    if env:
        return env  # a str: Path() would collapse a URL's "//"
    from platformdirs import user_data_dir

    return str(Path(user_data_dir("ctxledger", appauthor=False)) / "ctxledger.db")
