"""Case mapping of long texts in pieces (issue 14): ``factscan.lowered`` and
``factscan.casefolded`` equal ``str.lower`` and ``str.casefold`` on any text.

A long text that is not ASCII is mapped piece by piece (cut before a space, tab or
newline), so that its ASCII pieces take CPython's fast loop. The pieces are made tiny
here, so that every cut lands next to the characters whose mapping could depend on
their neighbours (a capital sigma, case-ignorable marks and quotes) or that map to more
than one character (``İ``, ``ß``).
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxledger.compressor import factmatch, factscan

# Σ's lower form looks at cased neighbours over case-ignorable ones (U+0301, ', :, .)
_CHARS = st.sampled_from([*"aAΣσς \t\n'.:-1", "\u0301", "\u00ad", "İ", "ß", "é", "\u2003"])


@pytest.fixture()
def tiny_pieces(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(factscan, "PIECE", 2)


@settings(
    max_examples=500, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(text=st.text(_CHARS, max_size=40))
def test_pieces_map_case_as_the_whole_text(tiny_pieces: None, text: str) -> None:
    assert "".join(factscan.pieces(text, 2)) == text
    assert factscan.lowered(text) == text.lower()
    assert factscan.casefolded(text) == text.casefold()


def test_every_code_point_is_mapped_as_the_whole_text(tiny_pieces: None) -> None:
    """Each code point next to a cut on both sides, and a sigma between cased letters
    and spaces (the form that would change if a look crossed a cut)."""
    every = [chr(i) for i in range(0x110000) if not 0xD800 <= i < 0xE000]
    text = " ".join(f"a{c}Σ" for c in every) + " aΣ\u0301 Σa \u0301Σ"
    assert factscan.lowered(text) == text.lower()
    assert factscan.casefolded(text) == text.casefold()


def test_a_long_mostly_ascii_text_is_cut_into_ascii_pieces() -> None:
    text = "alpha beta src/app.py error " * 20_000 + "Σ é"
    pieces = factscan.pieces(text)
    assert len(pieces) > 1
    assert all(piece.isascii() for piece in pieces[:-1])
    assert factscan.lowered(text) == text.lower()
    assert factscan.casefolded(text) == text.casefold()
    assert factmatch.normalize(text) == " ".join(text.split()).casefold()
