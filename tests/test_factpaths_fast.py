"""Path candidates of long texts: the same spans and paths as the reference extractor.

``factpaths._span_ends`` replaces the candidate walk (``_path_spans`` of
tests/helpers/reference_facts, folded as its ``paths`` folds it); ``first_paths`` is
``paths`` without repeats. Generated texts mix slashes, extensions, known file names,
the characters a path may not follow, and non-ASCII letters and digits.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from helpers.reference_facts import factpaths as reference
from hypothesis import example, given, settings
from hypothesis import strategies as st

from ctxledger.compressor import factpaths

_PIECES = st.sampled_from(
    [*"ab./-_~@:%+ \n\t\\", "C:\\", "a:/", "é", "٣", "ℌ", "K", ".py", ".tar", ".gz", ".pyx", "src/", "/", "//",
     "./", "../", "x.py.", "Makefile", "self.log", "and/or", "site-packages/", "app.py",
     "s/a/b/", "'", "https://x.io/a.py"]
)  # fmt: skip
_TEXTS = st.lists(_PIECES, max_size=24).map("".join)


def _reference_ends(text: str) -> dict[int, int]:
    spans = reference.span_ends(text)  # Windows paths included (session 29)
    not_before = reference._NOT_BEFORE_PATH
    return {s: e for s, e in spans.items() if not (s > 0 and text[s - 1] in not_before)}


@settings(max_examples=400, deadline=None)
@given(text=_TEXTS)
@example(text='\\\\.\\C:\\dir\\\\\\"')  # session 40: a device's drive path before ``\\"``
def test_span_ends_are_the_reference_walk(text: str) -> None:
    assert dict(factpaths._span_ends(text)) == _reference_ends(text)
    assert list(factpaths.paths(text)) == list(reference.paths(text))


@settings(max_examples=300, deadline=None)
@given(text=_TEXTS, repeat=st.integers(1, 30))
def test_first_paths_are_the_first_of_each_path(text: str, repeat: int) -> None:
    text = text * repeat
    every = list(factpaths.paths(text))
    first: dict[str, int] = {}
    for position, value in every:
        first.setdefault(value, position)
    assert factpaths.first_paths(text) == sorted((p, v) for v, p in first.items())


def test_a_long_text_of_one_repeated_path() -> None:
    text = "alpha src/app.py beta ./x/y.tar.gz " * 20_000
    assert list(factpaths.paths(text)) == list(reference.paths(text))
    assert factpaths.first_paths(text) == [(6, "src/app.py"), (22, "./x/y.tar.gz")]


# Session 30: a long text (factpaths.LONG_TEXT, lowered to 0 here so that short texts
# take that way too) is scanned once for slashes and extension anchors (a slash path's
# right part swallows the anchors inside it), known file names are looked for only when
# one of their capitals occurs, and first_paths judges each distinct candidate once. The
# pieces put anchors inside, right after and right before slash paths, behind "+", "@",
# "~", ":", "%" and non-ASCII letters, and dotfiles and known names inside paths.
_NEAR_SLASHES = st.sampled_from(
    ["/", "a/", "x+", "@", "~/", ":", "%", "é", "ℌ", ".py", ".tar.gz", ".j2", ".1", ".env",
     ".env.local", "Makefile", "Dockerfile.dev", "make", "a.py+", "a.py/", "-", "_", ".",
     " ", "\n", "C:/", "..\\", ".\\", "~\\", "\\", "C:\\", "s/x/y/", "'", "app", "A"]
)  # fmt: skip


@contextmanager
def _long_text_at(chars: int) -> Iterator[None]:
    before = factpaths.LONG_TEXT
    factpaths.LONG_TEXT = chars
    try:
        yield
    finally:
        factpaths.LONG_TEXT = before


@settings(max_examples=1500, deadline=None)
@given(text=st.lists(_NEAR_SLASHES, max_size=20).map("".join), long=st.booleans())
# session 40 (a CI draw): ``..\\`` or ``.\\`` after a device prefix (``\\\\.\\``) starts no
# Windows path (the prefix is a drive's only); ``app.py`` after it is its own name
@example(text="\\\\.\\..\\", long=False)
@example(text="\\\\.\\..\\", long=True)
@example(text="\\\\.\\.\\app.py", long=False)
@example(text="é\\\\.\\C:\\app.py", long=False)  # (nor after a letter of a name)
def test_anchors_near_slash_paths_give_the_reference_spans(text: str, long: bool) -> None:
    first: dict[str, int] = {}
    for position, value in reference.paths(text):
        first.setdefault(value, position)
    with _long_text_at(0 if long else factpaths.LONG_TEXT):
        assert dict(factpaths._span_ends(text)) == _reference_ends(text)
        assert list(factpaths.paths(text)) == list(reference.paths(text))
        assert factpaths.first_paths(text) == sorted((p, v) for v, p in first.items())


@settings(max_examples=300, deadline=None)
@given(text=_TEXTS, repeat=st.integers(1, 30))
def test_the_long_text_scan_gives_the_reference_spans(text: str, repeat: int) -> None:
    text = text * repeat
    with _long_text_at(0):
        assert dict(factpaths._span_ends(text)) == _reference_ends(text)
        every = list(factpaths.paths(text))
        assert every == list(reference.paths(text))
        first: dict[str, int] = {}
        for position, value in every:
            first.setdefault(value, position)
        assert factpaths.first_paths(text) == sorted((p, v) for v, p in first.items())


def test_a_long_text_takes_the_long_text_scan() -> None:
    text = "alpha src/app.py beta Makefile ./x/y.tar.gz .env " * 5_000
    assert len(text) >= factpaths.LONG_TEXT
    assert dict(factpaths._span_ends(text)) == _reference_ends(text)
    assert factpaths.first_paths(text) == [
        (6, "src/app.py"), (22, "Makefile"), (31, "./x/y.tar.gz"), (44, ".env")
    ]  # fmt: skip


# Session 31: the scans are merged a window of starts at a time (factpaths.SPAN_WINDOW,
# lowered here so that a short text spans many windows): a Windows path reaching into
# later windows still replaces the spans starting inside it, and the candidates come
# out by start, each start once.
@contextmanager
def _span_window(chars: int) -> Iterator[None]:
    before = factpaths.SPAN_WINDOW
    factpaths.SPAN_WINDOW = chars
    try:
        yield
    finally:
        factpaths.SPAN_WINDOW = before


@settings(max_examples=3000, deadline=None)
@given(
    text=st.lists(_NEAR_SLASHES | _PIECES, max_size=24).map("".join),
    width=st.integers(1, 9),
    long=st.booleans(),
)
# review of session 31 (each example fails a mutant the draws missed): a window without
# a start of its own keeps the span carried into it; a start at the limit is the next window's
@example(text=".\\/\\Makefile", width=1, long=False)
@example(text=".\\/\\Makefile", width=1, long=True)
@example(text="//////.pyéa.py/ Makefile/", width=8, long=False)
def test_spans_merged_by_window_are_the_reference_spans(text: str, width: int, long: bool) -> None:
    with _span_window(width), _long_text_at(0 if long else factpaths.LONG_TEXT):
        assert list(factpaths._span_ends(text)) == sorted(_reference_ends(text).items())
        assert list(factpaths.paths(text)) == list(reference.paths(text))


def test_a_long_text_of_candidates_is_held_a_window_at_a_time() -> None:
    # 1 MB of "x/ ": 333,333 candidates, none a path; all were held at once (+40 MB)
    import tracemalloc

    text = "x/ " * 333_333
    tracemalloc.start()
    try:
        assert factpaths.first_paths(text) == []
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 * factpaths.SPAN_WINDOW * 64  # a window's candidates, not the text's


# Review of session 31: each distinct candidate is judged once while the cache holds it
# (4,096 of them were, then it was emptied: 5,000 files named over and over were judged
# each time), and the cache is bounded (by count and characters): past it, it forgets.
def _judgements(monkeypatch, name: str) -> list[str]:
    judge, calls = getattr(factpaths, name), []

    def counted(raw: str) -> object:
        calls.append(raw)
        return judge(raw)

    monkeypatch.setattr(factpaths, name, counted)
    return calls


_MANY_FILES = [
    "src/pkg{}/mod.py:12: warning\n",
    "src\\pkg{}\\mod.py: warning\n",
    "\\\\srv{}\\share\\mod.py: warning\n",
]


@pytest.mark.parametrize("line", _MANY_FILES)
def test_recurring_candidates_are_judged_once(monkeypatch, line: str) -> None:
    text = "".join(line.format(i) for i in range(5_000)) * 3
    calls = _judgements(monkeypatch, "_path_of")
    relative = _judgements(monkeypatch, "plausible_path")
    found = factpaths.first_paths(text)
    assert len(found) == 5_000
    assert len(calls) == len(set(calls)) == 5_000
    # (a relative or UNC path is judged as one first, then as the path it names)
    as_windows = Counter(relative) - Counter(calls)
    assert set(as_windows.values()) == ({1} if "\\" in line else set())


@pytest.mark.parametrize("line", _MANY_FILES)
@pytest.mark.parametrize("bound", ["_JUDGED_MAX", "_JUDGED_CHARS"])
def test_the_judged_cache_is_bounded(monkeypatch, line: str, bound: str) -> None:
    text = "".join(line.format(i) for i in range(150)) * 2
    monkeypatch.setattr(factpaths, bound, 100 if bound == "_JUDGED_MAX" else 2_000)
    calls = _judgements(monkeypatch, "_path_of")
    relative = _judgements(monkeypatch, "plausible_path")
    assert len(factpaths.first_paths(text)) == 150
    assert len(calls) > len(set(calls))  # the second round was judged again
    if "\\" in line:
        assert max((Counter(relative) - Counter(calls)).values()) > 1


# Session 34: first_paths passes over a candidate it judged before (it names the path it
# named at its earlier start); one forgotten when the judgements are emptied (bounds
# lowered here to two candidates) is judged again and its path keeps its first start.
@contextmanager
def _judgements_bounded_at(count: int, chars: int) -> Iterator[None]:
    before = factpaths._JUDGED_MAX, factpaths._JUDGED_CHARS
    factpaths._JUDGED_MAX, factpaths._JUDGED_CHARS = count, chars
    try:
        yield
    finally:
        factpaths._JUDGED_MAX, factpaths._JUDGED_CHARS = before


@settings(max_examples=200, deadline=None)
@given(text=_TEXTS, repeat=st.integers(1, 8))
def test_first_paths_with_judgements_emptied_are_the_first_of_each_path(
    text: str, repeat: int
) -> None:
    text = text * repeat
    first: dict[str, int] = {}
    for position, value in reference.paths(text):
        first.setdefault(value, position)
    with _judgements_bounded_at(2, 24):
        assert factpaths.first_paths(text) == sorted((p, v) for v, p in first.items())
        assert list(factpaths.paths(text)) == list(reference.paths(text))
