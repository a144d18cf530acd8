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

__all__ = ["escape_follows", "escape_spans", "unescaped"]

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


def _escaped_lines(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` of the lines of `text` that show they are escaped (a line ends
    at a newline or a NUL), in order; consecutive ones as one stretch (no escape spans
    a line's end, so a stretch is blanked as its lines would be)."""
    if "\\" not in text:
        return []
    nul = "\x00" in text
    lines: list[tuple[int, int]] = []
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
        if lines and lines[-1][1] + 1 == start:  # the next line: one stretch (fewer calls)
            lines[-1] = (lines[-1][0], end)
        else:
            lines.append((start, end))
        match = _EVIDENCE.search(text, end)
    return lines


def _blanked(line: str, follows: dict[str, None] | None) -> str:
    """`line` with its escapes blanked: its escaped backslashes (pairs, read from the
    left) set aside, every ``\\n``, ``\\r``, ``\\t`` left made two blanks, the pairs put
    back (C-level replacements: an escaped JSON line holds thousands of escapes). With
    `follows`, what follows two blanks up to a blank goes there."""
    if _PAIR_MARK in line:  # (the mark is taken: one escape at a time)
        blanked = _ESCAPE.sub(lambda m: "  " if m.group(1) else m.group(), line)
    else:
        pairs_aside = line.replace("\\\\", _PAIR_MARK * 2)
        blanked = _SINGLE.sub("  ", pairs_aside).replace(_PAIR_MARK * 2, "\\\\")
    if follows is not None:
        follows.update(dict.fromkeys(_FOLLOWS.findall(blanked)))
    return blanked


_PAIR_MARK = "\x01"
_SINGLE = re.compile(r"\\[nrt]")
#: two blanks (a blanked escape's, or the line's own) and what follows up to a blank
_FOLLOWS = re.compile(r"  (\S+)")


def unescaped(text: str) -> str | None:
    """`text` with the ``\\n``, ``\\r`` and ``\\t`` escapes of its escaped lines blanked
    (same length), or None when it has no escaped line."""
    lines = _escaped_lines(text)
    return None if not lines else _joined(text, lines, None)


def escape_follows(text: str) -> list[str] | None:
    """The words that follow two blanks on the escaped lines of `text` once blanked, each
    once (a fact found in :func:`unescaped` and not in `text` starts one of them: the
    blanks of an escape before it are what changed), or None when it has no escaped
    line."""
    lines = _escaped_lines(text)
    if not lines:
        return None
    follows: dict[str, None] = {}  # (each word once: the answers depend on the set)
    for start, end in lines:
        _blanked(text[start:end], follows)
    return list(follows)


def _joined(text: str, lines: list[tuple[int, int]], follows: dict[str, None] | None) -> str:
    out: list[str] = []
    done = 0
    for start, end in lines:
        out.append(text[done:start])
        out.append(_blanked(text[start:end], follows))
        done = end
    out.append(text[done:])
    return "".join(out)


def escape_spans(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` of the escapes :func:`unescaped` blanks, in order."""
    blanked = unescaped(text)
    if blanked is None:
        return []
    return [(i, i + 2) for i in range(len(text) - 1) if blanked[i] == " " != text[i]]
