"""The normal form facts and texts are compared in: the folding half of :mod:`.factmatch`.

A text is folded (NFKC, curly quotes straightened, backslashes read as path separators,
superscript digits, a footnote's mark, read as blanks), its whitespace collapsed and, but
for identifiers, its case folded. Linear on long texts: a long text that is not ASCII is
folded in pieces cut at ASCII whitespace (:func:`fold_pieces`), and a text already
single-spaced is not split again (:func:`single_spaced`).
"""

from __future__ import annotations

import codecs
import re
import unicodedata

from ctxledger.compressor.factpathrules import SUPERSCRIPT_DIGITS
from ctxledger.compressor.factscan import PIECE as _PIECE  # (tests lower it here)
from ctxledger.compressor.factscan import casefolded, pieces

__all__ = [
    "DOUBLE_SPACE_BLOCK",
    "OTHER_SPACES",
    "WHITESPACE",
    "fold_cased",
    "fold_pieces",
    "folds_to_itself",
    "has_double_space",
    "normalize",
    "normalize_cased",
    "single_spaced",
]

_QUOTE_TABLE = str.maketrans(
    {
        "\u2018": "'",
        "\u2019": "'",
        "\u201a": "'",
        "\u201b": "'",
        "\u201c": '"',
        "\u201d": '"',
        "\u201e": '"',
        "\u00ab": '"',
        "\u00bb": '"',
        "\\": "/",
    }
)
WHITESPACE = re.compile(r"\s+")


# superscript digits, a footnote's mark (``x.log¹``): NFKC makes them digits
# (``x.log1``, another name), so they are read as a blank first
_SUPERSCRIPT_TABLE = str.maketrans(dict.fromkeys(SUPERSCRIPT_DIGITS, " "))


def _fold_cased(text: str) -> str:
    if text.isascii():  # NFKC leaves ASCII alone and "\\" is the only quote in it
        return text.replace("\\", "/")
    if any(digit in text for digit in SUPERSCRIPT_DIGITS):  # (a memchr each)
        text = text.translate(_SUPERSCRIPT_TABLE)
    return unicodedata.normalize("NFKC", text).translate(_QUOTE_TABLE)


def normalize(text: str) -> str:
    """The form facts and texts are compared in."""
    return casefolded(normalize_cased(text))


def normalize_cased(text: str) -> str:
    """:func:`normalize` without the case folding (how identifiers are compared).

    Linear and cheap on long texts (issue 14): ASCII stretches of a megabyte-sized text
    take the fast path even when one character elsewhere is not ASCII.
    """
    # str.split() and the \\s of WHITESPACE agree on what whitespace is (Py_UNICODE_ISSPACE)
    return _collapsed(fold_cased(text))


def fold_cased(text: str) -> str:
    """:func:`normalize_cased` but for the whitespace (NFKC, quotes, backslashes)."""
    if len(text) <= _PIECE or text.isascii():  # (every fact's value: no list made)
        return _fold_cased(text)
    return "".join([_fold_cased(piece) for piece in fold_pieces(text)])


def fold_pieces(text: str) -> list[str]:
    """The pieces :func:`fold_cased` folds one by one: a long text that is not ASCII is
    cut before ASCII whitespace, a starter that composes with nothing (NFKC of the
    pieces is NFKC of the whole); any other is one piece."""
    return pieces(text, _PIECE) if len(text) > _PIECE and not text.isascii() else [text]


def folds_to_itself(parts: list[str]) -> bool:
    """Whether folding each of `parts` (:func:`fold_pieces`) leaves it as it is, so that
    :func:`fold_cased` leaves their text as it is; an ASCII part is not folded to tell
    (it is, when it holds no backslash)."""
    return all(("\\" not in p) if p.isascii() else _fold_cased(p) == p for p in parts)


#: every character ``str.split()`` splits on but the space (tested on every code point)
OTHER_SPACES = (
    "\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f\x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005"
    "\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)


def _collapsed(text: str) -> str:
    """``" ".join(text.split())``; a long text already in that form is not split (a 10 MB
    message of single-spaced words is two million pieces)."""
    if len(text) > _PIECE and single_spaced(text):
        return text
    return " ".join(text.split())


def single_spaced(text: str) -> bool:
    """Whether ``" ".join(text.split()) == text``: no whitespace but single spaces
    between non-blanks (a few ``memchr``; a text holding a newline fails at once)."""
    return not (
        any(space in text for space in OTHER_SPACES)
        or text.startswith(" ")
        or text.endswith(" ")
        or has_double_space(text)
    )


#: a long text is looked at for two spaces in blocks of this many characters
DOUBLE_SPACE_BLOCK = 1 << 20


def has_double_space(text: str, block: int = DOUBLE_SPACE_BLOCK) -> bool:
    """``"  " in text``, ~3x faster on a long text of one byte per character.

    A two-character search stops at every space (~1.3 ns a character on words). A block
    that encodes as latin-1 is read instead as UTF-16 units at both byte alignments:
    two spaces meet exactly where one of them holds U+2020 (a unit of 0x2020 is never
    half of a surrogate pair, and lone surrogates pass), and finding one character is a
    ``memchr``-speed scan. Blocks overlap by one character. Once a block is not latin-1
    the rest of the text is searched as it is, in place (a text of wider characters
    would pay an encode that fails per block, and a slice, on top of the plain search);
    blocks start at a 16th of `block` and double, so the encode such a text wastes is
    small beside the search, or beside what the blocks before it saved.
    """
    if len(text) <= block:
        return "  " in text
    start, size = 0, max(1, block >> 4)
    while start < len(text):
        part = text[start : start + size + 1]
        try:
            data = memoryview(part.encode("latin-1"))
        except UnicodeEncodeError:
            return text.find("  ", start) >= 0
        n = len(data)
        even = codecs.utf_16_le_decode(data[: n - n % 2], "surrogatepass", True)[0]
        odd = codecs.utf_16_le_decode(data[1 : n - (n - 1) % 2], "surrogatepass", True)[0]
        if "\u2020" in even or "\u2020" in odd:
            return True
        start, size = start + size, min(2 * size, block)
    return False
