"""Session 40 (helper ``audit5``): audit verdicts checked against the post-compaction view.

A quoted value's normalized form dropped every quote at its ends, its own ones too:
``order.product_id = ""`` (a backtick span in the corpus) was ``order.product_id =``,
which any assignment states (``order.product_id = 5``), and ``sku="foo"`` was
``sku="foo``, stated by ``sku="foobar"``. The audit called those facts kept when the
view had lost the value. Now only one pair of quotes around the whole value goes
(``'other'`` is still ``other``).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxledger.compressor.factmatch import fact_in_text, normalize_fact, retention
from ctxledger.compressor.facts import Fact, extract_facts


def _quoted(text: str) -> list[Fact]:
    message: dict[str, Any] = {"role": "assistant", "content": text}
    return [f for f in extract_facts([message]) if f.kind == "quoted"]


def _kept(fact: Fact, view: str) -> bool:
    kept, _ = retention([fact], view)
    return kept == [fact]


@pytest.mark.parametrize(
    ("span", "normalized", "other_value", "same_value"),
    [
        (
            'order.product_id = ""',
            'order.product_id = ""',
            "Before save: order.product_id = 7",
            'the test sets order.product_id = "" first',
        ),
        ('sku=""', 'sku=""', 'Product(sku="bar")', 'a product with sku="" is deferred'),
        ('sku="foo"', 'sku="foo"', 'Product(sku="foobar")', 'Product(sku="foo")'),
        ('x = "a"', 'x = "a"', 'x = "a b"', 'we set x = "a" here'),
        ("name == ''", "name == ''", "name == 'x'", "if name == '': return"),
    ],
)
def test_a_quote_that_ends_a_value_is_part_of_it(
    span: str, normalized: str, other_value: str, same_value: str
) -> None:
    (fact,) = _quoted(f"The fix: `{span}` now.")
    assert fact.value == span
    assert fact.normalized == normalized
    assert not _kept(fact, other_value)  # main: kept (the value was cut off)
    assert _kept(fact, same_value)
    assert fact_in_text(fact, f"The fix: `{span}` now.")


@pytest.mark.parametrize(
    ("value", "normalized"),
    [
        ("'other'", "other"),  # one pair around the whole value goes, as before
        ('"src.project"', "src.project"),
        ('"a" or "b"', 'a" or "b'),
        ("`x`", "x"),
        ('""', ""),
        (" 'a b' ", "a b"),
    ],
)
def test_the_pair_around_a_value_still_goes(value: str, normalized: str) -> None:
    assert normalize_fact("quoted", value) == normalized


_NAMES = st.from_regex(r"[a-z][a-z_]{0,8}", fullmatch=True)
_WORDS = st.from_regex(r"[a-z0-9]{1,6}", fullmatch=True)


@given(name=_NAMES, quote=st.sampled_from(['"', "'"]), word=_WORDS, other=_WORDS)
def test_an_assigned_string_is_kept_only_by_that_string(
    name: str, quote: str, word: str, other: str
) -> None:
    """`name = "word"` and `name = ""` are kept by a view holding that assignment, and
    not by one assigning another string (a longer one, or the empty one)."""
    for value in (word, ""):
        span = f"{name} = {quote}{value}{quote}"
        (fact,) = [f for f in _quoted(f"Then `{span}` holds.") if f.value == span]
        assert _kept(fact, f"so {span} holds")
        for different in {other, value + other, ""} - {value}:
            assert not _kept(fact, f"so {name} = {quote}{different}{quote} holds")
