"""Drive the real ``ctxledger`` command on a pseudo-terminal and press Ctrl-C (session 42).

:func:`interrupt` forks the command with :func:`pty.fork`, so it runs as the foreground
process group of its own terminal, as in a shell; Ctrl-C is the byte ``\\x03`` written
to the terminal, which the kernel's line discipline turns into SIGINT for that group (a
``kill -INT`` of a background job is ignored: session 41's void probe). The child
resets SIGINT to its default first: a test runner started in the background of a
non-interactive shell ignores it, and an ignored SIGINT is inherited through ``exec``.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pty
import select
import signal
import struct
import sys
import termios
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

#: the longest a command gets to start, to reach the point where Ctrl-C is pressed, or to end
WAIT_S = 60.0


@dataclass
class Interrupted:
    pid: int  # the command's process id, and its session's
    status: int | None  # the exit status (None: it did not end; it was killed)
    output: str  # what the terminal showed (stdout and stderr, CRLF as LF)
    signalled: int | None  # the signal that ended it, if one did


def interrupt(
    args: Sequence[str],
    *,
    cwd: str,
    env: Mapping[str, str],
    ready: Callable[[str], bool],
    stdin_file: str | None = None,
) -> Interrupted:
    """Run ``python -m ctxledger ARGS`` on a terminal, press Ctrl-C once `ready` holds of
    what it printed so far (or of nothing, checked every 10 ms), and wait for its end."""
    pid, master = pty.fork()
    if pid == 0:  # the child: its terminal is the pty's other end
        try:
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.chdir(cwd)
            if stdin_file is not None:
                fd = os.open(stdin_file, os.O_RDONLY)
                os.dup2(fd, 0)
            argv = [sys.executable, "-m", "ctxledger", *args]
            os.execve(sys.executable, argv, dict(env))
        finally:
            os._exit(127)
    seen = bytearray()
    try:
        _read_until(master, seen, lambda: ready(_text(seen)))
        os.write(master, b"\x03")
        _read_until(master, seen, lambda: False)  # to the end of its output
        return _reaped(pid, seen)
    except BaseException:  # (a timeout, a test's own Ctrl-C): no child left running
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        raise
    finally:
        os.close(master)


def unread(fd: int) -> int:
    """How many bytes written to a pipe (`fd`, its writing end) no reader has read yet:
    0 once the command read them all and waits for more."""
    return struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"))[0]


def _read_until(master: int, seen: bytearray, done: Callable[[], bool]) -> None:
    deadline = time.monotonic() + WAIT_S
    while not done():
        if time.monotonic() > deadline:
            raise TimeoutError(f"waited {WAIT_S:.0f} s; the terminal showed: {_text(seen)!r}")
        ready, _, _ = select.select([master], [], [], 0.01)
        if not ready:
            continue
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: every process holding the terminal is gone
            return
        if not chunk:
            return
        seen += chunk


def _reaped(pid: int, seen: bytearray) -> Interrupted:
    deadline = time.monotonic() + WAIT_S
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return Interrupted(pid, None, _text(seen), signal.SIGKILL)
        time.sleep(0.01)
    if os.WIFSIGNALED(status):
        return Interrupted(pid, None, _text(seen), os.WTERMSIG(status))
    return Interrupted(pid, os.WEXITSTATUS(status), _text(seen), None)


def _text(seen: bytearray) -> str:
    return bytes(seen).decode("utf-8", "replace").replace("\r\n", "\n")


def in_session(sid: int) -> list[int]:
    """The processes of session `sid` (Linux /proc): the command's session (its pid,
    :func:`pty.fork` made it a session leader), so a child it left running is found
    even after it was handed to init."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) == sid and fields[0] != "Z":
            found.append(int(entry))
    return found
