"""Issue 14: inputs that used to be quadratic in the length of one string give the same
answers as the reference algorithms, now in linear time (timing is measured in
``bench/pathological_bench.py``, never asserted here)."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxledger import tokens
from ctxledger.compressor import factmatch, facts

# --- the reference forms the fast ones must agree with ------------------------------------


def _reference_normalize(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).translate(factmatch._QUOTE_TABLE).casefold()
    return re.sub(r"\s+", " ", text).strip()


def _reference_bounded(pattern: str, text: str, not_before: str) -> Iterator[tuple[int, str]]:
    """The pre-issue-14 search: a match may not follow a word char or one of `not_before`."""
    compiled = re.compile(pattern)
    pos = 0
    while (match := compiled.search(text, pos)) is not None:
        start = match.start()
        if start > 0 and (text[start - 1].isalnum() or text[start - 1] in "_" + not_before):
            pos = start + 1
            continue
        yield start, match.group(0)
        pos = match.end() if match.end() > start else start + 1


_TOKENS = st.text(alphabet="aZb_0.-\\/ \n9xX:", max_size=120)


@given(_TOKENS)
def test_code_tokens_match_the_reference_search(text: str) -> None:
    snake = r"[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+(?![\w\-])"
    camel = r"(?:[A-Z][a-z0-9]+|[a-z]+)(?:[A-Z][a-z0-9]+)+[A-Z]?(?![\w\-])"
    expected = [
        (pos, tok)
        for pattern in (snake, camel)
        for pos, tok in _reference_bounded(pattern, text, ".-\\")
        if facts._good_identifier(tok)
    ]
    assert list(facts._code_tokens(text)) == expected


@given(st.text(alphabet="01.9 /passedfilv-a", max_size=120))
def test_number_patterns_match_the_reference_search(text: str) -> None:
    version = r"(\d+\.\d+\.\d+(?:[-+][0-9A-Za-z.]+)?)(?![\w]|\.\d)"
    counted = r"(\d+(?:/\d+)? (?:passed|failed|files?|lines?))(?!\w)"
    for reference, index in ((version, 4), (counted, 5)):
        pattern = facts._NUMBER_PATTERNS[index][0]
        found = [(m.start(), m.group(0)) for m in pattern.finditer(text)]
        expected = list(_reference_bounded(reference, text, "."))
        if index == 5:  # the real pattern knows more units: compare on the shared ones
            found = [
                f
                for f in found
                if f[1].split()[-1] in ("passed", "failed", "file", "files", "line", "lines")
            ]
        assert found == expected


def _reference_run_start(text: str, pos: int, accept: Callable[[str], bool]) -> int:
    start = pos
    while start > 0 and accept(text[start - 1]):
        start -= 1
    return start


@given(st.text(alphabet="a.py- E/", max_size=80), st.lists(st.integers(0, 80), max_size=20))
def test_run_start_memo_matches_a_plain_scan(text: str, positions: list[int]) -> None:
    run_start = facts._RunStart(text, facts._is_name_char)
    for pos in sorted(p for p in positions if p <= len(text)):
        assert run_start(pos) == _reference_run_start(text, pos, facts._is_name_char)


def test_run_start_scans_each_character_once() -> None:
    text = ".py" * 2000
    seen: list[str] = []

    def accept(char: str) -> bool:
        seen.append(char)
        return facts._is_name_char(char)

    run_start = facts._RunStart(text, accept)
    for match in re.finditer(r"\.py", text):
        assert run_start(match.start()) == 0
    assert len(seen) <= len(text)


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


@given(
    st.text(
        alphabet="aB \t\n\u00a0\u2003\u0301\u0308e\u2018\u201c\\\u1100\u1161\ufb01\u00a8ß",
        max_size=200,
    )
)
def test_normalize_in_pieces_equals_the_whole_text_form(text: str) -> None:
    old_piece = factmatch._PIECE
    factmatch._PIECE = 8  # many pieces, cut at whitespace
    try:
        assert factmatch.normalize(text) == _reference_normalize(text)
    finally:
        factmatch._PIECE = old_piece
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
