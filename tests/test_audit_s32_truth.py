"""Session 32: shapes the audit read wrong, left by session 31 (grep's context lines,
wheel names, Win32 device paths). Each fact must also be found in its own text."""

from __future__ import annotations

import re
from typing import Any

import pytest
from helpers.reference_facts import facts as reference
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxledger.compressor import (
    factgrep,
    factkinds,
    factnoise,
    factnormal,
    factpathrules,
)
from ctxledger.compressor.factbounds import contains, search
from ctxledger.compressor.facts import extract_facts, fact_in_text


def _facts(text: str, kind: str) -> list[str]:
    message = {"role": "tool", "content": text}
    facts = extract_facts([message])
    assert all(fact_in_text(fact, text) for fact in facts)  # each found in its own text
    assert facts == reference.extract_facts([message])  # the reference states it its own way
    return [fact.value for fact in facts if fact.kind == kind]


@pytest.mark.parametrize(
    "text",
    [
        "src/x.py-12-from y import z",  # grep -n's context line
        "src/x.py-12-from y import z\nsrc/x.py-13-}\n",
        "src/x.py-from y import z\nsrc/x.py:from y import w\n",  # without -n: a match line
        "src/x.py:from y import w\nsrc/x.py-from y import z\n",
    ],
)
def test_a_grep_context_line_names_its_file(text: str) -> None:
    assert _facts(text, "path") == ["src/x.py"]


@pytest.mark.parametrize(
    ("text", "paths"),
    [
        ("app.py-- x", ["app.py"]),  # dashes before a blank end a name (the matcher's rule)
        ("see app.py- now", ["app.py"]),
        ("ls\napp.py-old\n", []),  # a backup, no grep line
        ("src/x.py-from y import z", []),  # no match line: maybe a backup's name
        ("see src/x.py-12-from y", []),  # not at a line's start
        ("app.log-2024-05-20 rotated", []),  # a date, no line number
    ],
)
def test_a_dash_after_a_name_is_grep_only_where_it_shows(text: str, paths: list[str]) -> None:
    assert _facts(text, "path") == paths


@pytest.mark.parametrize(
    ("text", "paths"),
    [
        # a path glued after the separator is extracted (the separator blanked) and the
        # matcher finds it in the same text: the ``-`` before it is grep's, no name's
        (
            "README.md-11-setup.py is the entry point\nREADME.md:12:run pip install .\n",
            ["README.md", "setup.py"],
        ),
        ("notes.txt-1-final.txt\n", ["notes.txt", "final.txt"]),
        ("src/x.py-setup.py x\nsrc/x.py:3:y\n", ["src/x.py", "setup.py"]),
    ],
)
def test_a_path_after_a_grep_separator_is_found_where_it_was_read(
    text: str, paths: list[str]
) -> None:
    assert _facts(text, "path") == paths
    # the separator is grep's only at a line's start: elsewhere the name is longer
    assert not fact_in_text(
        extract_facts([{"role": "tool", "content": "final.txt"}])[0], "x notes.txt-1-final.txt"
    )


@pytest.mark.parametrize("find", [contains, search])
def test_the_matcher_reads_a_grep_line_number_as_the_paths_end(find: Any) -> None:
    assert find("see src/x.py-12-from y", "src/x.py", path=True)
    assert find("app.py-12-", "app.py", path=True)
    assert not find("app.py-12", "app.py", path=True)
    assert not find("app.py-12x-y", "app.py", path=True)
    assert not find("see app.py-old", "app.py", path=True)


@pytest.mark.parametrize(
    ("text", "version"),
    [
        ("Django-4.2.11-py3-none-any.whl", "4.2.11"),
        ("requests-2.31.0-py2.py3-none-any.whl", "2.31.0"),
        ("numpy-1.26.4-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl", "1.26.4"),
        ("Downloading Django-4.2.11.tar.gz (10.4 MB)", "4.2.11"),
        ("foo-1.0.0-py3.8.egg", "1.0.0"),
        ("marshmallow-3.13.0-0.editable-py3-none-any.whl", "3.13.0"),  # a build tag
    ],
)
def test_a_wheel_or_sdist_names_its_distributions_version(text: str, version: str) -> None:
    # the Python tag is no pre-release: "4.2.11-py3" was a version no summary states
    assert _facts(text, "number") == [version]
    fact = next(f for f in extract_facts([{"role": "tool", "content": text}]) if f.kind == "number")
    assert fact_in_text(fact, f"upgraded to {version} today")


def test_a_pre_release_after_a_version_stays_one() -> None:
    # (a Python tag is one only before more of a wheel's name: a "-" or ".")
    assert _facts("pinned 1.2.3-rc1 and 2.0.0-py3 here", "number") == ["1.2.3-rc1", "2.0.0-py3"]


@pytest.mark.parametrize(
    ("text", "paths"),
    [
        ("\\\\?\\C:\\dir\\file.txt", ["C:\\dir\\file.txt"]),  # a long-path prefix: the file
        ('"\\\\\\\\?\\\\C:\\\\dir\\\\file.txt"', ["C:\\dir\\file.txt"]),  # JSON-escaped
        ("open \\\\.\\pipe\\docker_engine failed", ["\\\\.\\pipe\\docker_engine"]),
        ("\\\\?\\UNC\\srv\\share\\x.txt", ["\\\\?\\UNC\\srv\\share\\x.txt"]),
        ("\\\\?\\C: alone", []),
        ("x\\\\?\\C:\\a\\b.txt", ["b.txt"]),  # the prefix after a name: not a device's
        # session 40: the prefix is a drive's only; ``..\\`` after it is no relative path
        ("\\\\?\\..\\src\\app.py", ["app.py"]),
        ('"\\\\\\\\.\\\\.\\\\app.py"', ["app.py"]),
        ("José\\\\?\\C:\\a\\b.txt", ["b.txt"]),  # the prefix glued to a name: as x's above
    ],
)
def test_a_device_path_reads_as_one_path(text: str, paths: list[str]) -> None:
    assert _facts(text, "path") == paths


@pytest.mark.parametrize(
    "text",
    [
        "git diff -- path/to/file1 path/to/file2 > patch.txt",  # mini-swe-agent's prompt
        "cd /path/to/working/dir && ls",
        "see ~/path/to/x.py and ./path/to/y.py and C:\\path\\to\\z.txt",
    ],
)
def test_an_example_path_is_no_fact(text: str) -> None:
    # the placeholder of an instruction's example names no file of the session (corpus: 87)
    assert [p for p in _facts(text, "path") if "path" in p.lower()] == []


def test_a_path_holding_path_to_later_is_one() -> None:
    assert _facts("see src/path/to/x.py and xpath/to/y.py", "path") == [
        "src/path/to/x.py",
        "xpath/to/y.py",
    ]


def test_one_list_of_footnote_superscripts() -> None:
    # factmatch blanks the digits factpathrules ends names at: one definition
    assert factnormal.SUPERSCRIPT_DIGITS is factpathrules.SUPERSCRIPT_DIGITS
    more = re.compile(factpathrules.MORE_NAME)
    assert not any(more.match(digit) for digit in factpathrules.SUPERSCRIPT_DIGITS)
    assert all(more.match(c) for c in "a1_é٣")


def _kinds(text: str) -> list[tuple[str, str]]:
    message = {"role": "tool", "content": text}
    facts = extract_facts([message])
    assert facts == reference.extract_facts([message])  # the reference states it its own way
    assert all(fact_in_text(fact, text) for fact in facts)
    return [(fact.kind, fact.value) for fact in facts]


@pytest.mark.parametrize(
    ("text", "facts"),
    [
        # an exception expected, avoided or tested for: a success, no error (corpus: 10)
        (
            "✓ SUCCESS: Got expected NotSupportedError\n",
            [("outcome", "✓ SUCCESS: Got expected NotSupportedError")],
        ),
        ("SUCCESS: No TypeError raised\n", [("outcome", "SUCCESS: No TypeError raised")]),
        (
            "tests/x_test.py::test_noqa[noqa?-SQLParseError] PASSED   [ 50%]\n",
            [("path", "tests/x_test.py")],
        ),
        # a failure still is one
        (
            "FAILED tests/x.py::test_y - ValueError: bad\n",
            [("error", "FAILED tests/x.py::test_y - ValueError: bad"), ("path", "tests/x.py")],
        ),
        ("Got ValueError: bad input here\n", [("error", "Got ValueError: bad input here")]),
        (
            "✓ done here\nthen ValueError: bad input here\n",
            [("error", "then ValueError: bad input here"), ("outcome", "✓ done here")],
        ),
    ],
)
def test_a_success_line_names_no_error(text: str, facts: list[tuple[str, str]]) -> None:
    assert _kinds(text) == facts


@pytest.mark.parametrize(
    "text",
    [
        # review 4: a success word elsewhere in the line hides no error
        "OK, so the error is AttributeError: 'NoneType' object has no attribute 'x'\n",
        "Test did not behave as expected: KeyError: 'user_id'\n",
        "PASS 3/4 - test_parse raised ValueError: bad date\n",
        "tests/test_db.py::test_conn SKIPPED (ImportError: No module named psycopg2)\n",
        "Expected error not raised; got RuntimeError: boom\n",
        "did not raise KeyError as expected\n",
        "Raised more KeyError than expected here\n",
    ],
)
def test_a_success_word_elsewhere_hides_no_error(text: str) -> None:
    assert [value for kind, value in _kinds(text) if kind == "error"] == [text.strip()]


@pytest.mark.parametrize(
    ("text", "errors"),
    [
        # second review 2: something else came after what was expected (as on main)
        ("ValueError raised as expected, got TypeError: no\n", ["ValueError", "TypeError"]),
        ("ValueError raised as expected, TypeError: no\n", ["ValueError", "TypeError"]),
        ("KeyError as expected but ValueError was too\n", ["KeyError", "ValueError"]),
        (
            "Expected ValueError: got TypeError: wrong type\n",
            ["Expected ValueError: got TypeError: wrong type"],
        ),
        # the same exception named again, or after a word ``Expected x:``, still stands
        ("Got AstroidIndexError as expected: AstroidIndexError\n", []),
        ("Expected error: KeyError: 'user_id'\n", []),
        ("Expected KeyError: KeyError('x')\n", []),
        # third review 5: a skip whose reason names an exception anywhere reports it
        (
            "tests/t.py::test_a SKIPPED (Errors in setup, see ValueError above)\n",
            ["tests/t.py::test_a SKIPPED (Errors in setup, see ValueError above)"],
        ),
        ("tests/t.py::test_a SKIPPED (Errors in setup)\n", []),
    ],
)
def test_what_came_instead_of_the_expected_is_an_error(text: str, errors: list[str]) -> None:
    assert [value for kind, value in _kinds(text) if kind == "error"] == errors


def test_a_line_naming_many_exceptions_is_read_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    reports = factnoise.reports_success
    monkeypatch.setattr(
        factnoise, "reports_success", lambda line: calls.append(line) or reports(line)
    )
    text = ("not " + "EError as expected " * 20 + "\n") * 30
    assert extract_facts([{"role": "tool", "content": text}])
    assert len(calls) == 30  # (the line's answer is kept for each further name)


def test_a_denial_is_looked_for_once_per_line(monkeypatch: pytest.MonkeyPatch) -> None:
    searches: list[int] = []
    denied = factnoise._DENIED

    class Counting:
        def search(self, line: str) -> re.Match[str] | None:
            searches.append(len(line))
            return denied.search(line)

    monkeypatch.setattr(factnoise, "_DENIED", Counting())
    assert not factnoise.reports_success("x " + "EError as expected " * 20 + "but not")
    assert len(searches) == 1


@pytest.mark.parametrize(
    "text",
    [
        "OK (skipped=1)\n",
        "OK\n",
        "ValueError raised as expected\n",
        "Result: ValueError (as expected) - PVSystem must have at least one Array.\n",
        "Non-dict unpacking raises `AstroidIndexError` as expected\n",
        "PASSED: no KeyError raised\n",
        "tests/x.py::test_y SKIPPED (needs a fixture)\n",  # (third review 5: names none)
    ],
)
def test_a_standing_success_still_hides_its_exception(text: str) -> None:
    assert [value for kind, value in _kinds(text) if kind == "error"] == []


def test_a_success_line_keeps_no_bare_exception_name() -> None:
    # the bare name of the line was an error fact of its own once the line was none
    text = "checking\n✓ Correctly returned Uninferable instead of raising TypeError\n"
    assert [kind for kind, _ in _kinds(text)] == ["outcome"]
    assert ("error", "TypeError") in _kinds("checking\nx TypeError\n")


@pytest.mark.parametrize(
    ("text", "outcomes"),
    [
        # an argument "passed in" is prose (docstrings a tool showed; corpus: 5)
        ("relative mod path from the one passed in.\n", []),
        ("Check if a file is within the passed in path and if so, returns the\n", []),
        ("Only the fields passed into this\n", []),
        ("the value passed to the next stage\n", ["the value passed to the next stage"]),
        # review 6: a place or a manner after "passed" is a result, as on main
        (
            "My patch passed in the docker container but fails locally.\n",
            ["My patch passed in the docker container but fails locally."],
        ),
        ("It passed as expected after the change.\n", ["It passed as expected after the change."]),
        ("relative mod path from the one passed in.\n", []),
        ("None is passed in as the only one\n", []),
        ("Check if a file is within the passed in path\n", []),
        ("5 tests passed in 0.2s\n", ["5 tests passed in 0.2s"]),
        ("PASSED in 3 runs\n", ["PASSED in 3 runs"]),
        ("All checks passed\n", ["All checks passed"]),
        # second review 5: ``this`` only after ``into``, ``path`` only after ``the``
        *[
            (text, [text])
            for text in (
                "Everything passed in this environment.",
                "The lint check passed in path mode",
                "The build passed in\tthis branch, but failed on main.",
            )
        ],
        ("Only the fields passed into  this\n", []),
        ("Check the\tpassed in path\n", []),
        # a call's results assigned to names is code (corpus: 1)
        ("write_buff, success = self.fix_string()\n", []),
    ],
)
def test_passed_in_prose_and_code_are_no_outcome(text: str, outcomes: list[str]) -> None:
    assert [value for kind, value in _kinds(text) if kind == "outcome"] == outcomes


_NAMES = st.sampled_from(["src/x.py", "app.py", "a.tar.gz", "x.py.bak", ".py", "docs/r.md", "f"])
_SEPARATORS = st.sampled_from([":", "-", ":12:", "-12-", "-2024-05-20", "--", "-1-", ""])
_CONTENTS = st.sampled_from(
    ["from y import z", "", "x", "- item", "12-3 x", "old", "::x", "setup.py x", "a/b.txt"]
)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(_NAMES, _SEPARATORS, _CONTENTS), min_size=1, max_size=6))
def test_grep_output_reads_alike_in_the_reference(lines: list[tuple[str, str, str]]) -> None:
    # grep's match and context lines, and lookalikes (backups, dates, bullets): the
    # module and the reference agree, and every fact is found in its own text
    text = "\n".join(name + separator + content for name, separator, content in lines)
    _facts(text, "path")


_FRAMES = 'Traceback (most recent call last):\n  File "x.py", line 3, in <module>\n    f()\n'


@pytest.mark.parametrize(
    ("text", "errors"),
    [
        # a script's output interleaved with the traceback (stderr and stdout): its
        # exception line is the error, not the first line at the margin (corpus: 7)
        (
            "Traceback (most recent call last):\nTest 1: Valid nested object\n"
            '  File "x.py", line 3, in <module>\n    f()\nTypeError: bad\n',
            ["TypeError: bad"],
        ),
        (
            'Traceback (most recent call last):\n  File "x.py", line 3\n'
            "django.http.response.Http404: no\n",
            ["django.http.response.Http404: no"],
        ),
        # none named: the first line at the margin, as before
        ('Traceback (most recent call last):\n  File "x.py"\nsomething odd\n', ["something odd"]),
        # review: a lower-case exception of a module, then the script's output after it
        (
            _FRAMES + "struct.error: unpack requires a buffer of 4 bytes\nResult: 42\n",
            ["struct.error: unpack requires a buffer of 4 bytes"],
        ),
        (
            _FRAMES + "re.error: missing ), unterminated subpattern\nDone\n",
            ["re.error: missing ), unterminated subpattern"],
        ),
        (_FRAMES + "socket.timeout: timed out\nResult: 42\n", ["socket.timeout: timed out"]),
        # a script's banners printed after the last frame (stdout interleaved; corpus: 1)
        (
            _FRAMES
            + "".join(f"Test {n} - case {n}:\nZ.getitem('C') = D\n" for n in range(6))
            + "    raise AstroidIndexError(index)\n"
            + "astroid.exceptions.AstroidIndexError: <exception str() failed>\n",
            ["astroid.exceptions.AstroidIndexError: <exception str() failed>"],
        ),
        # second review 3: a file, a warning's location or a logger's name is no exception
        (_FRAMES + "logging.conf: loaded\nKeyboardInterrupt\n", ["KeyboardInterrupt"]),
        (_FRAMES + "app.main: starting worker\nKeyboardInterrupt\n", ["KeyboardInterrupt"]),
        (
            _FRAMES + "x.py:12: UserWarning: deprecated\nRuntimeError: stop\n",
            ["RuntimeError: stop"],
        ),
        (
            _FRAMES + "requests.exceptions.ReadTimeout: slow\n",
            ["requests.exceptions.ReadTimeout: slow"],
        ),
        # a chained traceback: each its own error (the first is read before ``During``)
        (
            _FRAMES + "socket.gaierror: [Errno -2] Name or service not known\n\nDuring handling of"
            " the above exception, another exception occurred:\n\n"
            + _FRAMES
            + "urllib3.exceptions.NewConnectionError: no connection\n",
            [
                "socket.gaierror: [Errno -2] Name or service not known",
                "urllib3.exceptions.NewConnectionError: no connection",
            ],
        ),
    ],
)
def test_a_traceback_ends_with_its_exception(text: str, errors: list[str]) -> None:
    assert [value for kind, value in _kinds(text) if kind == "error"] == errors


_GROUP = (
    "  + Exception Group Traceback (most recent call last):\n"
    '  |   File "x.py", line 3, in <module>\n'
    '  |     raise ExceptionGroup("eg", [ValueError(1), TypeError(2)])\n'
    "  | ExceptionGroup: eg (2 sub-exceptions)\n"
    "  +-+---------------- 1 ----------------\n"
    "    | ValueError: 1\n"
    "    +---------------- 2 ----------------\n"
    "    | TypeError: 2\n"
    "    +------------------------------------\n"
)


def test_an_exception_groups_traceback_is_read_without_its_border() -> None:
    # second review 10: the group's exception and each sub-exception are errors
    errors = _facts("log\n" + _GROUP, "error")
    for error in ("ExceptionGroup: eg (2 sub-exceptions)", "ValueError: 1", "TypeError: 2"):
        assert error in errors


def test_a_traceback_reads_its_own_lines_only(monkeypatch: pytest.MonkeyPatch) -> None:
    # review 9: each traceback's exception is looked for up to the next traceback only
    # (1 MB of headers and one line each read 20,000 characters per header: 7x main's
    # CPU); the characters handed to raised_line sum to at most the text's length
    read: list[int] = []
    real = factkinds.raised_line

    def counted(*args: Any) -> str | None:
        read.append(len(args[0]) if len(args) == 1 else args[2] - args[1])
        return real(*args)

    monkeypatch.setattr(factkinds, "raised_line", counted)
    text = "Traceback (most recent call last):\nodd\n" * 2000
    assert ("error", "odd") in _kinds(text)
    assert len(read) == 2000
    assert sum(read) <= len(text)


@pytest.mark.parametrize(
    ("text", "errors"),
    [
        # a capitalised label is no program (corpus: 2)
        ("Result: {'field1': ['field1 cannot be empty']}\n", []),
        ("cat: x.txt: No such file or directory\n", ["cat: x.txt: No such file or directory"]),
        ("Exception: Value 'test' not found\n", ["Exception: Value 'test' not found"]),
        # review 8: a known file name before the colon is make's or docker's, no label
        (
            "Makefile: target: No such file or directory\n",
            ["Makefile: target: No such file or directory"],
        ),
        ("Dockerfile: line 3: cannot open file\n", ["Dockerfile: line 3: cannot open file"]),
        # an exception expected (corpus: 12)
        ("Got KeyError as expected: 'x'\n", []),
        ("Expected error: NameInferenceError: 'x' not found in y\n", []),
        ("Expected: should raise ValueError\n", []),
        (
            "Got KeyError unexpectedly: 'x' (as expectedly)\n",
            ["Got KeyError unexpectedly: 'x' (as expectedly)"],
        ),
    ],
)
def test_a_label_or_an_expected_exception_is_no_error(text: str, errors: list[str]) -> None:
    assert [value for kind, value in _kinds(text) if kind == "error"] == errors


@pytest.mark.parametrize(
    ("text", "paths"),
    [
        # review 14: the placeholder is lower case; a capitalised one is a real folder
        ("see Path/To/Report.pdf now\n", ["Path/To/Report.pdf"]),
        ("see C:\\Path\\To\\x.txt now\n", ["C:\\Path\\To\\x.txt"]),
        ("git diff -- path/to/file1\n", []),
        # a Win32 device is a path as /dev/ttyS0 is one (what a tool opened)
        ("open \\\\.\\COM1 now\n", ["\\\\.\\COM1"]),
        ("open /dev/ttyS0 now\n", ["/dev/ttyS0"]),
    ],
)
def test_only_a_lower_case_placeholder_is_an_example(text: str, paths: list[str]) -> None:
    assert _facts(text, "path") == paths


@pytest.mark.parametrize(
    ("text", "outcomes"),
    [
        # review 7: prose in parentheses is no tuple of code
        (
            "(e.g., the build failed with exit code 2)\n",
            ["(e.g., the build failed with exit code 2)"],
        ),
        (
            "(see, the tests failed: 3 failed, 2 passed)\n",
            ["(see, the tests failed: 3 failed, 2 passed)"],
        ),
    ],
)
def test_prose_in_parentheses_keeps_its_outcome(text: str, outcomes: list[str]) -> None:
    assert [value for kind, value in _kinds(text) if kind == "outcome"] == outcomes


@pytest.mark.parametrize(
    ("text", "paths"),
    [
        # second review 9: dashes then a backslash end the path (it is found where read)
        ("src/x.py--\\\\.\\COM1\n", ["src/x.py"]),
        ("pkg/__init__.py-\\nsetup.py\n", ["pkg/__init__.py", "nsetup.py"]),
        ("see app.py-\\x here\n", []),  # (the extraction reads ``-\\`` as more name)
        # dashes then more of a name make one name (third review: the whole run)
        ("Makefile--OK\n", ["Makefile--OK"]),
        ("Makefile-old\n", ["Makefile-old"]),
        ("Makefile- OK\n", ["Makefile"]),
        ("app.py-old and app.py.-/x\n", []),
    ],
)
def test_a_path_before_dashes_is_found_where_it_was_read(text: str, paths: list[str]) -> None:
    assert _facts(text, "path") == paths


def test_wrapped_prose_in_parentheses_is_no_tuple() -> None:
    # second review 6: three lower-case words after the first comma, then a wrapped line
    text = "(e.g., the build failed with exit code 2,\nand then retried)\n"
    assert ("outcome", "(e.g., the build failed with exit code 2,") in _kinds(text)
    text = "(i.e., tests failed with ValueError: bad input,\nso we retried)\n"
    assert ("error", "(i.e., tests failed with ValueError: bad input,") in _kinds(text)
    # a tuple of names after its comma stays code
    assert ("error", "SQLParseError") in _kinds('x\n    ("noqa?", SQLParseError, b),\n')


def test_a_tuple_line_that_goes_on_is_code() -> None:
    # the tuple shapes of the corpus still read as code (their names stay bare errors)
    assert ("error", "SQLParseError") in _kinds('x\n    ("noqa?", SQLParseError),\n')
    text = "x\n(self.model.DoesNotExist, AttributeError), {\n"
    assert [kind for kind, value in _kinds(text) if kind == "error"] == ["error"]
    assert ("error", "AttributeError") in _kinds(text)


@pytest.mark.parametrize(
    ("text", "decisions"),
    [
        # how a fix stands is no choice (corpus: 16)
        ("Good, the fix is applied.", []),
        ("Now let me test some edge cases to make sure the fix is robust:", []),
        ("The fix is working.", []),
        ("The fix is working correctly.", []),
        ("The fix is working correctly:\n", []),
        ("Now that the issue is resolved, we can clean up.", []),
        ("So the fix is to catch it.", ["So the fix is to catch it."]),
        ("The fix is in the parser.", ["The fix is in the parser."]),
        (
            "The fix is working, so I will use X instead of Y.",
            ["The fix is working, so I will use X instead of Y."],
        ),
        ("To ensure that the fix is correct and that it holds, run it.", []),
        ("The fix is in \t place.", []),
        # second review 1: only ``and that`` after the state; a ``:`` opens the choice
        *[
            (text, [text])
            for text in (
                "The fix is complete and adds a lock around the cache in worker.py.",
                "The fix is in place and replaces the regex with str.split.",
                "The fix is good: it pins numpy<2.",
                "The fix is applied now and tested.",
                "The fix is working correctly for python 3.8 by pinning it.",
            )
        ],
        # review 5: only the fix's or the state, a state that ends its clause
        (
            "The issue is being caused by the __init__ override.",
            ["The issue is being caused by the __init__ override."],
        ),
        (
            "The root cause is resolved paths being compared to raw ones.",
            ["The root cause is resolved paths being compared to raw ones."],
        ),
        (
            "The solution is already in utils.py: reuse normalize().",
            ["The solution is already in utils.py: reuse normalize()."],
        ),
        (
            "Good, the fix is applied, but the root cause is being masked by the retry loop.",
            ["Good, the fix is applied, but the root cause is being masked by the retry loop."],
        ),
        ("The fix is done by wrapping the call.", ["The fix is done by wrapping the call."]),
    ],
)
def test_a_fixs_state_is_no_decision(text: str, decisions: list[str]) -> None:
    message = {"role": "assistant", "content": text}
    facts = extract_facts([message])
    assert facts == reference.extract_facts([message])
    assert [fact.value for fact in facts if fact.kind == "decision"] == decisions


def test_a_suffix_that_is_no_extension_is_passed_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # review 10: ``.ab-`` repeated searched the extensions' alternation over a window at
    # every ``-`` (0.05 s/MB on main, 0.62 s/MB before); a name's last suffix is looked
    # up first, and the window is searched only after a known one
    searched: list[int] = []
    real = factgrep._EXT_END

    class Counted:
        def search(self, *args: Any) -> re.Match[str] | None:
            searched.append(1)
            return real.search(*args)

    monkeypatch.setattr(factgrep, "_EXT_END", Counted())
    assert factgrep.context_spans(".ab-" * 5000 + "\nx.py-1-y") == [(20005, 20008)]
    assert len(searched) == 1
    assert factgrep.context_spans("a.tar.gz-12-x\nb.py.bak-3-y\nc.log.1-4-z") != []
    last = factgrep._LAST_SUFFIX
    assert all(last.fullmatch(suffix) for suffix in ("py", "gz", "bak", "jinja2", "1", "007"))
    assert not any(last.fullmatch(suffix) for suffix in ("ab", "pyx2", "1000", "Py"))


class _CountedChars(frozenset[str]):
    """Name characters that count how often they are asked about."""

    asked = 0

    def __contains__(self, char: object) -> bool:
        type(self).asked += 1
        return frozenset.__contains__(self, char)


@pytest.mark.parametrize(
    "piece", ["a.py-", "a.py-1-", "\na.py-x", "ab/cd.py.1-", "x" * 50 + ".py:"]
)
def test_grep_separators_are_found_in_linear_time(
    monkeypatch: pytest.MonkeyPatch, piece: str
) -> None:
    # each name is grown left no further than the last separator: the characters looked
    # at grow as the text does (a name grown to its line's start each time: quadratic)
    monkeypatch.setattr(factgrep, "_NAME_CHARS", _CountedChars(factgrep._NAME_CHARS))
    work = []
    for n in (2_000, 8_000):
        _CountedChars.asked = 0
        factgrep.context_spans(piece * n)
        work.append(_CountedChars.asked)
    assert work[1] <= 4.5 * work[0] and work[0] <= 2 * len(piece) * 2_000


@pytest.mark.parametrize(
    "line",
    [
        # source a tool showed: no error happened (corpus: 17)
        "    violations: List[SQLBaseError]",
        "    v: SQLLintError",
        "    types: Optional[Union[Type[SQLBaseError], Iterable[Type[SQLBaseError]]]] = None,",
        '    ("noqa?", SQLParseError),',
        "    (self.field.remote_field.model.DoesNotExist, AttributeError), {",
        ") -> Tuple[Optional[Sequence[BaseSegment]], List[SQLLexError], FluffConfig]:",
        '    f"{result.num_violations(types=SQLLintError, fixable=True)} fixable violations found"',
        "69- types: Optional[Union[Type[SQLBaseError], Iterable[Type[SQLBaseError]]]] = None,",
    ],
)
def test_source_naming_an_exception_is_no_error_line(line: str) -> None:
    assert [value for kind, value in _kinds(line + "\n") if kind == "error" and " " in value] == []


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("last_error: KeyError\n", "last_error: KeyError"),  # a label saying error
        ("(1/3) step failed with ValueError: bad\n", "(1/3) step failed with ValueError: bad"),
        ("Got ValueError: bad input here\n", "Got ValueError: bad input here"),
    ],
)
def test_an_error_line_stays_one(text: str, error: str) -> None:
    assert error in [value for kind, value in _kinds(text) if kind == "error"]
