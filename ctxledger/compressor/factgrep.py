"""grep's context lines (``-A``, ``-B``, ``-C``): the file's path glued to its line.

A match line reads ``src/x.py:12:from y import z`` (``:`` ends the path); a context
line ``src/x.py-12-from y import z`` with ``-n``, ``src/x.py-from y import z``
without. A ``-`` after a known extension is more of a name elsewhere (``app.py-old``,
a backup), so a separator is read as one only at a line's start and when the line
shows it: a line number between two dashes (not a date's year, ``app.log-2024-05-20``),
or, without one, the same text holding that path as a match line (``src/x.py:``).
:func:`context_spans` gives the separators; path finding blanks them (same length), so
the path is found as in a match line.

A directory tree drawn in ASCII glues its branch to a name the same way
(``|----__init__.py``, ``|   `--utils.py``): :func:`branch_spans` gives the branches,
read only at a line's start (after blanks and the ``|`` of outer levels), since a ``-``
before a name is more of it elsewhere (``--verbose``, ``old-app.py``).
"""

from __future__ import annotations

import re

from ctxledger.compressor.factpathrules import EXTENSIONS, SECOND_SUFFIXES
from ctxledger.compressor.factscan import holds_any

__all__ = ["LINE_NUMBER", "branch_spans", "context_spans", "grep_follows", "tree_follows"]

#: what may not follow a line number's closing ``-``: the rest of a date, whose year the
#: number would be (``app.log-2024-05-20``)
_NOT_A_DATE = r"(?![0-9]{2}-[0-9])"
#: a line number between dashes after a path, grep's context line (``src/x.py-12-from``),
#: not a date's year. The extraction (:data:`_SEPARATOR`) and the matcher (``factbounds``)
#: read it with the same rule, so a summary writing ``app.log-2024-05-20`` states no
#: ``app.log`` the extraction would not take from it
LINE_NUMBER = rf"-[0-9]+-{_NOT_A_DATE}"
#: the last dotted suffix of a name, then grep's ``:`` or ``-`` (group 1) and maybe a line
#: number (group 2) and ``-``, not a date's year (``-2024-05-20``). The extensions are
#: checked after a match (:data:`_EXT_END`): their alternation tried at every dot of a
#: text cost twice as much
_SEPARATOR = re.compile(rf"\.[A-Za-z0-9_]{{1,12}}([:\-])(?:([0-9]+)-{_NOT_A_DATE})?")
#: a known extension and its second suffixes ending a name (as written)
_EXT_END = re.compile(rf"\.(?:{EXTENSIONS})(?:\.(?:{SECOND_SUFFIXES}))*$")
#: a known extension or second suffix, the whole of a name's last suffix: matched at
#: the separator's dot alone first (``.ab-`` repeated ran :data:`_EXT_END` over a window
#: at every one: 12x the time per megabyte)
_LAST_SUFFIX = re.compile(rf"(?:{EXTENSIONS}|{SECOND_SUFFIXES})")
#: how far before a separator its name's extension and second suffixes are looked for
_SUFFIXES_MAX = 64
#: what a line starts after: a newline, or the matcher's JOIN between texts (so a text's
#: first line reads alike alone and joined to others)
_LINE_STARTS = "\n\x00"
#: what a path at a line's start grows over, right to left
_NAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.+@~/-")


def context_spans(text: str) -> list[tuple[int, int]]:
    """The spans of grep's context separators in `text` (``-12-`` of
    ``src/x.py-12-from y``; ``-`` of ``src/x.py-from y`` when ``src/x.py:`` starts a line
    of `text` too). Linear: each name is grown left no further than the last match."""
    if "-" not in text:
        return []
    matched: set[str] = set()  # the paths of match lines
    unnumbered: list[tuple[str, int, int]] = []
    spans: list[tuple[int, int]] = []
    floor = 0
    for match in _SEPARATOR.finditer(text):
        if _LAST_SUFFIX.fullmatch(text, match.start() + 1, match.start(1)) is None:
            continue  # (no known extension: ``x.foo-``)
        ext = _EXT_END.search(text, max(floor, match.start(1) - _SUFFIXES_MAX), match.start(1))
        if ext is None:
            continue  # (no known extension: ``x.foo-``)
        start = ext.start()
        while start > floor and text[start - 1] in _NAME_CHARS:
            start -= 1
        floor = match.end()
        if start == ext.start() or (start > 0 and text[start - 1] not in _LINE_STARTS):
            continue  # (``.py-`` alone, or not at a line's start)
        if match.group(1) == ":":
            matched.add(text[start : match.start(1)])
        elif match.group(2) is not None:
            spans.append((match.start(1), match.end()))
        else:
            unnumbered.append((text[start : match.start(1)], match.start(1), match.end()))
    spans.extend((at, end) for name, at, end in unnumbered if name in matched)
    return spans


def grep_follows(text: str) -> list[str] | None:
    """What follows each of grep's context separators in `text`, to its line's end, each
    once, or None when `text` has none. A path found with the separators blanked and not
    in `text` starts one of them (``setup.py`` of ``README.md-11-setup.py``: the ``-``
    glued to it reads as more of a name), so the matcher looks for it there too."""
    return _rests(text, context_spans(text))


#: a tree's branch glued to a name (group 1), at a line's start: after a newline or a
#: JOIN (:data:`_LINE_STARTS`; matched in the text after a newline, so its first line
#: starts after one: 3x faster than a look-behind at every place), blanks and outer
#: levels' ``|``, then ``|``, a backquote or ``+`` and two dashes or more, before a
#: name's character
_BRANCH = re.compile(r"[\n\x00]([ \t|]*[|`+]-{2,}+)(?=[\w.])")


def branch_spans(text: str) -> list[tuple[int, int]]:
    """The spans of a tree's branches glued to a name (``|----``, ``|   `--``), each
    from its line's start: blanked, a path is found as after a blank."""
    if not holds_any(text, ("--",)):
        return []
    return [(match.start(1) - 1, match.end(1) - 1) for match in _BRANCH.finditer("\n" + text)]


def tree_follows(text: str) -> list[str] | None:
    """What follows each tree branch glued to a name in `text`, to its line's end, each
    once, or None when `text` has none (as :func:`grep_follows`: ``__init__.py`` of
    ``|----__init__.py``)."""
    return _rests(text, branch_spans(text))


def _rests(text: str, spans: list[tuple[int, int]]) -> list[str] | None:
    """The rest of the line after each span, each once, or None with no span."""
    if not spans:
        return None
    follows: dict[str, None] = {}
    for _, end in spans:
        stop = text.find("\n", end)
        follows[text[end : len(text) if stop == -1 else stop]] = None
    return list(follows)
