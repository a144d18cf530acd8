"""Session 33: the audit's truth. The matcher and the extraction read grep's line number
alike; shapes session 32 left; lies found on real transcripts. Each fact must also be
found in its own text, and the reference extractor must give the same facts."""

from __future__ import annotations

import re
from typing import Any

import pytest
from helpers.reference_facts import facts as reference
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxledger.compressor import factgrep
from ctxledger.compressor.factbounds import contains
from ctxledger.compressor.facts import extract_facts, fact_in_text


def _message(text: str, role: str = "tool") -> dict[str, Any]:
    return {"role": role, "content": text}


def _facts(text: str, kind: str, role: str = "tool") -> list[str]:
    facts = extract_facts([_message(text, role)])
    assert all(fact_in_text(fact, text) for fact in facts)  # each found in its own text
    assert facts == reference.extract_facts([_message(text, role)])
    return [fact.value for fact in facts if fact.kind == kind]


# 1. grep's line number: the matcher has the extraction's date exception


@pytest.mark.parametrize(
    "text",
    [
        "app.log-2024-05-20",
        "rotated to app.log-2024-05-20 at midnight",
        "logs/app.log-2024-05-20.gz",
        "app.log-1999-12-31\n",
    ],
)
def test_a_dated_name_states_no_path_it_does_not_give(text: str) -> None:
    # the extraction never takes ``app.log`` from a date-suffixed name, so a summary
    # writing that name does not keep ``app.log`` either
    assert _facts(text, "path") == [] or "app.log" not in _facts(text, "path")
    assert not contains(text, "app.log", path=True)
    assert not contains(text, "logs/app.log", path=True)


@pytest.mark.parametrize(
    ("text", "path"),
    [
        ("src/x.py-12-from y", "src/x.py"),  # grep -n's context line: still found
        ("src/x.py-2024-x", "src/x.py"),  # a line number that is no date
        ("app.log-12-05 x", "app.log"),  # two digits then no dash-digit: a line number
    ],
)
def test_a_line_number_still_ends_a_path_for_the_matcher(text: str, path: str) -> None:
    assert contains(text, path, path=True)


@settings(max_examples=200, deadline=None)
@given(
    number=st.from_regex(r"[0-9]{1,5}", fullmatch=True),
    rest=st.from_regex(r"[0-9]{0,3}-?[0-9]{0,2}[ a-z]{0,3}", fullmatch=True),
)
def test_extraction_and_matcher_read_a_line_number_alike(number: str, rest: str) -> None:
    text = f"src/app.log-{number}-{rest}"
    extracted = factgrep.context_spans(text) != []
    assert extracted == (re.compile(factgrep.LINE_NUMBER).match(text, 11) is not None)
    assert contains(text, "src/app.log", path=True) == extracted


# 2. the reference states its own rules for known files and dotfiles

_NAME_PIECES = st.sampled_from(
    [
        "Makefile", "Dockerfile", "Gemfile", ".env", ".envrc", ".bashrc", ".python-version",
        ".local", ".dev", ".development", ".am", ".in", ".Am", "-", "--", "---------", "dev",
        "OK", "x", "_", ".", "..", "+", "~", "@", "(", "/", " ", "\n", "²", "é", "a" * 70,
    ]
)  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(pieces=st.lists(_NAME_PIECES, max_size=8))
def test_the_reference_finds_named_files_as_the_module_does(pieces: list[str]) -> None:
    from helpers.reference_facts.namedfiles import dotfiles, known_files

    from ctxledger.compressor.factpathrules import DOTFILE
    from ctxledger.compressor.factpaths import _KNOWN_FILE

    text = "".join(pieces)
    assert list(known_files(text)) == [m.span() for m in _KNOWN_FILE.finditer(text)]
    assert list(dotfiles(text)) == [m.span() for m in DOTFILE.finditer(text)]


@pytest.mark.parametrize(
    ("text", "paths"),
    [
        ("see Makefile.am and Dockerfile-dev", ["Makefile.am", "Dockerfile-dev"]),
        ("cp .env.example .env.local", [".env.example", ".env.local"]),
        ("Makefile-old-x² done", ["Makefile-old-x"]),
        (".bashrc² is read", [".bashrc"]),
        ("Makefile.in.x", []),
        (".env-x and .envy", []),
    ],
)
def test_named_files_are_found_alike(text: str, paths: list[str]) -> None:
    assert _facts(text, "path") == paths


#: every name the reference imports from ctxledger, by module: the thing under test
#: (Fact, the matcher), lists of names, tool-call plumbing, and the rules left shared
#: (session 33's note: the number patterns, a tool-error rule, session 30's listings,
#: the path judge). A rule restated in the reference leaves this list.
_REFERENCE_IMPORTS = {
    "factkinds.py": {
        "factkinds.TOOL_ERROR_LINE", "factkinds._reports_error", "factkinds.is_asset_path",
        "factkinds.reports_tool_error", "factnoise.listed_code_or_field",
        "toolcalls.EDITOR_TOOLS", "toolcalls.bare_tool_name", "toolcalls.tool_family",
    },
    "factpaths.py": {"factpathrules.EXTENSIONS", "factpathrules.SECOND_SUFFIXES"},
    "pathmasks.py": {"factpathrules.EXTENSIONS", "factpathrules.SECOND_SUFFIXES"},
    "facts.py": {
        "factasks.is_acknowledgement", "factbounds.matches_at_start", "factnormal.WHITESPACE",
        "factmatch.Fact",
        "factmatch.fact_in_text", "factnormal.normalize", "factmatch.normalize_fact",
        "factmatch.retention", "facts._NUMBER_PATTERNS", "facts._VERSION_AFTER_NAME",
        "facts.VERSION_RANGE_TO", "toolcalls.COMMAND_KEYS", "toolcalls.EDITOR_TOOLS",
        "toolcalls.TERMINAL_COMMAND_KEYS", "toolcalls.bare_tool_name",
        "toolcalls.call_name_and_args", "toolcalls.tool_family", "messages.content_text",
        "markers.is_summary_message",
    },
    "rules.py": {
        "factlookalikes.TEX_COMMANDS", "factpathrules.has_ext", "factpaths.plausible_path",
    },
}  # fmt: skip


def test_the_reference_imports_only_the_listed_names_of_the_module() -> None:
    import ast
    from pathlib import Path

    imported: dict[str, set[str]] = {}
    for module in (Path(__file__).parent / "helpers" / "reference_facts").glob("*.py"):
        for node in ast.walk(ast.parse(module.read_text("utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("ctxledger"):
                source = node.module.removeprefix("ctxledger.").removeprefix("compressor.")
                names = {f"{source}.{alias.name}" for alias in node.names}
                imported.setdefault(module.name, set()).update(names)
    assert imported == _REFERENCE_IMPORTS


# 3. a device path with a name in its namespace has no escapes


@pytest.mark.parametrize(
    ("text", "path"),
    [
        ("\\\\.\\pipe\\name", "\\\\.\\pipe\\name"),  # ``\n`` of ``\name``: a separator
        ("open \\\\.\\pipe\\tmp_sock failed", "\\\\.\\pipe\\tmp_sock"),
        ("\\\\?\\GLOBALROOT\\Device\\nul", "\\\\?\\GLOBALROOT\\Device\\nul"),
    ],
)
def test_a_device_path_reads_no_escape(text: str, path: str) -> None:
    assert _facts(text, "path") == [path]


@pytest.mark.parametrize(
    "text",
    [
        "\\\\srv\\share\\notes",  # a UNC path's ``\n`` may still be an escape (session 30)
        'print("\\\\.\\n")',  # a device and no name in it: maybe ``\.`` and a newline
    ],
)
def test_other_escape_like_unc_paths_stay_none(text: str) -> None:
    assert _facts(text, "path") == []


# 4. lies found on the corpus: a result's label alone is no outcome


@pytest.mark.parametrize(
    ("text", "outcomes"),
    [
        ("SQLFluff output:\nL:  1 | P:  1 | L003 | Indent", []),  # the label, no result
        ("SQLFluff fix output:", []),
        ("Result:\n42", []),
        ("Validation result =", []),
        ("Tests passed. Output:", ["Tests passed. Output:"]),  # a result before the label
        ("Result: 42", ["Result: 42"]),
        ("test output: failed", ["test output: failed"]),
        ("Result: failed", ["Result: failed"]),
    ],
)
def test_a_result_label_alone_is_no_outcome(text: str, outcomes: list[str]) -> None:
    assert _facts(text, "outcome") == outcomes


# 4. what a user quotes states no constraint of theirs

_TASK = "Please fix the linter so the config below parses.\n"


@pytest.mark.parametrize(
    ("text", "constraints"),
    [
        (  # a config file quoted in a fence (a PR's description)
            _TASK + "```ini\n[rules]\n# L049 - Always use IS or IS NOT for NULL (fix)\n```\n"
            "Do not change the tests.\n",
            ["Do not change the tests."],
        ),
        (  # an unclosed fence runs to the end
            _TASK + "Never push to main.\n```\n# L038 - Never use trailing commas\n",
            ["Never push to main."],
        ),
        (  # a file shown with line numbers (a demonstration in the task)
            _TASK + "1462:        if precision not in units:\n"
            "1463:            msg = 'The precision must be {} or {}.'.format(\n"
            "1432:        Always serializes to an integer value.\nAlways run the tests.\n",
            ["Always run the tests."],
        ),
        (  # a numbered list and a date are no listing
            _TASK + "1. Never push to main.\n2024-05-20: we must ship today.\n",
            ["Never push to main.", "2024-05-20: we must ship today."],
        ),
        (_TASK + "Do not run ```rm -rf``` here, ok?\n", ["Do not run ```rm -rf``` here, ok?"]),
    ],
)
def test_a_quoted_file_states_no_constraint(text: str, constraints: list[str]) -> None:
    assert _facts(text, "constraint", role="user") == constraints


@settings(max_examples=200, deadline=None)
@given(
    pieces=st.lists(
        st.sampled_from(["```", "```\n", "\n", "Never push.", " Do not x.", "12: must y.", "a"]),
        max_size=10,
    )
)
def test_the_reference_reads_fences_and_listings_alike(pieces: list[str]) -> None:
    _facts(_TASK + "".join(pieces), "constraint", role="user")


class _Span(tuple[int, int]):
    """A fence's span that counts how often it is read."""

    reads = 0

    def __iter__(self) -> Any:
        _Span.reads += 1
        return super().__iter__()

    def __getitem__(self, index: Any) -> Any:
        _Span.reads += 1
        return super().__getitem__(index)


def _fence_reads(monkeypatch: pytest.MonkeyPatch, n: int) -> int:
    # (session 35: this counted reads of ``factnoise.FENCE``, which `stated` no longer
    # used since session 34, so it counted 0; it now counts the spans of the fence
    # reader `stated` calls)
    from ctxledger.compressor import factfences, factnoise

    blocks = factfences.fenced_blocks
    monkeypatch.setattr(
        factnoise, "fenced_blocks", lambda text, until=None: [_Span(s) for s in blocks(text, until)]
    )
    _Span.reads = 0
    text = "Please fix it.\n" + "```\nx\n```\nNever push to main.\n" * n
    factnoise.stated(text, [(m.start(), m.group()) for m in re.finditer("Never[^\n]*", text)])
    return _Span.reads


def test_fences_are_read_in_linear_time(monkeypatch: pytest.MonkeyPatch) -> None:
    small, large = _fence_reads(monkeypatch, 500), _fence_reads(monkeypatch, 2_000)
    assert large <= 4.5 * small and large <= 4 * 2_000 + 10


# 4. a cut traceback's wrapper tag is no error

_CUT = (
    "<returncode>1</returncode>\n<output>\nTraceback (most recent call last):\n"
    '  File "/t/x.py", line 9, in <module>\n    f()\n'
)


@pytest.mark.parametrize(
    ("text", "errors"),
    [
        (_CUT + "</output>", []),  # cut before its exception: no line of it is the error
        (_CUT + "</output>\r\n", []),
        (_CUT + "ValueError: bad\n</output>", ["ValueError: bad"]),
        (_CUT + "Killed\n</output>", ["Killed"]),  # the first margin line, as before
        (_CUT + "</output> ValueError: x", ["</output> ValueError: x"]),  # no tag alone
    ],
)
def test_a_closing_tag_is_no_traceback_error(text: str, errors: list[str]) -> None:
    assert [e for e in _facts(text, "error") if not e.startswith("exit")] == errors


# 4. source shown with line numbers, a changelog: no error that happened


@pytest.mark.parametrize(
    ("text", "errors"),
    [
        ("260:    Raises\n261:    ------\n262:    AttributeError\n", ["AttributeError"]),
        ("23:    AstroidIndexError,\n24:    AstroidTypeError,\n", ["AstroidIndexError", "AstroidTypeError"]),
        ("25:    Raises RuntimeError if not found.\n", ["RuntimeError"]),
        ("12: ValueError: bad input\n", ["12: ValueError: bad input"]),  # a message: kept
        ("3.0: DateTime fields cannot be used as inner field\n", []),  # a changelog's entry
        ("2.1.4 12: x cannot be read\n", []),
        ("cp: cannot stat 'a.txt': No such file or directory\n", ["cp: cannot stat 'a.txt': No such file or directory"]),
        ("python3.11: can't open file 'x.py'\n", ["python3.11: can't open file 'x.py'"]),
    ],
)  # fmt: skip
def test_listed_names_and_versions_are_no_error_lines(text: str, errors: list[str]) -> None:
    assert _facts(text, "error") == errors


def test_pytest_s_location_line_keeps_its_error() -> None:
    text = "src/search/core.py:224: AssertionError\n"
    assert _facts(text, "error") == ["src/search/core.py:224: AssertionError"]


# 4. a range address of sed or awk names no directory

_SHELL = [
    ("awk '/class Date/,/^class [A-Z]/' src/fields.py", ["src/fields.py"]),
    ("sed -n '/class BlogUserMetaSchema/,/^class /p' /testbed/tests/base.py", ["/testbed/tests/base.py"]),
    ('sed -n "/def x/,/^$/p" a.py', ["a.py"]),
    ("grep -n '/api/v1/' app.py", ["/api/v1/", "app.py"]),  # one quoted path: kept
    ("cp '/tmp/a/' x'/b/,/c/' d.py", ["/tmp/a/", "d.py"]),  # after a word: no address
]  # fmt: skip


@pytest.mark.parametrize(("text", "paths"), _SHELL)
def test_a_range_address_names_no_path(text: str, paths: list[str]) -> None:
    assert _facts(text, "path", role="user") == paths


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.sampled_from(["'", '"', "/", "/,/", "a", "x.py", " ", "\n", "p", "s/"]), max_size=12
    )
)
def test_the_reference_reads_range_addresses_alike(pieces: list[str]) -> None:
    _facts("".join(pieces), "path")


class _CountingSearch:
    """A regex whose searches add up the characters they read (to the match's end, or
    to the text's end when none)."""

    read = 0

    def __init__(self, pattern: re.Pattern[str]) -> None:
        self.pattern = pattern

    def search(self, text: str, pos: int = 0, endpos: int | None = None) -> re.Match[str] | None:
        end = len(text) if endpos is None else endpos
        match = self.pattern.search(text, pos, end)
        _CountingSearch.read += (end if match is None else match.end()) - pos
        return match

    def finditer(self, text: str, pos: int = 0, endpos: int | None = None) -> Any:
        end = len(text) if endpos is None else endpos
        _CountingSearch.read += end - pos
        return self.pattern.finditer(text, pos, end)


def _range_reads(monkeypatch: pytest.MonkeyPatch, piece: str, n: int) -> int:
    from ctxledger.compressor import factsed

    for name in ("_RANGE_START", "_REGEX_END", "_QUOTE_END", "_RANGE_TOOL", "_COMMAND_END"):
        monkeypatch.setattr(factsed, name, _CountingSearch(getattr(factsed, name)))
    _CountingSearch.read = 0
    factsed.range_spans("sed " + piece * n)  # (review: a range address needs its program)
    monkeypatch.undo()
    return _CountingSearch.read


@pytest.mark.parametrize(
    "piece", ["'/x/,/", "'/,/ab", "'/a/,/b'", "\"/a/,/b' x", "'/a/,$", "sed '/a/,+2p'\n"]
)
def test_range_addresses_are_read_in_linear_time(
    monkeypatch: pytest.MonkeyPatch, piece: str
) -> None:
    small = _range_reads(monkeypatch, piece, 1_000)
    large = _range_reads(monkeypatch, piece, 4_000)
    assert large <= 4.5 * small and large <= 4 * len(piece) * 4_000
