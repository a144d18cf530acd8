"""Session 41 (helper ``auditmend``): mends from the review of ``audit6``.

An inline script's command fact was cut from the first text equal to the line it
runs, which may stand in a ``#`` comment before that line (``# python3 -c "`` then
``python3 -c "``): the fact then held the comment's tail. It is cut where the line
itself starts, in the code and in the reference.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from helpers.reference_facts import facts as reference
from hypothesis import example, given, settings
from hypothesis import strategies as st

from ctxledger.compressor.factmatch import fact_in_text, fact_text
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
