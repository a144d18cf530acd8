"""Path candidates of long texts: the same spans and paths as the reference extractor.

``factpaths._span_ends`` replaces the candidate walk (``_path_spans`` of
tests/helpers/reference_facts, folded as its ``paths`` folds it); ``first_paths`` is
``paths`` without repeats. Generated texts mix slashes, extensions, known file names,
the characters a path may not follow, and non-ASCII letters and digits.
"""

from __future__ import annotations

from helpers.reference_facts import factpaths as reference
from hypothesis import given, settings
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
def test_span_ends_are_the_reference_walk(text: str) -> None:
    assert factpaths._span_ends(text) == _reference_ends(text)
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
