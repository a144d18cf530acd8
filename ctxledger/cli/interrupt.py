"""Ctrl-C: every command stops at once, says so in one line and exits 130 (session 42).

A ``KeyboardInterrupt`` is turned into one plain line on stderr and the exit status
:data:`INTERRUPTED` (128 + SIGINT, what a shell reports), by ``handle_errors`` around a
command and by the root group around the rest (click alone printed ``Aborted!`` and
exited 1, and a traceback escaped past it). What an append had begun is rolled back by
the store; what was committed before stays (a ledger the command made is kept, as a
command that failed keeps it: :mod:`ctxledger.eventstore.leftovers`); a what-if's
``--out`` is removed.

``anyio.run`` (``compress``, ``demo``, a what-if, ``trajectories compress``) runs on an
``asyncio.Runner``, whose own SIGINT handler only cancels the main task: synchronous work
(a compaction's plan and its append) went on to the end, and the command then said it was
interrupted with the compaction recorded. :func:`raw_interrupts` keeps Python's own
behaviour (the interrupt raised where the code is) for the command's whole run.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from collections.abc import Iterator
from types import FrameType
from typing import NoReturn

import click

__all__ = [
    "INTERRUPTED",
    "ignoring_interrupts",
    "interrupted",
    "raw_interrupts",
    "restored_interrupts",
]

#: the exit status of a command stopped by Ctrl-C: 128 + SIGINT, as a shell reports it
INTERRUPTED = 130


def interrupted() -> NoReturn:
    """Say that Ctrl-C stopped the command, in one line, and exit :data:`INTERRUPTED`.
    A second Ctrl-C is ignored from here on: what is left is closing the ledger (and
    removing a ``.lock`` a failed command made), which a traceback would only cut short."""
    with contextlib.suppress(ValueError, OSError):  # (not the main thread: left as is)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    with contextlib.suppress(OSError, ValueError):
        # (on a terminal, after the "^C" it shows: a line of its own, as click does)
        start = "\n" if sys.stderr.isatty() else ""
        click.echo(f"{start}interrupted (Ctrl-C): stopped; no append is left half-done", err=True)
    sys.exit(INTERRUPTED)


def _raise_interrupt(_signum: int, _frame: FrameType | None) -> None:
    # a second Ctrl-C is ignored from the first: the finally blocks it unwinds through
    # (a demo's ledger close sealing its head, a what-if's scratch ledger) run to the end
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    raise KeyboardInterrupt


@contextlib.contextmanager
def ignoring_interrupts() -> Iterator[None]:
    """SIGINT is ignored inside (closing the ledger: its seal, the tidy of a failed
    command), then the handler before is back. Ignored rather than blocked: a blocked
    SIGINT may be taken by another thread, or come when unblocked as ``Aborted!``, exit 1,
    after a command that succeeded. Nothing changes off the main thread."""
    try:
        before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    except ValueError:  # (not the main thread)
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)


@contextlib.contextmanager
def raw_interrupts() -> Iterator[None]:
    """SIGINT raises ``KeyboardInterrupt`` where the code is, inside ``anyio.run`` too:
    a handler that is not ``signal.default_int_handler`` (which ``asyncio.Runner``
    replaces with its task-cancelling one) but does what it does. Nothing changes off the
    main thread, or where SIGINT is ignored (``nohup``) or handled by someone else."""
    if (
        threading.current_thread() is not threading.main_thread()
        or signal.getsignal(signal.SIGINT) is not signal.default_int_handler
    ):
        yield
        return
    signal.signal(signal.SIGINT, _raise_interrupt)
    stopped = False
    try:
        yield
    except KeyboardInterrupt:
        stopped = True  # (SIGINT stays ignored: interrupted() is next, then the close)
        raise
    finally:
        if not stopped and signal.getsignal(signal.SIGINT) in (_raise_interrupt, signal.SIG_IGN):
            signal.signal(signal.SIGINT, signal.default_int_handler)


@contextlib.contextmanager
def restored_interrupts() -> Iterator[None]:
    """The SIGINT handler found on entry is back on exit (the root group's ``main``):
    :func:`interrupted` ignores SIGINT until the process ends, which a host that runs the
    command in its own process (a test's ``CliRunner``) must not inherit."""
    try:
        before = signal.getsignal(signal.SIGINT)
    except ValueError:  # pragma: no cover
        before = None
    try:
        yield
    finally:
        if before is not None and threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, before)
