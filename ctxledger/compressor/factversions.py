"""Versions as the matcher reads them (:mod:`.factbounds`): what makes a version longer
(a pre-release or build after it, ``v2.0-rc1``), and a ``-`` and a dotted number after
a version that is its numeric pre-release (``1.0.0-0.3.7``) rather than a range's
other end (``3.8-3.12``), per occurrence and as a regex (:func:`lower_tail`).
"""

from __future__ import annotations

import re

__all__ = [
    "DOTTED_END",
    "DOTTED_START",
    "SHORT_DOTTED",
    "VERSION_RANGE_END",
    "VERSION_SUFFIX",
    "VERSION_SUFFIX_RE",
    "WHEEL_TAG",
    "lower_tail",
    "prerelease_end",
    "prerelease_start",
    "semver_end",
]

_DIGITS = frozenset("0123456789")

#: after a version's ``-``: not a range's other end (``3.8-3.12``, ``v2.0-v2.1``,
#: ``1.24.0-1.26.0`` state both ends, not a longer version): a dotted version that
#: ends there. One that goes on is a release's own part (``5.14.0-362.8.1.el9_3``,
#: ``1.0.0-20231012.142536-3``); so is one lower than the version before it, which
#: is no upper end (``1.0.0-0.3.7``, a semver pre-release: :func:`prerelease_end`).
#: Nor a wheel's or egg's Python tag (``Django-4.2.11-py3-none-any.whl``,
#: ``-py2.py3-``, ``-cp311-cp311-manylinux…``, ``-py3.8.egg``), maybe after a build
#: tag (``-0.editable-py3-``): the distribution's version ends before it. A tag's ``.``
#: goes on to a word (``.egg``): ``v0.0-pp0.`` ending a sentence is a pre-release
WHEEL_TAG = (
    r"(?:[0-9][0-9A-Za-z_.]*-)?(?:py|cp|pp|ip|jy)[0-9]+(?:\.(?:py|cp|pp|ip|jy)?[0-9]+)*"
    r"(?:-|\.(?=\w))"
)
VERSION_RANGE_END = r"(?!v?[0-9]+(?:\.[0-9]+)+(?![\w\-+]|\.\w)|" + WHEEL_TAG + ")"
#: what makes a version longer after its dotted number: build metadata (``+build``) or a
#: pre-release (``-rc1``, ``-beta``, ``-1``, ``-alpha.2``). A word after a hyphen is not
#: one (``Python 3.8-compatible`` states Python 3.8), nor a range's other end
#: (VERSION_RANGE_END). Also used by the extraction of a
#: named version (``release v2.0-rc1``), so a summary's own facts agree with matching.
VERSION_SUFFIX = (
    r"(?:\+[0-9A-Za-z]|-" + VERSION_RANGE_END + r"(?:[0-9A-Za-z]*[0-9]"
    r"|(?i:alpha|beta|rc|dev|pre|preview|post|snapshot|nightly|canary)(?![A-Za-z])))"
)
VERSION_SUFFIX_RE = re.compile(VERSION_SUFFIX)
#: a needle ending in a dotted number (``v2.0``, ``python 3.8``, ``1.2.3``; not an amount,
#: ``$5.50``, nor a number with thousands separators, nor a time's seconds and their
#: fraction, ``10:00:00.5``)
DOTTED_END = re.compile(r"(?<![0-9.,$])(?<![0-9]:)[0-9]+(?:\.[0-9]+)+$")


#: after a version: ``-`` and a dotted number that ends there (with a ``v`` it is a
#: range's other end however low: ``v2.0-v1.9`` names two versions)
_NUMERIC_TAIL = re.compile(r"-([0-9]+(?:\.[0-9]+)+)(?![\w\-+]|\.\w)")
#: how a numeric pre-release ends (the ``(?![\w\-+]|\.\w)`` of VERSION_RANGE_END)
_TAIL_END = r"(?![\w\-+]|\.\w)"


def _numbers_of(dotted: str) -> tuple[tuple[int, str], ...]:
    """The numbers of `dotted` (ASCII digits and dots) as keys that compare as their
    values do: length, then digits, without leading zeros. No ``int()``: a number of
    over 4,300 digits is a ValueError to it, and costs quadratic time below that."""
    return tuple(_number_key(part) for part in dotted.split("."))


def _number_key(digits: str) -> tuple[int, str]:
    significant = digits.lstrip("0")
    return len(significant), significant


def semver_end(version: str) -> re.Match[str] | None:
    """The dotted number `version` ends with when it has three numbers or more (a
    two-number version is no semver: ``3.12-3.8`` is a range written high to low)."""
    left = DOTTED_END.search(version)
    return left if left is not None and left.group().count(".") >= 2 else None


#: a day-first date written with dots (``28.02.2024``): two of them joined by ``-`` are
#: a range of dates, whatever their order as numbers (``28.02.2024-03.03.2024``)
_DOTTED_DATE = r"(?:0?[1-9]|[12][0-9]|3[01])\.(?:0?[1-9]|1[0-2])\.[0-9]{4}"
_DOTTED_DATE_RE = re.compile(_DOTTED_DATE)


def prerelease_end(text: str, at: int, version: str) -> int:
    """Where the numeric pre-release after `version` (which ends at `at` in `text`)
    ends, or -1 when there is none.

    A ``-`` and a dotted number after a version read as a range (``3.8-3.12``) when
    the number is a plausible upper end; when it is lower than a semver version's
    (``1.0.0-0.3.7``, compared number by number) it is no upper end but the version's
    own pre-release, one longer version. After a version of two numbers it is a
    range whatever its order (``3.12-3.8``), and so are two day-first dates
    (``28.02.2024-03.03.2024``).
    """
    if not text.startswith("-", at):
        return -1
    left = semver_end(version)
    tail = _NUMERIC_TAIL.match(text, at) if left is not None else None
    if left is None or tail is None:
        return -1
    if _DOTTED_DATE_RE.fullmatch(left.group()) and _DOTTED_DATE_RE.fullmatch(tail.group(1)):
        return -1  # two dates
    return tail.end() if _numbers_of(tail.group(1)) < _numbers_of(left.group()) else -1


#: the dotted number a needle starts with (its digits first)
DOTTED_START = re.compile(r"[0-9]+(?:\.[0-9]+)+")


def prerelease_start(text: str, at: int) -> bool:
    """Whether the dotted number starting at `at` in `text` is the numeric pre-release of
    a version before it (``0.3.7`` in ``1.0.0-0.3.7``, :func:`prerelease_end`): part of
    that longer version, not a version of its own (nor a range's end)."""
    if at < 2 or text[at - 1] != "-" or text[at - 2] not in _DIGITS:
        return False
    first = at - 2  # the run of digits and dots before the "-"
    while first > 0 and (text[first - 1] in _DIGITS or text[first - 1] == "."):
        first -= 1
    version = text[max(0, first - 1) : at - 1]  # (one more: DOTTED_END looks behind)
    return prerelease_end(text, at - 1, version) != -1


def _less_than(digits: str) -> str | None:
    """A regex of the digit strings whose value is lower than `digits` (no leading zeros;
    leading zeros allowed in what it matches), or None when none is (0)."""
    if not digits:
        return None
    shorter = [f"[1-9][0-9]{{0,{len(digits) - 2}}}"] if len(digits) > 1 else []
    same = []
    for i, digit in enumerate(digits):
        low = 1 if i == 0 else 0
        if int(digit) > low:
            rest = len(digits) - i - 1
            same.append(f"{digits[:i]}[{low}-{int(digit) - 1}][0-9]{{{rest}}}")
    return "(?=[0-9])0*(?:" + "|".join([*shorter, *same]) + ")?(?![0-9])"


def _equal_to(digits: str) -> str:
    return f"0*{digits}(?![0-9])" if digits else "0+(?![0-9])"


#: the longest dotted number :func:`lower_tail` makes a regex of: its size grows with
#: the square of the number's length (``v1.`` and 4,000 digits made 8 MB); a longer
#: one is checked per occurrence (:func:`search`)
SHORT_DOTTED = 24


def lower_tail(version: str) -> str | None:
    """The regex of what :func:`prerelease_end` finds after `version`: ``-`` and a
    dotted number lower than the one `version` ends with (None when it ends with none,
    or with one nothing is lower than, or with one longer than SHORT_DOTTED)."""
    left = semver_end(version)
    if left is None or len(left.group()) > SHORT_DOTTED:
        return None
    numbers = [digits for _, digits in _numbers_of(left.group())]
    options: list[str] = []
    for i, number in enumerate(numbers):
        same = r"\.".join(_equal_to(n) for n in numbers[:i])
        below = _less_than(number)
        if below is not None:  # equal up to i, lower at i, anything after (two numbers or more)
            more = r"(?:\.[0-9]+)+" if i == 0 else r"(?:\.[0-9]+)*"
            options.append((same + r"\." if same else "") + below + more)
        if i >= 2:  # a shorter equal prefix is lower too (``1.2`` < ``1.2.3``)
            options.append(same)
    if not options:
        return None
    # (a day-first date is followed by another as a range's end: prerelease_end)
    date = f"(?!{_DOTTED_DATE}{_TAIL_END})" if _DOTTED_DATE_RE.fullmatch(left.group()) else ""
    return "-" + date + "(?:" + "|".join(options) + ")" + _TAIL_END
