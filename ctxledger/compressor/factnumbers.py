"""Where a number fact's match goes on as a longer number: the number rules of
:mod:`.factbounds` (``$5`` is not in ``$5,000``, ``v2.0`` not in ``v2.0.1`` or
``v2.0-rc1``), per occurrence (:func:`continues_number`) and as the lookaheads of the
matcher's regex (:func:`number_ahead`). Moved out of :mod:`.factbounds` (session 42)
to make room there.
"""

from __future__ import annotations

import re

from ctxledger.compressor.factversions import (
    DOTTED_END,
    DOTTED_START,
    VERSION_SUFFIX,
    VERSION_SUFFIX_RE,
    lower_tail,
    prerelease_end,
    prerelease_start,
)

__all__ = ["SEPARATED_START", "continues_number", "number_ahead"]

_DIGITS = frozenset("0123456789")


#: a needle ending with a date or a date and time (as normalized: ``2024-05-20``,
#: ``2024-05-20 10:00``, ``2024-05-20t10:00:00.5+05:30``): a ``,`` and a digit after it is a
#: CSV field (``2024-05-20 10:00:00,5,6``), except logging's fraction of a second
_DATE_END = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}(?:[t ][0-9]{2}:[0-9]{2}"
    r"(?::[0-9]{2}(?:\.[0-9]{1,9}|,[0-9]{3})?(?:z|[+-][0-9]{2}:?[0-9]{2})?|z)?)?\Z"
)
_SECONDS_END = re.compile(r"[t ][0-9]{2}:[0-9]{2}:[0-9]{2}\Z")
#: logging's fraction of a second (``,744``), as the extraction reads it
_FRACTION = re.compile(r",[0-9]{3}(?![0-9]|[,.][0-9])")


#: a needle starting with a semver version or a date: a ``,`` before it is a separator
#: (``1.0.0,1.1.0``, ``17,2024-05-20 10:00:00`` of a CSV line), no number it continues
SEPARATED_START = re.compile(r"[0-9]+(?:\.[0-9]+){2,}|[0-9]{4}-[0-9]{2}-[0-9]{2}")


#: a needle ending with a version: a ``v`` or no number before a dotted number, then
#: maybe a pre-release or build (``v2.0-rc1``, ``python 3.12``, ``1.0.0+b.5``)
_VERSION_END = re.compile(
    r"(?:(?<![0-9a-z])(v)|(?<![0-9.,$])(?<![0-9]:))([0-9]+(?:\.[0-9]+)+)"
    r"((?:[-+][0-9a-z]+(?:\.[0-9a-z]+)*)*)\Z"
)


def _comma_separates(needle: str) -> bool:
    """Whether a ``,`` and a digit after `needle` start another value: after a date (or
    a date and time) or a version (``1.0.0,1.1.0``, ``python 3.11,3.12``,
    ``v2.0-rc1,2.1``); not after a dotted number whose groups after the first have
    three digits each, a European grouped number (``1.234.567,89``) without a ``v``."""
    if _DATE_END.search(needle) is not None:
        return True
    version = _VERSION_END.search(needle)
    if version is None:
        return False
    if version.group(1) or version.group(3):
        return True
    return any(len(group) != 3 for group in version.group(2).split(".")[1:])


def _digit_stop(needle: str) -> bool:
    """Whether `needle` ends in a digit and a ``.``: a digit after it would make that
    ``.`` a decimal or version point (:func:`continues_number`)."""
    return needle[-1] == "." and needle[-2:-1] in _DIGITS


def continues_number(haystack: str, start: int, end: int, needle: str) -> bool:
    """Whether the match ``haystack[start:end]`` of `needle` is part of a longer number:
    a needle ending in a digit followed by ``,`` or ``.`` and a digit (``$5`` in
    ``$5,000``, ``v2.0`` in ``v2.0.1``), or starting with a digit after a digit and
    ``,`` or ``.`` (``0.1`` in ``v2.0.1``; a ``,`` before a semver version or a date
    separates: :data:`SEPARATED_START`), or a dotted number that is a version's
    numeric pre-release (``0.3.7`` in ``1.0.0-0.3.7``: :func:`prerelease_start`); a
    needle ending in a dotted number followed by a :data:`VERSION_SUFFIX` (``v2.0`` in
    ``v2.0-rc1``) or a numeric pre-release (``1.0.0`` in ``1.0.0-0.3.7``:
    :func:`prerelease_end`). After a date or a date and time a ``,`` is a CSV
    separator (``2024-05-20 10:00:00,5``), except logging's ``,744`` after seconds;
    after a semver version a list's (``1.0.0,1.1.0``). A needle ending in a digit and
    a ``.`` (a sentence's stop: ``keep it at 10.``) is not followed by a digit: that
    ``.`` was a decimal or version point (``keep it at 10.5``, ``use v1.2.3``)."""
    if _digit_stop(needle) and haystack[end : end + 1] in _DIGITS:
        return True
    if needle[-1] in _DIGITS and end + 1 < len(haystack):
        if haystack[end] in ",." and haystack[end + 1] in _DIGITS:
            if haystack[end] == "." or not _comma_separates(needle):
                return True
            if _FRACTION.match(haystack, end) and _SECONDS_END.search(needle):
                return True  # logging's ``,744`` after seconds; other commas are CSV's
        if (
            haystack[end] in "+-"
            and VERSION_SUFFIX_RE.match(haystack, end)
            and DOTTED_END.search(needle)
        ):
            return True
        if prerelease_end(haystack, end, needle) != -1:
            return True  # ``1.0.0`` in ``1.0.0-0.3.7``
    if needle[0] not in _DIGITS or start < 2:
        return False
    if haystack[start - 1] in ",." and haystack[start - 2] in _DIGITS:
        return haystack[start - 1] == "." or SEPARATED_START.match(needle) is None
    return DOTTED_START.match(needle) is not None and prerelease_start(haystack, start)


def number_ahead(needle: str) -> list[str]:
    """The lookaheads of :func:`continues_number`'s rules after a match of `needle` (no
    path) in the matcher's regex (:func:`.factbounds.search`)."""
    ahead: list[str] = []
    if needle[-1] not in _DIGITS:
        return ahead
    if not _comma_separates(needle):
        ahead.append(r"[,.][0-9]")
    else:  # a "," is a separator, but logging's fraction after seconds
        ahead.append(r"\.[0-9]")
        if _SECONDS_END.search(needle):
            ahead.append(_FRACTION.pattern)
    if DOTTED_END.search(needle):
        ahead.append(VERSION_SUFFIX)
        lower = lower_tail(needle)
        if lower is not None:
            ahead.append(lower)
    return ahead
