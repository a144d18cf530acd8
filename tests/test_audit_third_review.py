"""The findings of session 32's third review of the audit's fact changes, each held here.

* 1: an exception group's border repeated on its header's line was stripped one per
  recursive call (``RecursionError`` at 2,000 borders); the border is stripped once;
* 2: ``got``, ``but`` or another exception after what was expected dispute it in its
  clause only, not in a later sentence or a parenthesis;
* 3: a ``|`` border is read as an exception group's only under the group's header (a
  border's line) or on a header that ends its line (no markdown table's row);
* 4: a known file name with dashed words (``Dockerfile-dev``) is the whole run, as the
  matcher reads it (it gave nothing);
* 5: a skip whose reason names an exception anywhere in its parentheses reports it.
"""

from __future__ import annotations

from typing import Any

import pytest
from helpers.fact_checks import one_message as _message
from helpers.reference_facts import facts as reference

from ctxledger.compressor import factkinds, factnoise
from ctxledger.compressor.factmatch import Fact, fact_in_text
from ctxledger.compressor.facts import extract_facts


def _facts(text: str, role: str = "tool") -> list[Fact]:
    return extract_facts([_message(text, role)])


def _values(text: str, kind: str, role: str = "tool") -> list[str]:
    return [fact.value for fact in _facts(text, role) if fact.kind == kind]


def _bordered_header(borders: int) -> str:
    return "  + Traceback (most recent call last):" + "| " * borders + "\nValueError: x"


@pytest.mark.parametrize("borders", [2000, 10000])
def test_repeated_borders_read_in_one_pass(borders: int, monkeypatch: pytest.MonkeyPatch) -> None:
    # third review 1: no recursion per border (RecursionError at 2,000), one call per header
    calls: list[int] = []
    original = factnoise.raised_line

    def counted(text: str, start: int, end: int) -> str | None:
        calls.append(start)
        return original(text, start, end)

    monkeypatch.setattr(factnoise, "raised_line", counted)
    monkeypatch.setattr(factkinds, "raised_line", counted)
    text = _bordered_header(borders)
    errors = _values(text, "error")
    assert "ValueError: x" in errors
    assert len(calls) == 1
    assert _facts(text) == reference.extract_facts([_message(text, "tool")])


def test_a_bordered_header_on_its_own_gives_its_exception() -> None:
    assert _values(_bordered_header(2000), "error") == ["ValueError: x"]


_LATER_CLAUSES = [
    ("KeyError raised as expected; 3 tests passed but 1 skipped", True),
    ("KeyError raised as expected. Build succeeded but with 2 warnings", True),
    ("Expected error: KeyError; but 3 tests passed", True),
    ("Got KeyError as expected; TypeError check comes next", False),
    ("ValueError raised as expected (see KeyError docs)", False),
]


@pytest.mark.parametrize(("text", "outcome"), _LATER_CLAUSES)
@pytest.mark.parametrize("role", ["tool", "user", "assistant"])
def test_a_later_clause_does_not_dispute_what_was_expected(
    text: str, outcome: bool, role: str
) -> None:
    # third review 2: as at 898addf, no error, and the tool's line is its outcome
    assert _values(text, "error", role) == []
    assert _values(text, "outcome", role) == ([text] if outcome and role == "tool" else [])
    assert _facts(text, role) == reference.extract_facts([_message(text, role)])


@pytest.mark.parametrize(
    "text",
    [
        "Expected error: KeyError, but got TypeError; done",
        "KeyError raised as expected, then TypeError. Fine.",
        "Got KeyError as expected but the run went on",
    ],
)
def test_the_clause_of_what_was_expected_still_disputes_it(text: str) -> None:
    assert _values(text, "error") != []
    assert _facts(text) == reference.extract_facts([_message(text, "tool")])


_GROUP = (
    "log\n  + Exception Group Traceback (most recent call last):\n"
    "  | ExceptionGroup: eg (2 sub-exceptions)\n"
    "  +-+---------------- 1 ----------------\n"
    "    | ValueError: 1\n"
    "    +---------------- 2 ----------------\n"
    "    | TypeError: 2\n"
    "    +------------------------------------\n"
)

_GROUP_ERRORS = ["ExceptionGroup: eg (2 sub-exceptions)", "ValueError: 1", "TypeError: 2"]


@pytest.mark.parametrize(
    ("text", "errors"),
    [
        ("| ValueError: bad", {"tool": ["| ValueError: bad"], "assistant": ["ValueError"]}),
        (
            "| Traceback (most recent call last): | x |\n| ValueError: t | y |",
            {"tool": ["| ValueError: t | y |"], "assistant": ["| ValueError: t | y |"]},
        ),
        (
            "| TypeError: a\n" + _GROUP,  # (a border before the group's header: none)
            {role: _GROUP_ERRORS for role in ("tool", "assistant")},
        ),
    ],
)
@pytest.mark.parametrize("role", ["tool", "assistant"])
def test_a_border_outside_an_exception_group_is_no_groups(
    text: str, errors: dict[str, list[str]], role: str
) -> None:
    # third review 3: no second error without its border
    assert _values(text, "error", role) == errors[role]
    assert _facts(text, role) == reference.extract_facts([_message(text, role)])


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("Use Dockerfile-dev for dev.", ["Dockerfile-dev"]),
        ("Run make with Makefile-old", ["Makefile-old"]),
        ("See Makefile--OK", ["Makefile--OK"]),
        (
            "Makefile-old\u00b9 and Makefile-x- then Dockerfile.dev",
            ["Makefile-old", "Makefile-x", "Dockerfile.dev"],
        ),
        ("Makefile-a.b, Dockerfile.dev-x, my-Makefile-old, Makefile-a-b-c-d-e-f-g-h-i", []),
    ],
)
def test_a_known_file_name_with_dashed_words_is_the_whole_run(text: str, found: list[str]) -> None:
    # third review 4: as the matcher reads it (extracted => found)
    facts = _facts(text, "user")
    assert [fact.value for fact in facts if fact.kind == "path"] == found
    assert all(fact_in_text(fact, text) for fact in facts)
    assert facts == reference.extract_facts([_message(text, "user")])


@pytest.mark.parametrize(
    ("text", "errors"),
    [
        ("t.py::t SKIPPED (Errors in setup, see ValueError above)", ["ValueError"]),
        ("t.py::t SKIPPED (see KeyError.args) here", ["KeyError"]),
        ("t.py::t SKIPPED (Errors in setup)", []),
        ("t.py::t SKIPPED (fine) ValueError", []),
    ],
)
def test_a_skip_naming_an_exception_in_its_reason_reports_it(text: str, errors: list[str]) -> None:
    # third review 5: the exception named inside the parentheses is no success's
    assert _values(text, "error", "assistant") == errors
    for role in ("tool", "assistant"):
        assert _facts(text, role) == reference.extract_facts([_message(text, role)])


# final review: the clause bound lost exceptions written in a later clause; past the
# clause, an exception with its message or failures as an outcome still dispute it
_LATER_EXCEPTIONS = [
    ("ValueError raised as expected; TypeError: boom", ["ValueError", "TypeError"]),
    ("ValueError raised as expected. KeyError: 'x' in handler", ["ValueError", "KeyError"]),
    ("KeyError raised as expected (RuntimeError: worker died)", ["KeyError", "RuntimeError"]),
]


@pytest.mark.parametrize(("text", "errors"), _LATER_EXCEPTIONS)
def test_an_exception_in_a_later_clause_is_still_reported(text: str, errors: list[str]) -> None:
    assert not factnoise.reports_success(text)
    assert _values(text, "error") == errors
    assert _facts(text) == reference.extract_facts([_message(text, "tool")])


def test_a_failure_after_the_clause_makes_the_whole_line_an_error() -> None:
    """Without its later clause the line is a success and states no error; with ``1
    failed: …`` after it, the line (a test's outcome line) is the error fact."""
    expected = "test_x: ValueError raised as expected"
    assert factnoise.reports_success(expected)
    assert _values(expected, "error") == []
    failing = f"{expected}; 1 failed: AssertionError: assert total == 3"
    assert not factnoise.reports_success(failing)
    (error,) = _values(failing, "error")
    assert error.startswith(expected) and error.endswith("AssertionError: assert total == 3")
    assert error == failing  # (the whole line, as the matcher finds it)
    assert _facts(failing) == reference.extract_facts([_message(failing, "tool")])


@pytest.mark.parametrize("text", [text for text, _ in _LATER_CLAUSES])
def test_a_later_clause_without_a_message_or_failure_stays_a_success(text: str) -> None:
    assert factnoise.reports_success(text)


@pytest.mark.parametrize(
    ("text", "success"),
    [
        ("KeyError raised as expected; 0 failed", True),
        ("KeyError raised as expected; 2 errors", False),
        ("KeyError raised as expected. FAILED: test_y", False),
        ("KeyError raised as expected (KeyError: 'k')", True),  # (its own message)
        ("Expected error: KeyError; KeyError: 'k'", True),
        ("Expected error: KeyError; TypeError: boom", False),
        ("Got KeyError as expected; ValueError(1) next", False),
    ],
)
def test_what_disputes_after_the_clause(text: str, success: bool) -> None:
    assert factnoise.reports_success(text) is success
    assert _facts(text) == reference.extract_facts([_message(text, "tool")])


def test_many_expectations_read_the_later_clauses_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # linear: the disputes after every clause are found in one pass over the line
    calls: list[int] = []
    original = factnoise._LaterDisputes.__init__

    def counted(self: Any, line: str) -> None:
        calls.append(len(line))
        original(self, line)

    monkeypatch.setattr(factnoise._LaterDisputes, "__init__", counted)
    line = "KeyError raised as expected; " * 300 + "TypeError: boom"
    assert not factnoise.reports_success(line)
    assert len(calls) == 1
