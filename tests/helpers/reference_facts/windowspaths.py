"""Independent reference (moved out of ``factpaths`` in session 43): the Windows paths
of a text, each finder a plain regex on the text as they read it (a name's letter or
mark outside ASCII read as ``_``): drive and relative paths, UNC paths and Win32
device paths, none cut at a letter or a mark of any script. :mod:`.factpaths` lets
them replace the spans starting inside them."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator

from helpers.reference_facts.foldedpaths import folds_to_separator
from helpers.reference_facts.mixedpaths import quote_escape
from helpers.reference_facts.rangeaddresses import is_word_char
from helpers.reference_facts.rules import in_slash_name, mixed_escaped, plausible_path

__all__ = ["PATH_CHARS", "SUPERSCRIPTS", "mark", "windows_spans"]

PATH_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-+@~")
SUPERSCRIPTS = "¹²³⁰⁴⁵⁶⁷⁸⁹"
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


_NAME_FIRST = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")


def mark(char: str) -> bool:
    return unicodedata.category(char).startswith("M")


def _past_marks(text: str, start: int, backslash: int) -> int:
    """Session 43 (round 2): where a relative path's first name starts when the run
    before its backslash starts with marks: they sit on the character before the run
    (no name's: a blank), so the name starts after them, when a letter, digit or ``_``
    (not a mark) follows them before the backslash; -1 when none does, or after more
    than 32 marks (read as one mark, as ``base_before`` reads them)."""
    marks = 0
    while start + marks < backslash and mark(text[start + marks]):
        marks += 1
    if marks > 32:
        return -1
    at = start + marks
    first = text[at] if at < backslash else ""
    good = first != "" and not mark(first) and (first.isascii() is False or first in _NAME_FIRST)
    return at if good else -1


def windows_spans(text: str) -> list[tuple[int, int]]:
    """The Windows paths of `text`, by start: from a drive, ``.\\``, ``..\\`` or ``~\\``
    (session 29), relative ones (session 30), UNC paths (session 31), device paths
    (session 32) and a device prefix's drive path (session 40), none cut at a letter or
    a mark of any script (session 33's second review)."""
    # session 35: the Windows finders read a name's non-ASCII cased letters and marks
    # as name characters (``C:\\Users\\José``): found in the text with each read as ``_``
    read = "".join("_" if ord(c) >= 128 and in_slash_name(c) else c for c in text)
    # from a drive, ``.\\``, ``..\\`` or ``~\\`` (session 29)
    windows = [
        (m.start(), quote_escape(text, m.end())) for m in _windows_paths(_WINDOWS_PATH, text, read)
    ]
    # session 30: a relative Windows path (``src\\app.py``) when it is judged a path
    for match in _RELATIVE_WINDOWS_PATH.finditer(read):
        start = _past_marks(text, match.start(), text.index("\\", match.start()))
        inside = any(w_start <= start < w_end for w_start, w_end in windows)
        if start == -1:
            continue  # session 43: a name starts with no mark (``_name_first``), nor one here
        value = text[start : (end := quote_escape(text, match.end()))]
        if not inside and (plausible_path(value) is not None or mixed_escaped(value)):
            windows.append((start, end))  # s38: a JSON-mixed one: none, nor its names
    windows.extend(_unc_and_device_spans(text, read))
    # (session 40: the drive's path ends as one without the prefix, before ``\\"`` too)
    windows.extend(
        (m.start(1), quote_escape(text, m.end(1))) for m in _DEVICE_DRIVE_PATH.finditer(read)
    )
    # (session 33's second review: none cut at a letter or a mark of any script)
    windows = [(start, end) for start, end in windows if not _letter_beside(text, start, end)]
    windows.sort()
    return windows


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
    if start and mark(text[start - 1]):
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
        and text[end : end + 1] not in SUPERSCRIPTS
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
    while at >= 0 and start - at <= 32 and mark(text[at]):
        at -= 1
    if at < 0:
        return False
    if mark(text[at]):
        return True
    if text[at] in SUPERSCRIPTS:
        return False
    folded = unicodedata.normalize("NFKC", text[at]).casefold() or text[at]
    folded = folded.rstrip("".join(c for c in folded if mark(c)))
    if not folded:
        return False
    near = folded[-1]
    if near.isascii():
        return near in PATH_CHARS
    return unicodedata.category(near)[0] in "LM"


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
        if _after_devicemark(text, match.start()):
            continue  # session 42: the separator after a device's ``?``, no UNC start
        if plausible_path(value) is not None and not _cut(text, match.end()):
            yield match.start(), end


def _after_devicemark(text: str, start: int) -> bool:
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
