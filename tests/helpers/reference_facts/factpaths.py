"""Finding file paths and URLs in text, for fact extraction (:mod:`.facts`).

Paths are found from their anchors (a ``/`` or a known extension) and grown in both
directions, then judged (``and/or`` and the pieces of a ``sed`` expression are not
paths; environment paths like ``site-packages`` are not the user's files). URLs are
found from their ``://`` and masked out before paths are looked for, as what
:mod:`.pathmasks` blanks out (grep's context separators, a tree's branches, sed's
pieces). The Windows paths (:mod:`.windowspaths`) replace the spans starting inside
them.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator

# rules changed since c2756f6 (session 29: second suffixes, dotfiles, known files with a
# suffix, Windows paths judged as POSIX ones), not fast paths: shared with the module
# under test
from ctxledger.compressor.factpathrules import EXTENSIONS, SECOND_SUFFIXES  # (lists, no rule)
from helpers.reference_facts.foldedpaths import (
    caseless_before,
    caseless_file_after,
    drive_before,
    longer_when_folded,
    system_root,
    tail_of_folder,
    word_beside_when_folded,
)
from helpers.reference_facts.namedfiles import dotfiles, known_files  # session 33: own rules
from helpers.reference_facts.pathmasks import mask, path_text  # (session 43: split out)
from helpers.reference_facts.rangeaddresses import is_word_char
from helpers.reference_facts.rules import (
    in_folder,  # session 35, review 1
    in_slash_name,  # session 35
    matcher_reads,  # session 35, review 1
    plausible_path,  # session 30's review: 1b, 1c
)
from helpers.reference_facts.windowspaths import PATH_CHARS as _PATH_CHARS  # (session 43)
from helpers.reference_facts.windowspaths import SUPERSCRIPTS as _SUPERSCRIPTS
from helpers.reference_facts.windowspaths import mark as _mark
from helpers.reference_facts.windowspaths import windows_spans

__all__ = [
    "bounded",
    "find_paths",
    "is_word_char",
    "mask",
    "path_text",
    "paths",
    "plausible_path",
    "urls",
]

# Paths grow both ways from anchors ("/", a known extension): one regex everywhere is ~10x slower.
_NOT_BEFORE_PATH = frozenset("/.-~@:%+")
_URL_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*$")
_URL_TAIL = re.compile(r"://[^\s<>\"'`\])}|,]+")
_URL_STRIP = ".,;:!?)]}'\""

_ENVIRONMENT_PATH = re.compile(r"site-packages|dist-packages|/lib/python\d|<frozen|node_modules/")
_OBJECT_NAMES = frozenset(
    [
        "self",
        "cls",
        "mock",
        "os",
        "sys",
        "np",
        "pd",
        "obj",
        "super",
        "this",
        "args",
        "kwargs",
        "request",
        "response",
    ]
)
_PATH_ROOTS = frozenset(
    [
        "tmp",
        "etc",
        "usr",
        "var",
        "home",
        "opt",
        "dev",
        "bin",
        "sbin",
        "srv",
        "mnt",
        "root",
        "proc",
        "sys",
        "lib",
        "work",
        "data",
        "app",
        "src",
        "workspace",
        "testbed",
        "repo",
        "code",
        "project",
        "users",
    ]
)
_KNOWN_FILES = frozenset(
    {"Makefile", "Dockerfile", "Gemfile", "Procfile", "Rakefile", "Vagrantfile", "Jenkinsfile"}
)


def urls(text: str) -> list[tuple[int, int, str]]:
    found: list[tuple[int, int, str]] = []
    for match in _URL_TAIL.finditer(text):
        start = match.start()
        while start > 0 and (text[start - 1].isalnum() or text[start - 1] in "+.-"):
            start -= 1
        scheme = text[start : match.start()]
        value = text[start : match.end()].rstrip(_URL_STRIP)
        if len(scheme) < 2 or not _URL_SCHEME.match(scheme) or len(value) <= len(scheme) + 4:
            continue
        found.append((start, start + len(value), value))
    return found


def bounded(pattern: re.Pattern[str], text: str, not_before: str = "") -> Iterator[re.Match[str]]:
    """``pattern.finditer`` where a match may not follow a word char or one of `not_before`.

    Same result as a leading negative lookbehind, without its cost: rejected matches
    resume one character later, so an overlapping valid match is still found.
    """
    pos = 0
    while True:
        match = pattern.search(text, pos)
        if match is None:
            return
        start = match.start()
        if start > 0 and (is_word_char(text[start - 1]) or text[start - 1] in not_before):
            pos = start + 1
            continue
        yield match
        pos = match.end() if match.end() > start else start + 1


def _path_spans(text: str) -> Iterator[tuple[int, int]]:
    """Candidate path spans, in order: slash paths, then bare file names."""
    n = len(text)
    slash = text.find("/")
    while slash != -1:
        start, end = slash, slash
        while start > 0 and in_slash_name(text[start - 1]):
            if _mark(text[start - 1]):
                base = start - 1
                while base > 0 and start - base < 32 and _mark(text[base - 1]):
                    if not in_slash_name(text[base - 1]):
                        break
                    base -= 1
                if base == 0 or _mark(text[base - 1]) or not in_slash_name(text[base - 1]):
                    break  # marks on no letter of a name (Thai ``ไฟล์``): prose before it
            start -= 1
        while end < n:
            if in_slash_name(text[end]) or text[end] == "/":
                end += 1
                continue
            # session 35: a folder name (a "/" after it) also holds caseless letters
            stop = end
            while stop < n and (in_slash_name(text[stop]) or in_folder(text[stop])):
                stop += 1
            if stop in (end, n) or text[stop] != "/":
                break
            end = stop
        yield start, end
        slash = text.find("/", end)
    anchors = [(start, end, True) for start, end in _extension_anchors(text)]
    anchors.extend((start, end, False) for start, end in known_files(text))
    anchors.extend((start, end, False) for start, end in dotfiles(text))
    for anchor, end, extension in anchors:
        start = anchor
        while start > 0 and (is_word_char(text[start - 1]) or text[start - 1] in ".-"):
            if text[start - 1] in _SUPERSCRIPTS:
                break  # review fixes: a footnote's mark ends the name before it
            start -= 1
        if start == anchor and extension:
            continue  # ``.py`` alone
        yield start, end


_EXTENSION_LIST = frozenset(EXTENSIONS.split("|"))
_SECOND_WORDS = frozenset(word for word in SECOND_SUFFIXES.split("|") if word.isalnum()) | {
    "jinja",
    "jinja2",
}


def _more_name(char: str) -> bool:
    """A word character that goes on a name (a footnote's superscript digit does not)."""
    return is_word_char(char) and char not in _SUPERSCRIPTS


def _run(text: str, at: int) -> str:
    """The name characters (:func:`_more_name`) from `at` on."""
    end = at
    while end < len(text) and _more_name(text[end]):
        end += 1
    return text[at:end]


def _extension_anchors(text: str) -> Iterator[tuple[int, int]]:
    """Session 32 (review 11, restated): each ``.ext`` (a known extension, then second
    suffixes: ``.tar.gz`` is ``.gz``'s, ``.py.bak``) whose name ends there, read suffix
    by suffix: no name character, ``+``, ``~``, ``@``, ``(`` or ``/`` after it; no
    ``-`` unless dots and dashes then a blank or the end follow (``app.py--``); no
    ``.`` then dots and dashes then a word character, ``+``, ``~``, ``@`` or ``/``
    (``resp.json.get``)."""
    dot = text.find(".")
    while dot != -1:
        word = _run(text, dot + 1)
        if word not in _EXTENSION_LIST:
            dot = text.find(".", dot + 1)
            continue
        end = dot + 1 + len(word)
        while end < len(text) and text[end] == ".":
            second = _run(text, end + 1)
            if not (second in _SECOND_WORDS or (second.isdecimal() and len(second) <= 3)):
                break
            end += 1 + len(second)
        if _name_ends(text, end):
            yield dot, end
            dot = text.find(".", end)
        else:
            dot = text.find(".", dot + 1)


def _name_ends(text: str, end: int) -> bool:
    if end == len(text):
        return True
    after = text[end]
    if _more_name(after) or after in "+~@(/":
        return False
    if after not in "-.":
        return True
    stop = end + 1
    while stop < len(text) and text[stop] in ".-":
        stop += 1
    if after == "-":
        # (session 39: a footnote's superscript digit is a blank to the matcher)
        return stop == len(text) or text[stop].isspace() or text[stop] in _SUPERSCRIPTS
    # (session 37: a ``\\`` is the matcher's ``/``)
    return stop == len(text) or not (_more_name(text[stop]) or text[stop] in "+~@/\\")


def _unc_goes_on(text: str, start: int, end: int) -> bool:
    """Session 37: whether the character at `end`, read as the matcher reads it, goes on
    a UNC path's last name (a ``//`` start is one to it): a word character, a letter or
    mark of any script, or a path character but a dot or dash (``＠`` is ``@``). A span
    ending with a ``/``, a dot or a dash ends there to the matcher (review 1)."""
    if text[end - 1] in "/.-":
        return False
    seen = matcher_reads(text[end : end + 1])[:1]
    return bool(seen) and (
        is_word_char(seen) or seen in "+@~" or unicodedata.category(seen)[0] in "LM"
    )


def _cased_beside(text: str, start: int, end: int) -> bool:
    """Session 34: whether the character before `start` or at `end`, folded as the
    matcher folds it (NFKC, case), goes on the name there: a mark or a letter of an
    alphabet with case (Latin, Greek, Cyrillic), or an ASCII path character (after
    the name, not a dot or dash); a caseless letter (CJK, kana, Hangul, Thai) is prose
    written without spaces, a footnote's superscript digit no more of the name."""
    at = start - 1
    while at >= 0 and start - at <= 32 and unicodedata.category(text[at]).startswith("M"):
        at -= 1  # review 1: a mark before the path belongs to its base, judged instead
    if at >= 0 and unicodedata.category(text[at]).startswith("M"):
        return True  # (review 2: more than 32 marks in a row are judged as a mark: a cut)
    if 0 <= at < start - 1 and ord(text[at]) < 128:
        if text[at] in _PATH_CHARS:
            return True  # NFD ``Jose\u0301/app.py``
    elif at >= 0 and _glued(text[at], -1):
        return True
    return end < len(text) and _glued(text[end], 0)


def _glued(char: str, side: int) -> bool:
    """Whether non-ASCII `char` before (-1) or after (0) a path goes on its name."""
    if ord(char) < 128 or char in "\u00b9\u00b2\u00b3\u2070\u2074\u2075\u2076\u2077\u2078\u2079":
        return False
    folded = unicodedata.normalize("NFKC", char).casefold() or char
    if side == -1:  # its own trailing marks (``´`` = space, mark) belong to it
        folded = folded.rstrip("".join(c for c in folded if unicodedata.category(c)[0] == "M"))
        if not folded:
            return False
    near = folded[side]
    if ord(near) < 128:
        return near in (_PATH_CHARS - {".", "-"} if side == 0 else _PATH_CHARS)
    return unicodedata.category(near) in ("Lu", "Ll", "Lt", "Mn", "Mc", "Me")


def _dots_before_backslash(text: str, start: int, end: int) -> bool:
    """Session 37: whether the span ends with dots and dashes, a dot among them, right
    before a ``\\``, which the matcher reads as a ``/`` going on the name; review 1:
    not after a folder's ``/`` (``/srv/share/.\\`` is ``/srv/share/`` to it)."""
    if text[end : end + 1] != "\\":
        return False
    name, dots = re.fullmatch(r"(.*?)([.\-]*)", text[start:end], re.S).groups()
    return "." in dots and not name.endswith("/")


def span_ends(text: str) -> dict[int, int]:
    """Start -> the longest end of the candidate spans at that start."""
    spans: dict[int, int] = {}
    for start, end in _path_spans(text):
        if _cased_beside(text, start, end):
            continue  # session 34: a slash path or name cut at a letter or mark is none
        if (
            text[start] == "/"
            and start
            and ord(text[start - 1]) >= 128
            and tail_of_folder(text[:start])
        ):
            continue  # review 1 of session 35: ``／用户/app.py`` read as ``/用户/app.py``
        if text[start] == "/" and caseless_before(text, start) and not system_root(text[start:end]):
            continue  # session 36: ``用户/app.py`` names no ``/app.py``
        if text[start] == "/" and start and (text[start - 1] == "\\" or drive_before(text, start)):
            continue  # session 37: ``\\/usr`` is ``//usr``, ``x：/tmp`` a drive's, to the matcher
        if _dots_before_backslash(text, start, end):
            continue  # session 37: ``/tmp/x.py.\\`` is ``/tmp/x.py./`` to the matcher
        if text.startswith("//", start) and _unc_goes_on(text, start, end):
            continue  # session 37: a ``//`` start is a UNC path to the matcher
        if caseless_file_after(text, end, text[start:end]):
            continue  # session 36: ``/home/x/app`` of ``/home/x/app用户.py`` is cut
        if word_beside_when_folded(text, start, end):
            continue  # session 36: ``㍿app.py`` is ``株式会社app.py`` to the matcher
        if longer_when_folded(text, start, end):
            continue  # session 36: ``~/a．／`` is ``~/a./`` to the matcher, a longer path
        if any(_mark(text[at + 1]) for at in range(start, end - 1) if text[at] == "/"):
            continue  # review 1 of session 35: a name starting with a mark is no name
        spans[start] = max(end, spans.get(start, end))  # ``x.tar.gz`` over ``x.tar``
    # a Windows path replaces every span starting inside it (session 29)
    windows = windows_spans(text)
    for start in list(spans):
        if any(w_start < start < w_end for w_start, w_end in windows):
            del spans[start]
    for start, end in windows:
        spans[start] = max(end, spans.get(start, end))
    return spans


def _placeholder(value: str) -> bool:
    """Session 32: whether `value` is an example path: its names, after a drive, ``~``,
    ``.`` or ``..``, start with ``path`` and ``to`` (``/path/to/dir``)."""
    names = re.split(r"[\\/]+", value)
    if names[0] in ("", "~", ".", "..") or re.fullmatch(r"[A-Za-z]:", names[0]):
        names = names[1:]
    return names[:2] == ["path", "to"]  # (lower case: ``Path/To/x.pdf`` is a file)


def paths(text: str) -> Iterator[tuple[int, str]]:
    spans = span_ends(text)
    found: dict[int, str] = {}
    for start, end in spans.items():
        if start > 0 and text[start - 1] in _NOT_BEFORE_PATH:
            continue
        # session 29: a dotted name (``.env``, ``.github/``) and ``.\\`` start paths too
        dotted = start + 1 < len(text) and text[start + 1].isascii() and text[start + 1].isalpha()
        if text[start] == "." and not (
            text.startswith(("./", "../", ".\\", "..\\"), start) or dotted
        ):
            continue
        if re.match(r"(?:\./)+/", text[start:end]):
            continue  # session 37: ``.//src/a.py`` is ``/src/a.py`` as a fact
        value = plausible_path(text[start:end])
        if value is None or _ENVIRONMENT_PATH.search(value.replace("\\", "/")):
            continue
        if "/" not in value and value.split(".", 1)[0].lower() in _OBJECT_NAMES:
            continue  # ``self.log``, ``mock.patch``: attribute access, not a file
        if _placeholder(value):
            continue  # session 32: ``path/to/file1``, an example
        found[start] = value
    return iter(sorted(found.items()))


def find_paths(text: str) -> list[str]:
    """The file paths mentioned in `text` (URLs excluded), in order, once each."""
    masked = mask(text, [(start, end) for start, end, _ in urls(text)])
    return list(dict.fromkeys(value for _, value in paths(path_text(masked))))
