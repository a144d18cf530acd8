"""Each section of the offline summary earns its place from the turns (issue 17, point 6).

Edited files come from the tool calls that edited them (editor tools, ``sed -i``),
reads stay reads; Key Decisions are the assistant's stated choices; only the latest
plan is kept, and a plan made before the user changed course says so; truncation
never cuts inside a word or a code span.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_offline_summarizer import coding_session, middle_budget, summarize

from ctxledger.compressor.facts import extract_facts, find_paths
from ctxledger.compressor.summarizers import parse_sections
from ctxledger.compressor.summarizers.analysis import cap

SED = (
    "sed -i 's/    return datetime.strptime(v/    if not v: return None\\n"
    "    return datetime.strptime(v/' pydicom/valuerep.py"
)


def _turn(n: int, text: str, name: str, result: str, **args: Any) -> list[dict[str, Any]]:
    call = {
        "id": f"c{n}",
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(args)},
    }
    return [
        {"role": "assistant", "content": text or None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": f"c{n}", "content": result},
    ]


def _shell(code: int, output: str) -> str:
    return f"<returncode>{code}</returncode>\n<output>\n{output}\n</output>"


def debugging_turns(change_course: bool = False) -> list[dict[str, Any]]:
    """A SWE-agent-style session: a read, a sed edit, an editor edit, a failing run."""
    turns: list[dict[str, Any]] = [
        {
            "role": "user",
            "content": "Fix the date parser in pydicom/valuerep.py: an empty DA value raises "
            "ValueError. Do not change the public API.",
        }
    ]
    turns += _turn(
        1,
        "Let me look at the parser first.",
        "bash",
        _shell(
            0, "  1 import re\n  2 def parse_da(v):\n  3     return datetime.strptime(v, '%Y%m%d')"
        ),
        command="nl -ba pydicom/valuerep.py | sed -n '1,40p' && cat pydicom/dataelem.py",
    )
    turns += _turn(
        2,
        "Maybe the issue is the timezone? Next I will add a guard for empty strings, then run the tests.",
        "bash",
        _shell(0, ""),
        command=SED,
    )
    turns += _turn(
        3,
        "I'll use None instead of raising because DICOM allows empty DA values.",
        "str_replace_based_edit_tool",
        "The file pydicom/config.py has been edited.",
        command="str_replace",
        path="pydicom/config.py",
        old_str="use_DS_decimal = True",
        new_str="use_DS_decimal = False",
    )
    turns += _turn(
        4,
        "Running the tests. After that I need to update the changelog.",
        "bash",
        _shell(
            1,
            "FAILED tests/test_valuerep.py::test_da - AssertionError\n1 failed, 40 passed in 2.1s",
        ),
        command="python -m pytest tests/test_valuerep.py -q",
    )
    if change_course:
        turns.append(
            {
                "role": "user",
                "content": "Stop working on the parser; make the config flag default to True instead.",
            }
        )
        turns += _turn(5, "Understood.", "bash", _shell(0, "ok"), command="git status --short")
    return turns


def _sections(turns: list[dict[str, Any]], budget: int = 900) -> dict[str, list[str]]:
    return parse_sections(summarize(turns, budget))


def test_an_editor_edit_is_an_edit_of_its_file_with_its_key_line() -> None:
    sections = _sections(debugging_turns())
    files = "\n".join(sections["files"])
    assert "- edited pydicom/config.py: `use_DS_decimal = False`" in files
    assert any("EDITED pydicom/config.py" in line for line in sections["completed"])
    assert not any("str_replace`" in line for line in sections["completed"])
    read = next(line for line in sections["files"] if line.startswith("- read or searched"))
    assert "pydicom/config.py" not in read and "pydicom/dataelem.py" in read


def test_a_sed_edit_names_its_file_and_its_expression_is_not_paths() -> None:
    sections = _sections(debugging_turns())
    assert any(
        line.startswith("- edited pydicom/valuerep.py: `if not v: return None")
        for line in sections["files"]
    )
    assert find_paths(SED) == ["pydicom/valuerep.py"]
    assert not any(
        f.kind == "path" and f.value in ("s/", "v/") for f in extract_facts(debugging_turns())
    )


def test_an_editor_subcommand_is_not_a_command_fact() -> None:
    commands = {f.value for f in extract_facts(debugging_turns()) if f.kind == "command"}
    assert "str_replace" not in commands
    assert SED.split("\\n")[0].split(" if")[0].strip() in " ".join(commands)


def test_key_decisions_are_the_assistants_stated_choices_not_hedges() -> None:
    decisions = _sections(debugging_turns())["decisions"]
    assert "- I'll use None instead of raising because DICOM allows empty DA values." in decisions
    assert not any("Maybe" in line or "timezone" in line for line in decisions)


def test_only_the_latest_plan_is_kept() -> None:
    remaining = _sections(debugging_turns())["remaining"]
    assert remaining == ["- The assistant had planned: After that I need to update the changelog."]


def test_a_plan_made_before_the_user_changed_course_says_so() -> None:
    remaining = _sections(debugging_turns(change_course=True))["remaining"]
    assert remaining == [
        "- Planned before the latest ask (may no longer apply): "
        "After that I need to update the changelog."
    ]


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
def test_every_section_but_the_ones_the_turns_leave_empty_has_content(seed: int) -> None:
    turns = coding_session(seed, 40)
    sections = _sections(turns, middle_budget(turns))
    empty = {key for key, lines in sections.items() if lines in ([], ["None."])}
    # every question was answered (no pending asks); plans may be absent: nothing else is empty
    assert empty <= {"preamble", "pending", "remaining"}, empty


word = st.text(alphabet="abcdefgh/._", min_size=1, max_size=12)
span = st.lists(word, min_size=1, max_size=4).map(lambda ws: "`" + " ".join(ws) + "`")


@given(st.lists(word | span, min_size=1, max_size=40), st.integers(30, 160))
def test_truncation_never_cuts_inside_a_word_or_a_code_span(parts: list[str], limit: int) -> None:
    text = " ".join(parts)
    out = cap(text, limit)
    if out == text:
        return
    assert out.endswith(" …")
    head = out.removesuffix(" …")
    assert text.startswith(head) and text[len(head)] == " "  # cut between two words
    assert head.count("`") % 2 == 0  # every code span it keeps is whole


def test_a_continue_after_the_ask_does_not_replace_the_active_task() -> None:
    # session 28's review: "continue" became the Active Task and the real ask was dropped
    turns = [
        {"role": "user", "content": "Migrate the orders table to PostgreSQL 15."},
        {"role": "assistant", "content": "Done with step one; shall I keep going?"},
        {"role": "user", "content": "continue"},
        {"role": "assistant", "content": "Continuing."},
    ]
    task = next(v for k, v in _sections(turns).items() if k.startswith("active_task"))
    assert task == [
        'User asked: "Migrate the orders table to PostgreSQL 15."',
        'User then said: "continue"',
    ]
