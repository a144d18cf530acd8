"""Counting a text that extends another (a summary merged after a long message) from the
other's count: ``tokens.count_text_after`` must equal tokenizing the whole text, always."""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from test_whatif_shared_reads import counting_long_texts

from ctxledger import tokens
from ctxledger.compressor.markers import merge_summary

ENC = tokens.DEFAULT_ENCODING

# what the pre-tokenizer treats apart: letters (ASCII and not), digits (ASCII and not),
# contractions, punctuation, every kind of white space and line end, lone surrogates
_PIECES = st.sampled_from(
    [
        "a", "Z", "s", "t", "ll", "é", "ß", "Ж", "字", "ſ", "\u212a", "0", "7", "٣", "½",
        "'", "'s", "'LL", ".", "-", "/", "!", "@", "_", "(", "\u0301",
        " ", "  ", "\t", "\n", "\r\n", "\r", "\u00a0", "\u3000", "\x0b", "\ud800", "\udc00",
    ]
)  # fmt: skip
_TEXTS = st.lists(_PIECES, max_size=40).map("".join)


def _tokens(text: str) -> list[int]:
    return list(tokens._encoding(ENC).encode_ordinary(text))


def _direct(text: str) -> int:
    return len(_tokens(text))


@pytest.fixture
def short_texts_are_long(monkeypatch: pytest.MonkeyPatch) -> None:
    """Take the junction path for texts of any length, so generated texts reach it."""
    monkeypatch.setattr(tokens, "_LONG_TEXT", 1)
    tokens._count_long.cache_clear()


@pytest.mark.usefixtures("short_texts_are_long")
@settings(max_examples=500)  # cheap: short texts
@given(base=_TEXTS, suffix=_TEXTS)
@example(base="word.", suffix="s")
@example(base="it'", suffix="s")
@example(base="ab c", suffix="d")
@example(base="x 12", suffix="3")
@example(base="x y\n", suffix="\n")
@example(base="hello  ", suffix="  ")
@example(base="a.\ud800", suffix="\udc00")
@example(base="tok. toké", suffix="nization")
@example(base="a, naï", suffix="ve")
def test_counting_after_a_base_equals_counting_the_whole_text(base: str, suffix: str) -> None:
    text = base + suffix
    assert tokens.count_text_after(text, base, ENC) == _direct(text)
    cut = tokens._cut(base)
    if cut is not None:  # not only the counts: the very tokens split at the cut
        for whole in (base, text):
            assert _tokens(whole[:cut]) + _tokens(whole[cut:]) == _tokens(whole)


@pytest.mark.usefixtures("short_texts_are_long")
@given(base=_TEXTS, other=_TEXTS)
def test_a_text_that_does_not_extend_the_base_is_counted_as_it_is(base: str, other: str) -> None:
    assert tokens.count_text_after(other, base, ENC) == _direct(other)


def test_the_default_encoding_has_the_pattern_the_cut_is_shown_for() -> None:
    # a tripwire: another pre-tokenizer needs its own argument (tokens._cut)
    assert tokens._encoding(ENC)._pat_str == tokens.CUT_PATTERN


def test_a_cut_inside_a_piece_would_split_tokens_differently() -> None:
    # what the token-identity check above guards against: an ASCII letter followed by
    # a non-ASCII letter (or by another letter) is no cut
    for text, cut in (("déjàvu", 3), ("tokenization", 1)):
        assert _tokens(text[:cut]) + _tokens(text[cut:]) != _tokens(text)
    assert tokens._cut("tok" * 30) is None  # no letter/non-letter pair: no cut, a whole count


def test_another_pattern_is_counted_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tokens, "CUT_PATTERN", "not the encoding's pattern")
    counted = counting_long_texts(monkeypatch)
    base = "word. " * 20_000
    assert tokens.count_text_after(base + "more", base, ENC) == _direct(base + "more")
    assert [len(t) for t in counted] == [len(base) + 4]  # the whole text, as count_text would


def test_a_cut_is_found_only_in_the_last_window() -> None:
    text = "word. " + "x" * (tokens._CUT_WINDOW + 10)
    assert tokens._cut(text) is None
    cut = tokens._cut(text + "y z")
    assert cut is not None and (text + "y z")[cut - 1 : cut + 1] == "y "


def _long_message() -> dict[str, str]:
    words = ["alpha", "beta,", "src/app.py", "42", "l'été", "naïve", "\n", "x=1;"]
    return {"role": "user", "content": " ".join(words[i % len(words)] for i in range(40_000))}


def test_a_merged_summary_counts_as_the_whole_message() -> None:
    message = _long_message()
    for summary in ("Goal: ship it.", "s", "\n\n", "", "ünïcode ſ summary 123"):
        merged = merge_summary(message, summary)
        assert tokens.count_message_after(merged, message, ENC) == tokens.count_message(merged)


def test_a_recorded_count_spares_tokenizing_the_long_message(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    message = _long_message()
    merged = merge_summary(message, "the summary")
    expected = tokens.count_message(merged)
    counted = counting_long_texts(monkeypatch)
    recorded = tokens.count_message(message)
    counted.clear()
    with tokens.knowing_counts():
        tokens.remember_count(message, ENC, recorded, lambda: True)
        assert tokens.count_message_after(merged, message, ENC) == expected
    assert counted == []  # neither the message nor the merged text was tokenized whole
    # without a known count the base is counted once (and the merged text never)
    assert tokens.count_message_after(merged, message, ENC) == expected
    assert [len(t) for t in counted] == [len(message["content"])]
