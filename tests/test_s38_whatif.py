"""Session 38: a cold what-if of a long message reads it fewer times, with the same results.

- ``factletters.wide_slashes`` reads a name's ASCII characters as one small class and
  tries its non-ASCII letters only where a character that is not ASCII stands: the same
  maximal runs as the one class of both (compared here with that one-class pattern).
- A :class:`~ctxledger.compressor.factmatch.Haystack`'s cased and folded forms equal
  ``normalize_cased`` and ``normalize`` (the cased form stays made on first ask: a long
  haystack kept in the cache would hold it unread).
"""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from ctxledger.compressor import (
    factfences,
    factgrep,
    factmatch,
    factnoise,
    factpaths,
    factscan,
    factsed,
)
from ctxledger.compressor.factletters import (
    caseless_letters,
    folder_chars,
    name_class,
    wide_slashes,
)

#: ASCII path characters and blanks, and characters of each non-ASCII class the pattern
#: reads: cased letters (``é``, ``Ω``), a mark, caseless letters (``用``), characters
#: folding to name characters (``１``, ``ʰ``), a superscript digit and a wide slash
_PIECES = [*"ab/.-_+@~ 1\\:", "é", "É", "Ω", "ß", "\u0301", "用", "户", "１", "ʰ", "¹", "／"]


def _one_class(also: str) -> re.Pattern[str]:
    """The pattern as session 35 wrote it: one class for the whole run of a name."""
    name = name_class()
    folder = f"(?=[^\\x00-\\x7f])[{name}{caseless_letters()[1:-1]}{folder_chars()[1:-1]}]++(?=/)"
    right = f"/[{name}/]*+(?:{folder}[{name}/]*+)*+"
    return re.compile(right + ("|" + also if also else ""))


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), max_size=60), st.booleans())
def test_wide_slashes_read_the_runs_of_the_one_class(pieces: list[str], mixed: bool) -> None:
    text = "".join(pieces)
    also = factpaths._EXT_ANCHOR.pattern if mixed else ""
    found = [m.span() for m in wide_slashes(also).finditer(text)]
    assert found == [m.span() for m in _one_class(also).finditer(text)]


def test_wide_slashes_on_long_names_of_each_class() -> None:
    """Runs that switch between ASCII characters and letters many times, and folders of
    caseless letters between them, end where the one class ends them."""
    texts = [
        "/home/" + "é" * 50 + "a" * 50 + "Ω" * 3 + "/app.py",
        "see /data/用户/" + "ab" * 40 + "é" + "/x.py文件 and /tmp/１/y.py",
        "/" + "aé" * 500 + " then /a/ʰ/b" + "\u0301" * 3 + "/c",
    ]
    for text in texts:
        for also in ("", factpaths._EXT_ANCHOR.pattern):
            found = [m.span() for m in wide_slashes(also).finditer(text)]
            assert found == [m.span() for m in _one_class(also).finditer(text)]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from([*_PIECES, "A", "K", "\t", "\n", "  ", "İ"]), max_size=80))
def test_a_haystack_holds_both_normalized_forms(pieces: list[str]) -> None:
    text = "".join(pieces)
    hay = factmatch.Haystack(text)
    assert hay.cased == factmatch.normalize_cased(text)
    assert hay.folded == factmatch.normalize(text)


class _Searched(str):
    """A text that records each multi-character literal looked for with ``in``."""

    asked: list[str]

    def __contains__(self, item: object) -> bool:
        if isinstance(item, str) and len(item) > 1:
            self.asked.append(item)
        return super().__contains__(item)


def _searched(text: str) -> _Searched:
    spy = _Searched(text)
    spy.asked = []
    return spy


def test_a_long_text_without_their_characters_is_not_searched_for_markers() -> None:
    """Fence markers, a tree's ``--`` and a sed range's ``/,``: a long text that lacks a
    character of one is answered by that character's search (a memchr), not read whole
    for the run (10 MB: ~6-8 ms each, 20 ms of a cold what-if)."""
    text = "see src/app.py and the tests, it's fine; " * 2000  # (no backtick, tilde, dash)
    spy = _searched(text)
    assert factfences.needed_blocks(spy, "'\"", 0) == []
    assert factfences.code_spans(spy, "'\"") == []
    assert factgrep.branch_spans(spy) == []
    no_comma = _searched(text.replace(",", ";"))
    assert factsed.range_spans(no_comma) == []
    assert "/," not in no_comma.asked
    assert factnoise.stated(spy, [(0, "keep the tests green")]) == [(0, "keep the tests green")]
    assert not {"```", "~~~", "--"} & set(spy.asked), spy.asked


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from(["`", "~", "-", "/", ",", "a", " ", "\n"]), max_size=40),
    st.sampled_from(["```", "~~~", "--", "/,"]),
    st.integers(0, 3000),
)
def test_holds_any_is_in(pieces: list[str], literal: str, padding: int) -> None:
    text = "x" * padding + "".join(pieces)
    assert factscan.holds_any(text, (literal,)) == (literal in text)
    assert factfences.has_fence_marker(text) == ("```" in text or "~~~" in text)
