"""Session 35: quoted strings are read outside code, with one fence reading.

The quoted-string facts of prose were masked by ```.*?(?:```|$) (any ``` anywhere);
constraints by :func:`factfences.fenced_blocks` (line fences of ``` and ``~~~``, the
closing run at least as long). Now both read fenced blocks alike, and quoted strings
are also not read inside an inline code span (a run of backticks to the next run as
long on its line, :func:`factfences.code_spans`). The reference states it in
``numbering.code_spans``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import pytest
from helpers.fact_checks import facts_of
from helpers.reference_facts import numbering
from hypothesis import example, given, settings
from hypothesis import strategies as st

from ctxledger.compressor import factfences, facts


@pytest.mark.parametrize(
    ("text", "quoted"),
    [
        (  # a ~~~ block's string literal is code
            '~~~py\nname = "secret value"\n~~~\nUse "strict mode" please.\n',
            ["strict mode"],
        ),
        (  # a ```` block quoting ``` lines runs on past them
            '````md\n```\nx = "inner one"\n```\ny = "still code"\n````\nSay "plain words".\n',
            ["plain words"],
        ),
        (  # a ``` inside a sentence with no closing ``` masks nothing after it
            'Answer with ``` fences and keep "this phrase" as is.',
            ["this phrase"],
        ),
        (  # an inline code span is code: the span is kept, not its literal
            'Set `x = "a b"` and keep "this phrase".',
            ['x = "a b"', "this phrase"],
        ),
        (  # a span of two backticks
            'Run ``print("a b")`` then say "all done".',
            ['print("a b")', "all done"],
        ),
        (  # a code span inside a quote of prose stays in its value, as written
            "The changelog says 'Removed custom `distutils` handling' here.",
            ["distutils", "Removed custom `distutils` handling"],
        ),
    ],
)
def test_quoted_strings_are_read_outside_code(text: str, quoted: list[str]) -> None:
    assert sorted(
        facts_of(text, "quoted", "user") + facts_of(text, "identifier", "user")
    ) == sorted(quoted)


def test_a_stray_backtick_masks_no_later_line() -> None:
    text = 'It is the ` key.\nKeep "this phrase" and ` that.\n'
    assert facts_of(text, "quoted", "user") == ["this phrase"]


_PIECES = ["```", "````", "~~~", "`", "``", " ", "\n", "x", "py", "'", '"', "ab", "Do:", "\t"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), max_size=14).map("".join))
@example('`a` ``b`` ` ``"xy"`` ``')
@example('See "ab". ```py\n"xy"\n```')
def test_the_reference_code_spans_agree(text: str) -> None:
    assert numbering.code_spans(text) == factfences.code_spans(text)
    facts_of(text, "quoted", "user")  # (the reference's quoted facts: the same)


def test_two_long_backtick_runs_give_one_span(monkeypatch: pytest.MonkeyPatch) -> None:
    # session 34's probe: ```.*?(?:```|$) split two runs of backticks into one span per
    # three pairs (1 MB: 166,000 spans masked one by one); one block now
    largest: list[int] = []

    def counted(text: str, spans: Sequence[tuple[int, int]]) -> str:
        largest.append(len(spans))
        return mask(text, spans)

    mask = facts.mask
    monkeypatch.setattr(facts, "mask", counted)
    size = 30_000
    text = f'Say "keep it".\n{"`" * (size + 1)}\n{"`" * size}\n'
    found = facts.extract_facts([{"role": "user", "content": text}])
    assert [fact.value for fact in found if fact.kind == "quoted"] == ["keep it"]
    assert max(largest) == 1


class _CountedOpener:
    """The opener pattern, counting the characters each search may read."""

    def __init__(self, pattern: re.Pattern[str]) -> None:
        self.pattern = pattern
        self.read = 0

    def search(self, text: str, pos: int = 0, endpos: int | None = None) -> re.Match[str] | None:
        stop = len(text) if endpos is None else endpos
        self.read += stop - pos
        return self.pattern.search(text, pos, stop)


def test_the_opener_is_tried_only_on_lines_with_a_fence(monkeypatch: pytest.MonkeyPatch) -> None:
    # the opener pattern was tried at every character of a text (most of the mask's
    # cost on ordinary texts); now only lines holding ``` or ~~~ are handed to it
    counted = _CountedOpener(factfences._FENCE_OPENER)
    monkeypatch.setattr(factfences, "_FENCE_OPENER", counted)
    prose = "Keep `x` as is.\n" * 300
    text = prose + "```py\nx = 1\n```\n" + prose
    assert factfences.fenced_blocks(text) == [(len(prose), len(prose) + 15)]
    assert counted.read == len("```py")
