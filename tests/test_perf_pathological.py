"""Issue 14: inputs that used to be quadratic in the length of one string give the same
answers as the reference algorithms, now in linear time (the fact patterns' word-start
checks are issue 18's, tested with its hostile inputs) (timing is measured in
``bench/pathological_bench.py``, never asserted here)."""

from __future__ import annotations

import re
import unicodedata

import pytest
from helpers.reference_facts import facts as reference
from hypothesis import given
from hypothesis import strategies as st

from ctxledger import tokens
from ctxledger.compressor import factmatch, factnormal, facts

# --- the reference forms the fast ones must agree with ------------------------------------


def _reference_normalize(text: str) -> str:
    # session 31: superscript digits (a footnote's mark) read as blanks, before NFKC
    for superscript in "¹²³⁰⁴⁵⁶⁷⁸⁹":
        text = text.replace(superscript, " ")
    text = unicodedata.normalize("NFKC", text).translate(factnormal._QUOTE_TABLE)
    return re.sub(r"\s+", " ", text).strip().casefold()


@pytest.mark.parametrize("piece", ["a", "A", "1", "aB", ".py", "x.py", "Error", "a_", "$1"])
def test_long_runs_give_the_facts_of_the_plain_algorithms(piece: str) -> None:
    """A 6,000-char run (the old code took seconds here; it is linear now)."""
    text = (piece * 6000)[:6000]
    message = {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": text}}
        ],
    }
    found = facts.extract_facts([{"role": "user", "content": text}, message])
    assert all(len(f.normalized) >= 2 for f in found)
    assert len({f.normalized for f in found}) == len(found)


@pytest.mark.parametrize("piece", ["a.py.", "x.tar.gz.", "Makefile.", ".env.", "a.py.1."])
def test_a_long_dotted_name_run_gives_the_reference_facts(piece: str) -> None:
    """Session 29: every extension anchor of one run of name characters was grown left
    over the whole run (``a.py.`` * 20,000: 60 s); the run's start is now found once.
    The answer is the reference extractor's, whose plain walk is quadratic (kept short)."""
    text = piece * (3000 // len(piece))
    message = {"role": "tool", "tool_call_id": "c", "content": text}
    assert facts.extract_facts([message]) == reference.extract_facts([message])


@given(
    st.text(
        alphabet="aB \t\n\u00a0\u2003\u0301\u0308e\u2018\u201c\\\u1100\u1161\ufb01\u00a8ß",
        max_size=200,
    )
)
def test_normalize_in_pieces_equals_the_whole_text_form(text: str) -> None:
    old_piece = factnormal._PIECE
    factnormal._PIECE = 8  # many pieces, cut at whitespace
    try:
        assert factmatch.normalize(text) == _reference_normalize(text)
    finally:
        factnormal._PIECE = old_piece
    assert factmatch.normalize(text) == _reference_normalize(text)


def test_normalize_agrees_on_every_code_point() -> None:
    every = "".join(chr(i) for i in range(0x110000) if not 0xD800 <= i < 0xE000)
    assert factmatch.normalize(every) == _reference_normalize(every)


def test_long_texts_are_counted_exactly_and_remembered() -> None:
    text = "word " * 20_000 + "é"
    expected = len(tokens._encoding(tokens.DEFAULT_ENCODING).encode_ordinary(text))
    assert tokens.count_text(text) == expected
    assert tokens.count_text("".join([text])) == expected  # another object, same text
    message = {"role": "user", "content": text}
    assert tokens.count_messages([message] * 40) == [expected + tokens.MESSAGE_OVERHEAD] * 40


def _reference_path_form(value: str) -> str:
    """normalize_fact's path branch as written before session 29 (a loop of slices)."""
    text = factmatch.normalize(value)
    while text.startswith("./"):
        text = text[2:]
    stripped = text.rstrip("/")
    if stripped:
        one_name_dir = stripped != text and "/" not in stripped
        text = stripped + "/" if one_name_dir else stripped
    return text


@given(st.text(alphabet="./\\x ", max_size=30))
def test_a_paths_leading_dot_slashes_go_as_the_plain_loop_takes_them(value: str) -> None:
    assert factmatch.normalize_fact("path", value) == _reference_path_form(value)


def test_a_long_run_of_dot_backslashes_is_one_linear_path() -> None:
    """Session 29: a run of ``.\\`` is one Windows path, normalized to a run of ``./``
    that a loop of slices took off two characters at a time (quadratic: 2 MB of tool
    output took 23 s to extract); it goes in one step."""
    run = ".\\" * 200_000 + "x.py"
    assert factmatch.normalize_fact("path", run) == "x.py"
    message = {"role": "tool", "tool_call_id": "c", "content": "wrote " + run + " done"}
    assert "x.py" in {f.normalized for f in facts.extract_facts([message])}
