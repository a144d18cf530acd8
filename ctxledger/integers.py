"""Integers a user or a client spells as text: ASCII digits, one rule everywhere.

``int()`` alone takes ``1_000``, ``+1`` and non-ASCII digits (``١``, Arabic-Indic 1)
and raises past 4,300 digits. Every integer read from text a person or a client sends
(``SESSION@SEQ``, the server's query integers and ``Last-Event-ID``, the CLI's integer
options) goes through :func:`ascii_int`, so one kind of value is read one way.

Blanks: spaces and tabs around the digits are allowed, everywhere (``int()`` allowed
them, and HTTP strips them around a header value); nothing is allowed inside.
"""

from __future__ import annotations

import math
import reprlib

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


def printable(text: str) -> str:
    """`text` with each character ``str.isprintable`` refuses (controls, format and bidi
    characters, unpaired surrogates, line and paragraph separators) written as
    :func:`escaped` shows it: text from outside (a path, an object's ``repr``, a
    library's message) shown as is, but never acted on by a terminal."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else escaped(c) for c in text)


def escaped(char: str) -> str:
    """One character as ctxledger shows one it will not print (``ctxledger.terminal``
    too): ``\\n``, ``\\t``, ``\\x1b`` (two hex digits below 0x100), ``\\u202e``."""
    code = ord(char)
    named = {"\n": "\\n", "\t": "\\t"}.get(char)
    return named or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")


__all__ = [
    "MAX_DIGITS",
    "all_digits",
    "ascii_int",
    "decimal_digits",
    "escaped",
    "printable",
    "quoted_short",
    "shown",
]
