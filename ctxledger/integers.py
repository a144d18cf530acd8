"""Integers a user or a client spells as text: ASCII digits, one rule everywhere.

``int()`` alone takes ``1_000``, ``+1`` and non-ASCII digits (``١``, Arabic-Indic 1)
and raises past 4,300 digits. Every integer read from text a person or a client sends
(``SESSION@SEQ``, the server's query integers and ``Last-Event-ID``, the CLI's integer
options) goes through :func:`ascii_int`, so one kind of value is read one way.

Blanks: spaces and tabs around the digits are allowed, everywhere (``int()`` allowed
them, and HTTP strips them around a header value); nothing is allowed inside.

Values quoted in errors live here too: :func:`shown` (any value, short), :func:`shown_id`
(an id, whole), :func:`shown_ids` (the first few ids and how many more), and the one set
of characters ctxledger will not print as they are (:data:`NOT_PRINTED_IN_LINE`, escaped
by :func:`escaped`; ``ctxledger.terminal`` uses it).
"""

from __future__ import annotations

import math
import re
import reprlib
from collections.abc import Sequence

#: the most digits ``int()`` reads by default (``sys.int_info.default_max_str_digits``)
MAX_DIGITS = 4300


def ascii_int(text: str, *, signed: bool = False, max_digits: int = MAX_DIGITS) -> int | None:
    """The integer `text` spells in 1 to `max_digits` ASCII digits (a leading ``-`` when
    `signed`; spaces and tabs around), else None."""
    body = text.strip(" \t")
    digits = body[1:] if signed and body.startswith("-") else body
    if not (0 < len(digits) <= max_digits and digits.isascii() and digits.isdigit()):
        return None
    try:
        return int(body)
    except ValueError:  # a lower PYTHONINTMAXSTRDIGITS than the default
        return None


def all_digits(text: str) -> bool:
    """Whether `text` is ASCII digits only, spaces and tabs around (of any length: a
    reader tells "too many digits" from "not a number" with it)."""
    body = text.strip(" \t")
    return bool(body) and body.isascii() and body.isdigit()


def quoted_short(value: str) -> str:
    """A user's or a client's value (an option, a query parameter, a header) as an error
    quotes it: its first 40 characters (a 5,000-digit value was quoted whole)."""
    return repr(value) if len(value) <= 40 else f"{value[:40]!r}… ({len(value):,} characters)"


def decimal_digits(value: int) -> int:
    """How many decimal digits `value` has (``str`` refuses past Python's limit)."""
    magnitude = abs(value)
    digits = max(1, int(magnitude.bit_length() * math.log10(2)))
    return digits + 1 if magnitude >= 10**digits else digits


#: how :func:`shown` quotes: three levels of containers, a few items each, cut strings
_SHOWN = reprlib.Repr()
_SHOWN.maxlevel, _SHOWN.maxstring, _SHOWN.maxother, _SHOWN.maxlong = 3, 60, 60, 40


def shown(value: object) -> str:
    """A value of any type as an error quotes it: short, plain text, and never an error
    itself (a list nesting 5,000 levels or holding itself raised RecursionError from
    ``repr``, an int of 5,000 digits ValueError, a 2 MB string was quoted whole, an
    object's own ``repr`` could hold terminal control bytes)."""
    if isinstance(value, int) and value.bit_length() > 128:
        return f"an integer of {decimal_digits(value):,} digits"
    if isinstance(value, str):  # a cut says how long the whole is
        return quoted_short(str.__str__(value))
    try:
        return printable(_SHOWN.repr(value))
    except Exception:  # a repr that raises (reprlib only covers instances of classes)
        return f"a {type(value).__name__}"


def written(value: object) -> str:
    """``str(value)``, or :func:`shown` when Python cannot write it (an int past its
    4,300 digits, a list holding itself): the text of a value read from outside (a
    provider's error body) that is searched or shown whole when it can be."""
    try:
        return str(value)
    except (ValueError, RecursionError):
        return shown(value)


#: the longest id a log can hold (``limits.MAX_SESSION_ID_CHARS``: ``check_name``
#: refuses a longer session id, or one holding a control character)
ID_CHARS = 1024


def shown_id(value: object) -> str:
    """An id (a session, a stream, an event) as an error quotes it: whole, as ``repr``
    writes it, up to :data:`ID_CHARS`: every id a log holds, so the reader can copy it
    and two ids differing only at the end (``stem#2``, ``stem#3``) read apart. A longer
    one (only a caller's value, before its check) keeps its start and its end."""
    if not isinstance(value, str):
        return shown(value)
    text = str.__str__(value)
    if len(text) <= ID_CHARS + 32:  # (an id, or SESSION@SEQ naming one)
        return repr(text)
    return f"{text[:40]!r}…{text[-24:]!r} ({len(text):,} characters)"


def inline_id(value: str) -> str:
    """An id in a log line: unquoted, escaped by :func:`printable`, and cut past
    :data:`ID_CHARS` as :func:`shown_id` cuts it (a ledger edited by SQL may hold any)."""
    text = str.__str__(value)
    if len(text) > ID_CHARS + 32:
        text = f"{text[:40]}…{text[-24:]} ({len(text):,} characters)"
    return printable(text)


def shown_ids(ids: Sequence[object], first: int = 3) -> str:
    """Ids as a message lists them: the first few through :func:`shown_id`, and how many
    more (a log edited by hand may hold thousands)."""
    more = f" and {len(ids) - first:,} more" if len(ids) > first else ""
    return ", ".join(map(shown_id, ids[:first])) + more


#: the bidi controls that reorder what follows them: embeddings, overrides, isolates
_REORDERING = "\u202a-\u202e\u2066-\u2069"
#: the bidi marks (ALM, LRM, RLM): right-to-left prose uses them, they reorder nothing
#: beyond their neighbours
_MARKS = "\u061c\u200e\u200f"
#: every Unicode Bidi_Control character, as a regex character-class body
BIDI_CONTROLS = _REORDERING + _MARKS
#: the marks, and characters that show nothing (an id holding one looks like another)
_MARKS_AND_INVISIBLE = _MARKS + "\u200b\u2060\ufeff\u00ad"
#: lone surrogates: an argument that was not UTF-8 (``\\xff``, ``\\x9b``) arrives as
#: U+DCFF, U+DC9B, which stdout writes back as the raw byte (0x9b: an 8-bit CSI)
_SURROGATES = "\\ud800-\\udfff"
#: what multi-line text does not print as is (``terminal.plain``): C0/C1 control
#: characters but newline and tab, the reordering bidi controls, lone surrogates
NOT_PRINTED = re.compile(f"[\\x00-\\x08\\x0b-\\x1f\\x7f-\\x9f{_REORDERING}{_SURROGATES}]")
#: what one line does not print as is (``terminal.inline``, :func:`printable`): the same,
#: newline, tab, the Unicode line/paragraph separators, the bidi marks and invisibles.
#: Every other character (NBSP, U+3000, ZWJ, tag characters) prints as it is.
NOT_PRINTED_IN_LINE = re.compile(
    f"[\\x00-\\x1f\\x7f-\\x9f\\u2028\\u2029{_REORDERING}{_MARKS_AND_INVISIBLE}{_SURROGATES}]"
)


def printable(text: str) -> str:
    """`text` as one line with each character of :data:`NOT_PRINTED_IN_LINE` written as
    :func:`escaped` shows it: text from outside (a path, an object's ``repr``, a
    library's message) shown as is, but never acted on by a terminal. The one set the
    terminal's one-line form uses too, so a path reads the same in an error and on screen."""
    return visible(NOT_PRINTED_IN_LINE, text)


def visible(pattern: re.Pattern[str], text: str) -> str:
    """`text` with each character `pattern` matches written as :func:`escaped` shows it."""
    return pattern.sub(_escaped_match, text) if pattern.search(text) else text


def _escaped_match(match: re.Match[str]) -> str:
    return escaped(match.group())


def escaped(char: str) -> str:
    """One character as ctxledger shows one it will not print (``ctxledger.terminal``
    too): ``\\n``, ``\\t``, ``\\x1b`` (two hex digits below 0x100), ``\\u202e`` (four
    below 0x10000), ``\\U000e0001`` (eight: ``\\u`` and five digits would read as four)."""
    code = ord(char)
    named = {"\n": "\\n", "\t": "\\t"}.get(char)
    if named:
        return named
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


__all__ = [
    "BIDI_CONTROLS",
    "ID_CHARS",
    "MAX_DIGITS",
    "NOT_PRINTED",
    "NOT_PRINTED_IN_LINE",
    "all_digits",
    "ascii_int",
    "decimal_digits",
    "escaped",
    "printable",
    "quoted_short",
    "shown",
    "shown_id",
    "visible",
    "written",
]
