"""A build tool's or compiler's error line is an error fact (the audit probe of session 28).

``make: *** [Makefile:12: all] Error 2`` and ``make: *** No rule to make target 'x'.
Stop.`` were no error fact (only ``Makefile`` was found, as a path), nor were the
``prog: error:`` and ``file:line:col: error:`` lines of gcc, clang, ld, ninja and mypy:
the offline summary did not carry why a build failed, and the audit could not say a
summary lost it. A capitalised label of prose (``Note: error: …``) and a status of
none (``ld: error: none``) are still no error.
"""

from __future__ import annotations

from typing import Any

from helpers.audit_harness import audit_of, status
from helpers.reference_facts import facts as reference
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxledger.compressor.facts import extract_facts

_TOOL_ERRORS = (
    "make: *** [Makefile:12: all] Error 2",
    "make[1]: *** [src/Makefile:40: objs/x.o] Error 1",
    "make: *** No rule to make target 'x'. Stop.",
    "gmake: *** [all] Interrupt",
    "Makefile:3: *** missing separator. Stop.",
    "src/x.c:3:5: error: expected ';' before '}' token",
    'app.py:12: error: Incompatible return value type (got "int", expected "str")',
    "collect2: error: ld returned 1 exit status",
    "gcc: fatal error: no input files",
    "ninja: error: loading 'build.ninja': No such file or directory",
    "clang: error: linker command failed with exit code 1",
    # on Windows (review of session 29): a drive and backslashes, MSVC / MSBuild codes
    'C:\\proj\\main.c:3:5: error: expected ";"',
    "src\\main.c:3:5: error: use of undeclared identifier 'x'",
    "Program.cs(12,5): error CS1002: ; expected",
    "main.cpp(3): fatal error C1083: Cannot open include file: 'x.h'",
)
_NOT_ERRORS = (
    "Note: error: handling is fine",
    "Summary: error: none",
    "ld: error: none",
    "gcc: fatal error: 0",
    "make: Nothing to be done for 'all'.",
    "make[1]: Leaving directory '/src'",
    "x.py:3: note: see the definition",
    "The result: error CS1002: a label, not a file",
    "Program.cs(12,5): warning CS0168: unused",
)


def _errors(role: str, text: str) -> list[str]:
    message: dict[str, Any] = {"role": role, "content": text}
    if role == "tool":
        message["tool_call_id"] = "c1"
    return [f.value for f in extract_facts([message]) if f.kind == "error"]


def test_a_build_or_compiler_error_line_is_an_error_fact() -> None:
    for role in ("tool", "assistant", "user"):
        for line in _TOOL_ERRORS:
            assert line in _errors(role, f"$ make\n{line}\n"), (role, line)


def test_the_spacing_of_makes_stop_is_collapsed() -> None:
    # make writes two blanks before "Stop."; the fact is whitespace-collapsed, as all are
    errors = _errors("tool", "make: *** No rule to make target 'x'.  Stop.")
    assert errors == ["make: *** No rule to make target 'x'. Stop."]


def test_prose_labels_and_statuses_of_none_are_no_tool_error() -> None:
    for line in _NOT_ERRORS:
        assert _errors("tool", line) == [], line


def test_a_summary_dropping_the_build_error_loses_it() -> None:
    tool_output = "cc -c x.c\nmake: *** [Makefile:12: all] Error 2\n"
    middle = [
        {
            "role": "assistant",
            "content": "Building.",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "terminal", "arguments": '{"command": "make"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": tool_output},
    ]
    lost = audit_of(middle, "Ran make; it failed.")
    kept = audit_of(middle, "Ran make: `make: *** [Makefile:12: all] Error 2`.")
    assert status(lost, "make: *** [Makefile:12: all] Error 2") == "lost"
    assert status(kept, "make: *** [Makefile:12: all] Error 2") == "kept"


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from(("make", "gmake", "make[2]", "Makefile:7", "src/Makefile:12")),
    st.text(alphabet="abc []:'.012", min_size=1, max_size=20).filter(lambda s: s.strip()),
)
def test_every_make_star_line_is_an_error(program: str, rest: str) -> None:
    line = f"{program}: *** {rest.strip()}"
    assert _errors("tool", line) == [" ".join(line.split())]


@settings(max_examples=40, deadline=None)
@given(
    line=st.sampled_from(_TOOL_ERRORS + _NOT_ERRORS),
    colon=st.booleans(),
    role=st.sampled_from(["tool", "user"]),
)
def test_a_long_text_finds_the_tool_errors_the_reference_finds(
    line: str, colon: bool, role: str
) -> None:
    """Session 30: a long text looks for the tool-error literals by their characters
    first (a text without ":" holds none); the facts stay the reference extractor's."""
    filler = "alpha beta, gamma delta; " + ("x: y " if colon else "")
    for text in (filler * 200, "\n".join([filler * 100, line, filler * 100])):
        message = {"role": role, "content": text}
        if role == "tool":
            message["tool_call_id"] = "c"
        assert extract_facts([message]) == reference.extract_facts([message])
