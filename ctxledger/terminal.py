"""Printing data to a terminal without letting it act on the terminal.

Everything that comes from data (transcripts, ids, paths, notes) is shown as text:
rich markup is never interpreted, control characters (ESC, BEL, CR, ...) are shown as
``\\x1b`` (two hex digits) and bidi controls (U+202E RIGHT-TO-LEFT OVERRIDE, ...) as
``\\u202e`` (four), so a hostile id can neither forge a line nor reverse the text
after it. Two forms:

* :func:`inline`: one line (table cells, ids, labels): newline, tab, the bidi marks and
  invisible characters (zero-width space, word joiner, BOM, soft hyphen) are escaped
  too, so one id cannot pass for another.
  :class:`PlainConsole` renders every string this way, and :func:`styled` parts.
* :func:`plain` / :func:`block`: multi-line text (a message's content): newline and tab
  are kept, and so are the bidi marks of right-to-left prose (LRM, RLM, ALM: they move
  no text past their neighbours); everything else is escaped as above.

Styling is applied only through :func:`styled` parts that ctxledger's own code builds.
The CLI and the demo print through :class:`PlainConsole`.
"""

from __future__ import annotations

import errno
import os
from typing import Any

from rich.console import Console
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from ctxledger.integers import BIDI_CONTROLS, NOT_PRINTED, printable, visible

__all__ = ["BIDI_CONTROLS", "TABLE_MIN_WIDTH", "PlainConsole", "block", "inline", "plain", "styled"]


def plain(text: object) -> str:
    """`text` made safe for a terminal, lines kept: control characters (ESC, BEL, CR, ...)
    shown as ``\\x1b`` and bidi controls as ``\\u202e``, so an escape sequence from a
    transcript is printed, never obeyed."""
    return visible(NOT_PRINTED, str(text))


def inline(text: object) -> str:
    """`text` as one line of plain text: like :func:`plain`, and a newline is shown as
    ``\\n``, a tab as ``\\t`` (an id or a model name cannot start a forged line). The
    characters escaped are the library's errors' (``integers.printable``): one set."""
    return printable(str(text))


def block(text: object) -> Text:
    """Multi-line data (a message's text) for :meth:`PlainConsole.print`: its lines kept,
    everything else neutralized by :func:`plain`."""
    return Text(plain(text))


#: the narrowest a table is laid out (see :meth:`PlainConsole.print`): the width the
#: CLI's tables are written for
TABLE_MIN_WIDTH = 80


class PlainConsole(Console):
    """A console that never interprets data: no markup, no control sequences.

    Every string it renders (``print`` arguments, table cells, progress labels) goes
    through :func:`inline` with markup and emoji codes (``:smile:``) off, so it stays on its line; multi-line data is
    printed as a :func:`block`. Styling is applied only through :func:`styled` ``Text``
    objects built by the CLI itself.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self._width is not None and self._width < 1:  # COLUMNS=0: rich printed no line
            self._width = None  # rich then reads COLUMNS=0 as 80 when it sizes the console

    def render_str(self, text: str, **kwargs: Any) -> Text:
        kwargs["markup"] = False
        kwargs["emoji"] = False  # (`:smile:` in a message was printed as 😄 by `recall`)
        return super().render_str(inline(text), **kwargs)

    def print(self, *objects: Any, **kwargs: Any) -> None:
        """As :meth:`Console.print`, but a table on a console narrower than
        :data:`TABLE_MIN_WIDTH` is laid out as wide as its cells need, up to that width:
        as it is on a console that wide (the terminal wraps the longer lines). Squeezed
        into the console, columns were cut to nothing and an id cropped without a mark."""
        table = objects[0] if len(objects) == 1 else None
        if not isinstance(table, Table) or self.width >= TABLE_MIN_WIDTH:
            super().print(*objects, **kwargs)
            return
        wide = self.options.update_width(TABLE_MIN_WIDTH)
        need = Measurement.get(self, wide, table).maximum  # (at most the width of `wide`)
        saved = self._width
        self.width = max(self.width, need)
        try:
            super().print(table, **kwargs)
        finally:
            self._width = saved

    def on_broken_pipe(self) -> None:
        """Let the EPIPE go up, as a ``click.echo``'s does, to the one place the CLI
        handles a reader that left (``ctxledger.cli.main``). rich's own answer exits 1
        (the status of a failure) after pointing stdout at /dev/null, even for a console
        on stderr."""
        self.quiet = True  # (anything printed later on the way out is dropped)
        raise BrokenPipeError(errno.EPIPE, os.strerror(errno.EPIPE))


def styled(*parts: object) -> Text:
    """A line from parts: a ``(text, style)`` tuple is styled, anything else is plain
    data. Every part is neutralized by :func:`inline`."""
    out = Text()
    for part in parts:
        if isinstance(part, tuple):
            text, style = part
            out.append(inline(text), style=style)
        else:
            out.append(inline(part))
    return out
