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
from typing import Any

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
    # (review 1: the quote after the runs: blocks after the last quote's line are not read)
    text = f'{"`" * size}\n{"`" * (size + 1)}\nSay "keep it".\n'
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


# Review 1 ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "quoted"),
    [
        (  # a ``` span opening a line: a backtick after the run, so no fence (CommonMark)
            '```foo``` is the option to set.\nKeep "this phrase" as the title.',
            ["this phrase"],
        ),
        (
            '``` npm test ``` fails for me.\nThe error says "cannot find module".',
            ["npm test", "cannot find module"],
        ),
        (  # a ``` ending a line closes the span the line opened: no fence
            'Run ``` ls -la ```\nThen keep "this phrase" in the title.',
            ["ls -la", "this phrase"],
        ),
        (  # an escaped backtick opens no span (the span after it is the span fact's)
            'Type \\` to start, say "keep this" and use `x`.',
            ['to start, say "keep this" and use', "keep this"],
        ),
        (  # a value as written holds no quote of the code inside it (the span's fact)
            'Key is "a`b" and "c`d" here',
            ['b" and "c'],
        ),
    ],
)
def test_review_1_quoted_strings(text: str, quoted: list[str]) -> None:
    assert facts_of(text, "quoted", "user") == quoted


@pytest.mark.parametrize(
    "text",
    [
        "Run ``` ls -la ```\nYou must never push to main.\n",
        "```foo``` is the option.\nYou must never push to main.\n",
    ],
)
def test_review_1_an_inline_span_opens_no_block(text: str) -> None:
    assert factfences.fenced_blocks(text) == numbering.fenced(text) == []
    assert facts_of(text, "constraint", "user") == ["You must never push to main."]


@pytest.mark.parametrize(
    ("text", "blocks"),
    [  # still blocks: a ``` ending prose that closes no span, a ~~~ with tildes after it
        ("```a``` and ```\nx\n```\n", [(11, 21)]),
        ("See: ```py\nx\n```\n", [(4, 16)]),
        ("~~~ a ~~~\nx\n", [(0, 9)]),
        ("\\``` x ```\n", [(6, 11)]),  # (an escaped run opens no span to close)
    ],
)
def test_review_1_blocks_left_as_they_were(text: str, blocks: list[tuple[int, int]]) -> None:
    assert factfences.fenced_blocks(text) == numbering.fenced(text) == blocks


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from([*_PIECES, "\\", "```a```", " ```"]), max_size=14).map("".join))
@example('\\\\`a` ``x`` \\`b` "ab"')
def test_review_1_the_reference_agrees(text: str) -> None:
    assert numbering.code_spans(text) == factfences.code_spans(text)
    assert numbering.fenced(text) == factfences.fenced_blocks(text)
    facts_of(text, "quoted", "user")
    facts_of(text, "constraint", "user")


class _Read(str):
    """A text counting the characters its searches may read."""

    read = 0

    def find(self, sub: str, start: Any = None, end: Any = None) -> int:
        at = super().find(sub, start, end)  # (read up to the match: review 2)
        _Read.read += (len(self) if end is None or at != -1 else end) - (start or 0)
        _Read.read -= 0 if at == -1 else len(self) - at - len(sub)
        return at

    def rfind(self, sub: str, start: Any = None, end: Any = None) -> int:
        at = super().rfind(sub, start, end)
        _Read.read += (len(self) if end is None else end) - (start or 0 if at == -1 else at)
        return at


class _CountedRuns:
    def __init__(self, pattern: re.Pattern[str]) -> None:
        self.pattern = pattern

    def finditer(self, text: str, pos: int = 0, endpos: int | None = None) -> Any:
        stop = len(text) if endpos is None else endpos
        _Read.read += stop - pos
        return self.pattern.finditer(text, pos, stop)

    def findall(self, text: str, pos: int = 0, endpos: int | None = None) -> Any:
        stop = len(text) if endpos is None else endpos
        _Read.read += stop - pos
        return self.pattern.findall(text, pos, stop)


@pytest.mark.parametrize("holding", ["", "'\""])
def test_code_spans_read_in_linear_time(monkeypatch: pytest.MonkeyPatch, holding: str) -> None:
    # a line of backtick runs of growing lengths, none closed: a search from each run
    # for its closer would read the rest of the line (cubic in the runs, quadratic in the
    # text); the pass from the right reads each character a bounded number of times
    monkeypatch.setattr(factfences, "_BACKTICKS", _CountedRuns(factfences._BACKTICKS))
    ratios = []
    for runs in (150, 300):
        text = _Read('Say "ab". ' + "".join("`" * k + "a" for k in range(1, runs)) + " '\n")
        _Read.read = 0
        factfences.code_spans(text, holding)
        ratios.append(_Read.read / len(text))
    assert ratios[1] < 12 and ratios[1] < ratios[0] * 1.2


def _count_block_reads(monkeypatch: pytest.MonkeyPatch) -> list[list[tuple[int, int]]]:
    """The blocks of each :func:`factfences.fenced_blocks` read, in order (counted)."""
    blocks: list[list[tuple[int, int]]] = []
    read_blocks = factfences.fenced_blocks

    def counted(text: str, until: int | None = None) -> list[tuple[int, int]]:
        blocks.append(read_blocks(text, until))
        return blocks[-1]

    monkeypatch.setattr(factfences, "fenced_blocks", counted)
    return blocks


def test_the_mask_reads_only_lines_quotes_can_meet(monkeypatch: pytest.MonkeyPatch) -> None:
    # review 1: 1 MB of ~~~ lines or of single backticks cost up to 6x main's mask; inline
    # spans are read only on lines holding a quote, blocks only up to the last such line
    monkeypatch.setattr(factfences, "_BACKTICKS", _CountedRuns(factfences._BACKTICKS))
    blocks = _count_block_reads(monkeypatch)
    head = 'Keep "the value" and `x`.\n'
    text = head + "~~~\nx\n~~~\n` a ` b\n" * 500
    _Read.read = 0
    assert facts_of(text, "quoted", "user") == ["the value"]
    assert blocks == [[]]
    assert _Read.read == len(head) - 1


def test_constraints_read_no_block_after_the_last_sentence(monkeypatch: pytest.MonkeyPatch) -> None:
    # review 1: `stated` read every block of a text (1 MB of ~~~ lines: 4x main's cost);
    # (review 2: the message's one reading, :func:`factfences.needed_blocks`, is counted)
    blocks = _count_block_reads(monkeypatch)
    text = "~~~\nNever push to main.\n~~~\nYou must never push to main.\n" + "~~~\nx\n~~~\n" * 500
    assert facts_of(text, "constraint", "user") == ["You must never push to main."]
    assert blocks == [[(0, 27)]]


def test_review_2_no_pattern_is_compiled_from_the_text(monkeypatch: pytest.MonkeyPatch) -> None:
    # runs all of one length were paired by a pattern built from the run: parsed anew
    # per length (8x main's cost for two runs of 400k) and held in re's cache (16 MB each)
    compiled: list[object] = []
    compile_ = re._compile  # type: ignore[attr-defined]

    def counted(*args: Any) -> Any:
        compiled.append(args)
        return compile_(*args)

    monkeypatch.setattr(re, "_compile", counted)
    for size in (3, 40, 4000):
        text = '"a b" ' + "`" * size + " x " + "`" * size + "\n"
        assert factfences.code_spans(text, "'\"") == [(6, len(text) - 1)]
        assert facts_of(text, "quoted", "user") == ["a b"]
    assert compiled == []


def test_review_2_one_fence_reading_per_message(monkeypatch: pytest.MonkeyPatch) -> None:
    # the constraints and the quoted-string mask each read the blocks of a text
    calls: list[int | None] = []
    read_blocks = factfences.fenced_blocks

    def counted(text: str, until: int | None = None) -> list[tuple[int, int]]:
        calls.append(until)
        return read_blocks(text, until)

    from ctxledger.compressor import factnoise

    monkeypatch.setattr(factfences, "fenced_blocks", counted)
    monkeypatch.setattr(factnoise, "fenced_blocks", counted)
    text = 'Never push to main.\n~~~\nx = "no"\n~~~\n' * 50 + 'Keep "this one".\n~~~\ny\n~~~\n'
    assert facts_of(text, "quoted", "user") == ["this one"]
    assert facts_of(text, "constraint", "user") == ["Never push to main."]
    assert len(calls) == 2  # one per extraction above
    assert calls[0] == text.index("\n~~~\ny")


@pytest.mark.parametrize(
    ("text", "code"),
    [  # an escaped run of two or more: its first backtick is literal, its rest opens
        ('Type \\``"a b"` and keep "this".', ['`"a b"`']),
        ("a \\```x`` b", ["``x``"]),
        ("a \\\\``x`` b", ["``x``"]),  # (an even number of backslashes: no escape)
        ("a \\``x`` b", []),  # (the rest, one backtick, meets no run of one)
        ("a ``x\\`` b", ["``x\\``"]),  # (a run closes whole: no escape inside code)
    ],
)
def test_review_2_an_escaped_run_opens_with_its_rest(text: str, code: list[str]) -> None:
    assert [text[start:end] for start, end in factfences.code_spans(text)] == code
    assert numbering.code_spans(text) == factfences.code_spans(text)


@pytest.mark.parametrize(
    "shape",
    [  # review 2's shapes: two long runs of one length; a distinct run on each quote's line
        lambda size: '"a b" ' + "`" * size + " x " + "`" * size,
        lambda size: "".join(
            f'Say "v{k}" ' + "`" * k + " x " + "`" * k + "\n" for k in range(1, size // 25)
        ),
    ],
)
def test_review_2_shapes_read_in_linear_time(monkeypatch: pytest.MonkeyPatch, shape: Any) -> None:
    monkeypatch.setattr(factfences, "_BACKTICKS", _CountedRuns(factfences._BACKTICKS))
    pairs = {size: _CountedRuns(pattern) for size, pattern in factfences._PAIRS.items()}
    monkeypatch.setattr(factfences, "_PAIRS", pairs)
    ratios = []
    for size in (4000, 16000):
        text = _Read(shape(size))
        _Read.read = 0
        assert factfences.code_spans(text, "'\"")
        ratios.append(_Read.read / len(text))
    assert ratios[1] < 12 and ratios[1] < ratios[0] * 1.2
