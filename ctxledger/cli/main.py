"""The ``ctxledger`` command (click + rich). Each command module registers on ``cli``."""

from __future__ import annotations

import contextlib
import os
import select
import signal
import sys
from collections.abc import Iterator

from ctxledger.cli import analysis as _analysis  # noqa: F401  (registers commands)
from ctxledger.cli import compress as _compress  # noqa: F401
from ctxledger.cli import config_command as _config_command  # noqa: F401
from ctxledger.cli import demo as _demo  # noqa: F401
from ctxledger.cli import export_commands as _export_commands  # noqa: F401
from ctxledger.cli import ledger_commands as _ledger_commands  # noqa: F401
from ctxledger.cli import migrate as _migrate  # noqa: F401
from ctxledger.cli import serve as _serve  # noqa: F401
from ctxledger.cli.app import cli
from ctxledger.cli.interrupt import interrupted

#: the exit status of a command whose output was cut because its reader left
#: (``ctxledger show S | head -1``): 128 + SIGPIPE, what a shell reports for a process a
#: pipe cut killed (``yes | head -1``), so it is told from 1 (drift, a bad log, a failure)
PIPE_CUT = 141


def main() -> None:
    with _pipe_watch() as cut:
        try:
            try:
                cli(prog_name="ctxledger")
            except KeyboardInterrupt:  # (outside a command: parsing, closing the ledger)
                interrupted()
        except (SystemExit, BrokenPipeError):
            # (a BrokenPipeError escapes when click's own usage-error print is cut;
            # poll first: entering a function runs a SIGPIPE handler still pending)
            if _reader_left() and cut:  # whatever the command would have said: unread
                _silence()
                raise SystemExit(PIPE_CUT) from None
            raise


@contextlib.contextmanager
def _pipe_watch() -> Iterator[list[int]]:
    """A flag, a list of one item once SIGPIPE arrived (the last signal, never more:
    ``serve`` gets one per write to each client that hung up): a write lost data to a
    pipe or socket whose reader left. SIGPIPE stays harmless (a handler only sets the
    flag, a write fails with EPIPE): its default would kill ``serve`` on a client that
    hangs up. A flag is needed beside click's EPIPE handling (exit 1): a large write cut
    part-way returns short without an error, and the command went on to exit 0."""
    arrived: list[int] = []

    def note(signum: int, _frame: object) -> None:
        arrived[:] = [signum]

    try:
        before = signal.signal(signal.SIGPIPE, note)
    except (AttributeError, ValueError):  # no SIGPIPE (Windows), or not the main thread
        yield arrived
        return
    try:
        yield arrived
    finally:
        signal.signal(signal.SIGPIPE, before)


def _reader_left() -> bool:
    """Whether stdout's or stderr's reader has left (Linux flags a pipe's write end
    POLLERR then, a socket's too): a SIGPIPE for a client socket of ``serve`` whose
    own output is still read is not a cut. BSD kernels flag it POLLHUP. False where
    there is no ``poll`` (Windows, which has no SIGPIPE either)."""
    if not hasattr(select, "poll"):
        return False
    poller = select.poll()
    for fd in (1, 2):
        poller.register(fd, select.POLLOUT)
    left = select.POLLERR | select.POLLHUP
    return any(events & left for _fd, events in poller.poll(0))


def _silence() -> None:
    """Send what is left to write to /dev/null: the interpreter's last flush of stdout
    and stderr, into the cut pipe, would print ``BrokenPipeError`` on the way out."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError, AttributeError):
            os.dup2(devnull, stream.fileno())
    os.close(devnull)


__all__ = ["PIPE_CUT", "cli", "main"]

if __name__ == "__main__":  # `python -m ctxledger.cli.main` (`python -m ctxledger` is quieter)
    main()
