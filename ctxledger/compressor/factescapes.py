"""Escaped newlines and tabs in a line of text: a JSON string's, not path separators.

A tool output printed as a JSON string writes a listing as ``"docs\\nsetup.py\\n"``:
its ``\\n`` is a newline, while the same characters outside such a string may be a
relative Windows path (``docs\\nsetup.py``, ``src\\tests\\app.py``). Neither shape
alone tells them apart (PowerShell and cmd quote a path without escapes: ``"src\\new.py"``),
so only a line that shows it is escaped is read as escaped: one holding a ``\\n`` that
no path can hold, before a blank, a quote, a closing bracket, a ``,``, ``;``, another
backslash or the line's end (``"…\\n"``, ``\\n\\n``), or a ``\\r\\n``, and no
single-backslash drive path (``C:\\temp\\notes.txt``: a JSON string doubles its
backslash; ``C:\\notes.txt`` only with a second single backslash, ``C:\\new\\x``: ``C:\\n``
may be a colon and a newline). On such a line, in the quoted string holding the evidence
(between two quotes no backslash escapes, or the line's ends; an apostrophe between two
word characters, ``it's``, is no quote) and in every double-quoted string, every
``\\n``, ``\\r`` and ``\\t``
whose backslash is no escaped backslash (an odd run: ``\\\\n`` is a backslash and an
``n``) is an escape, and :func:`escape_spans` gives their spans: ``sed "s/\\r\\n/\\n/"
src\\tests\\app.py`` keeps its path.

The extraction blanks them before it looks for paths (``setup.py``, not the path
``docs\\nsetup.py`` nor ``nsetup.py``); the matcher reads a text with such lines a
second time with them blanked, so a fact found that way is found in its own text.
"""

from __future__ import annotations

import re

__all__ = ["backslash_after_dots", "escape_follows", "escape_spans", "unescaped"]

#: a ``\\n`` no path can hold (before a blank, a quote, a closing bracket, ``,``, ``;``,
#: a backslash, a line's end, or a JOIN of the matcher), or a ``\\r\\n``
_EVIDENCE = re.compile(r"\\(?:n(?=[\s\"',;)\]}\\\x00]|\Z)|r\\n)")
#: in a word: a drive where a Windows path finder starts one (after no path character,
#: separator or ``:``): it would take in a backslash put back after the word's dots
_DRIVE = re.compile(r"(?<![A-Za-z0-9_.+@~\-/\\:%])[A-Za-z]:[\\/]")
#: from a backslash: an escaped backslash (a pair), or an escape (group 1)
_ESCAPE = re.compile(r"\\(?:\\|([nrt]))")


def _free(text: str, at: int) -> bool:
    """Whether no backslash escapes the character at `at` (an even run of them before it):
    a backslash there escapes the next one, a quote there ends a string."""
    first = at
    while first > 0 and text[first - 1] == "\\":
        first -= 1
    return (at - first) % 2 == 0


def _escaped_lines(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` of the stretches of `text` whose escapes are blanked, in order: on
    a line (it ends at a newline or a NUL) that shows it is escaped and holds no
    single-backslash drive path (``C:\\temp``: a JSON string doubles it), the stretch
    between two quotes (``"``, ``'``, no escaped one) that holds the evidence. Each
    character is looked at a bounded number of times (a long line cut by NULs, or
    holding many quoted strings, is read once)."""
    if "\\" not in text:
        return []
    spans: list[tuple[int, int]] = []
    line = (0, -1, False)  # the last line looked at: start, end, whether it holds a drive path
    done = 0  # where the last stretch (or drive path's line) ended: not looked at again
    match = _EVIDENCE.search(text)
    while match is not None:
        at = match.start()
        if not _free(text, at):  # (an escaped backslash: an escape may start after it)
            match = _EVIDENCE.search(text, at + 1)
            continue
        if at > line[1]:
            line = _line_at(text, at, done)
            if not line[2]:  # (review fixes) every double-quoted string of the line
                spans.extend(_double_quoted(text, line[0], line[1]))
        if line[2]:  # a real Windows path on this line: its backslashes are no escapes
            done = line[1]
            match = _EVIDENCE.search(text, done)
            continue
        start = _quote_before(text, at, max(line[0], done)) + 1
        quote = _QUOTE_OR_END.search(text, at + 2)
        while quote is not None and quote.group() in "\"'" and not _free(text, quote.start()):
            quote = _QUOTE_OR_END.search(text, quote.end())
        end = len(text) if quote is None else quote.start()
        spans.append((start, end))
        done = end
        match = _EVIDENCE.search(text, end)
    return _merged(spans)


def _merged(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """`spans` in order, those that overlap or touch (across a quote, the next line) made
    one stretch."""
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def _double_quoted(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """The double-quoted strings between `start` and `end` (a line): between a ``"`` no
    backslash escapes and the next one, or the line's end."""
    spans: list[tuple[int, int]] = []
    opening = -1
    at = text.find('"', start, end)
    while at >= 0:
        if _free(text, at):
            if opening < 0:
                opening = at + 1
            else:
                spans.append((opening, at))
                opening = -1
        at = text.find('"', at + 1, end)
    if opening >= 0:
        spans.append((opening, end))
    return spans


def _line_at(text: str, at: int, done: int) -> tuple[int, int, bool]:
    """The line holding `at` (looked for back to `done` at most): its start, its end,
    and whether it holds a single-backslash drive path."""
    start = max(done, text.rfind("\n", done, at) + 1, text.rfind("\x00", done, at) + 1)
    stop = _LINE_END.search(text, at)
    end = len(text) if stop is None else stop.start()
    return start, end, _SINGLE_DRIVE.search(text, start, end) is not None


def _quote_before(text: str, at: int, lowest: int) -> int:
    """Where the last quote no backslash escapes stands before `at` (from `lowest`), or
    `lowest` - 1 (each kind of quote looked for once over each character)."""
    double, single = text.rfind('"', lowest, at), text.rfind("'", lowest, at)
    while True:
        quote = max(double, single)
        if quote < 0 or (_free(text, quote) and not _apostrophe(text, quote)):
            return max(quote, lowest - 1)
        if quote == double:
            double = text.rfind('"', lowest, quote)
        else:
            single = text.rfind("'", lowest, quote)


#: a line's end (a newline, or a JOIN of the matcher)
_LINE_END = re.compile(r"[\n\x00]")


def _apostrophe(text: str, at: int) -> bool:
    """Whether the ``'`` at `at` stands between two word characters (``it's``): no quote."""
    return (
        text[at] == "'"
        and 0 < at < len(text) - 1
        and _WORD.match(text, at - 1) is not None
        and _WORD.match(text, at + 1) is not None
    )


_WORD = re.compile(r"\w")
#: a quote (no apostrophe between two word characters), or a line's end
_QUOTE_OR_END = re.compile(r"[\"\n\x00]|(?<!\w)'|'(?!\w)")
#: a drive, one backslash and a name (``C:\\temp``): no JSON string holds it; a name
#: starting with n, r or t (``C:\\nsetup.py``: a colon and a newline?) only with a second
#: single backslash and a name (``C:\\new\\table.txt``)
_SINGLE_DRIVE = re.compile(
    r"(?<![A-Za-z0-9_])[A-Za-z]:\\(?:(?![nrt])[A-Za-z0-9_]|[nrt][^\\\s\"']*\\[A-Za-z0-9_])"
)


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
    return None if not lines else _joined(text, lines)


def backslash_after_dots(text: str, blanked: str) -> str:
    """`blanked` (:func:`unescaped` of `text`) with the backslash of each escape blanked
    right after a run of dots and dashes holding a dot put back (review 1 of session 37):
    the matcher reads ``out.txt.\\n`` as written, ``out.txt./n``, a longer name, and
    finds no fact ending before an escape in the blanked text, so the path finders see
    that ``\\`` (``factpaths._beside_backslash``, ``MORE_AFTER_DOT``), not a blank;
    unless the word ending there follows two blanks: the matcher reads such a word in
    the blanked text (:func:`escape_follows`: ``see  /app.py.\\n"`` states ``/app.py``),
    or holds a drive: the Windows path finder would grow over that ``\\`` (review 2:
    ``C:/out/report.csv.\\n`` gave ``C:/out/report.csv.\\``), so the word is blanked
    from the drive on instead: no fact, as for ``/tmp/out.txt``
    (on main its fact was LOST in its own text: the matcher reads ``report.csv./n``).
    Linear: each word is read back once, from the escape after it."""
    pieces, done = [], 0
    for match in _SINGLE.finditer(text):
        at = match.start()
        if blanked[at] != " " or text[at - 1 : at] not in (".", "-"):
            continue
        run = at
        while run and text[run - 1] in ".-":
            run -= 1
        word = run
        while word and not blanked[word - 1].isspace():
            word -= 1
        if "." not in text[run:at] or blanked[max(0, word - 2) : word] == "  ":
            continue
        drive = _DRIVE.search(blanked, word, run)
        if drive is None:
            pieces += [blanked[done:at], "\\"]
        else:
            pieces += [blanked[done : drive.start()], " " * (at - drive.start() + 1)]
        done = at + 1
    return "".join([*pieces, blanked[done:]]) if pieces else blanked


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


def _joined(text: str, lines: list[tuple[int, int]]) -> str:
    out: list[str] = []
    done = 0
    for start, end in lines:
        out.append(text[done:start])
        out.append(_blanked(text[start:end], None))
        done = end
    out.append(text[done:])
    return "".join(out)


def escape_spans(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` of the escapes :func:`unescaped` blanks, in order."""
    blanked = unescaped(text)
    if blanked is None:
        return []
    return [(i, i + 2) for i in range(len(text) - 1) if blanked[i] == " " != text[i]]
