"""Progress spinners for long calls (a summary request) and long replays.

A spinner is drawn on **stderr**, only when stderr is a terminal and ``--quiet`` was
not given, and is erased when the work ends: stdout (``--json`` included) never holds
a byte of it. Texts are shown as plain text, never as rich markup, and the ids in them
through :func:`~ctxledger.terminal.inline` (rich's ``Text`` keeps ESC and bidi controls).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import click
from rich.console import Console
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from ctxledger.cli.app import state_of
from ctxledger.terminal import inline

#: called back with (done, total) by work that knows how far it is
Advance = Callable[[int, int], None]


def err_console() -> Console:
    """The console spinners draw on (a function, so a test can give a terminal one)."""
    return Console(stderr=True, highlight=False)


def _active(ctx: click.Context) -> Console | None:
    if state_of(ctx).quiet:
        return None
    console = err_console()
    return console if console.is_terminal else None


def _text_column() -> TextColumn:
    # the task's description, not `text` as the column's format string: a user's ref
    # with braces in it must be shown as typed, not formatted
    return TextColumn("{task.description}", markup=False)


@contextmanager
def spinner(ctx: click.Context, text: str) -> Iterator[None]:
    """A spinner with `text` and the time elapsed while the block runs."""
    console = _active(ctx)
    if console is None:
        yield
        return
    columns = (SpinnerColumn(), _text_column(), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=True) as bar:
        bar.add_task(inline(text), total=None)
        yield


@contextmanager
def progress_bar(ctx: click.Context, text: str, total: int) -> Iterator[Advance]:
    """A bar for work that reports (done, total); yields the callback to give it."""
    console = _active(ctx)
    if console is None:
        yield lambda done, total: None
        return
    columns = (
        SpinnerColumn(),
        _text_column(),
        BarColumn(),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=console, transient=True) as bar:
        task = bar.add_task(inline(text), total=total)
        yield lambda done, total: bar.update(task, completed=done, total=total)
