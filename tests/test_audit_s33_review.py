"""Session 33's review of the audit branch: a ``` inside a sentence opens no fence, a
user's numbered list is no listing, a pdsh host's address is no version, a closing tag
ends a cut traceback, range addresses need their program, a UNC name cut at a letter
is none, CRLF listings, the label rule's case, the reference's own numbering rules,
sentences of one long line read in linear time, a header glued to a line."""

from __future__ import annotations

import re
from typing import Any

import pytest
from helpers.fact_checks import facts_of
from helpers.reference_facts import numbering
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxledger.compressor import factnoise, factsentences

# 1, 2. a ``` inside a sentence opens no fence; a user's numbered list is no listing


@pytest.mark.parametrize(
    ("text", "constraints"),
    [
        (  # a ``` mentioned in prose
            "Format every code answer with ``` fences. You must not use tabs in src/app.py.\n"
            "Never commit to main.\n",
            ["You must not use tabs in src/app.py.", "Never commit to main."],
        ),
        (  # a fence opening after up to 3 blanks still quotes
            "Fix it.\n   ```ini\n# L049 - Always use IS\n   ```\nDo not change the tests.\n",
            ["Do not change the tests."],
        ),
        (  # a user's list, written 1- and 3:
            "Rules for this task:\n1- Never push to main.\n2- You must not change the public API.\n"
            "3: Do not delete tests/legacy.py.\n",
            [
                "1- Never push to main.",
                "2- You must not change the public API.",
                "3: Do not delete tests/legacy.py.",
            ],
        ),
        (  # a listing: three blanks or a tab after the number, or code (two blanks and
            # a number of 100+ were a listing's too before the second review: a user's
            # list reads so as well, and a requirement lost is worse than a quote kept)
            "Shown:\n5:    Never use tabs in src/a.py.\n7:\t\tAlways run the linter first.\n"
            "8: import os  # never remove this import\n"
            "120:   Always serializes to an integer value.\nAlways run the tests.\n",
            ["Always run the tests."],
        ),
    ],
)
def test_only_quoted_or_listed_sentences_state_no_constraint(
    text: str, constraints: list[str]
) -> None:
    assert facts_of(text, "constraint", "user") == constraints


# 3, 7. an IPv4 host's prefix is no version; a CRLF listing's name alone


@pytest.mark.parametrize(
    ("text", "errors"),
    [
        (
            "10.0.0.5: Permission denied (publickey,password).\n"
            "192.168.1.20: mkdir: cannot create directory /data: Permission denied\n",
            [
                "10.0.0.5: Permission denied (publickey,password).",
                "192.168.1.20: mkdir: cannot create directory /data: Permission denied",
            ],
        ),
        ("1.2.3.4.5: x cannot be read\n", []),  # five numbers: a version, no address
        ("260:    Raises\r\n261:    ------\r\n262:    AttributeError\r\n", ["AttributeError"]),
    ],
)
def test_a_host_address_and_a_crlf_listing(text: str, errors: list[str]) -> None:
    assert facts_of(text, "error") == errors


# 4. a closing tag ends a cut traceback: the wrapper's next tag is no error either


def test_a_closing_tag_ends_the_traceback() -> None:
    text = (
        "<returncode>1</returncode>\n<output_head>\nTraceback (most recent call last):\n"
        '  File "/testbed/reproduce.py", line 12, in <module>\n    main()\n'
        "</output_head>\n<elided_chars>\n1326 characters elided\n</elided_chars>\n"
        "<output_tail>\nok\n</output_tail>\n"
    )
    assert facts_of(text, "error") == ["exit code 1"]


# 5, 8. range addresses: only after sed, awk, gawk or perl; ``,$`` and ``,+N``


@pytest.mark.parametrize(
    ("text", "paths"),
    [
        ('{"data_dirs": "/data1/,/data2/hdfs", "log_dir": "/var/log/hadoop"}', ["/data2/hdfs", "/var/log/hadoop"]),
        ('Set EXCLUDE_DIRS="/proc/,/sys/kernel/debug" in the config.', ["/proc/", "/sys/kernel/debug"]),
        ("$ sed -n '/^class Date/,$p' src/fields.py", ["src/fields.py"]),
        ("$ sed -n '/^def run/,+20p' src/cli.py", ["src/cli.py"]),
        ("$ awk '/^x/,12' a.txt", ["a.txt"]),
        ("sed -n '/a/,/b/x.py\" done", ["/b/x.py"]),  # no same quote: no range address
        ("used -n '/class Date/,/^class /p' x.txt", ["Date/", "x.txt"]),  # ``used``: no sed
    ],
)  # fmt: skip
def test_range_addresses_need_their_program(text: str, paths: list[str]) -> None:
    assert facts_of(text, "path") == paths


# 6, 8. a device path: a name cut at a letter, a device with no name


@pytest.mark.parametrize(
    ("text", "paths"),
    [
        # (session 35: a name with a cased letter is read whole, no longer cut: none)
        ("open \\\\.\\pipe\\réseau failed\n", ["\\\\.\\pipe\\réseau"]),
        ("copy x \\\\.\\nul", []),
        ("\\\\.\\pipe\\tö x", ["\\\\.\\pipe\\tö"]),
        ("\\\\.\\pipe\\tʰ x", []),  # (a modifier letter: still a cut name, none)
    ],
)
def test_a_cut_or_nameless_device_path_is_none(text: str, paths: list[str]) -> None:
    assert facts_of(text, "path") == paths


# 10. a label's word ignores case in ASCII only


@pytest.mark.parametrize(
    ("text", "outcomes"),
    [("Job reſult:", ["Job reſult:"]), ("Job RESULT:", []), ("Job RESULTS :", [])],
)
def test_a_label_ignores_case_in_ascii_only(text: str, outcomes: list[str]) -> None:
    assert facts_of(text, "outcome") == outcomes


# 9. the reference's numbering rules and the module's, on lines built from pieces

_PIECES = [
    "1", "12", "123", "١", ":", "-", " ", "  ", "\t", "\r", ",", ")", ".", "x", "os",
    "AttributeError", "a.b.KeyError", "Error", "Raises", "Raise", "R", "import os",
    "Never push", "```", "\n", "  ```", "\n    ```", "\n\t```", "~~~", " ```py", "x", "`",
]  # fmt: skip
_FREE = st.lists(st.sampled_from(_PIECES), max_size=8).map("".join)
#: a numbered line's shape: blanks, a number, a separator, blanks, a body, a tail
_SHAPED = st.tuples(
    st.sampled_from(["", " ", "\t"]),
    st.sampled_from(["1", "12", "123", "١", "3.0", ""]),
    st.sampled_from([":", "-", ":1", ""]),
    st.sampled_from(["", " ", "  ", "\t"]),
    st.sampled_from(
        [
            "AttributeError",
            "a.b.KeyError",
            "_x.Y1Error",
            "Error",
            "AError",
            "aError",
            "Raises X if",
            "Raise Y",
            "RaisesX",
            "Raises\tZ",
            "import os",
            "Never push",
            "x.é.ValueError",
            "```",
            "KeyError: x",
        ]
    ),
    st.lists(st.sampled_from([" ", "\t", "\r", ",", ")", ",,", "x", "\n"]), max_size=3).map(
        "".join
    ),
).map("".join)
_LINES = st.one_of(_FREE, _SHAPED)


@settings(max_examples=300, deadline=None)
@given(line=_LINES, raw_extra=st.sampled_from(["", " ", "\t", "  "]))
def test_the_reference_numbering_rules_agree_with_the_module(line: str, raw_extra: str) -> None:
    assert numbering.numbered(line) == factnoise.numbered(line)
    number = re.match(r"\s*\d+[:-]", line)
    raw = line if number is None else line[: number.end()] + raw_extra + line[number.end() :]
    assert numbering.numbered_listing(line, raw) == factnoise.numbered_listing(line, raw)
    module_name = factnoise.listed_or_documented(line) and not factnoise.listed_code_or_field(line)
    assert not module_name or numbering.listed_name(line)
    if not factnoise.listed_code_or_field(line):
        assert numbering.listed_name(line) == factnoise.listed_or_documented(line)
    spans = factnoise.fenced_blocks(line)
    assert numbering.fenced(line) == spans


# the sentences of one long line: each hit reads its line back once only


class _CountingText(str):
    """A text counting the characters its ``rfind`` calls read."""

    read = 0

    def rfind(self, sub: str, start: Any = None, end: Any = None) -> int:  # type: ignore[override]
        low = 0 if start is None else start
        high = len(self) if end is None else end
        _CountingText.read += max(0, high - low)
        return str.rfind(self, sub, low, high)


def _sentence_reads(n: int) -> int:
    _CountingText.read = 0
    text = _CountingText("```\n" + "You must not do x. " * n)
    assert len(factsentences.constraint_sentences(text)) == n
    return _CountingText.read


def test_sentences_of_one_long_line_are_read_in_linear_time() -> None:
    small, large = _sentence_reads(500), _sentence_reads(2_000)
    assert large <= 4.5 * small


# a traceback header glued to a line: the line is no error of the traceback before


def test_a_header_glued_to_a_line_gives_no_error_of_that_line() -> None:
    text = (
        'Traceback (most recent call last):\n  File "a.py", line 1\nfrom yTraceback '
        '(most recent call last):\n  File "a.py", line 1\nValueError: x\n'
    )
    assert facts_of(text, "error") == ["ValueError: x"]
