"""The sealed head anchor: where the log ended, kept apart from the log.

A hash chain proves that nothing *inside* the log changed, but deleting the newest
events leaves a shorter chain that still verifies. The anchor is a small file beside
the ledger (``<ledger>.head``) recording the last seq and its hash, sealed with an
HMAC under a per-user key (``$CTXLEDGER_ANCHOR_KEY_FILE``, else ``anchor.key`` in
the user data directory, created 0600). A writer advances it when it closes the
ledger after appending, and ``verify`` advances it after a clean walk; it only ever
moves forward. ``verify`` then checks that the log still holds the anchored event
with the anchored hash: a truncation, or a rewrite from that event on, fails.

Built on the store's public API (``last_seq``, ``read_all`` hashes and the verify
report's head); a hash is compared by its chain value (``base.chain_tip``: the whole
per-event hash, or the link of a linked row's ``<digest>:<link>``), the value
``verify`` prints as the head, so an anchor sealed before issue 14's linked rows
(or by a writer that stored the whole column) still matches. Limits: someone who can
delete both the anchor and the newest events is caught only by ``verify
--expect-head`` with a head hash kept elsewhere.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import hmac
import logging
import os
import secrets
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path

import msgspec

from ctxledger.errors import CtxLedgerError, InvalidInput
from ctxledger.eventstore.base import EventStore
from ctxledger.eventstore.files import HEAD_SUFFIX
from ctxledger.eventstore.opening import (
    OLDER,
    is_url,
    open_for_reading,
    open_store,
    require_ledger_file,
    target_text,
)
from ctxledger.eventstore.readonly import belongs_to_another
from ctxledger.eventstore.rows import chain_tip
from ctxledger.eventstore.sqlite import SQLiteEventStore
from ctxledger.eventstore.verifier import VerifyReport
from ctxledger.inputfile import NotAFile, open_input, read_capped, shown_path
from ctxledger.integers import shown
from ctxledger.ledger.derived import differing_values

_KEY_BYTES = 32
_log = logging.getLogger("ctxledger")


class HeadAnchor(msgspec.Struct, frozen=True):
    """The last event a writer saw: its seq and hash, and the seal over both."""

    seq: int
    hash: str
    seal: str = ""


def anchor_path(db: str | os.PathLike[str]) -> Path:
    return Path(os.fspath(db) + HEAD_SUFFIX)


def _key_path() -> Path:
    env = os.environ.get("CTXLEDGER_ANCHOR_KEY_FILE")
    if env:
        return Path(env)
    from platformdirs import user_data_dir

    return Path(user_data_dir("ctxledger", appauthor=False)) / "anchor.key"


class NoKey(Exception):
    """The anchor is not checked, a warning (:attr:`warning`), not a failure: a
    read-only check found no sealing key this user may read (no key is made), or
    another user's anchor does not verify under this user's key."""

    def __init__(self, warning: str | None = None) -> None:
        super().__init__(warning or NO_KEY)
        self.warning = warning or NO_KEY


def _key(create: bool = True) -> bytes:
    """The per-user sealing key, created (0600) on first use (not when `create` is
    False: NoKey when there is none this user may read).

    It must be a regular file of 1 to :data:`_MOST_KEY_BYTES` bytes, else InvalidInput
    naming it (``$CTXLEDGER_ANCHOR_KEY_FILE=/dev/zero`` was read until memory ran out,
    a FIFO waited forever, at the close of every writer and in ``verify``)."""
    path = _key_path()
    try:
        return _read_small(path, _KEY_FILE, _MOST_KEY_BYTES)
    except FileNotFoundError:
        if not create:
            raise NoKey from None
    except InvalidInput:
        if not create and not _may_read(path):
            raise NoKey from None
        raise
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    # (whole or not at all: a key file made empty and cut short before its write was
    # refused as "no key" at every close; False: another process made it first)
    _create(path, secrets.token_bytes(_KEY_BYTES))
    return _read_small(path, _KEY_FILE, _MOST_KEY_BYTES)


def _may_read(path: Path) -> bool:
    try:
        return os.access(path, os.R_OK)
    except OSError:
        return False


#: what a read-only verify says (a warning, not a failure) of an anchor it cannot check
NO_KEY = "anchor not checked: no key readable by this user (the hash chain was checked)"
#: ...and of another user's anchor whose seal is not this user's (no tampering shown)
FOREIGN_SEAL = (
    "anchor sealed under a key this user does not hold: not checked (the hash chain was checked)"
)


def _not_ours(db: str | os.PathLike[str], read_only: bool) -> bool:
    """Whether the anchor beside `db` is another user's: its head file is not this
    user's, or the ledger is read read-only and is not this user's."""
    return belongs_to_another(anchor_path(db)) or (read_only and belongs_to_another(db))


def _someone_elses(db: str | os.PathLike[str]) -> bool:
    """Whether the ledger at `db`, or its head file, belongs to another user (theirs to
    seal, under their key)."""
    return belongs_to_another(db) or belongs_to_another(anchor_path(db))


_KEY_FILE = "the anchor key file ($CTXLEDGER_ANCHOR_KEY_FILE)"
#: the most an anchor file may hold (~200 bytes), and a key file (one made is 32 bytes;
#: one of the user's own may be longer)
_MOST_BYTES = 4096
_MOST_KEY_BYTES = 1 << 16


def _read_small(path: Path, what: str, most: int = _MOST_BYTES) -> bytes:
    """The bytes of `path`, a regular file of 1 to `most` bytes; else InvalidInput
    naming `what` (FileNotFoundError passes, for the caller to create or skip it)."""
    try:
        with open_input(path, pipes=False) as fh:
            data = read_capped(fh, most)
    except NotAFile as exc:
        raise InvalidInput(f"{what} {shown_path(path)} is {exc.strerror}") from None
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise InvalidInput(
            f"{what} {shown_path(path)} cannot be read: {exc.strerror or exc}"
        ) from None
    if not data or len(data) > most:
        size = "empty" if not data else f"over {most:,} bytes"
        raise InvalidInput(f"{what} {shown_path(path)} is {size}")
    return data


def _seal(seq: int, head: str, create: bool = True) -> str:
    key = _key(create)
    return hmac.new(key, f"ctxledger-head:{seq}:{head}".encode(), hashlib.sha256).hexdigest()


def read_anchor(db: str | os.PathLike[str]) -> HeadAnchor | None:
    """The anchor beside `db`, or None when there is none (raises on an unreadable one)."""
    try:
        data = _read_small(anchor_path(db), "the head anchor")
    except FileNotFoundError:
        return None
    return msgspec.json.decode(data, type=HeadAnchor)


def seal_is_valid(anchor: HeadAnchor, create: bool = True) -> bool:
    """Whether the anchor's seal is this user's (NoKey, with `create` False, when this
    user has no key it may read)."""
    return hmac.compare_digest(anchor.seal, _seal(anchor.seq, anchor.hash, create))


def head_of(store: EventStore) -> tuple[int, str] | None:
    """(last seq, its hash) of the log, or None when it is empty."""
    last = store.last_seq()
    if last == 0:
        return None
    recorded = next(iter(store.read_all(last, last)), None)
    return None if recorded is None else (recorded.seq, chain_tip(recorded.hash))


def advance_anchor(db: str | os.PathLike[str], seq: int, head: str) -> bool:
    """Seal (seq, head) beside `db` if it is past the current anchor. False if not moved.

    Serialized with ``flock`` so two closing writers never move it backwards. The new
    anchor is written to a temporary file renamed over the old one: a ``verify`` reading
    it meanwhile (it takes no lock), or after a crash, reads a whole anchor, never the
    empty file of a truncate-then-write. (A symlinked anchor stays a link.)
    """
    path = Path(os.path.realpath(anchor_path(db)))
    body = HeadAnchor(seq=seq, hash=head, seal=_seal(seq, head))
    while True:
        try:
            fd = os.open(path, os.O_RDWR | os.O_NONBLOCK)
        except FileNotFoundError:  # the first anchor: appears whole, never empty
            if _create(path, msgspec.json.encode(body)):
                return True
            continue  # (another closer made it first: lock and compare)
        if not stat.S_ISREG(os.fstat(fd).st_mode):  # a FIFO's read waited forever
            os.close(fd)
            raise NotAFile(errno.EINVAL, "not a regular file", str(path))
        os.set_blocking(fd, True)
        with os.fdopen(fd, "r+b") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            if not _still_at(fh.fileno(), path):
                continue  # replaced while this one waited: lock the new one
            raw = read_capped(fh, _MOST_BYTES)
            if raw.strip():
                try:
                    current = msgspec.json.decode(raw, type=HeadAnchor)
                except msgspec.DecodeError:
                    current = None
                if current is not None and current.seq >= seq:
                    return False
            _replace(path, msgspec.json.encode(body))
        return True


def _still_at(fd: int, path: Path) -> bool:
    """Whether the open file `fd` is still the one at `path`."""
    try:
        here = os.stat(path)
    except FileNotFoundError:
        return False
    there = os.fstat(fd)
    return (here.st_dev, here.st_ino) == (there.st_dev, there.st_ino)


def _create(path: Path, body: bytes) -> bool:
    """Make the file `path` holding `body` (0600), written beside it first and linked into
    place (False: one is there already). It appears whole or not at all: an empty anchor
    (the lock target an interrupted first seal left, which ``verify`` called tampered),
    or an empty key file, never shows. Where the file system has no hard links (vfat,
    SMB, some FUSE mounts), it is made in place as before (:func:`_create_in_place`)."""
    temporary = _written_beside(path, body)
    try:
        os.link(temporary, path)
    except FileExistsError:
        return False
    except OSError as exc:
        if exc.errno not in _NO_HARD_LINKS:
            raise
        return _create_in_place(path, body)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
    _sync_folder(path)
    return True


#: what ``link`` says where a file system has no hard links, or none across a mount
_NO_HARD_LINKS = frozenset(
    {errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK, errno.EXDEV}
)


def _create_in_place(path: Path, body: bytes) -> bool:
    """Make `path` with ``O_EXCL`` (False: one is there already), write `body` and sync:
    main's way. Cut short, the file made is removed again (an empty one stays only if the
    removal fails too)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    except FileExistsError:
        return False
    made = os.fstat(fd)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(body)
            out.flush()
            os.fsync(out.fileno())
    except BaseException:
        with contextlib.suppress(OSError):
            if os.path.samestat(made, os.lstat(path)):
                os.unlink(path)
        raise
    _sync_folder(path)
    return True


def _replace(path: Path, body: bytes) -> None:
    """Write `body` to a temporary file beside `path` and rename it over `path`, keeping
    the mode of the file it replaces (0600 for a new one); the folder is synced after."""
    temporary = _written_beside(path, body, keep_mode=True)
    try:
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    _sync_folder(path)


def _written_beside(path: Path, body: bytes, *, keep_mode: bool = False) -> str:
    """A temporary file beside `path` holding `body`, synced (0600, or with `keep_mode`
    the mode of the file at `path`); its name. Removed again if the write fails."""
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as out:
            if keep_mode:
                with contextlib.suppress(FileNotFoundError):
                    os.fchmod(out.fileno(), stat.S_IMODE(os.stat(path).st_mode))
            out.write(body)
            out.flush()
            os.fsync(out.fileno())
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    return temporary


def _sync_folder(path: Path) -> None:
    folder = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(folder)
    finally:
        os.close(folder)


def seal_anchor(store: EventStore, db: str | os.PathLike[str]) -> bool:
    """Advance the anchor beside `db` to the last event of `store`, best effort: False
    when it did not move, or could not (an unwritable folder; a key file that is no key,
    logged as a warning: the anchor stops advancing, which only ``verify`` would say)."""
    if _someone_elses(db):  # root writing a user's ledger: a head sealed under root's
        return False  # key, readable by root alone, made the owner's verify FAILED
    try:
        head = head_of(store)
        return head is not None and advance_anchor(db, *head)
    except InvalidInput as exc:  # (the key file, or the anchor file, is no such file)
        _log.warning("the head anchor was not sealed: %s", exc)
        return False
    except (OSError, CtxLedgerError):
        return False


def check_anchor(
    store: EventStore, db: str | os.PathLike[str], read_only: bool = False
) -> tuple[int | None, str] | None:
    """``(seq, problem)`` when the log contradicts its sealed anchor, else None.
    `read_only` makes no key: NoKey when there is none this user may read, and when
    another user's seal does not verify under this user's key (it is theirs: that is
    no tampering this user can tell; on this user's own anchor it is FAILED)."""
    try:
        anchor = read_anchor(db)
    except (OSError, msgspec.DecodeError) as exc:
        return None, f"the head anchor {anchor_path(db)} cannot be read: {exc}"
    except InvalidInput as exc:  # (it names the file: not a regular one, empty, too large)
        return None, f"{exc}: it cannot be read"
    if anchor is None:
        return None
    if not seal_is_valid(anchor, create=not read_only):
        if _not_ours(db, read_only):
            raise NoKey(FOREIGN_SEAL)
        return None, (
            f"the head anchor {anchor_path(db)} does not carry a valid seal (edited, or sealed "
            "under another key): check the head with --expect-head"
        )
    last = store.last_seq()
    if last < anchor.seq:
        return last + 1, (
            f"the log ends at seq {last} but its sealed head anchor records seq {anchor.seq} "
            f"(hash {anchor.hash}): the newest events were deleted"
        )
    recorded = next(iter(store.read_all(anchor.seq, anchor.seq)), None)
    if recorded is None or chain_tip(recorded.hash) != chain_tip(anchor.hash):
        return anchor.seq, (
            f"the event at seq {anchor.seq} is not the one the sealed head anchor records "
            f"(hash {anchor.hash}): the log was truncated and rewritten from here"
        )
    return None


def _failed(report: VerifyReport, seq: int | None, problem: str) -> VerifyReport:
    return msgspec.structs.replace(
        report, ok=False, first_bad_seq=seq, first_bad_event_id=None, problem=problem
    )


def _check_derived(store: EventStore, report: VerifyReport) -> VerifyReport:
    """`report`, failed at the first long message whose stored derived value (a cache
    outside the hash chain, trusted by audits and what-ifs) differs from its
    recomputation; the value is named by its blob ref and kind (read-only)."""
    for wrong in differing_values(store):
        return _failed(
            report,
            wrong.seq,
            f"the derived value {shown(wrong.kind)} of content {wrong.ref} differs from its "
            "recomputation (`ctxledger upgrade` replaces it)",
        )
    return report


def _derived_checked(store: EventStore, report: VerifyReport) -> VerifyReport:
    """:func:`_check_derived`, run after the log's lock-free read was found unchanged.

    The recomputation can take seconds (its cost depends on the contents), so a writer
    that starts meanwhile must not turn the consistent read of the log into a "changed
    meanwhile": a clean result stands. A difference, or an error, is reported only
    while the file is still unchanged (a torn read may have caused it); else the
    "changed meanwhile" error tells the user to run the check again."""
    try:
        checked = _check_derived(store, report)
    except CtxLedgerError:
        store.check_unchanged()
        raise
    if not checked.ok:
        store.check_unchanged()
    return checked


def _bad_expected(expect: str) -> InvalidInput:
    return InvalidInput(
        f"--expect-head takes HASH or SEQ:HASH, the head `ctxledger verify` prints (a hash is "
        f"64 hex characters, SEQ a sequence number), got {shown(expect)}"
    )


def parse_expected(expect: str) -> tuple[int | None, str]:
    """``(seq or None, hash)`` of an ``--expect-head`` value; InvalidInput if it is not one."""
    seq_text, _, want = expect.strip().rpartition(":")
    want = want.lower()
    if not want or any(c not in "0123456789abcdef" for c in want):
        raise _bad_expected(expect)
    if not seq_text:
        if len(want) != 64:
            raise _bad_expected(expect)
        return None, want
    if not (seq_text.isascii() and seq_text.isdigit()):  # (int() took "1_0", "+1", "١")
        raise _bad_expected(expect)
    return int(seq_text), want


def _check_expected(store: EventStore, report: VerifyReport, expect: str) -> VerifyReport:
    """``HASH``: the head must be that hash; ``SEQ:HASH``: the event at SEQ must have it."""
    seq, want = parse_expected(expect)
    if seq is None:
        if report.head_hash == want:
            return report
        return _failed(
            report,
            report.head_seq,
            f"the head is seq {report.head_seq} hash {report.head_hash}, expected {want}",
        )
    if seq > store.last_seq():
        if len(want) != 64:
            raise _bad_expected(expect)
        return _failed(
            report,
            store.last_seq() + 1,
            f"the log ends at seq {store.last_seq()}, expected an event {seq} with hash {want}: "
            "the newest events were deleted",
        )
    recorded = next(iter(store.read_all(seq, seq)), None)
    tip = chain_tip(recorded.hash) if recorded is not None else ""
    if recorded is not None and len(tip) != 64:
        # inside a linked append a row holds only its crc32 locator, which seals nothing
        raise InvalidInput(
            f"seq {seq} is inside an append, whose rows carry no chain value: name a seq "
            "that ends an append (the head verify prints always does)"
        )
    if len(want) != 64:
        raise _bad_expected(expect)
    if recorded is None or want != tip:
        return _failed(
            report, seq, f"the event at seq {seq} does not have the expected hash {want}"
        )
    return report


def verify_file(
    path: str | os.PathLike[str],
    *,
    expect_head: str | None = None,
    seal: bool = True,
    tell: Callable[[str], None] | None = None,
    derived: bool = False,
) -> VerifyReport:
    """Check a ledger without folding it: the store's walk, its anchor, `expect_head`,
    and with `derived` the stored derived values against their recomputation (opt-in:
    its cost depends on the long contents, ~0.15 s per 350 KB of tool-like text).

    The store is opened directly (no projection is built, so an undecodable payload
    or a deleted row is reported at its seq, not raised while folding). After a clean
    walk the anchor is advanced to the verified head when `seal` is set. A server
    ledger (a ``postgresql://`` URL) has no anchor file: its walk and `expect_head`.
    A ledger an older ctxledger wrote, read as it is, is told to `tell` (one line).
    """
    path = target_text(path)  # the file every step below opens ("~/x.db" expanded)
    server = is_url(path)
    if expect_head is not None:  # ("" was no check at all: `--expect-head "$UNSET"` passed)
        parse_expected(expect_head)  # bad input is refused before the walk
    require_ledger_file(path)
    store: EventStore
    if server:
        store, read_only = open_store(path, existing=True), False
    else:  # (read-only again when a writable open failed for writing only: a full disk;
        # a SQLite database holding no table is refused, never made a ledger by a check)
        lite, why = open_for_reading(
            path, lambda ro: SQLiteEventStore(path, read_only=ro, existing=not ro), tell
        )
        # (a ledger an older ctxledger wrote is read as is, never migrated: its anchor is
        # still checked and sealed beside it, as any ledger's this process may write)
        store, read_only = lite, lite.read_only and why != OLDER
    try:
        report = store.verify()
        if report.ok and not server:
            try:
                found = check_anchor(store, path, read_only)
            except NoKey as exc:
                found, report = None, msgspec.structs.replace(report, warning=exc.warning)
            if found is not None:
                report = _failed(report, *found)
        if report.ok and expect_head is not None:
            report = _check_expected(store, report, expect_head)
        store.check_unchanged()  # (a lock-free read: the anchor and head were read after)
        if report.ok and derived:
            report = _derived_checked(store, report)
        if server:
            return report
        sealing = seal and not read_only  # (it writes beside the file)
        if report.ok and sealing and report.head_seq is not None and report.head_hash is not None:
            with contextlib.suppress(OSError):
                advance_anchor(path, report.head_seq, report.head_hash)
        return report
    finally:
        store.close()


__all__ = [
    "FOREIGN_SEAL",
    "NO_KEY",
    "HeadAnchor",
    "NoKey",
    "advance_anchor",
    "anchor_path",
    "check_anchor",
    "head_of",
    "read_anchor",
    "seal_is_valid",
    "verify_file",
]
