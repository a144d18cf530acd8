"""Printing data to a terminal without letting it act on the terminal.

Everything that comes from data (transcripts, ids, paths, notes) is shown as text:
rich markup is never interpreted and control characters (ESC, BEL, CR, ...) are shown
as ``\\xNN``. Styling is applied only through :func:`styled` parts that ctxledger's
own code builds. The CLI and the demo print through :class:`PlainConsole`.
"""

from __future__ import annotations

import re
from typing import Any

from rich.console import Console
from rich.text import Text

__all__ = ["PlainConsole", "plain", "styled"]

#: C0/C1 control characters except newline and tab: a terminal would act on them
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _visible(match: re.Match[str]) -> str:
    return f"\\x{ord(match.group()):02x}"


def plain(text: object) -> str:
    """`text` made safe for a terminal: control characters (ESC, BEL, CR, ...) shown as
    ``\\xNN`` so an escape sequence from a transcript is printed, never obeyed."""
    s = str(text)
    return _CONTROL.sub(_visible, s) if _CONTROL.search(s) else s


class PlainConsole(Console):
    """A console that never interprets data: no markup, no control sequences.

    Every string it renders (``print`` arguments, table cells, progress labels) goes
    through :func:`plain` with markup off; styling is applied only through
    :func:`styled` ``Text`` objects built by the CLI itself.
    """

    def render_str(self, text: str, **kwargs: Any) -> Text:
        kwargs["markup"] = False
        return super().render_str(plain(text), **kwargs)


def styled(*parts: object) -> Text:
    """A line from parts: a ``(text, style)`` tuple is styled, anything else is plain
    data. Every part is neutralized by :func:`plain`."""
    out = Text()
    for part in parts:
        if isinstance(part, tuple):
            text, style = part
            out.append(plain(text), style=style)
        else:
            out.append(plain(part))
    return out
