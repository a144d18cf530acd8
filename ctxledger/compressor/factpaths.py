"""Finding file paths and URLs in text, for fact extraction (:mod:`.facts`).

Paths are found from their anchors (a ``/``, a known extension, a known file or
dotfile name, a Windows drive or ``.\\``) and grown in both directions, then judged
(``and/or`` and the pieces of a ``sed`` expression are not paths; environment paths
like ``site-packages`` are not the user's files). A name keeps its second suffix
after a known extension (``config.yaml.j2``, ``run.log.1``), a dotfile or dotted
directory its dot (``.env``, ``.github/workflows/ci.yml``), a Windows path its drive
and backslashes (``C:\\Users\\me\\app.py``, matched as ``c:/users/me/app.py``). URLs are
found from their ``://`` and masked out before paths are looked for.
"""

from __future__ import annotations

import bisect
import heapq
import re
import string
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from ctxledger.compressor.factescapes import backslash_after_dots, unescaped
from ctxledger.compressor.factgrep import branch_spans, context_spans
from ctxledger.compressor.factletters import is_word as is_word_char
from ctxledger.compressor.factletters import name_letter
from ctxledger.compressor.factparams import parameter_spans
from ctxledger.compressor.factpathrules import DOTFILE as _DOTFILE
from ctxledger.compressor.factpathrules import EXTENSIONS as _EXTENSIONS
from ctxledger.compressor.factpathrules import KNOWN_FILES as _KNOWN_FILES
from ctxledger.compressor.factpathrules import MORE_AFTER_DOT as _MORE_AFTER_DOT
from ctxledger.compressor.factpathrules import (
    MORE_NAME,
    SUPERSCRIPT_DIGITS,
    cut_name,
    cut_path,
    dotted_name_goes_on,
    first_names,
    name_start,
    plausible_path,
    wide_slashes,
    with_name_letters,
)
from ctxledger.compressor.factpathrules import PATH_CHARS as _PATH_CHARS
from ctxledger.compressor.factpathrules import SECOND_SUFFIXES as _SECOND_SUFFIXES
from ctxledger.compressor.factscan import LONG_TEXT  # (read as this module's name: tests lower it)
from ctxledger.compressor.factsed import range_spans, sed_spans
from ctxledger.compressor.factseparators import (
    before_escaped_quote,
    escape_letter_before_colon,
    folded_separator_before,
    mixes_separators,
)
from ctxledger.compressor.facturls import mask, urls

__all__ = [
    "PATH_CHARS",
    "bounded",
    "find_paths",
    "first_paths",
    "is_word_char",
    "mask",
    "path_text",
    "paths",
    "plausible_path",
    "urls",
]

# Paths are found from their anchors — a "/" or a known extension — and grown in both
# directions: a single path regex tried at every position of a tool output is ~10x slower.
PATH_CHARS = _PATH_CHARS
#: a known extension, its second suffixes, then no more of a name: not a word char
#: (but a footnote's superscript digit, :data:`MORE_NAME`), ``-``, ``+``, ``~``, ``@``
#: (what the matcher reads as more of it: ``app.py~`` is a backup), ``(`` or ``/``,
#: nor a ``.`` (then dots and dashes) and a word char, ``+``, ``~``, ``@`` or ``/``
#: (``Sample.h.create(``, ``resp.json.get``, ``app.py.xyz`` and ``app.py..+r`` are no
#: ``Sample.h``, ``resp.json``, ``app.py``: a fact the matcher found nowhere, not even
#: in its own text, which reads dots and dashes before more of a name as part of it)
_EXT_ANCHOR = re.compile(
    rf"\.(?:{_EXTENSIONS})(?:\.(?:{_SECOND_SUFFIXES}))*"
    rf"(?!{MORE_NAME}|[+~@(/]|-(?![.\-]*(?:[\s{SUPERSCRIPT_DIGITS}]|\Z))|{_MORE_AFTER_DOT})"
)
#: a known file name, with one lower-case suffix (``Dockerfile.dev``) or dashed words
#: (``Dockerfile-dev``, ``Makefile--OK``: one name to the matcher), ending a sentence;
#: not before more of a name (nor a ``+``, ``~``, ``@``: ``Makefile~`` is a backup, one
#: name to the matcher, session 39 review 1). The dashed words are taken whole or not
#: at all, at most 8 of at most 64 characters (a start reads a bounded stretch: no
#: square time on ``Makefile-Makefile-…``)
_KNOWN_FILE = re.compile(
    r"(?:Makefile|Dockerfile|Gemfile|Procfile|Rakefile|Vagrantfile|Jenkinsfile)"
    r"(?:\.[a-z0-9]+|(?:-{1,8}" + MORE_NAME + r"{1,64}){1,8}+)?"
    r"(?!" + MORE_NAME + "|" + _MORE_AFTER_DOT + r"|[+~@]|-[.\-]*(?:" + MORE_NAME + r"|[+~@]))"
)
#: where a Windows path starts: a drive (``C:\\``, ``D:/``), ``.\\``, ``..\\`` or ``~\\``
_WINDOWS_ANCHOR = re.compile(r":[\\/]|(?:\.\.?|~)\\")
#: where a relative Windows path starts (``src\\app.py``): its first name, after no path
#: character, separator or ``:``, then a backslash. The character before is matched,
#: not looked behind at, so each name is read once (a leading lookbehind would be
#: tried at every position)
_RELATIVE_START = re.compile(r"(?:\A|[^A-Za-z0-9_.+@~\-/\\:%])([A-Za-z0-9_][A-Za-z0-9_.+@~\-]*+)\\")
#: what a Windows path grows over: path characters and both separators
_WINDOWS_RIGHT = re.compile(r"[A-Za-z0-9_.+@~\-\\/]*")
#: where a UNC path starts (``\\\\server\\share``, or JSON-escaped with four
#: backslashes): after no path character, separator or ``:``, two backslashes or more,
#: then a name; it grows over what a Windows path does and ``$`` (``\\\\srv\\c$``)
_UNC_START = re.compile(
    r"(?:\A|[^A-Za-z0-9_.+@~\-/\\:%])(\\{2,}(?:[?.]\\+(?![A-Za-z]:))?[A-Za-z0-9_])"
)
#: a Win32 device prefix before a drive (``\\\\?\\C:\\dir``, also JSON-escaped): the
#: path is the drive's (the prefix only turns off the API's normalizing)
_DEVICE_PREFIXES = ("\\\\?\\", "\\\\.\\", "\\\\\\\\?\\\\", "\\\\\\\\.\\\\")
_UNC_RIGHT = re.compile(r"[A-Za-z0-9_.+@~$\-\\/]*")
_NOT_BEFORE_PATH = frozenset("/.-~@:%+")
#: what may not stand before a Windows path (else it is part of something longer)
_NOT_BEFORE_WINDOWS = PATH_CHARS | _NOT_BEFORE_PATH | frozenset("\\")

#: the conventional placeholder of an example path (``git diff -- path/to/file1``,
#: ``/path/to/working/dir``, ``C:\\path\\to\\x``), in lower case only
#: (``Path/To/Report.pdf`` is a real path)
_PLACEHOLDER = re.compile(r"(?:(?:[A-Za-z]:|~|\.{1,2})[\\/]+|[\\/]*)path[\\/]+to(?:[\\/]|$)")
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


#: a character of a slash path's names: PATH_CHARS and "/"
_SLASH_NAME = "[A-Za-z0-9_.+@~/-]"
#: a "/" and what follows it of a path: PATH_CHARS and "/"
_SLASH_AND_RIGHT = re.compile("/" + _SLASH_NAME + "*")
#: the same, or an extension anchor: one scan finds both in a long text, and a slash
#: path swallows the extension anchors inside it
_SLASH_OR_EXTENSION = re.compile("/" + _SLASH_NAME + "*+|" + _EXT_ANCHOR.pattern)


#: what a known file name (_KNOWN_FILE) needs: one of their capitals
_KNOWN_FILE_CAPITALS = tuple(dict.fromkeys(name[0] for name in sorted(_KNOWN_FILES)))
_SHORT_SCANS = (_SLASH_AND_RIGHT, _EXT_ANCHOR, _KNOWN_FILE, _DOTFILE)
_LONG_SCANS = (_SLASH_OR_EXTENSION, _KNOWN_FILE, _DOTFILE)


#: candidate spans are gathered one window of starts at a time: memory is bounded by
#: a window's candidates, not the text's (10 MB of ``x/ `` held 3.3 million at once)
SPAN_WINDOW = 1 << 16
#: at most this many judged candidates, of at most _JUDGED_CHARS characters in all, are
#: remembered (the cache is emptied then): a log naming 5,000 files over and over (a
#: cache of 4,096 emptied at every round) judged each of them each time
_JUDGED_MAX = 1 << 16
_JUDGED_CHARS = 1 << 21

#: (window number, the spans starting in it, in order)
_Chunks = Iterator[tuple[int, list[tuple[int, int]]]]


def _span_ends(text: str) -> Iterable[tuple[int, int]]:
    """Candidate path spans ``(start, the longest end at that start)`` (``x.tar.gz``
    over ``x.tar``), by start, without the starts paths() skips (after a char of
    _NOT_BEFORE_PATH).

    Slash paths: each "/" (from where the previous span ended) grown left over
    PATH_CHARS and right over them and "/" (in a text that is not ASCII, over
    non-ASCII cased letters and marks too: :func:`.factletters.wide_slashes`,
    :func:`.factpathrules.name_start`); bare file names: each extension anchor,
    known file or dotfile name grown left over word chars, "." and "-" (``.py`` alone
    is none); Windows paths (:func:`_windows_spans`), which replace every other span
    starting inside them (``app.py`` of ``C:\\proj\\app.py``). The same spans as the
    candidate walk of tests/helpers/reference_facts (a long text names 150,000 paths).

    A long text (:data:`LONG_TEXT`) is scanned once for slashes and extension anchors
    together: a slash path's right part (from its first "/") swallows the extension
    anchors inside it, whose names grow left to a "/", "+", "@" or "~" of that part,
    all characters of _NOT_BEFORE_PATH, so they never start a span (``app.py`` of
    ``src/app.py``); and known file names are looked for only when one of their
    capitals occurs. A short text is scanned once per kind (two memchr-fast scans
    beat one scan for either of two characters there).

    Each scan gives its starts in order, so the scans are merged a window of
    :data:`SPAN_WINDOW` starts at a time.
    """
    width = SPAN_WINDOW
    every = _LONG_SCANS if len(text) >= LONG_TEXT else _SHORT_SCANS
    scans = [pattern for pattern in every if _may_match(pattern, text)]
    if len(text) > width:
        return _by_window(text, scans, width)
    spans: dict[int, int] = {}  # one window (most texts)
    backslash = "\\" in text
    for pattern in scans:
        _scan(text, pattern, (0, 0, 0), width, spans, backslash)
    windows = list(_windows_spans(text))
    if windows:
        _replace_by_windows(spans, [(-1, -1), *windows])
    return sorted(spans.items())


#: where a scan goes on: the position of its next match, its last name anchor and
#: where that name starts
_ScanState = tuple[int, int, int]


def _by_window(
    text: str, scans: Sequence[re.Pattern[str]], width: int
) -> Iterator[tuple[int, int]]:
    """:func:`_span_ends` of a text longer than a window, a window at a time: each scan
    stops at its first start past the window and goes on from there in the next."""
    pending: list[tuple[re.Pattern[str], _ScanState, int]] = [(p, (0, 0, 0), 0) for p in scans]
    windows = _in_windows(_windows_spans(text), width)
    head = next(windows, None)
    carry = (-1, -1)  # the last Windows path of the windows before
    backslash = "\\" in text
    while pending or head is not None:
        starts = [start for _, _, start in pending]
        window = min([*starts, head[0] * width] if head is not None else starts) // width
        limit = (window + 1) * width
        spans: dict[int, int] = {}
        going_on = []
        for pattern, state, start in pending:
            if start < limit:
                stopped = _scan(text, pattern, state, limit, spans, backslash)
                if stopped is not None:
                    going_on.append((pattern, *stopped))
            else:
                going_on.append((pattern, state, start))
        pending = going_on
        in_window: list[tuple[int, int]] = []
        if head is not None and head[0] == window:
            in_window, head = head[1], next(windows, None)
        if in_window or carry[1] > window * width:
            _replace_by_windows(spans, [carry, *in_window])
            carry = in_window[-1] if in_window else carry
        yield from sorted(spans.items())


def _may_match(pattern: re.Pattern[str], text: str) -> bool:
    """Whether a scan's `pattern` may match in `text`: each of its matches starts with a
    "/", a "." or a known file name's capital (many short texts lack them)."""
    if pattern is _SLASH_AND_RIGHT:
        return "/" in text
    if pattern is _SLASH_OR_EXTENSION:
        return "/" in text or "." in text
    if pattern is _KNOWN_FILE:
        return any(capital in text for capital in _KNOWN_FILE_CAPITALS)
    return "." in text


def _scan(
    text: str,
    pattern: re.Pattern[str],
    state: _ScanState,
    limit: int,
    spans: dict[int, int],
    backslash: bool = True,
) -> tuple[_ScanState, int] | None:
    """One scan of `text` for candidate spans (see :func:`_span_ends`) from `state`,
    each start's longest end added to `spans`, up to the first start at `limit` or
    past it: then where to go on from (that match, found again) and that start; None
    at the end. A start never comes before the one before it: a slash path's start
    grows left to no further than the end of the last match, a name's to the last
    name anchor (or that name's start), and neither over a character that may not
    start a span. `backslash`: whether the text holds a ``\\`` (a slash path beside one
    may be none: :func:`_beside_backslash`)."""
    # (by identity: a compiled pattern's hash reads its whole program)
    slashes, mixed = pattern is _SLASH_AND_RIGHT, pattern is _SLASH_OR_EXTENSION
    extensions = mixed or pattern is _EXT_ANCHOR
    path_chars, not_before, get = PATH_CHARS, _NOT_BEFORE_PATH, spans.get
    pos, last, last_start = state  # the last name anchor and where its name starts
    cut = None if text.isascii() else cut_path  # (an ASCII text cuts no name)
    named = dotted_name_goes_on  # (a name's dots: asked of names only, session 36)
    wide = cut is not None and (slashes or mixed)  # (names of other letters: wide_slashes)
    for match in (wide_slashes(_EXT_ANCHOR.pattern if mixed else "") if wide else pattern).finditer(
        text, pos
    ):
        anchor, end = match.span()
        start = anchor
        slash = slashes or (mixed and text[anchor] == "/")
        if slash:  # (resumes at its end, as the walk)
            while start > 0 and text[start - 1] in path_chars:
                start -= 1
            if wide and start > 0 and not text[start - 1].isascii():
                start = name_start(text, start)
            # (session 37: ``\/usr/x.py`` is ``//usr/x.py`` to the matcher, a longer path)
            alone = backslash and _beside_backslash(text, start, end)
        else:
            while start > last and ((c := text[start - 1]).isalnum() or c in "_.-"):
                start -= 1
            if start == last:  # the name runs on through the last anchor: its start
                start = last_start  # (``a.py.a.py.…`` was grown over once per anchor)
            if not text[start:anchor].isascii():
                start = _after_superscript(text, start, anchor)  # (``foo¹bar.py``: bar.py)
            alone = start == anchor and extensions  # ``.py`` alone: no span
            if cut is not None and not alone:  # nor a name read on (session 36: ``a.py.／``)
                alone = named(text, start, end)
        if alone or (start and text[start - 1] in not_before) or (cut and cut(text, start, end)):
            pass  # no span (it may start before the last one: only spans come in order)
        elif start >= limit:
            return (anchor, last, last_start), start  # (before the name anchor is taken)
        elif get(start, -1) < end:
            spans[start] = end
        if not slash:
            last, last_start = anchor, start
    return None


def _beside_backslash(text: str, start: int, end: int) -> bool:
    """Whether the matcher reads the slash path ``text[start:end]`` longer at a ``\\``,
    its ``/`` (session 37): an absolute path after one (``\\/usr`` is ``//usr``), or a
    path whose trailing dots and dashes (the judgement strips them) hold a dot before
    one (``/tmp/x.py.\\`` is ``/tmp/x.py./``: ``factbounds.inside_longer_path``)."""
    if start > 0 and text[start - 1] == "\\" and text[start] == "/":
        return True
    if not text.startswith("\\", end):
        return False
    tail = text[start:end]
    stem = tail.rstrip(".-")  # (a folder's ``/`` before the dots ends it: ``/srv/share/.\\``)
    return "." in tail[len(stem) :] and not stem.endswith("/")


def _after_superscript(text: str, start: int, anchor: int) -> int:
    """Where a name grown left from `anchor` to `start` starts once it stops at a
    superscript digit: a footnote's mark (:data:`MORE_NAME`), the end of a name before."""
    return max(start, *(text.rfind(digit, start, anchor) + 1 for digit in SUPERSCRIPT_DIGITS))


def _in_windows(spans: Iterable[tuple[int, int]], width: int) -> _Chunks:
    """`spans` (by start) by window of `width` starts."""
    window, chunk = -1, list[tuple[int, int]]()
    for span in spans:
        if span[0] // width != window:
            if chunk:
                yield window, chunk
            window, chunk = span[0] // width, []
        chunk.append(span)
    if chunk:
        yield window, chunk


def _replace_by_windows(spans: dict[int, int], windows: list[tuple[int, int]]) -> None:
    """Drop the `spans` starting inside one of `windows` (Windows paths, by start, apart;
    the first may have started in an earlier window), then add `windows` (each at
    least as long as a span at its start)."""
    starts = [start for start, _ in windows]
    for start in list(spans):
        at = bisect.bisect_left(starts, start) - 1  # the last Windows path before it
        if at >= 0 and start < windows[at][1]:
            del spans[start]
    get = spans.get
    for start, end in windows[1:]:
        spans[start] = max(end, get(start, -1))


def _windows_spans(text: str) -> Iterator[tuple[int, int]]:
    """``(start, end)`` of the Windows paths of `text`, by start: from a drive (``C:\\``,
    ``D:/``), ``.\\``, ``..\\`` or ``~\\`` that follows no path character, separator or
    ``:``, over path characters and both separators; and the relative ones
    (:func:`_relative_spans`). None is a name cut at a letter (:func:`.factpathrules.cut_name`)."""
    if "\\" not in text and (":" not in text or ":/" not in text):
        return iter(())
    if "\\" not in text:
        spans = _anchored_windows_spans(text)
    # (apart from the others: a relative one starts after a character no other holds,
    # a UNC one too, and it holds no ":")
    elif "\\\\" not in text:
        spans = heapq.merge(_anchored_windows_spans(text), _relative_spans(text))
    else:
        spans = heapq.merge(_anchored_windows_spans(text), _relative_spans(text), _unc_spans(text))
    return (span for span in spans if not cut_name(text, *span, every_letter=True))


def _bounded_judge(mixed: bool = False) -> Callable[[str], bool]:
    """Whether :func:`plausible_path` judges a candidate a path (`mixed`: or it is a
    JSON string's path mixing its separators, :func:`mixes_separators`), each distinct
    candidate judged once (a long text repeats its paths) in a cache bounded by count
    and characters (emptied when full)."""
    judged: dict[str, bool] = {}
    held = 0  # (characters of the candidates in judged)

    def is_path(raw: str) -> bool:
        nonlocal held
        good = judged.get(raw)
        if good is None:
            held += len(raw)
            if held > _JUDGED_CHARS or len(judged) >= _JUDGED_MAX:
                judged.clear()
                held = len(raw)
            good = plausible_path(raw) is not None or (mixed and mixes_separators(raw))
            judged[raw] = good
        return good

    return is_path


def _unc_spans(text: str) -> Iterator[tuple[int, int]]:
    """``(start, end)`` of the UNC paths of `text` (``\\\\server\\share``), by start,
    when :func:`plausible_path` judges them paths."""
    is_path = _bounded_judge()
    done = 0
    grow = _UNC_RIGHT if text.isascii() else with_name_letters(_UNC_RIGHT.pattern)
    for match in _UNC_START.finditer(text):
        start = match.start(1)
        if start < done:  # (a ``$\\\\x`` inside the last one: grown over, not one of its own)
            continue
        right = grow.match(text, match.end())
        end = done = before_escaped_quote(text, right.end() if right else match.end())
        if cut_name(text, start, end, every_letter=True) or folded_separator_before(text, start):
            continue  # (a name cut at a letter it cannot grow over: ``\\\\.\\pipe\\réseau``)
        if is_path(text[start:end]):
            yield start, end


def _anchored_windows_spans(text: str) -> Iterator[tuple[int, int]]:
    """The Windows paths of `text` from a drive, ``.\\``, ``..\\`` or ``~\\``, by start."""
    done = 0
    grow = _WINDOWS_RIGHT if text.isascii() else with_name_letters(_WINDOWS_RIGHT.pattern)
    for match in _WINDOWS_ANCHOR.finditer(text):
        drive = match.group()[0] == ":"
        start = match.start() - 1 if drive else match.start()
        if start < done or (drive and text[start] not in string.ascii_letters):
            continue  # (inside the last one, or no drive letter; done >= 0 > -1)
        glued = start > 0 and text[start - 1] in _NOT_BEFORE_WINDOWS
        if glued and not (drive and _after_device(text, start)):  # (``\\\\.\\..\\``: no ``..\\``)
            continue
        right = grow.match(text, match.end())
        done = right.end() if right is not None else match.end()
        yield start, before_escaped_quote(text, done)


def _after_device(text: str, start: int) -> bool:
    """Whether a Win32 device prefix (``\\\\?\\``, ``\\\\.\\``) ends at `start`, after
    no path character or separator. Asked of a drive only (session 32's rule: the path
    is the drive's); ``.\\``, ``..\\`` or ``~\\`` after one is no relative path
    (session 40: ``\\\\.\\..\\app.py`` names ``app.py``, as the reference reads it)."""
    for prefix in _DEVICE_PREFIXES:
        at = start - len(prefix)
        if text.startswith(prefix, at) and at >= 0:
            before = text[at - 1 : at]  # (nor a name's letter: ``é\\\\?\\C:\\``, session 40)
            return not before or not (before in _NOT_BEFORE_WINDOWS or name_letter(before))
    return False


def _relative_spans(text: str) -> Iterator[tuple[int, int]]:
    """``(start, end)`` of the relative Windows paths of `text` (``src\\app.py``), by
    start: a name after no path character, separator or ``:`` (``\\d+\\.`` is none),
    then a backslash and what a Windows path grows over, when :func:`plausible_path`
    judges it a path (else the names in it are looked at alone, as before) or it is a
    JSON string's path that mixes its separators (judged none: :func:`mixes_separators`)."""
    is_path = _bounded_judge(mixed=True)
    wide = not text.isascii()  # (the same starts, found from each backslash: session 35)
    grow = with_name_letters(_WINDOWS_RIGHT.pattern) if wide else _WINDOWS_RIGHT
    found = ((m.start(1), m.end()) for m in _RELATIVE_START.finditer(text))
    for start, after in first_names(text) if wide else found:
        right = grow.match(text, after)
        end = before_escaped_quote(text, right.end() if right is not None else after)
        if is_path(text[start:end]):  # (session 38: a JSON-mixed one too, judged none)
            yield start, end


def paths(text: str) -> Iterator[tuple[int, str]]:
    """``(position, path)`` of every path `text` names, in order."""
    return _named(text, repeats=True)


def first_paths(text: str) -> list[tuple[int, str]]:
    """``(position, path)`` of each distinct path at its first position, in order: what
    :func:`paths` yields, without the repeats (a caller keeping the first of equal
    values, as fact extraction does, sees the same).

    Each distinct candidate is judged once (while at most :data:`_JUDGED_MAX` are
    remembered): the judgement reads only the candidate's characters (:func:`_path_of`).
    So a candidate met again is passed over at once (:func:`_named`): it names the path
    it named at its earlier start, already kept (or none). One forgotten when the
    judgements are emptied is judged again and its path keeps its earlier start.
    """
    first: dict[str, int] = {}
    for start, path in _named(text, repeats=False):
        first.setdefault(path, start)
    return [(start, path) for path, start in first.items()]  # (in order of start)


def _named(text: str, *, repeats: bool) -> Iterator[tuple[int, str]]:
    """``(position, path)`` of the candidates of `text` that name a path, in order,
    each distinct candidate judged once; without `repeats`, only where a candidate is
    judged (its first start, or again after the judgements were emptied)."""
    judged: dict[str, str | None] = {}  # a long text repeats its paths: judge each once
    held = 0  # (characters of the candidates in judged)
    for start, end in _span_ends(text):
        raw = text[start:end]
        value = judged.get(raw, _UNJUDGED)
        if value is _UNJUDGED:
            held += len(raw)
            if held > _JUDGED_CHARS or len(judged) >= _JUDGED_MAX:
                judged.clear()
                held = len(raw)
            value = judged[raw] = _path_of(raw)
        elif not repeats:
            continue
        if value is not None:
            yield start, value


#: ``./`` before a ``/``: the fact (``normalize_fact`` drops ``./``) would be absolute
_DOTS_BEFORE_ROOT = re.compile(r"(?:\./)+/")
#: a candidate not judged yet (None is "no path"; compared by identity)
_UNJUDGED: Any = object()


def _path_of(raw: str) -> str | None:
    """The path a candidate span's text names, or None. Its text alone decides: the
    look past a leading ``.`` (:func:`_dot_starts_path`) stays inside it, since a
    candidate starting with ``.`` holds the name or separator that follows the dot."""
    if raw.startswith(".") and not _dot_starts_path(raw, 0):
        return None
    return _judged(raw)


def _dot_starts_path(text: str, start: int) -> bool:
    """Whether a candidate starting with a ``.`` at `start` may be a path: ``./``,
    ``../``, ``.\\``, ``..\\`` or a dotted name (``.env``, ``.github/``), not dots
    (``...``) or a dot before no name (``.5``, ``.-``)."""
    if text.startswith(("./", "../", ".\\", "..\\"), start):
        return _DOTS_BEFORE_ROOT.match(text, start) is None  # (session 37: ``.//src``)
    return start + 1 < len(text) and (text[start + 1].isascii() and text[start + 1].isalpha())


def _judged(raw: str) -> str | None:
    """The path `raw` names, or None when it is none (or an environment path, an attribute)."""
    value = plausible_path(raw)
    if value is None or _ENVIRONMENT_PATH.search(value.replace("\\", "/")):
        return None
    if "/" not in value and value.split(".", 1)[0].lower() in _OBJECT_NAMES:
        return None  # ``self.log``, ``mock.patch``: attribute access, not a file
    if _PLACEHOLDER.match(value):
        return None  # ``path/to/file1`` of an instruction's example: no file of the session
    return value


def path_text(text: str) -> str:
    """`text` as paths are looked for in it: the escapes of its escaped lines
    (:mod:`.factescapes`: ``"docs\\nsetup.py\\n"``), grep's context separators
    (:mod:`.factgrep`: ``src/x.py-12-from y``), a tree's branches glued to a name
    (``|----__init__.py``), the ``-`` joining a path to the next pytest parameter id
    (:mod:`.factparams`: ``x.py::test[a.sql-utf-8]``), quoted ``sed`` expressions and range
    addresses (``'/class Date/,/^class /p'``) blanked
    (same length)."""
    blanked = unescaped(text)
    if blanked is not None:  # (session 38: ``\\nx：/tmp`` is no drive to the matcher)
        text = backslash_after_dots(text, escape_letter_before_colon(text, blanked))
    text = mask(text, context_spans(text))
    text = mask(text, branch_spans(text))
    text = mask(text, parameter_spans(text))
    if "'" not in text and '"' not in text:
        return text  # an expression is quoted
    text = mask(text, range_spans(text))
    return mask(text, sed_spans(text)) if "s" in text else text


def find_paths(text: str) -> list[str]:
    """The file paths mentioned in `text` (URLs excluded), in order, once each."""
    masked = mask(text, [(start, end) for start, end, _ in urls(text)])
    return list(dict.fromkeys(value for _, value in paths(path_text(masked))))
