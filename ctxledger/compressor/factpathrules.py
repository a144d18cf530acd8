"""Judging a path candidate of fact extraction (:mod:`.factpaths` finds them): whether
its text names a file path (``src/app.py``, ``C:\\Users\\me``, ``.env``), or is
something else with slashes or dots (``and/or``, ``resp.json.get``, a regex escape).

Every judgment reads the candidate once, in linear time: a candidate can be megabytes
long (a tool output of one run of path characters).
"""

from __future__ import annotations

import functools
import re
import string
import unicodedata
from collections.abc import Iterator

from ctxledger.compressor.factletters import (
    CASED,
    MAX_MARKS,
    PATH_CHARS,
    PATH_ROOTS,
    SUPERSCRIPT_DIGITS,
    base_before,
    caseless_before,
    caseless_letter,
    caseless_letters,
    dotted_name_goes_on,
    folded_after,
    folded_colon_before,
    folded_dots_go_on,
    folded_name_char,
    folded_word_beside,
    folder_chars,
    in_folded_folder,
    letters_and_marks,
    mark,
    mark_after_slash,
    name_class,
    name_letter,
    name_letters,
    system_root,
    wide_slashes,
    with_name_letters,
    word_after,
)
from ctxledger.compressor.factlookalikes import TEX_COMMANDS, division
from ctxledger.compressor.factseparators import (
    BACKSLASH_RUNS,
    DOUBLED_BACKSLASHES,
    single_separators,
)

__all__ = [
    "DOTFILE",
    "EXTENSIONS",
    "KNOWN_FILES",
    "MORE_AFTER_DOT",
    "MORE_NAME",
    "PATH_CHARS",
    "SECOND_SUFFIXES",
    "SUPERSCRIPT_DIGITS",
    "caseless_file_after",
    "caseless_letter",
    "caseless_letters",
    "cut_name",
    "cut_path",
    "dotted_name_goes_on",
    "first_names",
    "folded_name_char",
    "folder_chars",
    "has_ext",
    "letters_and_marks",
    "name_letter",
    "name_letters",
    "name_start",
    "plausible_path",
    "system_root",
    "wide_slashes",
    "with_name_letters",
]

EXTENSIONS = (
    # no ``db``/``conf``/``env``: ``django.db`` and ``django.conf`` are modules, not files
    "py|pyi|pyx|ipynb|js|mjs|cjs|ts|tsx|jsx|vue|svelte|json|jsonl|toml|yaml|yml|ini|cfg|"
    "txt|md|rst|html|htm|css|scss|sh|bash|zsh|ps1|bat|rs|go|java|kt|scala|c|h|cc|"
    "cpp|hpp|cs|rb|php|swift|sql|lock|xml|csv|tsv|log|mk|gradle|proto|tf|lua|dart|"
    "exs|erl|hs|zig|jl|patch|diff|pem|crt|sqlite|gz|zip|tar|whl|png|jpg|jpeg|gif|svg|"
    "pdf|dll|exe|wasm|pyc"
)
#: suffixes a file name keeps after a known extension (``config.yaml.j2``, ``app.py.bak``,
#: ``run.log.1``): a closed list, so ``resp.json.get`` stays no path
SECOND_SUFFIXES = (
    r"j2|jinja2?|tpl|tmpl|template|erb|bak|orig|old|new|tmp|swp|dist|example|sample|"
    r"local|in|enc|gpg|asc|sig|bz2|xz|zst|\d{1,3}"
)
#: more of a name: a word character, but a superscript digit
MORE_NAME = "[^\\W" + SUPERSCRIPT_DIGITS + "]"
#: more of a name after a name's end: a ``.``, maybe dots and dashes, then a word
#: character, ``+``, ``~``, ``@``, ``/`` or ``\\`` (the matcher reads ``app.py..+r`` as
#: one name, and ``app.py.\\x`` as ``app.py./x``: session 37); not a superscript digit,
#: a blank to the matcher (``app.py.² x``: session 39)
MORE_AFTER_DOT = r"\.[.\-]*(?:" + MORE_NAME + r"|[+~@/\\])"
#: dotfiles named bare (``.env``, ``.bashrc``): a closed list, since a dot before a word
#: is also a method call (``.filter(``), a CSS class (``.header``) or a name (``.NET``)
DOTFILE = re.compile(
    r"\.(?:env|envrc|bashrc|bash_profile|bash_aliases|bash_history|profile|zshrc|zprofile|"
    r"vimrc|inputrc|gitignore|gitattributes|gitmodules|gitconfig|dockerignore|npmrc|nvmrc|"
    r"yarnrc|editorconfig|prettierrc|prettierignore|eslintrc|eslintignore|babelrc|pylintrc|"
    r"flake8|coveragerc|pypirc|netrc|htaccess|python-version|node-version|ruby-version|"
    r"tool-versions)(?:\.(?:local|example|sample|template|dev|development|prod|production|"
    r"test|staging))?(?!" + MORE_NAME + r"|[\-+~@(/]|" + MORE_AFTER_DOT + ")"
)
_DRIVE = re.compile(r"[A-Za-z]:[\\/]")
#: a single backslash before ``n``, ``r`` or ``t``: maybe an escape, not a separator
_ESCAPE_LIKE = re.compile(r"(?<!\\)\\[nrt]")
#: what a name of a relative Windows path starts with
_NAME_START = frozenset(string.ascii_letters + string.digits + "_")
#: a UNC path's server (a host name, an address, ``wsl$``) and share (``c$``) names
_UNC_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]*\$?")
#: a date written with slashes and a month's name (``20/May/2024``, nginx's and
#: Apache's logs): no path (one with numbers only has no letter, so none either)
_DATE_SLASHES = re.compile(
    r"[0-9]{1,4}/(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)/[0-9]{2,4}", re.IGNORECASE
)
#: a relative path whose first name is a dotted directory (``.ssh/config``)
_DOT_DIR = re.compile(r"\.[a-z][\w\-]*/[^/]")
_HAS_EXT = re.compile(
    r"\.(?:" + EXTENSIONS + r")(?:\.(?:" + SECOND_SUFFIXES + r"))*$", re.IGNORECASE
)
#: the longest value :func:`has_ext` searches forward
_SHORT_VALUE = 256
#: a known extension and its second suffixes ending a text, read from the end: the
#: text reversed, each name reversed (``jinja2?`` as ``2?ajnij``), so a match is tried
#: once, at the start, and the run of second suffixes read once (:func:`has_ext`)
_EXT_REVERSED = re.compile(
    r"(?:(?:"
    + "|".join(
        {"jinja2?": "2?ajnij", r"\d{1,3}": r"\d{1,3}"}.get(name, name[::-1])
        for name in SECOND_SUFFIXES.split("|")
    )
    + r")\.)*+(?:"  # possessive: no extension is a second suffix, none is given back
    + "|".join(name[::-1] for name in EXTENSIONS.split("|"))
    + r")\.",
    re.IGNORECASE,
)
#: a file name: a name, a dot and a lower-case extension of two characters or more
#: (``schema.prisma``, ``index.mdx``; not ``3.x``, ``e.g``)
_FILE_NAME = re.compile(r"[A-Za-z_][\w\-]*\.[a-z][a-z0-9]{1,9}")
#: the directory before such a file name: a name (with a letter, :func:`_file_name_dir`)
_DIR_NAME = re.compile(r"[\w\-.]*")
_ASCII_LETTER = re.compile(r"[A-Za-z]")
_NOT_PATHS = frozenset(
    {"and/or", "w/o", "i/o", "n/a", "yes/no", "on/off", "true/false", "read/write"}
    # the pieces of a ``sed 's/True/False/'`` expression
    | {"true/", "false/", "none/", "null/"}
)
KNOWN_FILES = frozenset(
    {"Makefile", "Dockerfile", "Gemfile", "Procfile", "Rakefile", "Vagrantfile", "Jenkinsfile"}
)


def plausible_path(raw: str) -> str | None:
    """The path `raw` names (without sentence punctuation after it), or None.

    A Windows path (``C:\\Users\\me``, ``.\\run.ps1``) is judged as the POSIX path it
    reads as without its drive (``/Users/me``, ``./run.ps1``), and returned as written,
    except that doubled backslashes (a JSON string's escapes, ``C:\\\\logs``) are one.
    """
    value = raw.rstrip(".-,:")
    windows = _DRIVE.match(value) is not None
    if "\\" in value and not _uniform(value):
        return _escaped_twice(value, windows)  # (``a\\\\\\b``: none)
    if windows or value.startswith((".\\", "..\\", "~\\")):
        single = DOUBLED_BACKSLASHES.sub("\\\\", value) if "\\\\" in value else value
        posix = single.replace("\\", "/")
        if _plausible(posix[2:] if windows else posix) is None:
            return None
        if not windows and _EMPTY_AFTER_DOTS.match(posix):
            return _file_name(value, True)  # (session 39: ``.\\/x.log`` is no ``/x.log``)
        return single if single is value or single_separators(value) else _file_name(value, True)
    if value.startswith("\\\\"):
        return _unc(value)
    if "\\" in value:
        return _relative_windows(value)
    return _plausible(value)


#: leading ``./`` pieces, then a ``/``: a path whose normalized fact (they dropped) would
#: start at the root (``.\\/x.log`` is ``.//x.log``: ``/x.log``, which the text does not hold)
_EMPTY_AFTER_DOTS = re.compile(r"(?:\./)+/")


def _escaped_twice(value: str, windows: bool) -> str | None:
    """Session 39: the file's name ending a path a JSON string escaped twice (each
    backslash written four times) that also holds a ``/`` (``src\\\\\\\\app/x.py``,
    ``.\\\\\\\\/setup.py``): the matcher reads a path's separators all single or all
    doubled, so no path, but it finds the name after the last separator (as a JSON-mixed
    path's, session 38; the tail ``app/x.py``, which it finds too, would be the stronger
    fact: review 1, F3, left). Any other uneven run of backslashes names none
    (``a\\\\\\b``), and so does a UNC start's (as before)."""
    runs = {len(run) for run in BACKSLASH_RUNS.findall(value)}
    if runs != {4} or "/" not in value or value.startswith("\\"):
        return None
    return _file_name(value, windows or value.startswith((".", "~")))


def _uniform(value: str) -> bool:
    """Whether the backslashes of `value` separate alike: each alone, or each doubled (a
    JSON string's escapes); a UNC path's leading ones are :func:`_unc`'s to judge."""
    runs = {len(run) for run in BACKSLASH_RUNS.findall(value.lstrip("\\"))}
    return runs <= {1} or runs == {2}


def _unc(raw: str) -> str | None:
    """The UNC path `raw` names (``\\\\server\\share\\dir\\file.txt``), or None.

    Two backslashes, then single separators; or JSON-escaped, every backslash doubled
    (four, then two). A server name and a share name at least, each a name (``$``
    may end them: ``c$``, ``wsl$``), no LaTeX command among them (``\\\\alpha\\beta``
    is an escaped formula) and, when the last has no known extension, no single
    backslash before ``n``, ``r`` or ``t`` (an escape, as in :func:`_directories`);
    the other names start with a letter, digit or ``_``. A device path with a name in its
    namespace (``\\\\.\\pipe\\name``) has no escapes. Returned with two leading
    backslashes and single separators.
    """
    rest = raw.lstrip("\\")
    lead = len(raw) - len(rest)
    escaped = "\\\\" in rest
    if lead != (4 if escaped else 2):
        return None
    names = (DOUBLED_BACKSLASHES.sub("\\\\", rest) if escaped else rest).split("\\")
    if names[-1] == "":
        names.pop()  # a directory's trailing separator
    device = names[0] in ("?", ".")  # ``\\\\.\\pipe\\name``: the device namespace
    if len(names) < 2 or not all(
        _UNC_NAME.fullmatch(name) for name in names[1 if device else 0 : 2]
    ):
        return None
    if any(not _name_first(name) for name in names[2:]):
        return None
    file = has_ext(names[-1]) and len(names) > 2
    formula = any(
        name.rstrip("$").lower() in TEX_COMMANDS for name in names[: -1 if file else None]
    )
    # a device path names its namespace and a name in it (``\\\\.\\pipe\\name``): no
    # escaped string starts so (``\\.`` would read as ``\.``, no escape)
    literal = device and len(names) > 2
    if formula or (not file and not literal and _ESCAPE_LIKE.search(raw) is not None):
        return None
    if escaped and "/" in rest and single_separators(raw) is None:
        return _file_name(raw, True)  # (session 38, review 1: ``\\\\\\\\srv\\\\s\\\\a/b.txt``)
    return "\\\\" + "\\".join(names) + ("\\" if raw.endswith("\\") else "")


def _relative_windows(raw: str) -> str | None:
    """The relative Windows path `raw` names (``src\\app.py``, ``src\\\\app.py`` as a
    JSON string escapes it: one backslash each), or None.

    Regex escapes and LaTeX have the same shape (``\\d+\\.\\d+``, ``x\\in``,
    ``2\\theta\\sin``, ``config\\.yaml``), so it must look like a path: two names or
    more, each starting with a letter, digit or ``_`` (or ``..``), none but the last a
    file name (``a.py\\nb.py`` is a listing with a newline escape), and the last a file
    name with a known extension, or three names or more of two characters each
    (``src\\app\\models``).
    """
    value = DOUBLED_BACKSLASHES.sub("\\\\", raw) if "\\\\" in raw else raw
    names = value.replace("/", "\\").split("\\")
    if names[-1] == "":
        names.pop()  # a directory's trailing separator
    if len(names) < 2 or not (has_ext(names[-1]) or _directories(raw, names)):
        return None
    if any(not _name_first(name) and name != ".." for name in names):
        return None
    if any(has_ext(name) for name in names[:-1]):
        return None
    if _plausible(value.replace("\\", "/")) is None:
        return None
    return value if value is raw or single_separators(raw) else _file_name(raw, False)


#: a file's name with an extension of one letter and up to 7 letters or digits more
_EXTENDED_NAME = re.compile(r"\w[\w.+@~-]*\.[A-Za-z][A-Za-z0-9]{0,7}")


def _file_name(value: str, anchored: bool) -> str | None:
    """The file name ending a JSON string's path that mixes its separators
    (``C:\\\\Users\\\\me/Documents/report.docx``), which the matcher finds there though
    it reads no path written with some separators single and some doubled
    (:func:`.factseparators.single_separators`); None when the path ends with a folder.
    A path from a drive, ``.\\``, ``~\\`` or a UNC server (`anchored`) ends with a file's
    name when it has an extension, a relative one when the name alone is a path (a
    known extension or file name: ``src\\\\a/config.json``). Session 38, review 1."""
    name = value.replace("\\", "/").rsplit("/", 1)[-1]
    if _plausible(name) is not None:
        return name
    return name if anchored and _EXTENDED_NAME.fullmatch(name) else None


def _name_first(name: str) -> bool:
    """Whether `name` starts with a letter, digit or ``_`` (session 35: also a non-ASCII
    cased letter, ``Élodie``; not a mark)."""
    return bool(name) and _letter(name[0]) and not mark(name[0])


def _letter(char: str) -> bool:
    """An ASCII letter, digit or ``_``, or a :func:`name_letter` (a cased letter or mark)."""
    return char in _NAME_START or (not char.isascii() and name_letter(char))


def _directories(raw: str, names: list[str]) -> bool:
    """Whether names without an extension are a directory path: three names or more of
    two characters each, each ending with a letter, digit or ``_`` (``ab\\w+\\d+`` is a
    regex), none a LaTeX command (``w_i\\cdot\\log``), none after a single backslash
    starting with ``n``, ``r`` or ``t`` (``word\\nword\\nword`` is text with its
    newlines escaped, ``src\\\\tests\\\\unit`` a path as a JSON string writes it)."""
    return (
        len(names) >= 3
        and all(len(name) >= 2 and _letter(name[-1]) and not mark(name[-1]) for name in names)
        and not any(name.lower() in TEX_COMMANDS for name in names)
        and _ESCAPE_LIKE.search(raw) is None
    )


def _plausible(value: str) -> str | None:
    if not any(c.isalpha() for c in value) or value.lower() in _NOT_PATHS:
        return None
    if _DATE_SLASHES.fullmatch(value):
        return None  # ``20/May/2024`` of a web server's log: a date
    if "/" not in value:
        known = value.split(".", 1)[0].split("-", 1)[0] in KNOWN_FILES  # (Dockerfile-dev)
        return value if has_ext(value) or known or DOTFILE.fullmatch(value) else None
    parts = [p for p in value.split("/") if p]
    if not parts:
        return None
    if value.startswith(("/", "~/", "./", "../")):
        if len(parts) >= 2 or has_ext(value) or parts[0].lower() in PATH_ROOTS:
            return value
        return None
    if not value.isascii() and not has_ext(value):
        # session 35, reviews 1 and 2: ``он/она/они``, ``α/β/γ``, ``к.т.н./д.т.н./проф.``,
        # ``сайт.рф/docs/a``: prose, as in session 34 (the ASCII rules below are older)
        return None
    # ``src/`` is a directory, ``s/`` and ``v/`` are pieces of an expression
    if has_ext(value) or value.count("/") >= 2 or (value.endswith("/") and len(value) > 2):
        return value
    # under a directory a file name needs no known extension (``prisma/schema.prisma``)
    if (
        _FILE_NAME.fullmatch(parts[-1])
        and _file_name_dir(parts[0])
        and not division(parts[0], parts[-1])
    ):
        return value
    # ``.ssh/config``, ``config/.env``: a dotted directory or a dotfile names a path
    return value if _DOT_DIR.match(value) or DOTFILE.fullmatch(parts[-1]) else None


def has_ext(value: str) -> bool:
    """Whether `value` ends with a known extension and its second suffixes (``a.py``,
    ``config.yaml.j2``, ``run.log.1``), in any case; as ``$`` would, a final newline is
    passed over.

    A long value is matched reversed, once: the regex anchored at the end is tried from
    every dot (2 MB of ``.1`` took a second). A short one (most) is searched forward,
    which skips to its dots.
    """
    if len(value) <= _SHORT_VALUE:
        return _HAS_EXT.search(value) is not None
    return _EXT_REVERSED.match(value[::-1].removeprefix("\n")) is not None


def _file_name_dir(name: str) -> bool:
    """Whether `name` is a directory name before a file name: name characters with an
    ASCII letter (one regex holding both backtracked over every letter of a long name:
    quadratic)."""
    return _DIR_NAME.fullmatch(name) is not None and _ASCII_LETTER.search(name) is not None


@functools.cache
def _caseless_file() -> re.Pattern[str]:
    """A caseless letter, more of them and ASCII name characters, then a known extension
    ending a name (:func:`caseless_file_after`)."""
    letters = caseless_letters()[1:-1]
    return re.compile(
        f"[{letters}][{letters}A-Za-z0-9_\\-]*+\\.(?:{EXTENSIONS})(?:\\.(?:{SECOND_SUFFIXES}))*"
        f"(?![{letters}A-Za-z0-9_])",
        re.IGNORECASE,
    )


def caseless_file_after(text: str, end: int, path: str) -> bool:
    """Whether slash path `path`, ending at `end` of `text` with a last name that has
    no known extension, is followed by a caseless letter that runs on to a known
    extension (``/home/x/app用户.py``): its last name is cut there, ``/home/x/app`` is
    no path of the text (session 36). Prose glued after a file's name or a folder's
    ``/`` (``修改src/app.py文件``, ``/home/用户``) is not looked at. The matcher reads
    the text alike (:func:`.factbounds.inside_longer_path`)."""
    if end >= len(text) or text[end].isascii():
        return False
    if path.endswith("/") or "/" not in path or has_ext(path):
        return False
    # review 1: read folded, as the matcher reads it (``/home/x/app㍿x.py``)
    seen = folded_after(text, end)
    return bool(seen) and _caseless_file().match(seen) is not None


def first_names(text: str) -> Iterator[tuple[int, int]]:
    """``(start, after its backslash)`` of each first name of a relative Windows path in
    `text` (``src\\app.py``): what ``factpaths._RELATIVE_START`` matches with
    :func:`name_letter` letters in its classes, read back from each backslash (that
    regex has no literal to skip to: tried at every position of a text that is not
    ASCII, it cost 40 % more there). A name is the longest run of path characters and
    such letters before the backslash, after the text's start or no ``/``, backslash,
    ``:`` or ``%``, starting with a letter, digit or ``_`` once the marks it starts
    with are passed over (session 43: :func:`_after_marks`). Review 1: not a character
    at a time in Python (5-10 times main's time on backslash-heavy texts): a text with
    few backslashes reads each run back by a regex over the reversed text (a regex
    tried at every position cost 25 % on the corpus), one with many finds the runs
    by a regex (:func:`_runs_before_backslash`)."""
    count = text.count("\\")
    if count * 64 > len(text):
        return _dense_first_names(text)
    return _sparse_first_names(text) if count else iter(())


def _dense_first_names(text: str) -> Iterator[tuple[int, int]]:
    """:func:`first_names`, one regex for the runs before a backslash."""
    for match in _runs_before_backslash().finditer(text):
        start = _after_marks(text, match.start(), match.end() - 1)
        first = text[start]
        if first in _NAME_START or (not first.isascii() and not mark(first)):
            yield start, match.end()


def _sparse_first_names(text: str) -> Iterator[tuple[int, int]]:
    """:func:`first_names`, each backslash's run read back over the reversed text."""
    back, n, run = text[::-1], len(text), _name_run().match
    at = text.find("\\")
    while at != -1:
        start = n - run(back, n - at).end()  # type: ignore[union-attr]  # (``*+``: a match)
        if start < at and (start == 0 or text[start - 1] not in "/\\:%"):
            start = _after_marks(text, start, at)
            first = text[start]
            if first in _NAME_START or (not first.isascii() and not mark(first)):
                yield start, at + 1
        at = text.find("\\", at + 1)


def _after_marks(text: str, start: int, stop: int) -> int:
    """Where a run of names starting at `start` (before `stop`) starts once the marks it
    starts with are passed over: they sit on the character before the run, no name's
    (a blank: ``see`` + U+0301 + ``src\\app.py`` names ``src\\app.py``), so no name
    starts with them. More than :data:`.factletters.MAX_MARKS` of them are read as a
    mark that starts no name (as :func:`.factletters.base_before` reads them)."""
    at = start
    while at < stop and at - start <= MAX_MARKS and mark(text[at]):
        at += 1
    return start if at - start > MAX_MARKS else at


@functools.cache
def _name_run() -> re.Pattern[str]:
    """A run of path characters and :func:`name_letter` letters (of the reversed text)."""
    return re.compile(f"[{name_class()}]*+")


@functools.cache
def _runs_before_backslash() -> re.Pattern[str]:
    """A longest run of path characters and :func:`name_letter` letters after none of
    them and no ``/``, backslash, ``:`` or ``%``, and the backslash after it."""
    name = name_class()
    return re.compile(f"(?<![{name}/\\\\:%])[{name}]++\\\\")


def name_start(text: str, start: int) -> int:
    """Where a slash path's names start, grown left from `start` over ASCII path
    characters and :func:`name_letter` letters; a run of such marks (at most
    :data:`.factletters.MAX_MARKS`) is taken with the character it sits on when that is one of
    those, else the names start after it (Thai ``ไฟล์`` ends with a mark on a caseless
    letter: prose, review 1 of session 34)."""
    while start > 0:
        char = text[start - 1]
        if char in PATH_CHARS or (not char.isascii() and not mark(char) and name_letter(char)):
            start -= 1
            continue
        if char.isascii() or not mark(char) or not name_letter(char):
            return start
        at = start - 1  # (the first mark of the run)
        while at > 0 and start - at < MAX_MARKS and mark(c := text[at - 1]) and name_letter(c):
            at -= 1
        base = text[at - 1] if at > 0 else " "
        if base in PATH_CHARS or (not base.isascii() and not mark(base) and name_letter(base)):
            start = at - 1
        else:
            return start
    return start


def cut_path(text: str, start: int, end: int) -> bool:
    """:func:`cut_name` for a slash path or name the extraction finds in a text that is not
    ASCII (review 1 of session 35), which is also none when the matcher, reading the text
    folded, sees its ``/`` end a longer path (:func:`.factletters.in_folded_folder`:
    ``／用户/app.py``), or when a name of it starts with a mark (``/home/x/\u0301/a.py``:
    such a name is no name, as a Windows path's, ``_name_first``). Session 36: none
    either after a caseless letter unless it starts at a system root (:func:`system_root`),
    before what the matcher reads as more of it (:func:`.factletters.folded_dots_go_on`),
    or, a bare name, after what it reads as a word (:func:`.factletters.folded_word_beside`).
    Session 37: none either after what it reads as a drive's or a URL's ``:``
    (:func:`.factletters.folded_colon_before`: ``x：/tmp``), nor, a ``//`` start, beside
    what goes on a UNC path's name (:func:`_unc_cut`: ``//a/app.py修改``)."""
    if text[start - 1 if start else 0 : end + 1].isascii():
        # (ASCII in it and beside it: most paths of a long text, one look; a name's
        # dots before more of it, ``app.py.／``, are the caller's: :func:`dotted_name_goes_on`)
        return False
    after_folder = text[start] == "/" and start and not text[start - 1].isascii()
    if after_folder and in_folded_folder(text, start):
        return True
    if after_folder and folded_colon_before(text, start):
        return True  # (session 37: ``x：/tmp/build.sh`` is ``x:/tmp/build.sh`` to the matcher)
    if after_folder and caseless_before(text, start) and not system_root(text[start:end]):
        return True
    if cut_name(text, start, end) or folded_dots_go_on(text, start, end):
        return True
    if caseless_file_after(text, end, text[start:end]):
        return True
    if folded_word_beside(text, start, end):
        return True
    if text.startswith("//", start) and _unc_cut(text, start, end):
        return True
    return not text[start:end].isascii() and mark_after_slash(text, start, end)


def _unc_cut(text: str, start: int, end: int) -> bool:
    """Whether a slash path starting with ``//`` is cut as the matcher reads it: a UNC
    path's name, which a letter of any script, a mark or a word character glued on
    goes on (session 37: ``//a/app.py修改``, ``//home٣``). After the name the matcher
    reads the character its own end stops at: a folder's ``/`` or the first of the dots
    and dashes the judgement strips (review 1: ``//tmp/x.py.修改``, ``//srv/share/ملف``
    keep their fact)."""
    value = text[start:end]
    tail = end - 1 if value.endswith("/") else start + len(value.rstrip(".-"))
    return cut_name(text, start, tail, every_letter=True) or word_after(text, tail)


def cut_name(text: str, start: int, end: int, *, every_letter: bool = False) -> bool:
    """Whether a non-ASCII cased letter (Latin, Greek, Cyrillic, …) or mark stands right
    before `start` or at `end` of `text` (with `every_letter`, a letter of any
    script): a name was cut there (a Windows path's characters are ASCII: ``C:\\Jos``
    of ``C:\\José``; a slash path grows over them, :func:`name_letter`, so only a
    character they fold to cuts it: ``ʰ``). Session 34: no path is read
    there, a loss rather than a false fact. A caseless letter (CJK, kana, Hangul, Thai,
    written without spaces) is prose glued on: the path ends there (``修改src/app.py文件``).
    A character is judged as the matcher reads it, folded (NFKC, case): ``ʰ`` is an
    ``h``, ``ᵝ`` a ``β``, so the name goes on over it; a footnote's superscript digit
    does not (:data:`MORE_NAME`). Before the path a mark belongs to the character
    before it (review 1: Thai ``ไฟล์``, a spacing ``´``): that base is judged, so
    ``Jose\u0301/app.py`` is cut, ``ไฟล์src/app.py`` prose."""
    before = base_before(text, start)
    if before is not None and _goes_on(before, -1, every_letter):
        return True
    return end < len(text) and not text[end].isascii() and _goes_on(text[end], 0, every_letter)


def _goes_on(char: str, side: int, every_letter: bool) -> bool:
    """Whether `char` (side -1: before a path, 0: after it) goes on the path's name."""
    if char in SUPERSCRIPT_DIGITS:
        return False  # a footnote's mark (``app.py¹``), no more of the name
    near = (unicodedata.normalize("NFKC", char).casefold() or char)[side]
    if near.isascii():
        return near in _NAME_GOES_ON if side == 0 else near in PATH_CHARS
    category = unicodedata.category(near)
    return category[0] == "M" or category in CASED or (every_letter and category[0] == "L")


#: ASCII characters a folded character may become that go on a path's name: before
#: it, what the matcher grows a path over; after it, those but a dot or dash (which
#: end a name before a blank: ``run.log.``)
_NAME_GOES_ON = PATH_CHARS - {".", "-"}
