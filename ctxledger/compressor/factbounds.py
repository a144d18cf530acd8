"""Where an occurrence of a fact in a text is a match: the boundary rules of :mod:`.factmatch`.

A fact's normalized value is found in a normalized text by :func:`contains`; an
occurrence counts only when it is not part of something longer:

* a word: a fact that begins or ends with a word character only matches on word
  boundaries (``foo`` is not in ``foobar``);
* a number (:func:`continues_number`; a path's boundary is the next rule's alone):
  ``$5`` is not in ``$5,000``, ``v2.0`` not in
  ``v2.0.1``, and a version not in a longer version (``v2.0`` in ``v2.0-rc1``,
  ``v2.0-beta``, ``v2.0+build``; :data:`VERSION_SUFFIX`), while sentence punctuation
  after it (``v2.0.``, ``v2.0,``) ends it;
* a path (:func:`inside_longer_path`): not inside a longer path, not followed by more
  of a name; an absolute path is stated by a URL whose path it is
  (``/api/v1/users`` by ``http://localhost:8000/api/v1/users?page=2``), not by one
  whose path only ends with it (``http://h/v2/api/v1/users``: another route, as
  ``/opt/legacy/app/settings.py`` is another file). A URL is not stated by its path
  alone (host and port are lost). Nor is an absolute path stated behind a drive
  (``/users/me`` in ``c:/users/me``, a Windows path as normalized).

The rules are written once per occurrence in Python (the readable definition, and
what the first few occurrences are checked with) and once as one regular expression
per needle (:func:`search`), which takes over after a few rejected occurrences: a
needle that occurs at every other position of a 10 MB text (``a.a`` in ``a.a.a…``)
was rejected one occurrence at a time in Python (4 to 8 s); one regex search
rejects them in C (~0.1 s). Tests hold the two to the same answers.
"""

from __future__ import annotations

import functools
import re
import string

from ctxledger.compressor.factgrep import LINE_NUMBER
from ctxledger.compressor.factpathrules import cut_name, letters_and_marks
from ctxledger.compressor.factpaths import PATH_CHARS  # what a path grows over, besides /

__all__ = [
    "MAX_AUTHORITY",
    "VERSION_RANGE_END",
    "VERSION_SUFFIX",
    "contains",
    "continues_number",
    "inside_longer_path",
    "is_word",
    "lower_tail",
    "prerelease_end",
    "prerelease_start",
    "search",
    "states_lines",
    "states_range_end",
]

_DIGITS = frozenset(string.digits)
_ASCII_LETTERS = frozenset(string.ascii_letters)
#: the characters of a URL scheme (two of them before ``://`` make a URL to the matcher)
_SCHEME_CHARS = frozenset(string.ascii_letters + string.digits + "+.-")
#: what ends a URL's authority besides whitespace (the URL finder's stops, ``/``, JOIN)
_NOT_AUTHORITY = frozenset("/<>\"'`])}|,\x00")
#: the longest URL authority (user, host, port) the matcher reads as one; a host name
#: has at most 253 characters
MAX_AUTHORITY = 2048

#: after a version's ``-``: not a range's other end (``3.8-3.12``, ``v2.0-v2.1``,
#: ``1.24.0-1.26.0`` state both ends, not a longer version): a dotted version that
#: ends there. One that goes on is a release's own part (``5.14.0-362.8.1.el9_3``,
#: ``1.0.0-20231012.142536-3``); so is one lower than the version before it, which
#: is no upper end (``1.0.0-0.3.7``, a semver pre-release: :func:`prerelease_end`).
#: Nor a wheel's or egg's Python tag (``Django-4.2.11-py3-none-any.whl``,
#: ``-py2.py3-``, ``-cp311-cp311-manylinux…``, ``-py3.8.egg``), maybe after a build
#: tag (``-0.editable-py3-``): the distribution's version ends before it
WHEEL_TAG = (
    r"(?:[0-9][0-9A-Za-z_.]*-)?(?:py|cp|pp|ip|jy)[0-9]+(?:\.(?:py|cp|pp|ip|jy)?[0-9]+)*[\-.]"
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
_VERSION_SUFFIX = re.compile(VERSION_SUFFIX)
#: a needle ending in a dotted number (``v2.0``, ``python 3.8``, ``1.2.3``; not an amount,
#: ``$5.50``, nor a number with thousands separators, nor a time's seconds and their
#: fraction, ``10:00:00.5``)
_DOTTED_END = re.compile(r"(?<![0-9.,$])(?<![0-9]:)[0-9]+(?:\.[0-9]+)+$")


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


def _semver_end(version: str) -> re.Match[str] | None:
    """The dotted number `version` ends with when it has three numbers or more (a
    two-number version is no semver: ``3.12-3.8`` is a range written high to low)."""
    left = _DOTTED_END.search(version)
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
    left = _semver_end(version)
    tail = _NUMERIC_TAIL.match(text, at) if left is not None else None
    if left is None or tail is None:
        return -1
    if _DOTTED_DATE_RE.fullmatch(left.group()) and _DOTTED_DATE_RE.fullmatch(tail.group(1)):
        return -1  # two dates
    return tail.end() if _numbers_of(tail.group(1)) < _numbers_of(left.group()) else -1


#: the dotted number a needle starts with (its digits first)
_DOTTED_START = re.compile(r"[0-9]+(?:\.[0-9]+)+")


def prerelease_start(text: str, at: int) -> bool:
    """Whether the dotted number starting at `at` in `text` is the numeric pre-release of
    a version before it (``0.3.7`` in ``1.0.0-0.3.7``, :func:`prerelease_end`): part of
    that longer version, not a version of its own (nor a range's end)."""
    if at < 2 or text[at - 1] != "-" or text[at - 2] not in _DIGITS:
        return False
    first = at - 2  # the run of digits and dots before the "-"
    while first > 0 and (text[first - 1] in _DIGITS or text[first - 1] == "."):
        first -= 1
    version = text[max(0, first - 1) : at - 1]  # (one more: _DOTTED_END looks behind)
    return prerelease_end(text, at - 1, version) != -1


def states_range_end(haystack: str, name: str, version: str) -> bool:
    """Whether `haystack` names a range of `name` that ends at `version` (``python 3.12``
    in ``python 3.8-3.12``): the extraction makes such a named version of a range's
    other end, and the range restated keeps it. The end is matched as `version` (not
    part of a longer number or version); a lower number is no end but a pre-release."""
    for match in _range_end_pattern(name, version).finditer(haystack):
        left = match.group(1)
        if prerelease_end(haystack, match.end(1), left) == -1 and _accepted(
            haystack, match.start(2), version, False
        ):
            return True
    return False


def states_lines(haystack: str, first: str, last: str) -> bool:
    """Whether `haystack` names the lines `first` to `last` as the extraction reads them
    (``lines 12-20`` of ``Line 12-20``, ``lines 12 to 20``, ``lines 12 – 20``)."""
    return _lines_pattern(first, last).search(haystack) is not None


@functools.lru_cache(maxsize=1024)
def _lines_pattern(first: str, last: str) -> re.Pattern[str]:
    # "line" first, so the engine finds candidates by it; the rest as extraction reads it
    return re.compile(f"line(?<!\\wline)s? {first}\\s*(?:-|\u2013|to)\\s*{last}(?![0-9]|[.,][0-9])")


@functools.lru_cache(maxsize=1024)
def _range_end_pattern(name: str, version: str) -> re.Pattern[str]:
    literal = re.escape(name)  # first, so the engine finds candidates by it
    return re.compile(f"{literal}(?<!\\w{literal}) (v?[0-9]+(?:\\.[0-9]+)+)-({re.escape(version)})")


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
    left = _semver_end(version)
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


def is_word(char: str) -> bool:
    """A word character (as ``\\w`` of a str regex; tested on every code point)."""
    return char.isalnum() or char == "_"


#: a Windows path as normalized: a drive (``c:/work``) or a UNC path (``//server``)
_WINDOWS_START = re.compile(r"[A-Za-z]:/|//")


def _ascii_path(needle: str, path: bool, windows: bool) -> bool:
    """Whether `needle` is a path of ASCII characters with a ``/``: the extraction's
    POSIX paths, whose name goes on only over its own path characters (ASCII,
    :func:`inside_longer_path`), so a letter of any other script ends it
    (``修改src/app.py文件``, ``src/app.pyㅋ``, ``ésrc/app.py``). A bare name
    (``éapp.py`` is one name), a name holding other letters and a Windows path (written
    with a ``\\``: `windows`; a drive, a ``//`` start) keep ``\\w``: the extraction
    reads a Windows path glued to a letter as none (review 2: ``C:\\work\\app.pyé``)."""
    return (
        path
        and not windows
        and "/" in needle
        and needle.isascii()
        and _WINDOWS_START.match(needle) is None
    )


def _name_goes_on(char: str, ascii_path: bool) -> bool:
    """Whether `char` next to a match goes on its word (:func:`_ascii_path`)."""
    return not ascii_path and is_word(char)


# --------------------------------------------------------------------------- per occurrence


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
_SEPARATED_START = re.compile(r"[0-9]+(?:\.[0-9]+){2,}|[0-9]{4}-[0-9]{2}-[0-9]{2}")


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


def continues_number(haystack: str, start: int, end: int, needle: str) -> bool:
    """Whether the match ``haystack[start:end]`` of `needle` is part of a longer number:
    a needle ending in a digit followed by ``,`` or ``.`` and a digit (``$5`` in
    ``$5,000``, ``v2.0`` in ``v2.0.1``), or starting with a digit after a digit and
    ``,`` or ``.`` (``0.1`` in ``v2.0.1``; a ``,`` before a semver version or a date
    separates: :data:`_SEPARATED_START`), or a dotted number that is a version's
    numeric pre-release (``0.3.7`` in ``1.0.0-0.3.7``: :func:`prerelease_start`); a
    needle ending in a dotted number followed by a :data:`VERSION_SUFFIX` (``v2.0`` in
    ``v2.0-rc1``) or a numeric pre-release (``1.0.0`` in ``1.0.0-0.3.7``:
    :func:`prerelease_end`). After a date or a date and time a ``,`` is a CSV
    separator (``2024-05-20 10:00:00,5``), except logging's ``,744`` after seconds;
    after a semver version a list's (``1.0.0,1.1.0``)."""
    if needle[-1] in _DIGITS and end + 1 < len(haystack):
        if haystack[end] in ",." and haystack[end + 1] in _DIGITS:
            if haystack[end] == "." or not _comma_separates(needle):
                return True
            if _FRACTION.match(haystack, end) and _SECONDS_END.search(needle):
                return True  # logging's ``,744`` after seconds; other commas are CSV's
        if (
            haystack[end] in "+-"
            and _VERSION_SUFFIX.match(haystack, end)
            and _DOTTED_END.search(needle)
        ):
            return True
        if prerelease_end(haystack, end, needle) != -1:
            return True  # ``1.0.0`` in ``1.0.0-0.3.7``
    if needle[0] not in _DIGITS or start < 2:
        return False
    if haystack[start - 1] in ",." and haystack[start - 2] in _DIGITS:
        return haystack[start - 1] == "." or _SEPARATED_START.match(needle) is None
    return _DOTTED_START.match(needle) is not None and prerelease_start(haystack, start)


def inside_longer_path(haystack: str, start: int, end: int, needle: str) -> bool:
    """Whether the match ``haystack[start:end]`` of path `needle` is part of a longer path.

    Before it: an absolute path (``/app/settings.py``) may follow no path character
    and no ``/`` (``/opt/legacy/app/settings.py`` names another file) and no drive
    (``c:/app/settings.py``), except a URL's ``scheme://authority`` (a URL states its
    path), and a UNC path (``//server/share``) no ``:`` (``http://server/share`` is
    a URL, another resource); a relative one may follow a ``/`` (``src/app.py`` names ``app.py`` more fully) but no other path
    character (``old-app.py``, ``myapp.py``). After it: a directory (a needle ending in ``/``) may be followed by anything (``build/x`` is in
    ``build/``); any other path by a ``/`` or a non-path character, or by dots and
    dashes that end it (``run.log.``, grep's context ``app.py-``), or by a line number
    between dashes (grep's context line ``src/x.py-12-from y``), but not by more of a
    name (``run.log.1``, ``run.logs``, ``app.py-old``).
    """
    absolute = needle[0] == "/"
    if start > 0:
        before = haystack[start - 1]
        longer = (
            (before == "/" and absolute)
            or before in PATH_CHARS
            or (before == ":" and needle.startswith("//"))  # a URL names a host, no share
            or (absolute and _after_drive(haystack, start))
        )
        if longer and not (absolute and _after_url_authority(haystack, start)):
            return True
    if needle[-1] == "/" or end == len(haystack):
        return False
    after = haystack[end]
    if after == "/" or after not in PATH_CHARS:
        return False
    if after not in ".-":
        return True
    if _GREP_LINE_NUMBER.match(haystack, end):
        return False  # grep's context line
    stop = end
    while stop < len(haystack) and haystack[stop] in ".-":
        stop += 1
    if stop == len(haystack):
        return False
    # dashes alone before a separator end the name (``src/x.py--\\.\COM1``, read with
    # ``/`` for each backslash): what the extraction strips (``rstrip(".-,:")``)
    dashes = "." not in haystack[end:stop]
    return haystack[stop] in PATH_CHARS or (haystack[stop] == "/" and not dashes)


#: a line number between dashes after a path: grep's context line (``src/x.py-12-from``),
#: not a date's year (``app.log-2024-05-20``), read as the extraction reads it
_GREP_LINE_NUMBER = re.compile(LINE_NUMBER)


def _after_url_authority(haystack: str, start: int) -> bool:
    """Whether ``haystack[:start]`` ends with a URL's ``scheme://authority`` (two scheme
    characters, ``://``, then at most MAX_AUTHORITY characters, none a ``/``, blank or
    character that ends a URL). The bound keeps each look back short: a text without
    ``://`` was read back to its start for every occurrence looked at."""
    at = haystack.rfind("://", max(0, start - MAX_AUTHORITY - 3), start)
    if at < 2 or haystack[at - 1] not in _SCHEME_CHARS or haystack[at - 2] not in _SCHEME_CHARS:
        return False
    return _AUTHORITY_STOP.search(haystack, at + 3, start) is None


def _after_drive(haystack: str, start: int) -> bool:
    """Whether a drive (``c:``, a letter after no path character) ends at `start`."""
    return (
        start >= 2
        and haystack[start - 1] == ":"
        and haystack[start - 2] in _ASCII_LETTERS
        and (start == 2 or haystack[start - 3] not in PATH_CHARS)
    )


def _accepted(haystack: str, start: int, needle: str, path: bool, windows: bool = False) -> bool:
    """Whether the occurrence of `needle` at `start` is a match (the rules above)."""
    end = start + len(needle)
    ascii_path = _ascii_path(needle, path, windows)
    if is_word(needle[0]) and start > 0 and _name_goes_on(haystack[start - 1], ascii_path):
        return False
    if is_word(needle[-1]) and end < len(haystack) and _name_goes_on(haystack[end], ascii_path):
        return False
    if path:  # (its own rule: a path's boundary is a name's, not a number's)
        # (session 34: the extraction reads no path beside a non-ASCII letter or mark)
        every = windows or _WINDOWS_START.match(needle) is not None  # (as the extraction)
        return not cut_name(haystack, start, end, every_letter=every) and not (
            inside_longer_path(haystack, start, end, needle)
        )
    return not continues_number(haystack, start, end, needle)


# --------------------------------------------------------------------------- one regex

#: rejected occurrences checked in Python before one regex search takes over
PLAIN_TRIES = 8


def contains(haystack: str, needle: str, *, path: bool = False, windows: bool = False) -> bool:
    """Whether normalized `needle` occurs in normalized `haystack` as a match (see above;
    `windows`: a path fact written with a ``\\``, :func:`_ascii_path`)."""
    if not needle:
        return False
    start = haystack.find(needle)
    tries = 0
    while start != -1:
        if _accepted(haystack, start, needle, path, windows):
            return True
        tries += 1
        if tries >= PLAIN_TRIES:
            return search(haystack, needle, path=path, windows=windows)
        if is_word(needle[0]):
            # a later start inside this word run follows a word char: skip the run
            # (a needle of letters inside a 10 MB word was one find per position)
            after = _NON_WORD.search(haystack, start)
            if after is None:
                return False
            start = haystack.find(needle, after.end())
        else:
            start = haystack.find(needle, start + 1)
    return False


#: what is not a word char to :func:`is_word` (tested on every code point)
_NON_WORD = re.compile(r"\W")


def search(haystack: str, needle: str, *, path: bool = False, windows: bool = False) -> bool:
    """:func:`contains` as regex searches: linear in C however often `needle` occurs."""
    if not needle:
        return False
    plain, in_url = _patterns(needle, path, windows)
    long_version = not path and _long_dotted_end(needle)
    dotted_start = not path and _DOTTED_START.match(needle) is not None
    # (a Windows path's name is cut at any letter, as the extraction's Windows finders read it)
    every = windows or _WINDOWS_START.match(needle) is not None
    if _found(plain, haystack, needle, long_version, dotted_start, path, every):
        return True
    return (
        in_url is not None
        and "://" in haystack
        and _found(in_url, haystack, needle, long_version, dotted_start, path, every)
    )


def _long_dotted_end(needle: str) -> bool:
    """Whether `needle` ends with a dotted number too long for :func:`lower_tail`."""
    if needle[-1] not in _DIGITS:
        return False
    left = _semver_end(needle)
    return left is not None and len(left.group()) > SHORT_DOTTED


def _found(
    pattern: re.Pattern[str],
    haystack: str,
    needle: str,
    long_version: bool,
    dotted_start: bool,
    path: bool = False,
    every_letter: bool = False,
) -> bool:
    """Whether `pattern` matches in `haystack`; what the pattern leaves to Python is
    checked per match: with `long_version`, a match followed by a numeric pre-release
    (:func:`prerelease_end`), with `dotted_start` one that is a version's numeric
    pre-release (:func:`prerelease_start`: a variable-width look behind), with `path`
    one after a mark on a base that cuts the name (:func:`cut_name`), is no match, and
    the search goes on one character after its start."""
    match = pattern.search(haystack)
    marks = path and not haystack.isascii()
    if not (long_version or dotted_start or marks):
        return match is not None
    while match is not None:
        end = match.end()
        if not (
            (long_version and prerelease_end(haystack, end, needle) != -1)
            or (dotted_start and prerelease_start(haystack, end - len(needle)))
            or (marks and cut_name(haystack, end - len(needle), end, every_letter=every_letter))
        ):
            return True
        match = pattern.search(haystack, match.start() + 1)
    return False


def _class(chars: frozenset[str]) -> str:
    return "".join(re.escape(c) for c in sorted(chars))


_PATH_CLASS = _class(PATH_CHARS)
#: (no dot, no dash: a run of them ends a path before a blank, as a sentence's or
#: grep's context separator does: ``run.log.``, ``app.py-``)
_PATH_CLASS_NO_DOT = _class(PATH_CHARS - {".", "-"})
_AUTHORITY = r"[^\s" + _class(_NOT_AUTHORITY) + "]{0," + str(MAX_AUTHORITY) + "}"
_AUTHORITY_STOP = re.compile(r"[\s" + _class(_NOT_AUTHORITY) + r"]")
_SCHEME = "[" + _class(_SCHEME_CHARS) + "]"


@functools.lru_cache(maxsize=4096)
def _patterns(
    needle: str, path: bool, windows: bool = False
) -> tuple[re.Pattern[str], re.Pattern[str] | None]:
    """The regexes of `needle`'s matches: anywhere, and (an absolute path) as a URL's path.

    The needle comes first so the engine finds candidates by its literal prefix; the
    rules before it are lookbehinds that re-read the needle (``(?<!\\wNEEDLE)``), since
    a leading lookbehind would be tried at every position of the text.
    """
    literal = re.escape(needle)
    behind: list[str] = []
    if is_word(needle[0]) and not _ascii_path(needle, path, windows):  # (else its class, below)
        behind.append(r"\w")
    if needle[0] in _DIGITS and not path:
        behind.append(r"[0-9]\." if _SEPARATED_START.match(needle) else r"[0-9][,.]")
    if path:
        slash = "/" if needle[0] == "/" else ""
        behind.append("[" + _PATH_CLASS + slash + (":" if needle.startswith("//") else "") + "]")
        if needle[0] == "/":
            behind.append(r"(?<![" + _PATH_CLASS + r"])[A-Za-z]:")
        behind.append(letters_and_marks(marks=False))  # (session 34: :func:`cut_name`)
    ahead = _ahead(needle, path, windows)
    plain = literal + "".join(f"(?<!{b}{literal})" for b in behind) + ahead
    in_url = None
    if path and needle[0] == "/":
        # "://" first: a pattern that starts with a lookbehind is tried at every position
        in_url = re.compile(f"://(?<={_SCHEME}{_SCHEME}://){_AUTHORITY}{literal}{ahead}")
    return re.compile(plain), in_url


def _ahead(needle: str, path: bool, windows: bool) -> str:
    """The lookaheads of the rules after a match of `needle`."""
    ahead: list[str] = []
    if is_word(needle[-1]) and not _ascii_path(needle, path, windows):  # (else its class)
        ahead.append(r"\w")
    if needle[-1] in _DIGITS and not path:
        if not _comma_separates(needle):
            ahead.append(r"[,.][0-9]")
        else:  # a "," is a separator, but logging's fraction after seconds
            ahead.append(r"\.[0-9]")
            if _SECONDS_END.search(needle):
                ahead.append(_FRACTION.pattern)
        if _DOTTED_END.search(needle):
            ahead.append(VERSION_SUFFIX)
            lower = lower_tail(needle)
            if lower is not None:
                ahead.append(lower)
    if path:
        ahead.append(letters_and_marks())  # (session 34: :func:`cut_name`)
    if path and needle[-1] != "/":
        ahead.append(
            f"[{_PATH_CLASS_NO_DOT}]|(?!{_GREP_LINE_NUMBER.pattern})"
            f"(?:-+[{_PATH_CLASS_NO_DOT}]|-*\\.[.\\-]*[{_PATH_CLASS_NO_DOT}/])"
        )
    return f"(?!{'|'.join(ahead)})" if ahead else ""
