"""Finding file paths and URLs in text, for fact extraction (:mod:`.facts`).

Paths are found from their anchors (a ``/`` or a known extension) and grown in both
directions, then judged (``and/or`` and the pieces of a ``sed`` expression are not
paths; environment paths like ``site-packages`` are not the user's files). URLs are
found from their ``://`` and masked out before paths are looked for, as what
:mod:`.pathmasks` blanks out (grep's context separators, a tree's branches, sed's
pieces).
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
    folds_to_separator,
    longer_when_folded,
    system_root,
    tail_of_folder,
    word_beside_when_folded,
)
from helpers.reference_facts.mixedpaths import quote_escape  # session 39, review 1
from helpers.reference_facts.namedfiles import dotfiles, known_files  # session 33: own rules
from helpers.reference_facts.pathmasks import mask, path_text  # (session 43: split out)
from helpers.reference_facts.rangeaddresses import is_word_char
from helpers.reference_facts.rules import (
    in_folder,  # session 35, review 1
    in_slash_name,  # session 35
    matcher_reads,  # session 35, review 1
    mixed_escaped,  # session 38
    plausible_path,  # session 30's review: 1b, 1c
)

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
_PATH_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-+@~")
_NOT_BEFORE_PATH = frozenset("/.-~@:%+")
# Session 29: a Windows path, plainly (what may stand before it: :func:`_windows_paths`)
_WINDOWS_PATH = re.compile(r"(?:[A-Za-z]:[\\/]|\.\.?\\|~\\)[A-Za-z0-9_.+@~\-\\/]*")
# Session 30: a relative one (``src\\app.py``): a name, a backslash, the rest
_RELATIVE_WINDOWS_PATH = re.compile(
    r"(?<![A-Za-z0-9_.+@~\-/\\:%])[A-Za-z0-9_][A-Za-z0-9_.+@~\-]*\\[A-Za-z0-9_.+@~\-\\/]*"
)
# Session 31: a UNC path (``\\\\server\\share``), plainly
_UNC_PATH = re.compile(r"\\{2,}[A-Za-z0-9_][A-Za-z0-9_.+@~$\-\\/]*")  # (:func:`_windows_paths`)
# Session 32: a Win32 device path: ``\\.\pipe\x`` (a UNC path whose server is ``.`` or
# ``?``: :func:`_device_unc_paths`), and a drive path after ``\\?\`` or ``\\.\`` (also
# JSON-escaped), the drive's
_DEVICE_DRIVE_PATH = re.compile(
    r"(?<![A-Za-z0-9_.+@~\-/\\:%])(?:\\\\[?.]\\|\\\\\\\\[?.]\\\\)"
    r"([A-Za-z]:[\\/][A-Za-z0-9_.+@~\-\\/]*)"
)
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


def _mark(char: str) -> bool:
    return unicodedata.category(char).startswith("M")


_SUPERSCRIPTS = "¹²³⁰⁴⁵⁶⁷⁸⁹"
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


def _device_unc_paths(original: str, text: str) -> Iterator[tuple[int, int]]:
    """Session 32 (review 11, restated): a Win32 device path read as a UNC path whose
    server is ``.`` or ``?`` (``\\\\.\\pipe\\docker_engine``): two backslashes or more after
    no path character, ``.`` or ``?``, backslashes, then a name (no drive: that is the
    drive's path) and what a Windows path grows over. `text` is `original` as the Windows
    finders read it (a name's letter or mark is a ``_``); session 43: the first name
    starts with an ASCII character of `original`, as a server's name does
    (``\\\\.\\éa`` starts none, so it swallows no device path after it)."""
    start = text.find("\\\\")
    while start != -1:
        end = start
        if start == 0 or original[start - 1] not in _WINDOWS_NOT_BEFORE:  # (s43: a mark)
            at = start
            while at < len(text) and text[at] == "\\":
                at += 1
            if at < len(text) and text[at] in "?.":
                name = at + 1
                while name < len(text) and text[name] == "\\":
                    name += 1
                drive = text[name : name + 1].isascii() and text[name : name + 1].isalpha()
                drive = drive and text[name + 1 : name + 2] == ":"
                first = original[name : name + 1]  # (session 43: ASCII, as a server's)
                if (
                    name > at + 1
                    and not drive
                    and first
                    and (first.isascii() and is_word_char(first))
                ):
                    end = name + 1
                    while end < len(text) and text[end] in _WINDOWS_GROWS:
                        end += 1
                    yield start, end
        while end < len(text) and text[end] == "\\":
            end += 1  # (a run of backslashes starts no second path)
        start = text.find("\\\\", max(end, start + 1))


_WINDOWS_NOT_BEFORE = frozenset(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.+@~-/\\:%"
)
_WINDOWS_GROWS = _WINDOWS_NOT_BEFORE - {":", "%"} | {"$"}


def _cut(text: str, end: int) -> bool:
    """Whether a letter stands right after `end` (``\\\\.\\pipe\\r`` of ``…\\réseau``)."""
    return text[end : end + 1].isalpha()


def _windows_paths(
    pattern: re.Pattern[str], text: str, read: str, server: bool = False
) -> Iterator[re.Match[str]]:
    """Session 29: the matches of a Windows finder's `pattern` (:data:`_WINDOWS_PATH`,
    :data:`_UNC_PATH`) in `read` (a name's letter or mark read as a ``_``) after no ASCII
    path character, separator or ``:``, each tried where the last one ended or one past a
    rejected one. Session 43: a character outside ASCII before it (read as ``_``) glues
    nothing on here: a letter there is a cut, a mark is judged by the character it sits
    on (:func:`_letter_beside`: U+0301 then ``.\\app.py`` is a path), and either way
    the match is grown over, so no path starts inside it (``éC:\\``, U+0301, then
    ``.\\app.py`` names only ``app.py``), as production reads it. With `server` (a UNC
    path) the first name starts with an ASCII character of `text`, as a server's name
    does: ``\\\\éa`` starts no path, so none is grown over what follows it."""
    at = 0
    while (match := pattern.search(read, at)) is not None:
        start = match.start()
        glued = start and text[start - 1] in _WINDOWS_NOT_BEFORE  # (ASCII: as `read` has it)
        first = start + len(match.group()) - len(match.group().lstrip("\\"))
        if glued or (server and not text[first].isascii()):
            at = start + 1
            continue
        yield match
        at = max(match.end(), start + 1)


def _letter_beside(text: str, start: int, end: int) -> bool:
    """Session 33 (second review): whether the character before `start` or at `end` is a
    letter or a mark (a Unicode category starting L or M). Session 43: a mark before
    `start` is judged by its base (:func:`_base_goes_on`): a combining mark is part of
    the character before it: ``\\\\srv\\share\\``, U+0301, then ``.\\app.py`` names
    ``.\\app.py`` (the mark sits on a backslash); ``a``, U+0301, then ``.\\app.py`` names
    no ``.\\app.py`` (the mark is part of the name ``á.``)."""
    if start and _mark(text[start - 1]):
        if _base_goes_on(text, start):
            return True
    elif unicodedata.category(text[start - 1 : start] or " ").startswith(("L", "M")):
        return True
    if unicodedata.category(text[end : end + 1] or " ").startswith(("L", "M")):
        return True
    # review 1 of session 35: after it, a character the matcher reads as an ASCII
    # letter, digit or ``_`` first goes on the name (``①`` is ``1``); session 38: but a
    # footnote's superscript digit, a blank to the matcher (``srv\\x.log¹``)
    after = unicodedata.normalize("NFKC", text[end : end + 1]).casefold()[:1]
    return (
        ord(text[end : end + 1] or "a") >= 128
        and text[end : end + 1] not in _SUPERSCRIPTS
        and (after.isalnum() or after == "_")
        and after.isascii()
    )


def _base_goes_on(text: str, start: int) -> bool:
    """Session 43: whether the character the marks before `start` sit on, folded as the
    matcher folds it (NFKC, case, its own trailing marks dropped), goes on a Windows
    path's name: a letter or mark of any script or an ASCII path character (``a``,
    ``é``, ``用``); a blank, a separator or a footnote's superscript digit does not. More
    than 32 marks in a row are judged as a mark (a cut)."""
    at = start - 1
    while at >= 0 and start - at <= 32 and _mark(text[at]):
        at -= 1
    if at < 0:
        return False
    if _mark(text[at]):
        return True
    if text[at] in _SUPERSCRIPTS:
        return False
    folded = unicodedata.normalize("NFKC", text[at]).casefold() or text[at]
    folded = folded.rstrip("".join(c for c in folded if _mark(c)))
    if not folded:
        return False
    near = folded[-1]
    if near.isascii():
        return near in _PATH_CHARS
    return unicodedata.category(near)[0] in "LM"


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
    # session 35: the Windows finders read a name's non-ASCII cased letters and marks
    # as name characters (``C:\\Users\\José``): found in the text with each read as ``_``
    read = "".join("_" if ord(c) >= 128 and in_slash_name(c) else c for c in text)
    # a Windows path replaces every span starting inside it (session 29)
    windows = [
        (m.start(), quote_escape(text, m.end())) for m in _windows_paths(_WINDOWS_PATH, text, read)
    ]
    # session 30: a relative Windows path (``src\\app.py``) when it is judged a path
    for match in _RELATIVE_WINDOWS_PATH.finditer(read):
        inside = any(w_start <= match.start() < w_end for w_start, w_end in windows)
        if _mark(text[match.start()]):
            continue  # session 43: a name starts with no mark (``_name_first``), nor one here
        value = text[match.start() : (end := quote_escape(text, match.end()))]
        if not inside and (plausible_path(value) is not None or mixed_escaped(value)):
            windows.append((match.start(), end))  # s38: a JSON-mixed one: none, nor its names
    windows.extend(_unc_and_device_spans(text, read))
    # (session 40: the drive's path ends as one without the prefix, before ``\\"`` too)
    windows.extend(
        (m.start(1), quote_escape(text, m.end(1))) for m in _DEVICE_DRIVE_PATH.finditer(read)
    )
    # (session 33's second review: none cut at a letter or a mark of any script)
    windows = [(start, end) for start, end in windows if not _letter_beside(text, start, end)]
    windows.sort()
    for start in list(spans):
        if any(w_start < start < w_end for w_start, w_end in windows):
            del spans[start]
    for start, end in windows:
        spans[start] = max(end, spans.get(start, end))
    return spans


def _unc_and_device_spans(text: str, read: str) -> list[tuple[int, int]]:
    """The UNC paths (session 31) and Win32 device paths read as UNC ones (session 32)
    of `text` (`read` as the Windows finders read it), each from a candidate no earlier
    one grew over (:func:`_first_starts`)."""
    uncs = list(_windows_paths(_UNC_PATH, text, read, server=True))
    devices = list(_device_unc_paths(text, read))
    firsts = _first_starts([match.span() for match in uncs] + devices)
    found = list(_unc_spans(text, [match for match in uncs if match.start() in firsts]))
    for start, end in devices:
        if start not in firsts:
            continue
        if plausible_path(text[start : quote_escape(text, end)]) and not _cut(text, end):
            found.append((start, quote_escape(text, end)))
    return found


def _first_starts(candidates: list[tuple[int, int]]) -> set[int]:
    """Session 43: the starts of the UNC and device candidates (grown, not yet judged)
    that start after the end of every one before them. A start inside an earlier one is
    grown over, whatever that one is judged (``\\\\.\\diré$\\\\a`` starts no UNC path
    at ``\\\\a``; ``\\\\srv$\\\\.\\x`` no device path at ``\\\\.``): production
    reads both in one scan."""
    firsts, done = set(), 0
    for start, end in sorted(candidates):
        if start >= done:
            firsts.add(start)
            done = end
    return firsts


def _unc_spans(text: str, matches: list[re.Match[str]]) -> Iterator[tuple[int, int]]:
    """Session 31: the UNC paths of `text` (of the candidate `matches`), judged as relative
    ones; session 33's review: none cut at a letter it cannot grow over; session 38: none
    after a character the matcher reads as ``:`` or ``/`` (``：\\\\srv`` is a URL's
    ``://srv`` to it)."""
    for match in matches:
        value = text[match.start() : (end := quote_escape(text, match.end()))]
        if folds_to_separator(text, match.start()):
            continue
        if _after_device_mark(text, match.start()):
            continue  # session 42: the separator after a device's ``?``, no UNC start
        if plausible_path(value) is not None and not _cut(text, match.end()):
            yield match.start(), end


def _after_device_mark(text: str, start: int) -> bool:
    """Session 42: whether the backslashes at `start` follow a device path's ``?``: two
    backslashes or more after no path character (``\\\\\\\\?\\\\UNC\\srv``). They
    separate the device's namespace from its first name, as in ``\\\\?\\UNC\\srv``;
    the path is the device's (:func:`_device_unc_paths`) or none. No UNC path starts
    there, whose server would be ``UNC``. (A ``.`` there is a path character: no UNC
    path follows it anyway; after ``a\\\\?`` the backslashes are no device's.)"""
    if text[start - 1 : start] != "?":
        return False
    run = start - 1
    while run > 0 and text[run - 1] == "\\":
        run -= 1
    return start - 1 - run >= 2 and (run == 0 or text[run - 1] not in _WINDOWS_NOT_BEFORE)


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
