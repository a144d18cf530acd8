"""Escaped newlines and tabs in a line of text: a JSON string's, not path separators.

A tool output printed as a JSON string writes a listing as ``"docs\\nsetup.py\\n"``:
its ``\\n`` is a newline, while the same characters outside such a string may be a
relative Windows path (``docs\\nsetup.py``, ``src\\tests\\app.py``). Neither shape
alone tells them apart (PowerShell and cmd quote a path without escapes: ``"src\\new.py"``),
so only a line that shows it is escaped is read as escaped: one holding a ``\\n`` that
no path can hold, before a blank, a quote, a closing bracket, a ``,``, ``;``, another
backslash or the line's end (``"…\\n"``, ``\\n\\n``), or a ``\\r\\n``. On such a line every
``\\n``, ``\\r`` and ``\\t`` whose backslash is no escaped backslash (an odd run: ``\\\\n``
is a backslash and an ``n``) is an escape, and :func:`escape_spans` gives their spans.

The extraction blanks them before it looks for paths (``setup.py``, not the path
``docs\\nsetup.py`` nor ``nsetup.py``); the matcher reads a text with such lines a
second time with them blanked, so a fact found that way is found in its own text.
"""

from __future__ import annotations

import re

__all__ = ["escape_spans", "unescaped"]

#: a ``\\n`` no path can hold (before a blank, a quote, a closing bracket, ``,``, ``;``,
#: a backslash, a line's end, or a JOIN of the matcher), or a ``\\r\\n``
_EVIDENCE = re.compile(r"\\(?:n(?=[\s\"',;)\]}\\\x00]|\Z)|r\\n)")
#: from a backslash: an escaped backslash (a pair), or an escape (group 1)
_ESCAPE = re.compile(r"\\(?:\\|([nrt]))")


def _escaped(text: str, at: int) -> bool:
    """Whether the backslash at `at` escapes the next character (an even run before it)."""
    first = at
    while first > 0 and text[first - 1] == "\\":
        first -= 1
    return (at - first) % 2 == 0


def escape_spans(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` of the ``\\n``, ``\\r`` and ``\\t`` escapes of the lines of `text` that
    show they are escaped (a line ends at a newline or a NUL), in order."""
    if "\\" not in text:
        return []
    nul = "\x00" in text
    spans: list[tuple[int, int]] = []
    done = -1  # the end of the last line read
    match = _EVIDENCE.search(text)
    while match is not None:
        at = match.start()
        if not _escaped(text, at):  # (an escaped backslash: an escape may start after it)
            match = _EVIDENCE.search(text, at + 1)
            continue
        start = text.rfind("\n", 0, at) + 1
        end = text.find("\n", at)
        end = len(text) if end == -1 else end
        if nul:
            start = max(start, text.rfind("\x00", start, at) + 1)
            stop = text.find("\x00", at, end)
            end = end if stop == -1 else stop
        for escape in _ESCAPE.finditer(text, start, end):
            if escape.group(1) is not None:
                spans.append(escape.span())
        done = end
        match = _EVIDENCE.search(text, done)
    return spans


def unescaped(text: str) -> str | None:
    """`text` with the escapes of :func:`escape_spans` blanked (same length), or None
    when it has none."""
    spans = escape_spans(text)
    if not spans:
        return None
    out: list[str] = []
    done = 0
    for start, end in spans:
        out.append(text[done:start])
        out.append(" " * (end - start))
        done = end
    out.append(text[done:])
    return "".join(out)
