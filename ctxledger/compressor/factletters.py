"""The non-ASCII letters a path's names hold, judged as the matcher reads them (NFKC,
case folded), and the regex classes of them (session 35; moved from
:mod:`.factpathrules`, its review 1): cased letters and marks in any name, caseless
letters (CJK, Arabic, …) and characters folding to name characters in a folder name.
"""

from __future__ import annotations

import functools
import re
import string
import sys
import unicodedata
from collections.abc import Callable

from ctxledger.compressor import lettertables

#: superscript digits, a footnote's mark (``x.log¹``), which the matcher reads as a blank
#: (:mod:`.factmatch`): a name grown left stops at one (``foo¹bar.py``: ``bar.py``)
SUPERSCRIPT_DIGITS = "\u00b9\u00b2\u00b3\u2070\u2074\u2075\u2076\u2077\u2078\u2079"


#: the letters of the alphabets written with spaces between words (Latin, Greek,
#: Cyrillic, Armenian, …: the cased ones), a name goes on over them
CASED = frozenset(("Lu", "Ll", "Lt"))


def name_letter(char: str) -> bool:
    """Whether non-ASCII `char` is a letter a slash path's name grows over (session 35):
    a cased letter (Latin, Greek, Cyrillic, …: ``/home/José``, ``src/données``) or a
    mark (NFD ``Jose\u0301``) that the matcher reads (NFKC, case folded) as such letters,
    marks and ASCII path characters only (not ``ŉ``, ``ʼn`` to it: a modifier letter)."""
    category = unicodedata.category(char)
    return (category in CASED or category[0] == "M") and _folds_to_name(char)


@functools.lru_cache(maxsize=4096)
def _folds_to_name(char: str) -> bool:
    """Whether `char` folded (NFKC, case) is ASCII path characters, cased letters and marks."""
    return all(
        c in PATH_CHARS or (not c.isascii() and _cased_or_mark(c))
        for c in unicodedata.normalize("NFKC", char).casefold()
    )


def _cased_or_mark(char: str) -> bool:
    category = unicodedata.category(char)
    return category in CASED or category[0] == "M"


def caseless_letter(char: str) -> bool:
    """Whether non-ASCII `char` is a letter of a script without case (CJK, kana, Hangul,
    Arabic, Hebrew, Devanagari, Thai: Lo; a modifier letter such as ``ー``: Lm) that the
    matcher reads (folded) as such letters and marks only (not ``ʰ``, an ``h`` to it).
    Session 35: a folder name inside slashes holds them (``/home/用户/app.py``); glued
    before a path's first name or after its last they are prose (``修改src/app.py文件``)."""
    return unicodedata.category(char) in ("Lo", "Lm") and _folds_to_caseless(char)


@functools.lru_cache(maxsize=4096)
def _folds_to_caseless(char: str) -> bool:
    return all(
        not c.isascii() and unicodedata.category(c)[0] in "LM"
        for c in unicodedata.normalize("NFKC", char).casefold()
    )


def folded_name_char(char: str) -> bool:
    """A character of a folder name as the matcher reads it, folded (its look back,
    ``factbounds.in_caseless_folder``): an ASCII path character, or a name or caseless
    letter."""
    if char.isascii():
        return char in PATH_CHARS
    return name_letter(char) or caseless_letter(char)


@functools.lru_cache(maxsize=4096)
def _fold(char: str) -> str:
    """`char` as the matcher reads it: NFKC, case folded, a backslash a ``/``, a
    footnote's superscript digit a blank."""
    if char in SUPERSCRIPT_DIGITS:
        return " "
    return unicodedata.normalize("NFKC", char).casefold().replace("\\", "/")


#: one character as the audit's matcher reads it (cached; the separator checks use it)
matcher_fold = _fold


#: what may be more of a name after a path as written: ASCII name characters, dots,
#: dashes and any character that is not ASCII (read folded: :func:`folded_after`)
_RUN_AFTER = re.compile("[A-Za-z0-9_.\\-\x80-\U0010ffff]*+")


def folded_after(text: str, end: int) -> str:
    """The run of characters after `end` of `text` that may be more of a name
    (:data:`_RUN_AFTER`) and the one that ends it, as the matcher reads them (each
    folded, :func:`_fold`: ``㍿`` is ``株式会社``, ``．ｐｙ`` is ``.py``); empty
    when the character at `end` is read as no caseless letter (the common case: one
    look)."""
    if end >= len(text) or not caseless_letter(_fold(text[end])[:1] or " "):
        return ""
    stop = _RUN_AFTER.match(text, end).end()  # type: ignore[union-attr]  # (``*+``: a match)
    run = text[end : stop + 1]
    if unicodedata.is_normalized("NFKC", run) and run.casefold() == run:
        return run  # (most runs: a character at a time in Python cost 25 % on ``/x/app用户 ``)
    return "".join(map(_fold, run))


def folder_char(char: str) -> bool:
    """Whether non-ASCII `char` goes on a folder name that holds caseless letters
    (review 1 of session 35): every character it folds to does (``１``, ``＿``, ``．``,
    ``º``, ``™``: ``/data/第１版/app.py`` is read whole, as the matcher reads it)."""
    folded = _fold(char)
    return bool(folded) and all(folded_name_char(c) for c in folded)


@functools.cache
def folder_chars() -> str:
    """A regex class of the :func:`folder_char` characters with a decomposition (the
    others fold to themselves or by case: :func:`name_letters`, :func:`caseless_letters`)."""
    return _class("folder_chars")


def in_folded_folder(text: str, start: int) -> bool:
    """Whether the matcher, reading `text` folded, sees the ``/`` at `start` end a folder
    name holding a caseless letter right before it (``／用户/app.py`` is ``/用户/app.py``
    to it), or after a ``/`` (``／/src``): the path from `start` is then a tail of a
    longer one, a cut name."""
    at, tail = start, ""
    while True:
        if not tail:
            if at == 0:
                return False
            at -= 1
            tail = _fold(text[at])
            if at == start - 1 and not (tail and (caseless_letter(tail[-1]) or tail[-1] == "/")):
                return False
            continue
        if not folded_name_char(tail[-1]):
            return tail[-1] == "/"
        tail = tail[:-1]


def folded_word_beside(text: str, start: int, end: int) -> bool:
    """Whether the bare name ``text[start:end]`` (no ``/``) starting (ending) with a
    word character follows (comes before) a non-ASCII character the matcher, reading
    folded, reads as ending (starting) with one (``㍿`` is ``株式会社``, ``™`` is ``tm``):
    it reads the name glued to a longer word there, so it is a cut name (session 36)."""
    if "/" in text[start:end]:
        return False
    before = start and not text[start - 1].isascii() and is_word(text[start])
    if before and is_word(_fold(text[start - 1])[-1:]):
        return True
    return (
        end < len(text)
        and not text[end].isascii()
        and is_word(text[end - 1])
        and word_after(text, end)
    )


def word_after(text: str, end: int) -> bool:
    """Whether the character at `end` of `text`, as the matcher reads it (folded: ``٣``
    is a digit, a superscript digit a blank), starts with a word character."""
    return end < len(text) and is_word(_fold(text[end])[:1])


def is_word(char: str) -> bool:
    """Whether `char` (one character or none) is a word character (as ``\\w`` of a str
    regex): the one test the fact modules share."""
    return char.isalnum() or char == "_"


def folded_dots_go_on(text: str, start: int, end: int) -> bool:
    """Whether the matcher, reading `text` folded, sees the path ``text[start:end]`` go on
    at a non-ASCII character after it, maybe after dots and dashes, that folds to a dot,
    dash, name character or ``/`` (``．``, ``－``, ``／``): after the dots and dashes the
    judgement strips from its end (``~/a.``) and those it folds to, more of a name, or a
    ``/`` after a dot (``~/a．／`` and ``~/a.／`` are ``~/a./`` to it): a longer path,
    so the path is a cut name (session 36; the matcher's rule is
    ``factbounds.inside_longer_path``'s, but grep's line numbers). Linear in the run of
    dots read (an ASCII one by a regex)."""
    if end >= len(text) or text[end - 1] == "/":
        return False
    tail = end
    while tail > start and text[tail - 1] in ".-":
        tail -= 1
    at = _DOTS_AND_DASHES.match(text, tail).end()  # type: ignore[union-attr]  # (``*``)
    if at < len(text) and text[at].isascii():
        return False  # (ASCII dots, then ASCII: the anchors read it alike)
    dot = "." in text[tail:at]
    while at < len(text):
        seen = _fold(text[at])
        if seen.strip(".-"):
            head = seen.lstrip(".-")[0]
            dot = dot or "." in seen[: len(seen) - len(seen.lstrip(".-"))]
            more = at > tail or seen[0] in ".-"  # (a dot or dash before it)
            return head in PATH_CHARS if not more else head in PATH_CHARS or (head == "/" and dot)
        dot = dot or "." in seen
        at += 1
    return False


_DOTS_AND_DASHES = re.compile(r"[.\-]*")


@functools.cache
def with_name_letters(pattern: str) -> re.Pattern[str]:
    """`pattern` (a Windows path finder's) with the :func:`name_letter` letters added to
    each class of name characters (``A-Za-z0-9_``): how a text that is not ASCII is read
    (session 35: ``C:\\Users\\José\\app.py`` whole)."""
    return re.compile(pattern.replace("A-Za-z0-9_", "A-Za-z0-9_" + name_letters()[1:-1]))


@functools.cache
def caseless_letters() -> str:
    """A regex class of the :func:`caseless_letter` letters (as :func:`name_letters`)."""
    return _class("caseless_letters")


def mark(char: str) -> bool:
    return unicodedata.category(char)[0] == "M"


@functools.cache
def name_letters() -> str:
    """A regex class of the :func:`name_letter` letters, when a non-ASCII text is first
    scanned for paths: read from :mod:`.lettertables` (review 2 of session 35: building
    the classes from every code point cost such a process 0.37 s), built when Python's
    Unicode version is not the table's."""
    return _class("name_letters")


#: what a path grows over, besides ``/`` (:data:`.factpaths.PATH_CHARS`)
PATH_CHARS = frozenset(string.ascii_letters + string.digits + "_.-+@~")


@functools.cache
def letters_and_marks(marks: bool = True) -> str:
    """A regex class of the non-ASCII characters :func:`cut_name` looks for (as
    :func:`name_letters`); without `marks`, the cased letters only (before a path a mark
    is judged by its base: Python's)."""
    return _class("letters_and_marks" if marks else "cased_letters")


def _cased_letter(char: str) -> bool:
    return unicodedata.category(char) in CASED


#: each class's judge of one non-ASCII character
JUDGES: dict[str, Callable[[str], bool]] = {
    "name_letters": name_letter,
    "caseless_letters": caseless_letter,
    "folder_chars": lambda char: bool(unicodedata.decomposition(char)) and folder_char(char),
    "letters_and_marks": _cased_or_mark,
    "cased_letters": _cased_letter,
}


def built_ranges(name: str) -> list[tuple[int, int]]:
    """The code point ranges of class `name`, from every code point (0.07-0.17 s each)."""
    judge = JUDGES[name]
    ranges: list[tuple[int, int]] = []
    for code in range(0x80, sys.maxunicode + 1):
        if judge(chr(code)):
            if ranges and ranges[-1][1] == code - 1:
                ranges[-1] = (ranges[-1][0], code)
            else:
                ranges.append((code, code))
    return ranges


def stored_ranges(name: str) -> list[tuple[int, int]]:
    """The ranges of class `name` as :mod:`.lettertables` stores them (hex ``first-last``
    or ``code`` items), in code point order."""
    found: list[tuple[int, int]] = []
    for item in lettertables.TABLES[name].split():
        first, _, last = item.partition("-")
        found.append((int(first, 16), int(last or first, 16)))
    return found


def _class(name: str) -> str:
    """A regex class of the characters of `name`: stored ranges if this Python's Unicode
    version is the table's, else built."""
    if unicodedata.unidata_version == lettertables.UNIDATA_VERSION:
        ranges = stored_ranges(name)
    else:
        ranges = built_ranges(name)
    return "[" + "".join(f"{chr(a)}-{chr(b)}" if a < b else chr(a) for a, b in ranges) + "]"


def name_class() -> str:
    """The inside of a regex class of a slash path's name characters: the ASCII path
    characters and the :func:`name_letter` letters."""
    return _ASCII_NAME + name_letters()[1:-1]


#: the inside of a regex class of the ASCII path characters (:data:`PATH_CHARS`)
_ASCII_NAME = "A-Za-z0-9_.+@~\\-"


@functools.cache
def wide_slashes(also: str = "") -> re.Pattern[str]:
    """``factpaths``' regex of a ``/`` and what follows it of a path (or `also`) as a text
    that is not ASCII is read (session 35): names hold :func:`name_letter` letters
    (``/home/José/app.py``), and a folder name, one a ``/`` follows, also
    :func:`caseless_letter` ones and those folding to name characters (review 1:
    ``/home/用户/app.py``, ``/data/第１版/``; the last name ends at one: ``app.py文件``).
    Possessive: a name is read once."""
    name = name_class()
    # a folder's run starts where the name's run stopped, so at a caseless or folded
    # character, none ASCII: looked at first, a blank fails there at once (the class's
    # ranges are tried one by one: 10 MB of ASCII paths ran 0.07 s longer)
    folder = f"(?=[^\\x00-\\x7f])[{name}{caseless_letters()[1:-1]}{folder_chars()[1:-1]}]++(?=/)"
    # a run of ``[{name}/]``: its ASCII characters, then the letters (none ASCII) only
    # where a character that is not ASCII stands (session 38: the whole class tried at
    # each run's end cost 10 MB of ASCII paths 27 ms); the same maximal run
    ascii_run = f"[{_ASCII_NAME}/]*+"
    run = f"{ascii_run}(?:(?=[^\\x00-\\x7f])[{name_letters()[1:-1]}]++{ascii_run})*+"
    right = f"/{run}(?:{folder}{run})*+"  # (a class's run is read fastest)
    return re.compile(right + ("|" + also if also else ""))


#: a ``/`` and a character after it that is not ASCII (a mark is looked for there)
_SLASH_AND_OTHER = re.compile("/[^\\x00-\\x7f]")


def mark_after_slash(text: str, start: int, end: int) -> bool:
    """Whether a name of the slash path ``text[start:end]`` starts with a mark (review 1
    of session 35: ``/home/x/\u0301/a.py``, ``a.py//\u0e4c``)."""
    return any(mark(text[m.end() - 1]) for m in _SLASH_AND_OTHER.finditer(text, start, end))


#: the first names of the paths of a system or container (``/tmp``, ``/app``): one alone,
#: with no extension, is a path (``factpathrules``' plausibility, ``see /tmp``)
PATH_ROOTS = frozenset(
    {"tmp", "etc", "usr", "var", "home", "opt", "dev", "bin", "sbin", "srv", "mnt", "root"}
    | {"proc", "sys", "lib", "work", "data", "app", "src", "workspace", "testbed", "repo"}
    | {"code", "project", "users"}
)
#: the first names of :data:`PATH_ROOTS` a project's own tree starts with as often
#: (``lib/util.py``, ``src/``, ``app/``, ``bin/``): after caseless prose they are as
#: likely a relative path's first folder (session 37; ``data`` stays a root: a
#: container's volume, and session 35 keeps ``已修改/data/José/``; review 1: so do
#: the work folders a container's tree starts at, ``workspace``, ``repo``, ``work``,
#: ``code``, ``project``, as ``testbed`` and ``workspaces``)
PROJECT_ROOTS = frozenset({"lib", "bin", "src", "app"})
#: the first names of an absolute path read after caseless prose (session 36, review 1:
#: one list with :data:`PATH_ROOTS`): those but :data:`PROJECT_ROOTS`, and more top
#: directories of systems, containers and phones, kept out of :data:`PATH_ROOTS`
#: (``/run`` or ``/media`` alone is more often a word than a path; :func:`system_root`)
_SYSTEM_ROOTS = (PATH_ROOTS - PROJECT_ROOTS) | frozenset(
    {"boot", "lib64", "media", "run", "workspaces", "private", "volumes", "nix", "snap"}
    | {"content", "sdcard", "storage"}
)


def dotted_name_goes_on(text: str, start: int, end: int) -> bool:
    """Whether a bare name ``text[start:end]`` (its anchor ends before the dots a slash
    path grows over) is followed by dots or dashes the matcher, reading folded, reads
    as going on (``app.py.／``: :func:`folded_dots_go_on`); asked of names only, so the
    paths of a long text pay nothing for it."""
    return text.startswith((".", "-"), end) and folded_dots_go_on(text, start, end)


def system_root(path: str) -> bool:
    """Whether absolute `path` (as written or normalized) starts at a system root.

    Session 36: after a caseless letter a slash path's ``/`` either starts an absolute
    path glued to prose (``修改/home/用户/app.py``) or ends a relative path's caseless
    first name (``用户/app.py``, ``データ/src/app.py``): the text cannot tell them apart.
    The absolute reading (``/app.py``, ``/src/app.py``) is then a path the text may not
    hold: none, unless it starts at a system's top directory (``/home``, ``/etc``),
    which a relative path hardly names second. Session 37: not at a name a project's
    tree starts with too (:data:`PROJECT_ROOTS`: ``项目/lib/util.py`` gave the false
    ``/lib/util.py``) nor at one letter (``目录/a/b.txt``; session 36 read an MSYS drive
    there). The matcher reads it alike (:func:`.factbounds.inside_longer_path`).
    """
    name = path[1:].split("/", 1)[0]
    folded = name.lower() if name.isascii() else unicodedata.normalize("NFKC", name).casefold()
    return folded in _SYSTEM_ROOTS


def folded_colon_before(text: str, start: int) -> bool:
    """Whether the matcher, reading `text` folded, sees a ``:`` the text wrote otherwise
    (``：``) right before the path starting with a ``/`` at `start`, ending a drive (an
    ASCII letter after no path character: ``x：/tmp/build.sh`` is ``x:/tmp/build.sh``,
    ``factbounds._after_drive``) or, before a ``//`` start, a URL's ``://``: the path is
    a longer one's tail to it, which no finder reads (their colons are ASCII): none
    (session 37; an ASCII ``:`` before it starts no path: ``factpaths._NOT_BEFORE_PATH``)."""
    if start < 1 or text[start - 1].isascii() or not (seen := _fold(text[start - 1])).endswith(":"):
        return False  # (review 1: one folded character, most often no colon, is read first)
    if text.startswith("//", start):
        return True
    for at in (start - 2, start - 3):  # (the folds of the two before it, as far as needed)
        if at >= 0 and len(seen) < 3:
            seen = _fold(text[at]) + seen
    if len(seen) < 2 or seen[-2] not in string.ascii_letters:
        return False
    return len(seen) == 2 or seen[-3] not in PATH_CHARS


#: marks looked back over before a path to find the character they sit on (the
#: extraction's and the matcher's)
MAX_MARKS = 32


def base_before(text: str, start: int) -> str | None:
    """The character before `start`, or, when that is a mark (``ไฟล์`` ends with one),
    the base it combines with, folded (NFKC, case) with its own marks dropped (``´``
    folds to a space and a mark, ``क़`` to ``क`` and one); None before the text, at an
    ASCII character other than a mark's base (its own rules judge it); after more
    than :data:`MAX_MARKS` marks, a mark."""
    at = start - 1
    while at >= 0 and start - at <= MAX_MARKS + 1:  # (the marks and their base)
        char = text[at]
        if char.isascii():
            return char if at < start - 1 else None
        base = _folded_base(char)  # (cached: a run of marks is read at every match)
        if base:
            return base[-1] if char not in SUPERSCRIPT_DIGITS else None
        at -= 1
    return text[at + 1] if at >= 0 else None  # (a long run of marks: judged as a mark)


@functools.lru_cache(maxsize=4096)
def _folded_base(char: str) -> str:
    """`char` folded (NFKC, case) without the marks it ends with: empty for a mark."""
    return _without_marks(unicodedata.normalize("NFKC", char).casefold() or char)


def _without_marks(folded: str) -> str:
    """`folded` without the marks it ends with."""
    end = len(folded)
    while end and unicodedata.category(folded[end - 1])[0] == "M":
        end -= 1
    return folded[:end]


def caseless_before(text: str, start: int) -> bool:
    """Whether a caseless letter (:func:`caseless_letter`), as the matcher reads it
    (folded; the base of marks: Thai ``ไฟล์``, :func:`base_before`), ends before
    `start`: the extraction's and the matcher's judge (session 36)."""
    base = base_before(text, start)
    return base is not None and not base.isascii() and caseless_letter(base)
