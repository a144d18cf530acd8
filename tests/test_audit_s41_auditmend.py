"""Session 41 (helper ``auditmend``): mends from the review of ``audit6``.

An inline script's command fact was cut from the first text equal to the line it
runs, which may stand in a ``#`` comment before that line (``# python3 -c "`` then
``python3 -c "``): the fact then held the comment's tail. It is cut where the line
itself starts, in the code and in the reference.

A sentence fact ending in a digit and its stop (``Keep it at 10.``, ``Use v1.2.``) was
stated by a longer number (``keep it at 10.5``, ``use v1.2.3``): the match stopped at
a decimal or version point. A digit after such a stop now makes the occurrence no
match, in :func:`.factbounds.continues_number` and in the regex of ``search``.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from helpers.fact_checks import view_keeps as _kept
from helpers.reference_facts import facts as reference
from hypothesis import example, given, settings
from hypothesis import strategies as st

from ctxledger.compressor.factbounds import contains, search
from ctxledger.compressor.factmatch import (
    fact_in_text,
    fact_text,
    retention,
)
from ctxledger.compressor.facts import extract_facts
from ctxledger.compressor.toolcalls import command_fact, command_line


def _call(command: str) -> dict[str, Any]:
    arguments = json.dumps({"command": command})
    call = {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": arguments}}
    return {"role": "assistant", "content": "", "tool_calls": [call]}


def _commands(command: str, extract: Any = extract_facts) -> list[str]:
    return [f.value for f in extract([_call(command)]) if f.kind == "command"]


# --------------------------------------------------------------------------- a comment before


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ('# python3 -c "\npython3 -c "\nprint(1)"', 'python3 -c " print(1)"'),
        ('#python3 -c "\n  python3 -c "\nprint(1)"', 'python3 -c " print(1)"'),
        ("# run: sed -i '\n# sed -i '\nsed -i '\n3d' f", "sed -i ' 3d' f"),
        ('# x\r\n# python -c "\r\npython -c "\r\nimport os"', 'python -c " import os"'),
        ('# python3 -c "\u2028python3 -c "\u2028pass"', 'python3 -c " pass"'),
    ],
)
def test_a_script_fact_starts_at_its_line_not_at_a_comment_that_repeats_it(
    command: str, expected: str
) -> None:
    assert command_fact(command) == expected
    assert _commands(command) == [expected]
    assert _commands(command, reference.extract_facts) == [expected]
    (fact,) = [f for f in extract_facts([_call(command)]) if f.kind == "command"]
    assert fact_in_text(fact, fact_text(_call(command)))


_LINE_TEXT = st.text(alphabet="ab \"'\\#=-", max_size=14)


@settings(max_examples=200)
@given(
    comments=st.lists(_LINE_TEXT, min_size=1, max_size=3),
    first=_LINE_TEXT.filter(lambda s: s.strip() != "" and not s.lstrip().startswith("#")),
    rest=st.lists(st.text(alphabet="ab \"'\\#", max_size=8), max_size=3),
    echo=st.booleans(),
)
@example(comments=[' python3 -c "'], first='python3 -c "', rest=['print(1)"'], echo=True)
@example(comments=["a'"], first="a'", rest=["x'"], echo=False)
def test_comments_before_the_line_a_command_runs_change_not_its_fact(
    comments: list[str], first: str, rest: list[str], echo: bool
) -> None:
    """Property: ``#`` comment lines before the line a command runs (one of them may
    repeat that line) change neither that line nor its fact; the reference agrees."""
    body = "\n".join([first, *rest])
    lead = "".join(f"#{c}{first if echo else ''}\n" for c in comments)
    command = lead + body
    assert command_line(command) == command_line(body) == first
    assert command_fact(command) == command_fact(body)
    assert _commands(command) == _commands(command, reference.extract_facts)


# --------------------------------------------------------------------------- a digit's stop

# A sentence fact keeps its stop (``Keep it at 10.``); a needle ending in a non-word
# character had no boundary after it, so ``keep it at 10.5`` and ``use v1.2.3`` stated
# ``Keep it at 10.`` and ``Use v1.2.``: another number, a false "kept". A ``.`` after a
# digit, then a digit, is a decimal or version point: no match ends there.


@pytest.mark.parametrize(
    ("kind", "value", "view", "expected"),
    [
        ("decision", "Keep it at 10.", "Keep it at 10.5", False),
        ("decision", "Keep it at 10.", "we keep it at 10.25 for now", False),
        ("decision", "Use v1.2.", "Use v1.2.3", False),
        ("decision", "Use v1.2.", "- use v1.2.3\n", False),
        ("constraint", "We will keep it at 10.", "We will keep it at 10.0 then", False),
        ("ask", "Decision: keep the timeout at 10.", "decision: keep the timeout at 10.5", False),
        # the stop itself, or the words ending a line, still state it
        ("decision", "Keep it at 10.", "Keep it at 10.", True),
        ("decision", "Keep it at 10.", "Keep it at 10. Then 5.", True),
        ("decision", "Keep it at 10.", "Keep it at 10.\n5 is too low", True),
        ("decision", "Keep it at 10.", "(Keep it at 10.)", True),
        ("decision", "Keep it at 10.", "Keep it at 10\nnext", True),
        ("decision", "Use v1.2.", "Use v1.2.", True),
        ("decision", "Use v1.2.", "use v1.2\n", True),
        # a letter after the stop: a longer token too (session 42, ``glued_stop``)
        ("decision", "Use v1.2.", "Use v1.2.x", False),
        # no digit before the stop: a word after it still makes a longer token
        # (session 42: ``foo.5``, as ``foo.bar``)
        ("decision", "Use foo.", "use foo.5", False),
    ],
)
def test_a_stop_after_a_digit_is_no_stop_before_a_digit(
    kind: str, value: str, view: str, expected: bool
) -> None:
    assert _kept(kind, value, view) is expected


def test_the_extracted_decisions_are_lost_to_a_longer_number() -> None:
    message = {"role": "assistant", "content": "I decided to use v1.2. Fine."}
    (fact,) = [f for f in extract_facts([message]) if f.kind == "decision"]
    assert fact.value == "I decided to use v1.2."
    kept, lost = retention([fact], "Summary: I decided to use v1.2.3 instead.")
    assert (kept, lost) == ([], [fact])
    kept, lost = retention([fact], "Summary: I decided to use v1.2. Nothing else.")
    assert (kept, lost) == ([fact], [])
    (constraint,) = [
        f
        for f in extract_facts([{"role": "user", "content": "We will keep it at 10. Go."}])
        if f.kind == "constraint"
    ]
    assert retention([constraint], "we will keep it at 10.5") == ([], [constraint])


_NUMBER = st.from_regex(r"v?[0-9]{1,3}(\.[0-9]{1,3}){0,2}", fullmatch=True)
#: what may follow the stop: no word (the fact is stated), or else (only the agreement)
_NO_WORD_AFTER = ("", " ", "\n", ")", ",", "/")
_AFTER_STOP = st.sampled_from([*_NO_WORD_AFTER, "x", "-rc1", ".", ".5"])


@settings(max_examples=200)
@given(
    words=st.lists(st.text(alphabet="abcxyz", min_size=1, max_size=5), min_size=1, max_size=3),
    number=_NUMBER,
    digits=st.from_regex(r"[0-9]{1,3}", fullmatch=True),
    after=_AFTER_STOP,
    repeat=st.integers(min_value=1, max_value=12),
)
@example(words=["keep", "it", "at"], number="10", digits="5", after="", repeat=1)
@example(words=["use"], number="v1.2", digits="3", after="", repeat=10)
def test_a_stop_after_a_digit_is_never_found_before_a_digit(
    words: list[str], number: str, digits: str, after: str, repeat: int
) -> None:
    """Property: a needle ending in a digit and ``.`` is not found where that ``.`` is
    followed by a digit, and is found where it is followed by no digit and no word
    character; the rule per occurrence and the one regex agree (a text repeating the
    needle often hands over to the regex)."""
    needle = " ".join([*words, number]) + "."
    longer = " ".join([needle + digits] * repeat)
    assert not contains(longer, needle)
    assert not search(longer, needle)
    assert not _kept("decision", needle, longer)
    stated = longer + " " + needle + after
    assert contains(stated, needle) == search(stated, needle)
    if after in _NO_WORD_AFTER:
        assert contains(stated, needle)
