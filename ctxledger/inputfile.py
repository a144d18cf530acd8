"""The one rule for a file a user names as input (a config file, a token file, a file
to import, trajectories to compress, an output read back to resume).

Read: a regular file, a FIFO or a pipe (``--config <(echo 'threshold = 0.6')`` names
``/dev/fd/63``, a pipe), and ``/dev/null`` (nothing). Refused, naming what it is: a
directory, a socket and any other device (``/dev/zero`` was read until memory ran out).
The file is opened non-blocking (opening a FIFO that has no writer waited forever); a
FIFO then waits up to :data:`WRITER_WAIT` seconds for a writer (a producer started
just after ctxledger, ``ctxledger --config f & producer > f``: read at once as empty,
its settings were lost and the producer hung), else it is refused naming the wait.
Then the file is set back to blocking to read (a writer still writing is waited for).
The caller caps what it reads (:func:`read_capped`).
"""

from __future__ import annotations

import errno
import os
import select
import stat
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from ctxledger.errors import InvalidInput
from ctxledger.integers import printable, shown

__all__ = [
    "WRITER_WAIT",
    "NotAFile",
    "file_kind",
    "is_stream",
    "open_input",
    "path_exists",
    "path_text",
    "read_capped",
    "readable_kind",
    "shown_path",
]

#: how much of a path a message shows (a 5000-character name was shown whole)
SHOWN_PATH = 200
#: seconds a FIFO opened for input waits for a program to open it for writing
WRITER_WAIT = 30.0


class NotAFile(OSError):
    """`path` is no file to read (a directory, a socket, a device): an OSError, so what
    callers already say for a file they cannot read covers it (``strerror`` says what)."""


def open_input(path: str | os.PathLike[str], *, pipes: bool = True) -> BinaryIO:
    """`path` opened for binary reads if it is a file to read (see the module); else
    NotAFile (OSError for a missing or unreadable one). ``pipes=False``: a regular file
    only (one read twice, or opened again by name: a SQLite database)."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        mode = os.fstat(fd).st_mode
        if not (stat.S_ISREG(mode) or (pipes and readable_kind(fd, mode))):
            raise NotAFile(errno.EINVAL, f"not a regular file ({file_kind(mode)})", str(path))
        if stat.S_ISFIFO(mode) and not _writer_came(fd):
            raise NotAFile(
                errno.ETIMEDOUT,
                f"a FIFO that no program opened for writing within {WRITER_WAIT:g} s",
                str(path),
            )
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return os.fdopen(fd, "rb")


def _writer_came(fd: int) -> bool:
    """Whether a writer has opened the FIFO or pipe `fd` (open non-blocking) within
    WRITER_WAIT: it wrote (readable) or came and went (hung up). Before any writer
    came, a read gives end of file at once, which is what was wrong."""
    if not hasattr(select, "poll"):  # (no poll: read as before)
        return True
    poller = select.poll()
    poller.register(fd, select.POLLIN | select.POLLHUP)
    return bool(poller.poll(int(WRITER_WAIT * 1000)))


def readable_kind(fd: int, mode: int) -> bool:
    """Whether what `fd` is open on, not a regular file, is still read as one: a FIFO or a
    pipe, or ``/dev/null``."""
    return _stream(mode, os.fstat(fd).st_rdev)


def _stream(mode: int, rdev: int) -> bool:
    """A FIFO or pipe, or ``/dev/null`` (by its mode and device number)."""
    return stat.S_ISFIFO(mode) or (stat.S_ISCHR(mode) and rdev == _devnull_rdev())


def _devnull_rdev() -> int | None:
    try:
        return os.stat(os.devnull).st_rdev
    except OSError:
        return None


def file_kind(mode: int) -> str:
    """What a file that is not a regular one is, in words."""
    for test, name in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return name
    return "not a plain file"


def read_capped(fh: BinaryIO, limit: int, expected: int = 0) -> bytes:
    """What `fh` holds up to one byte past `limit`, read `expected` bytes (its size, when
    known) at a time: ``read(limit + 1)`` allocates that much first, so a large limit
    (``--max-bytes 10**12``) failed with an OverflowError or a MemoryError."""
    chunks: list[bytes] = []
    size = 0
    step = max(expected, _STEP) + 1
    while size <= limit:
        chunk = fh.read(min(step, limit + 1 - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)  # one chunk (a file read whole): returned as it is, not copied


#: how much a read of an input of unknown size asks for at a time
_STEP = 1 << 20


def is_stream(path: str | os.PathLike[str]) -> bool:
    """Whether an existing `path` is a FIFO or ``/dev/null``: written to, never read back."""
    try:
        info = Path(path).stat()
    except OSError:
        return False
    return _stream(info.st_mode, info.st_rdev)


def shown_path(path: str | os.PathLike[str]) -> str:
    """`path` as a message shows it: cut at :data:`SHOWN_PATH` characters, a character a
    terminal would act on escaped (a file name may hold ESC)."""
    text = os.fspath(path)
    return printable(text if len(text) <= SHOWN_PATH else text[:SHOWN_PATH] + "…")


def path_text(
    path: object,
    what: str,
    error: type[InvalidInput] = InvalidInput,
    *,
    expected: str = "must be text or a path",
    named: Callable[[str], str] | None = None,
    noun: str | Callable[[str], str] = "file name",
) -> str:
    """`path` (text, bytes or path-like) as text, else `error`: a number was a TypeError,
    a NUL a ValueError and a lone surrogate a UnicodeEncodeError from the open; no
    `noun` (of the text) holds either. The messages read "`what` `expected`, got int"
    and "`named` (of the text) holds a NUL character, which no `noun` can" (`named` by
    default: `what` and the text quoted short)."""
    if not isinstance(path, str | bytes | os.PathLike):
        raise error(f"{what} {expected}, got {type(path).__name__}")
    text = os.fsdecode(path)
    name = named or (lambda text: f"{what} {shown(text)}")
    kind = noun if isinstance(noun, str) else noun(text)
    if "\x00" in text:
        raise error(f"{name(text)} holds a NUL character, which no {kind} can")
    try:  # ('\udcff' is byte 0xff: a name can hold it; '\ud800' no file system can)
        os.fsencode(text)
    except UnicodeEncodeError:
        raise error(f"{name(text)} holds a lone surrogate, which no {kind} can") from None
    return text


def stat_of(path: str | os.PathLike[str], what: str) -> os.stat_result | None:
    """`path`'s stat, None when nothing is there; InvalidInput naming it as `what` (``--out``)
    for a name no file can have: one over the system's limit was an OSError traceback
    (session 39). A NUL or an unpaired surrogate is no such file either."""
    try:
        return os.stat(path)
    except (FileNotFoundError, NotADirectoryError, ValueError):  # (ValueError: a NUL)
        return None
    except OSError as exc:
        raise InvalidInput(f"{what} {shown_path(path)} cannot be used: {exc.strerror}") from None


def path_exists(path: str | os.PathLike[str], what: str) -> bool:
    """Whether anything is at `path`, a user named as `what` (see :func:`stat_of`)."""
    return stat_of(path, what) is not None
