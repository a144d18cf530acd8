"""Cheap necessary conditions before the fact patterns' whole-text scans (issue 14).

Most fact patterns cannot match a given text at all: a 10 MB log with no digit has no
number, one without ``Error`` no exception line. Each check here is a few C-level
``in`` searches (memchr speed), far cheaper than the regex scan it can skip; when
it says "maybe", the pattern runs exactly as before, so results never change.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator

__all__ = [
    "JOIN",
    "LONG_TEXT",
    "PIECE",
    "casefolded",
    "has_any",
    "holds_any",
    "line_matches",
    "lowered",
    "may_have_digit",
    "may_match_ignoring_case",
    "pieces",
]

#: joins the texts of a joined haystack (:class:`.factmatch.JoinedHaystack`); no
#: normalized fact contains it (one constant: :mod:`.factelided` reads it too)
JOIN = "\x00"

#: below this many characters a scan is cheap: no check (it would cost as much)
_SMALL = 2048
_DIGIT = re.compile(r"\d")
#: İ ı ſ: ``re.IGNORECASE`` matches them to ``i`` / ``s``, which ``lower()`` does not
CASE_ODD = ("\u0130", "\u0131", "\u017f")


def line_matches(
    pattern: re.Pattern[str], text: str, literals: tuple[str, ...] = ()
) -> Iterator[re.Match[str]]:
    """``pattern.finditer(text)`` for a pattern whose every match starts a line (``^`` in
    MULTILINE mode): a text without a newline can only match at its start. Each match
    holds one of `literals` when some are given (none: no such check)."""
    if literals and not has_any(text, literals):
        return iter(())
    if "\n" in text:
        return pattern.finditer(text)
    match = pattern.match(text)
    return iter(() if match is None else (match,))


def has_any(text: str, literals: tuple[str, ...]) -> bool:
    """Whether `text` holds one of `literals` (always True for a short text)."""
    return len(text) < _SMALL or any(_holds(text, literal) for literal in literals)


def holds_any(text: str, literals: tuple[str, ...]) -> bool:
    """Whether `text` holds one of `literals`, whatever its length: a long text is first
    asked for each literal's characters (see _holds: ``"```" in text`` reads 10 MB
    without a backtick in ~6 ms, ``"`" in text`` in ~0.2 ms), a short one at once."""
    if len(text) < _SMALL:
        return any(literal in text for literal in literals)
    return any(_holds(text, literal) for literal in literals)


def _holds(text: str, literal: str) -> bool:
    """``literal in text``, answered at once when one of the literal's characters is
    nowhere in `text`: finding one character is a memchr, a literal search of a long
    text several times slower (~8 ms per 10 MB), and most literals are absent."""
    return all(char in text for char in _chars(literal)) and literal in text


@functools.lru_cache(maxsize=1024)
def _chars(literal: str) -> tuple[str, ...]:
    return tuple(dict.fromkeys(literal))


def may_match_ignoring_case(text: str, literals: tuple[str, ...]) -> bool:
    """False only when no case variant of any of the lowercase ASCII `literals` is in `text`.

    ``re.IGNORECASE`` matches an ASCII letter to the characters whose simple
    lowercase it is (its capital, the Kelvin sign for ``k``, ``İ`` for ``i``) and to
    ``ı`` and ``ſ``; ``str.lower()`` maps all of them but those three, so a text
    holding one of them is always scanned.
    """
    if len(text) < _SMALL or any(odd in text for odd in CASE_ODD):
        return True
    lower = _lowered(text)
    return any(_holds(lower, literal) for literal in literals)


_last_lowered: tuple[str, str] = ("", "")


def _lowered(text: str) -> str:
    """``text.lower()``, remembered for the last text (its line and sentence kinds ask twice)."""
    global _last_lowered
    last = _last_lowered
    if last[0] is text:
        return last[1]
    lower = lowered(text)
    _last_lowered = (text, lower)
    return lower


#: the length from which the fact modules treat a text as long (issue 14): it is
#: case-mapped and normalized in pieces of about this many characters, its paths
#: scanned in one pass (factpaths), its haystack prepared once per process (factmatch)
LONG_TEXT = 64 * 1024
#: a long text that is not ASCII is case-mapped in pieces of about this many characters
PIECE = LONG_TEXT
_CUT = re.compile(r"[ \t\n]")


def pieces(text: str, size: int = PIECE) -> list[str]:
    """`text` cut just before ASCII whitespace (a space, tab or newline) every ~`size`
    characters: the pieces joined are `text`, and every piece but the first starts with
    that whitespace."""
    found: list[str] = []
    start = 0
    while start < len(text):
        cut = _CUT.search(text, start + size)
        end = cut.start() if cut is not None else len(text)
        found.append(text[start:end])
        start = end
    return found


def lowered(text: str) -> str:
    """``text.lower()``, in pieces when `text` is long and not ASCII.

    CPython lower-cases an ASCII string in one fast loop and any other string through
    the Unicode tables (~7 ns a character: 67 ms for 10 MB holding one ``é``); pieces
    of a mostly-ASCII text are mostly ASCII. Same result: ``lower()`` maps each
    character alone except a capital sigma, whose form looks at its neighbours over
    case-ignorable characters only, and a piece starts with a space, tab or newline,
    which is neither cased nor case-ignorable, so no look crosses a cut.
    """
    if len(text) <= PIECE or text.isascii():
        return text.lower()
    return "".join([piece.lower() for piece in pieces(text, PIECE)])


def casefolded(text: str) -> str:
    """``text.casefold()``, in pieces when `text` is long and not ASCII (see
    :func:`lowered`; case folding maps each character alone)."""
    if len(text) <= PIECE or text.isascii():
        return text.casefold()
    return "".join([piece.casefold() for piece in pieces(text, PIECE)])


def may_have_digit(text: str) -> bool:
    """False only when `text` has no character ``\\d`` matches (a decimal digit of any script)."""
    if len(text) < _SMALL or any(d in text for d in "0123456789"):
        return True
    if text.isascii():
        return False
    try:
        text.encode("latin-1")  # no decimal digit between U+0080 and U+00FF
    except UnicodeEncodeError:
        return _DIGIT.search(text) is not None
    return False
