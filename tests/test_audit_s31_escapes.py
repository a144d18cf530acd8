"""Session 31, final review fixes: a JSON tool output's escapes beside an apostrophe,
a single-quoted value, a second string, or a colon before ``\\n`` (review 5, F1).

The quoted-string rule of the review fixes blanked only the string around the evidence
and read ``'`` as a quote everywhere, so ``it's``, ``'x'`` or a second JSON string cut
a listing off its escapes (``tests\\ntest_app.py``, ``nsetup.py``), and ``C:\\n`` (a
colon and a newline) passed for a drive path. The Windows paths of the earlier fix stay
(tests/test_audit_s31_truth.py).
"""

from __future__ import annotations

from typing import Any

import pytest
from helpers.reference_facts import facts as reference
from helpers.reference_facts.rules import unescape_lines

from ctxledger.compressor.factescapes import unescaped
from ctxledger.compressor.factmatch import fact_in_text, retention
from ctxledger.compressor.facts import extract_facts

_REVIEW_LINES = [
    (r'''{"stdout": "tests\ntest_app.py F\nE  assert 'x' == 'y'\n"}''', ["test_app.py"]),
    (r'''{"stdout": "docs\nsetup.py\nit's done\n"}''', ["setup.py"]),
    (r'{"stdout": "docs\nsetup.py\nREADME.md", "stderr": "warning\n"}',
     ["setup.py", "README.md"]),
    (r'{"stdout": "Space on C:\nsetup.py modified\n"}', ["setup.py"]),
    (r'''{"stdout": "Don't touch docs\nsetup.py\n"}''', ["setup.py"]),
    (r'{"a": "lib\nutils.py", "b": "docs\nsetup.py\n"}', ["utils.py", "setup.py"]),
]  # fmt: skip


def _message(text: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": "c", "content": text}


def _paths(text: str) -> list[str]:
    return [f.value for f in extract_facts([_message(text)]) if f.kind == "path"]


@pytest.mark.parametrize(("text", "paths"), _REVIEW_LINES)
def test_a_json_outputs_escapes_beside_quotes_list_names(text: str, paths: list[str]) -> None:
    assert _paths(text) == paths
    for fact in extract_facts([_message(text)]):
        assert fact_in_text(fact, text), fact


@pytest.mark.parametrize(("text", "paths"), _REVIEW_LINES)
def test_the_reference_states_the_final_escape_rules_alike(text: str, paths: list[str]) -> None:
    assert (unescaped(text) or text) == unescape_lines(text)
    assert extract_facts([_message(text)]) == reference.extract_facts([_message(text)])


def test_a_summary_naming_the_listed_file_keeps_it() -> None:
    tool = r"""{"stdout": "tests\ntest_app.py F\nE  assert 'x' == 'y'\n", "exit_code": 1}"""
    facts = [f for f in extract_facts([_message(tool)]) if f.kind == "path"]
    kept, lost = retention(facts, "Ran pytest: tests/test_app.py failed (assert 'x' == 'y').")
    assert [f.normalized for f in kept] == ["test_app.py"] and lost == []


@pytest.mark.parametrize(
    ("text", "paths"),
    [
        (r'"docs\nsetup.py\nit' + "'" + r's done\n"', ["setup.py"]),
        (r'"docs\nsetup.py\nREADME.md", "warning\n"', ["setup.py", "README.md"]),
        (r'"Space on C:\nsetup.py modified\n"', ["setup.py"]),
    ],
)
def test_a_summary_keeps_each_listed_name(text: str, paths: list[str]) -> None:
    facts = [f for f in extract_facts([_message(text)]) if f.kind == "path"]
    kept, lost = retention(facts, "Listed " + " and ".join(paths) + ".")
    assert [f.value for f in kept] == paths and lost == []


@pytest.mark.parametrize(
    "text",
    [
        r'open("C:\new\table.txt") and "\n"',  # \n after the drive, then a second \
        r'type C:\temp\x "\n"',
        r'''it's C:\notes.txt\x "\n"''',
    ],
)
def test_a_drive_path_with_a_second_backslash_still_stops_escapes(text: str) -> None:
    assert unescaped(text) is None
    assert unescape_lines(text) == text
