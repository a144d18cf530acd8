"""Session 33's second review of the audit branch: a fence opened at the end of a line
of prose, ``~~~`` and a list item's indented fence; a user's numbered list of any
number; the sentences of one long line walked once; a closing tag printed inside a
traceback; the range address's program; UNC names with letters outside ASCII; a
four-part version."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from helpers.fact_checks import facts_of
from helpers.reference_facts import numbering
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxledger.compressor import factnoise, factsentences

# 1. fences: one opened at the end of a line of prose, ~~~, a list item's indented one


@pytest.mark.parametrize(
    ("text", "constraints"),
    [
        (  # the review's case: the closing ``` opened a block running to the end
            "See below. ```\nNever commit secrets.\n```\nDo not change the tests.\n",
            ["Do not change the tests."],
        ),
        (  # round 1's case stays: a ``` inside a sentence opens none
            "Format every code answer with ``` fences. You must not use tabs.\nNever push to main.\n",
            ["You must not use tabs.", "Never push to main."],
        ),
        (
            "Config:\n~~~ini\n# L049 - Always use IS\n~~~\nNever edit the generated file.\n",
            ["Never edit the generated file."],
        ),
        (
            "1. Install:\n    ```\n    # Never edit this generated file\n    ```\n"
            "Do not change the tests.\n",
            ["Do not change the tests."],
        ),
    ],
)
def test_fences_of_prose_lines_tildes_and_list_items(text: str, constraints: list[str]) -> None:
    assert facts_of(text, "constraint", "user") == constraints


_FENCE_PIECES = ["```", "~~~", "`", " ", "\t", "\n", "x", "py", ".", "-"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(_FENCE_PIECES), max_size=12).map("".join))
def test_the_reference_fences_agree_with_the_module(text: str) -> None:
    assert numbering.fenced(text) == factnoise.fenced_blocks(text)


# 2. a user's numbered list: any number, no blank or two blanks after its separator


@pytest.mark.parametrize(
    ("text", "constraints"),
    [
        (
            "Requirements:\n100: Never push to main.\n101: You must not change the public API.\n",
            ["100: Never push to main.", "101: You must not change the public API."],
        ),
        (
            "Requirements:\n100- Never push to main.\n101- You must not change the API.\n",
            ["100- Never push to main.", "101- You must not change the API."],
        ),
        (
            "Rules:\n1:Never push to main.\n2:You must not change the public API.\n",
            ["1:Never push to main.", "2:You must not change the public API."],
        ),
        (
            "Rules:\n1)  Never push to main.\n2-  You must not change the public API.\n",
            ["1) Never push to main.", "2- You must not change the public API."],
        ),
        (  # a listing's indent (three blanks, a tab among the first three) or code
            "Shown:\n1432:        Always serializes to an integer value.\n"
            "5:  \tNever use tabs in src/a.py.\n12: import os  # never remove it\n",
            [],
        ),
    ],
)
def test_a_users_numbered_list_keeps_its_constraints(text: str, constraints: list[str]) -> None:
    assert facts_of(text, "constraint", "user") == constraints


# 3. the sentences of one long line: each part of the line walked once


class _CountingPattern:
    """`_SENTENCE`, counting its ``match`` and ``search`` calls."""

    def __init__(self, pattern: re.Pattern[str]) -> None:
        self.pattern, self.calls = pattern, 0

    def match(self, text: str, pos: int) -> re.Match[str] | None:
        self.calls += 1
        return self.pattern.match(text, pos)

    def search(self, text: str, pos: int) -> re.Match[str] | None:
        self.calls += 1
        return self.pattern.search(text, pos)


def _sentence_calls(n: int, monkeypatch: pytest.MonkeyPatch) -> int:
    counting = _CountingPattern(factsentences._SENTENCE)
    monkeypatch.setattr(factsentences, "_SENTENCE", counting)
    # no ". " in the 400 characters before each hit: its look back finds the line's start
    unit = "x. " * 20 + "a" * 420 + " never do it. "
    assert len(factsentences.constraint_sentences(unit * n)) == n
    return counting.calls


def test_each_sentence_of_one_long_line_is_walked_once(monkeypatch: pytest.MonkeyPatch) -> None:
    small, large = _sentence_calls(20, monkeypatch), _sentence_calls(80, monkeypatch)
    assert large <= 4.5 * small


# 4. a closing tag whose tag a line of the traceback opened is printed HTML, no wrapper's end


@pytest.mark.parametrize(
    ("text", "errors"),
    [
        (
            'Traceback (most recent call last):\n  File "scrape.py", line 9, in <module>\n'
            "    parse(page)\n<table>\n</table>\nValueError: no rows found\n",
            ["ValueError: no rows found"],
        ),
        (  # the wrapper's end still ends it: a cut traceback gives its last frame's line
            '<output>\nTraceback (most recent call last):\n  File "a.py", line 1, in <module>\n'
            "    run()\n<b>done</b>\n</output>\n<elided_chars>\nValueError: other\n",
            ["<b>done</b>", "ValueError: other"],
        ),
    ],
)
def test_a_closing_tag_printed_in_a_traceback(text: str, errors: list[str]) -> None:
    assert facts_of(text, "error") == errors


# 5. a range address's program starts its command: no earlier command's, no file name's


@pytest.mark.parametrize(
    ("text", "paths"),
    [
        (
            "$ sed -n 1p list.txt; cat '/data1/,/data2/hdfs' /var/log/hadoop\n",
            ["list.txt", "/data2/hdfs", "/var/log/hadoop"],
        ),
        ('config.sed has dirs: "/data1/,/data2/hdfs"\n', ["/data2/hdfs"]),
        ("$ cat a.txt | /usr/bin/sed -n '/^class Date/,/^class /p' > out.txt\n", ["a.txt", "/usr/bin/sed", "out.txt"]),
        ("$ (cd src && awk '/^x/,/^y/' m.py)\n", ["m.py"]),
    ],
)  # fmt: skip
def test_a_range_address_needs_its_own_command(text: str, paths: list[str]) -> None:
    assert facts_of(text, "path") == paths


_RANGE_PIECES = ["sed ", "awk", "x.sed ", "; ", "|", "&", "(", "'", '"', "/", "/,/", "a", " ", "\n"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(_RANGE_PIECES), max_size=12).map("".join))
def test_the_reference_reads_a_range_addresss_command_alike(text: str) -> None:
    facts_of(text, "path")


# 6. a Windows path cut at a letter or a mark outside ASCII is none


@pytest.mark.parametrize(
    ("text", "paths"),
    [
        # (session 35: a name with a cased letter or a mark is read whole)
        ("copy x \\\\srv\\share\\Données\\a.txt", ["\\\\srv\\share\\Données\\a.txt"]),
        ("copy x \\\\srv\\share\\Cafe\u0301\\a.txt", ["\\\\srv\\share\\Cafe\u0301\\a.txt"]),
        ("copy x \\\\sérveur\\share\\a.txt", ["a.txt"]),  # (a server's name: ASCII)
        ("dir C:\\Users\\José\\a.txt", ["C:\\Users\\José\\a.txt"]),
        ("dir C:\\Users\\Joʰn\\a.txt", ["a.txt"]),  # (a modifier letter: a cut, none)
        ("copy x \\\\srv\\share\\Donnees\\a.txt", ["\\\\srv\\share\\Donnees\\a.txt"]),
    ],
)
def test_a_windows_path_cut_at_a_letter_is_none(text: str, paths: list[str]) -> None:
    assert facts_of(text, "path") == paths


# 7. a dotted quad is a pdsh host's address only before a program's output or a remote
# shell's error; else a version (a changelog's entry)


@pytest.mark.parametrize(
    ("text", "errors"),
    [
        ("Changelog:\n2.7.18.1: DateTime fields cannot be used with naive values\n", []),
        ("Changelog:\n3.0: DateTime fields cannot be used with naive values\n", []),
        ("10.0.0.5: Permission denied\n", ["10.0.0.5: Permission denied"]),
        ("10.0.0.5: bash: foo: command not found\n", ["10.0.0.5: bash: foo: command not found"]),
    ],
)
def test_a_four_part_version_is_no_host(text: str, errors: list[str]) -> None:
    assert facts_of(text, "error") == errors


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from(["1.2.3.4", "2.7.18.1", "10.0.19041.1", "3.0", "1.2.3.4 5"]),
    st.sampled_from(["", " ", "\t"]),
    st.sampled_from(["Permission denied", "Connection refused", "bash", "DateTime", "", "é"]),
)
def test_the_reference_reads_a_host_or_version_alike(number: str, blank: str, tail: str) -> None:
    line = f"{number}:{blank}{tail}: cannot be used, permission denied\n"
    facts_of(line, "error")


# 8. the reference's functions stay under 60 lines, as the project's do


def test_the_reference_functions_are_under_60_lines() -> None:
    folder = Path(numbering.__file__).parent
    long = [
        (path.name, node.name)
        for path in sorted(folder.glob("*.py"))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.FunctionDef) and (node.end_lineno or 0) - node.lineno >= 60
    ]
    assert long == []


def test_the_reference_reads_a_traceback_to_the_line_of_the_next_header() -> None:
    text = (
        'Traceback (most recent call last):\n  File "a.py", line 1, in <module>\n'
        "KeyError: 'k'\nfrom yTraceback (most recent call last):\n"
        '  File "b.py", line 2, in <module>\nValueError: bad\n'
    )
    assert facts_of(text, "error") == ["KeyError: 'k'", "ValueError: bad"]
