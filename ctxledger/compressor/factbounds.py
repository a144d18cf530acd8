"""Where an occurrence of a fact in a text is a match: the boundary rules of :mod:`.factmatch`.

A fact's normalized value is found in a normalized text by :func:`contains`; an
occurrence counts only when it is not part of something longer:

* a word: a fact that begins or ends with a word character only matches on word
  boundaries (``foo`` is not in ``foobar``), and words ending with a path's name not
  before a ``/`` and more of a name (``load src/x`` is not in ``load src/x/a.py``);
* a number (:func:`continues_number`; a path's boundary is the next rule's alone):
  ``$5`` is not in ``$5,000``, ``v2.0`` not in
  ``v2.0.1``, and a version not in a longer version (``v2.0`` in ``v2.0-rc1``,
  ``v2.0-beta``, ``v2.0+build``; :data:`VERSION_SUFFIX`), while sentence punctuation
  after it (``v2.0.``, ``v2.0,``) ends it (:mod:`.factnumbers`);
* a sentence's stop (:func:`glued_stop`): a fact ending in a word character and one
  ``.`` is not found before a word character (``use v1.2.`` is not in ``use v1.2.x``);
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
from collections.abc import Callable, Sequence

from ctxledger.compressor.factgrep import LINE_NUMBER
from ctxledger.compressor.factletters import caseless_before, caseless_letters, is_word
from ctxledger.compressor.factnumbers import SEPARATED_START, continues_number, number_ahead
from ctxledger.compressor.factpathrules import (
    caseless_file_after,
    caseless_letter,
    cut_name,
    folded_name_char,
    letters_and_marks,
    name_letter,
    system_root,
)
from ctxledger.compressor.factpaths import PATH_CHARS  # what a path grows over, besides /
from ctxledger.compressor.factversions import (
    DOTTED_START,
    SHORT_DOTTED,
    VERSION_RANGE_END,
    VERSION_SUFFIX,
    lower_tail,
    prerelease_end,
    prerelease_start,
    semver_end,
)

__all__ = [
    "MAX_AUTHORITY",
    "VERSION_RANGE_END",
    "VERSION_SUFFIX",
    "contains",
    "continues_number",
    "first_match",
    "inside_longer_path",
    "is_word",
    "lower_tail",
    "prerelease_end",
    "prerelease_start",
    "search",
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


@functools.lru_cache(maxsize=1024)
def _range_end_pattern(name: str, version: str) -> re.Pattern[str]:
    literal = re.escape(name)  # first, so the engine finds candidates by it
    return re.compile(f"{literal}(?<!\\w{literal}) (v?[0-9]+(?:\\.[0-9]+)+)-({re.escape(version)})")


#: a Windows path as normalized: a drive (``c:/work``) or a UNC path (``//server``)
_WINDOWS_START = re.compile(r"[A-Za-z]:/|//")


def _windows_form(needle: str, windows: bool) -> bool:
    """Whether path `needle` is a Windows form: written with a ``\\`` (`windows`), a
    drive or a ``//`` start (as normalized): its name is cut at a letter of any script,
    as the extraction's Windows finders read it."""
    return windows or _WINDOWS_START.match(needle) is not None


def _slash_path(needle: str, path: bool, windows: bool) -> bool:
    """Whether `needle` is a slash path as the extraction reads one (a ``/``, ASCII
    path characters, and non-ASCII cased letters and marks: session 35), whose name
    goes on only over those (:func:`inside_longer_path`, :func:`.factpathrules.cut_name`),
    so a letter of a caseless script ends it (``修改src/app.py文件``, ``src/app.pyㅋ``,
    ``/home/josé/app.py文件``). A bare name (``éapp.py`` is one name), a name holding
    other letters and a Windows path (written with a ``\\``: `windows`; a drive, a
    ``//`` start) keep ``\\w``: the extraction reads a Windows path glued to a letter as
    none (review 2: ``C:\\work\\app.pyé``)."""
    return (
        path
        and "/" in needle
        and (needle.isascii() or _slash_letters(needle))
        and not _windows_form(needle, windows)
    )


@functools.lru_cache(maxsize=4096)
def _slash_letters(needle: str) -> bool:
    """Whether each non-ASCII character of `needle` is one a slash path's names hold
    (a caseless letter only in a folder name: the extraction gives no other)."""
    return all(c.isascii() or name_letter(c) or caseless_letter(c) for c in needle)


def _bare_name(needle: str, path: bool, windows: bool) -> bool:
    """Whether path `needle` is a bare name (no ``/``) of the letters a slash path's
    names hold: after a ``/`` it ends as a slash path's last name does (session 36:
    ``./build.sh`` is ``build.sh`` normalized, and ``运行./build.sh脚本`` states it)."""
    return (
        path and not windows and "/" not in needle and (needle.isascii() or _slash_letters(needle))
    )


def _name_goes_on(char: str, slash_path: bool) -> bool:
    """Whether `char` next to a match goes on its word (:func:`_slash_path`)."""
    return not slash_path and is_word(char)


def glued_stop(needle: str) -> bool:
    """Whether `needle` (no path) ends in a word character and one ``.``, a sentence's
    stop: a word character right after it makes that ``.`` part of a longer token, a
    version's or decimal point or a dotted name's (``use v1.2.`` is not in
    ``use v1.2.x``, ``keep it at 10.`` not in ``keep it at 10.5``, ``we use foo.`` not
    in ``we use foo.bar``). A sentence glued to the next (``at 10.Then``) is read so
    too: the audit errs toward "lost"."""
    return needle[-1] == "." and is_word(needle[-2:-1])


def _ends_in_path(needle: str, path: bool) -> bool:
    """Whether `needle`, no path fact, is words ending with a path's name (``unable to
    load file src/project``): a ``/`` and a name after it make a longer path, another
    one. A value that is one whole path or URL (no blank: ``"src/project"``, a URL)
    follows the path rule instead: a directory is stated by a file under it."""
    blank = needle.rfind(" ")
    return not path and blank != -1 and is_word(needle[-1]) and "/" in needle[blank + 1 :]


# --------------------------------------------------------------------------- per occurrence


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
            or (absolute and not before.isascii() and after_caseless(haystack, start, needle))
        )
        if longer and not (absolute and _after_url_authority(haystack, start)):
            return True
    if needle[-1] == "/" or end == len(haystack):
        return False
    after = haystack[end]
    if not after.isascii():  # (session 36: ``/home/x/app`` of ``/home/x/app用户.py``)
        return caseless_file_after(haystack, end, needle)
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


def in_caseless_folder(haystack: str, start: int) -> bool:
    """Whether a ``/`` at `start` ends a folder name holding a caseless letter right
    before it (``/home/用户`` of ``/home/用户/app.py``): the extraction reads the longer
    path (:func:`.factletters.wide_slashes`), so ``/app.py`` is not stated there. The
    look back stops at the first character that is no name's: at most the distance to
    the ``/`` before, so each occurrence is read once."""
    if start == 0 or not caseless_letter(haystack[start - 1]):
        return False
    at = start - 1
    while at > 0 and folded_name_char(haystack[at - 1]):
        at -= 1
    return at > 0 and haystack[at - 1] == "/"


def after_caseless(haystack: str, start: int, needle: str) -> bool:
    """Whether absolute `needle` at `start` follows a caseless folder name
    (:func:`in_caseless_folder`) or, session 36, a caseless letter (the base of its
    marks) at all: a relative path's caseless first name ends there (``用户/app.py``),
    unless the needle starts at a system root (:func:`.factpathrules.system_root`:
    ``修改/home/x`` is prose glued on), as the extraction reads it."""
    if in_caseless_folder(haystack, start):
        return True
    return caseless_before(haystack, start) and not system_root(needle)


def _in_folder_not_url(haystack: str, start: int, needle: str) -> bool:
    """:func:`after_caseless`, but a URL's path is stated by it (``http://例子/x``)."""
    return after_caseless(haystack, start, needle) and not _after_url_authority(haystack, start)


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
    slash_path = _slash_path(needle, path, windows) or (
        start > 0 and haystack[start - 1] == "/" and _bare_name(needle, path, windows)
    )
    if is_word(needle[0]) and start > 0 and _name_goes_on(haystack[start - 1], slash_path):
        return False
    if is_word(needle[-1]) and end < len(haystack) and _name_goes_on(haystack[end], slash_path):
        return False
    if (
        haystack[end : end + 1] == "/"
        and is_word(haystack[end + 1 : end + 2])
        and _ends_in_path(needle, path)
    ):
        return False
    if not path and glued_stop(needle) and is_word(haystack[end : end + 1]):
        return False
    if path:  # (its own rule: a path's boundary is a name's, not a number's)
        # (session 34: the extraction reads no path beside a non-ASCII letter or mark)
        every = _windows_form(needle, windows)  # (as the extraction)
        return not cut_name(haystack, start, end, every_letter=every) and not (
            inside_longer_path(haystack, start, end, needle)
        )
    return not continues_number(haystack, start, end, needle)


# --------------------------------------------------------------------------- one regex

#: rejected occurrences checked in Python before one regex search takes over
PLAIN_TRIES = 8


def contains(haystack: str, needle: str, *, path: bool = False, windows: bool = False) -> bool:
    """Whether normalized `needle` occurs in normalized `haystack` as a match (see above;
    `windows`: a path fact written with a ``\\``, :func:`_slash_path`)."""
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


def first_match(haystack: str, needle: str, start: int = 0) -> int:
    """Where the first match of normalized `needle` (no path) at or after `start` in
    `haystack` starts, or -1 (the occurrences one by one: an elided script's start,
    :mod:`.factelided`)."""
    at = haystack.find(needle, start) if needle else -1
    while at != -1 and not _accepted(haystack, at, needle, False):
        at = haystack.find(needle, at + 1)
    return at


def matches_at_start(haystack: str, needle: str) -> bool:
    """Whether normalized `needle` (no path) is a match at the start of `haystack`: the
    occurrence at position 0 only (a long turn's ask cut, :func:`.factasks.ask_cut`)."""
    return bool(needle) and haystack.startswith(needle) and _accepted(haystack, 0, needle, False)


#: what is not a word char to :func:`is_word` (tested on every code point)
_NON_WORD = re.compile(r"\W")


def search(haystack: str, needle: str, *, path: bool = False, windows: bool = False) -> bool:
    """:func:`contains` as regex searches: linear in C however often `needle` occurs."""
    if not needle:
        return False
    plain, in_url = _patterns(needle, path, windows)
    long_version = not path and _long_dotted_end(needle)
    dotted_start = not path and DOTTED_START.match(needle) is not None
    every = _windows_form(needle, windows)
    absolute = path and needle[0] == "/"
    strict = functools.partial(_plain_after_no_caseless, needle, windows) if absolute else None
    if _found(plain, haystack, needle, long_version, dotted_start, path, every, strict):
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
    left = semver_end(needle)
    return left is not None and len(left.group()) > SHORT_DOTTED


def _found(
    pattern: re.Pattern[str],
    haystack: str,
    needle: str,
    long_version: bool,
    dotted_start: bool,
    path: bool = False,
    every_letter: bool = False,
    strict: Callable[[], re.Pattern[str]] | None = None,
) -> bool:
    """Whether `pattern` matches in `haystack`; what the pattern leaves to Python is
    checked per match: with `long_version`, a match followed by a numeric pre-release
    (:func:`prerelease_end`), with `dotted_start` one that is a version's numeric
    pre-release (:func:`prerelease_start`: a variable-width look behind), with `path`
    one after a mark on a base that cuts the name (:func:`cut_name`) or, absolute,
    after a caseless folder name (:func:`in_caseless_folder`), is no match, and
    the search goes on one character after its start; after :data:`PYTHON_REJECTS`
    such matches of an absolute path, with `strict` (the plain pattern's), the search
    goes on with its pattern (:func:`_plain_after_no_caseless`)."""
    match = pattern.search(haystack)
    marks = path and not haystack.isascii()
    folders = marks and needle[0] == "/"
    if not (long_version or dotted_start or marks):
        return match is not None
    rejected = 0
    while match is not None:
        end = match.end()
        if not (
            (long_version and prerelease_end(haystack, end, needle) != -1)
            or (dotted_start and prerelease_start(haystack, end - len(needle)))
            or (marks and cut_name(haystack, end - len(needle), end, every_letter=every_letter))
            or (folders and _in_folder_not_url(haystack, end - len(needle), needle))
            or (marks and caseless_file_after(haystack, end, needle))
        ):
            return True
        rejected += 1
        if rejected == PYTHON_REJECTS and folders and strict is not None:
            pattern = strict()
        match = pattern.search(haystack, match.start() + 1)
    return False


#: matches of an absolute path rejected in Python before :func:`_found` compiles its
#: stricter pattern: its large class costs ≈ 3 ms to compile, ≈ 750 rejects at ≈ 4 µs
#: each (review 2: at 64, 1,000 needles each rejected 65 times took 4× the time)
PYTHON_REJECTS = 1000


@functools.lru_cache(maxsize=256)
def _plain_after_no_caseless(needle: str, windows: bool) -> re.Pattern[str]:
    """The plain pattern of absolute path `needle` that also rejects a match right
    after a caseless letter (:func:`after_caseless` without marks) unless it starts at
    a system root, in C (session 36, review 1: ``用户/x.py`` repeated, rejected one
    match at a time in Python, took 10 times main's time). The lookbehind's class
    doubles the pattern's compile time: only a text with many such matches asks. For
    the matcher's normalized text only: its class leaves out caseless letters that have
    a compatibility decomposition (``ﾞ``, ``ʱ``), which normalizing has replaced."""
    caseless = [] if system_root(needle) else [caseless_letters()]
    return re.compile(_plain(needle, True, windows, caseless))


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
    in_url = None
    if path and needle[0] == "/":
        # "://" first: a pattern that starts with a lookbehind is tried at every position
        literal = re.escape(needle)
        ahead = _ahead(needle, path, windows)
        in_url = re.compile(f"://(?<={_SCHEME}{_SCHEME}://){_AUTHORITY}{literal}{ahead}")
    return re.compile(_plain(needle, path, windows)), in_url


def _plain(needle: str, path: bool, windows: bool, more: Sequence[str] = ()) -> str:
    """The regex of `needle`'s matches anywhere (:func:`_patterns`), `more` classes
    rejected right before it."""
    literal = re.escape(needle)
    behind: list[str] = []
    if is_word(needle[0]) and not _slash_path(needle, path, windows):  # (else its class, below)
        behind.append(r"\w")
    if needle[0] in _DIGITS and not path:
        behind.append(r"[0-9]\." if SEPARATED_START.match(needle) else r"[0-9][,.]")
    if path:
        slash = "/" if needle[0] == "/" else ""
        behind.append("[" + _PATH_CLASS + slash + (":" if needle.startswith("//") else "") + "]")
        if needle[0] == "/":
            behind.append(r"(?<![" + _PATH_CLASS + r"])[A-Za-z]:")
        behind.append(letters_and_marks(marks=False))  # (session 34: :func:`cut_name`)
    behind.extend(more)
    ahead = _ahead(needle, path, windows)
    return literal + "".join(f"(?<!{b}{literal})" for b in behind) + ahead


def _ahead(needle: str, path: bool, windows: bool) -> str:
    """The lookaheads of the rules after a match of `needle`."""
    ahead: list[str] = []
    if is_word(needle[-1]) and not _slash_path(needle, path, windows):  # (else its class)
        # (a bare name after a "/" ends as a slash path's last name: :func:`_accepted`)
        bare = _bare_name(needle, path, windows)
        ahead.append(f"(?<!/{re.escape(needle)})\\w" if bare else r"\w")
    if _ends_in_path(needle, path):
        ahead.append(r"/\w")
    if not path and glued_stop(needle):
        ahead.append(r"\w")  # (:func:`glued_stop`: ``v1.2.`` in ``v1.2.x``, ``10.`` in ``10.5``)
    if not path:
        ahead.extend(number_ahead(needle))
    if path:
        ahead.append(letters_and_marks())  # (session 34: :func:`cut_name`)
    if path and needle[-1] != "/":
        ahead.append(
            f"[{_PATH_CLASS_NO_DOT}]|(?!{_GREP_LINE_NUMBER.pattern})"
            f"(?:-+[{_PATH_CLASS_NO_DOT}]|-*\\.[.\\-]*[{_PATH_CLASS_NO_DOT}/])"
        )
    return f"(?!{'|'.join(ahead)})" if ahead else ""
