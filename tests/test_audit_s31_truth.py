"""What session 30 left of the audit's truth, each held here (session 31).

1. a UNC path (``\\\\server\\share\\dir\\file.txt``) is one path, not ``file.txt``;
2. a dotted number that is a version's numeric pre-release (``0.3.7`` of
   ``1.0.0-0.3.7``) is no version of its own to the matcher, as ``1.0.0`` is not;
3. a time range after seconds (``10:00:00-11:30:00``) is no time zone;
4. two day-first dates (``28.02.2024-03.03.2024``) are a range, not a pre-release;
5. a superscript digit after a path (a footnote's mark, ``x.log¹``) is no part of it;
6. a ``,`` and digits after a date and time (``10:00:00,5,6``) are CSV fields, not
   a longer number; logging's ``,744`` stays the time's fraction;
7. a line that shows it is JSON-escaped (``"docs\\nsetup.py\\n"``) lists names: its
   ``\\n`` is no path separator.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from helpers.fact_checks import one_message as _message
from helpers.reference_facts import facts as reference
from helpers.reference_facts.rules import unc_path, unescape_lines
from hypothesis import example, given, settings
from hypothesis import strategies as st

from ctxledger.compressor import factescapes
from ctxledger.compressor.factbounds import contains, lower_tail, prerelease_start, search
from ctxledger.compressor.factescapes import escape_follows, escape_spans, unescaped
from ctxledger.compressor.factmatch import Fact, fact_in_text, normalize, normalize_fact, retention
from ctxledger.compressor.factnoise import diff_side
from ctxledger.compressor.factpaths import find_paths, plausible_path
from ctxledger.compressor.facts import extract_facts


def _values(text: str, role: str = "tool", kind: str = "path") -> list[str]:
    return [f.value for f in extract_facts([_message(text, role)]) if f.kind == kind]


def _fact(kind: str, value: str) -> Fact:
    return Fact(kind=kind, value=value, normalized=normalize_fact(kind, value), message_index=0)


def _kept(kind: str, value: str, text: str) -> bool:
    return bool(retention([_fact(kind, value)], text)[0])


def _own_text_holds_every_fact(text: str) -> None:
    for role in ("tool", "user", "assistant"):
        for fact in extract_facts([_message(text, role)]):
            assert fact_in_text(fact, text), (text, role, fact)


# --------------------------------------------------------------------------- 1 UNC


@pytest.mark.parametrize(
    ("text", "path"),
    [
        (r"open \\server\share\dir\file.txt now", r"\\server\share\dir\file.txt"),
        (r"copied to \\fs01\builds\2024\app.zip.", r"\\fs01\builds\2024\app.zip"),
        (r"net use Z: \\fs01\c$\Windows\x.log", r"\\fs01\c$\Windows\x.log"),
        (r"\\wsl$\Ubuntu\home\me\app.py", r"\\wsl$\Ubuntu\home\me\app.py"),
        (r"mapped \\nas.local\media", r"\\nas.local\media"),
        # a JSON string's escapes: every backslash doubled, the two leading ones too
        (r'{"path": "\\\\fs01\\share\\dir\\f.txt"}', r"\\fs01\share\dir\f.txt"),
    ],
)
def test_a_unc_path_is_one_path(text: str, path: str) -> None:
    assert _values(text) == [path]
    _own_text_holds_every_fact(text)


@pytest.mark.parametrize(
    "text",
    [
        r'pattern "\\d+\\.\\d+" in JSON',  # a regex, escaped
        r"$\\alpha\beta$ and a \\ b",  # LaTeX: a line break, commands
        r"\\server alone",  # no share
        r"\\\server\share",  # three backslashes
        r"\\srv\share\tests\unit",  # an escape-like \t and no file name
    ],
)
def test_what_only_looks_like_a_unc_path_is_none(text: str) -> None:
    assert not [p for p in find_paths(text) if p.startswith("\\\\")]


def test_a_unc_path_is_kept_by_itself_and_not_by_other_paths() -> None:
    unc = r"\\server\share\dir\file.txt"
    assert _kept("path", unc, rf"It is at {unc}.")
    assert _kept("path", unc, r'"\\\\server\\share\\dir\\file.txt"')  # JSON-escaped
    assert not _kept("path", unc, "It is at /server/share/dir/file.txt.")  # a POSIX path
    assert not _kept("path", unc, "see http://server/share/dir/file.txt")  # a URL
    assert not _kept("path", unc, r"see \\other\server\share\dir\file.txt")
    assert not _kept("path", "/server/share/dir/file.txt", rf"It is at {unc}.")


def test_the_reference_states_the_unc_rule() -> None:
    # its own loop, not the module's: the two agree on the cases above and their misses
    for raw in (r"\\server\share", r"\\\\a\\b\\c.py", r"\\a\\b", r"\\d+\\.\\d+", r"\\x"):
        assert unc_path(raw) == plausible_path(raw), raw


# --------------------------------------------------------------------------- 2 pre-release


def test_a_pre_release_keeps_neither_version_alone() -> None:
    # one version, 1.0.0 with the pre-release 0.3.7 (semver's own example): the
    # extraction makes one fact of it, and the matcher reads neither end alone in it
    assert _values("see 1.0.0-0.3.7", kind="number") == ["1.0.0-0.3.7"]
    assert not _kept("number", "1.0.0", "pinned 1.0.0-0.3.7")
    assert not _kept("number", "0.3.7", "pinned 1.0.0-0.3.7")
    assert _kept("number", "0.3.7", "pinned 1.0.0-0.3.7, then 0.3.7 alone")
    # a range (the upper end not lower) states both ends
    assert _kept("number", "1.26.0", "numpy 1.24.0-1.26.0")
    assert _kept("number", "3.12", "python 3.8-3.12")
    assert _kept("number", "3.8", "python 3.12-3.8")  # two numbers: a range either way


@settings(max_examples=400, deadline=None)
@given(
    st.lists(st.sampled_from(("0", "1", "2", "3", "10", "007")), min_size=2, max_size=4),
    st.lists(st.sampled_from(("0", "1", "2", "3", "10", "007")), min_size=2, max_size=4),
    st.sampled_from(("", " x", ".", "-1", "+b")),
    st.integers(min_value=1, max_value=12),
)
def test_the_regex_and_the_rule_agree_on_a_pre_release_start(
    left: list[str], right: list[str], tail: str, repeats: int
) -> None:
    # the start side is checked per match in search (a look behind of any width)
    needle = ".".join(right)
    text = f"{'.'.join(left)}-{needle}{tail}"
    for hay in (text, " ".join([text] * repeats), " ".join([text] * repeats + [needle])):
        assert contains(hay, needle) == search(hay, needle), hay
    assert contains(text + " " + needle, needle)  # alone, it is stated


# --------------------------------------------------------------------------- 3 time range


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("at 2024-05-20 10:00:00-11:30:00 ok", "2024-05-20 10:00:00"),
        ("at 2024-05-20T10:00:00-11:30:00Z ok", "2024-05-20T10:00:00"),
        ("at 2024-05-20T10:00:00.5-11:30:00.5 ok", "2024-05-20T10:00:00.5"),
        ("at 2024-05-20T10:00:00-05:00 ok", "2024-05-20T10:00:00-05:00"),  # a zone
        ("at 2024-05-20T10:00:00+0530 ok", "2024-05-20T10:00:00+0530"),
    ],
)
def test_a_time_range_after_seconds_is_no_zone(text: str, value: str) -> None:
    assert _values(text, kind="number") == [value]
    _own_text_holds_every_fact(text)


def test_a_summary_restating_a_time_range_keeps_its_start() -> None:
    text = "Maintenance window 2024-05-20 10:00:00-11:30:00 UTC."
    facts = [f for f in extract_facts([_message(text, "user")]) if f.kind == "number"]
    kept, lost = retention(facts, "The window is 2024-05-20 10:00:00 to 11:30:00.")
    assert [f.value for f in kept] == ["2024-05-20 10:00:00"] and lost == []


# --------------------------------------------------------------------------- 4 dates


def test_a_range_of_day_first_dates_is_two_dates() -> None:
    text = "Out of office 28.02.2024-03.03.2024, back on 04.03.2024."
    assert _values(text, "user", "number") == ["28.02.2024", "03.03.2024", "04.03.2024"]
    _own_text_holds_every_fact(text)
    assert _kept("number", "03.03.2024", "away 28.02.2024-03.03.2024")
    assert _kept("number", "28.02.2024", "away 28.02.2024-03.03.2024")
    # not dates (a month of 13, a semver): still one version with its pre-release
    assert _values("see 28.13.2024-03.03.2024", kind="number") == ["28.13.2024-03.03.2024"]
    assert _values("see 10.2.1-3.3.2024", kind="number") == ["10.2.1-3.3.2024"]


def test_the_pre_release_regex_knows_dates() -> None:
    pattern = lower_tail("28.02.2024")
    assert pattern is not None
    assert re.match(pattern, "-03.03.2024") is None  # a date: the range's end
    assert re.match(pattern, "-03.03.20") is not None  # no date: lower, a pre-release


# --------------------------------------------------------------------------- 5 footnotes


@pytest.mark.parametrize(
    ("text", "path"),
    [
        ("details are in x.log¹ below", "x.log"),
        ("see src/app.py² for the fix", "src/app.py"),
        ("the Dockerfile³ builds it", "Dockerfile"),
    ],
)
def test_a_footnote_mark_after_a_path_is_no_part_of_it(text: str, path: str) -> None:
    assert _values(text) == [path]
    _own_text_holds_every_fact(text)
    assert _kept("path", path, text)
    assert not _kept("path", path, text.replace(path, path + "1"))  # another name


def test_a_footnote_mark_reads_as_a_blank() -> None:
    assert normalize("x.log¹ and y²⁰") == normalize("x.log and y")
    assert normalize("x.log1") != normalize("x.log¹")


# --------------------------------------------------------------------------- 6 CSV


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("2024-05-20 10:00:00,5,6", "2024-05-20 10:00:00"),
        ("2024-05-20 10:00,5,6", "2024-05-20 10:00"),
        ("2024-05-20,5,6", "2024-05-20"),
        ("2024-05-20 10:00:00,744,6", "2024-05-20 10:00:00"),  # a field of three digits
        ("2018-03-25 15:27:29,744 INFO start", "2018-03-25 15:27:29,744"),  # logging
    ],
)
def test_a_csv_field_after_a_date_is_no_part_of_it(text: str, value: str) -> None:
    assert _values(text, kind="number") == [value]
    _own_text_holds_every_fact(text)


def test_logging_fraction_still_makes_a_longer_time() -> None:
    assert not _kept("number", "2018-03-25 15:27:29", "at 2018-03-25 15:27:29,744 INFO")
    assert not _kept("number", "2018-03-25 15:27:29", "at 2018-03-25 15:27:29.5")
    assert _kept("number", "2018-03-25 15:27:29", "at 2018-03-25 15:27:29,5,6")
    assert not _kept("number", "2018-03-25", "on 2018-03-25.5")


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from(("2024-05-20", "2024-05-20 10:00", "2024-05-20t10:00:00", "10:00:00")),
    st.lists(st.sampled_from((",", ".", "5", "744", "7445", ",6", " ", "x")), max_size=6),
    st.integers(min_value=1, max_value=12),
)
def test_the_regex_and_the_rule_agree_after_a_date(
    needle: str, after: list[str], repeats: int
) -> None:
    hay = " ".join([needle + "".join(after)] * repeats)
    assert contains(hay, needle) == search(hay, needle), hay


# --------------------------------------------------------------------------- 7 escapes


@pytest.mark.parametrize(
    ("text", "paths"),
    [
        ('{"stdout": "total 2\\ndocs\\nsetup.py\\n", "exit_code": 0}', ["setup.py"]),
        ('{"output": "README.md\\nnotes.txt\\n"}', ["README.md", "notes.txt"]),
        ('"src\\\\new.py\\n"', ["src\\new.py"]),  # an escaped backslash: a separator
        ("line one\\r\\nlib\\nsetup.py", ["setup.py"]),  # \r\n: escapes
    ],
)
def test_an_escaped_line_lists_names(text: str, paths: list[str]) -> None:
    found = _values(text)
    assert found == paths
    _own_text_holds_every_fact(text)


@pytest.mark.parametrize(
    "text",
    [
        '"docs\\nsetup.py"',  # no sign of escapes: a PowerShell path has this shape
        "see src\\tests\\test_app.py",
        "cd lib\\net\\http.py\nok\\n",  # the evidence is on another line
    ],
)
def test_a_line_without_a_sign_of_escapes_keeps_its_windows_paths(text: str) -> None:
    assert escape_spans(text.split("\n")[0]) == []
    assert len(_values(text)) == 1 and "\\" in _values(text)[0]


def test_the_matcher_reads_an_escaped_line_as_the_extraction_does() -> None:
    text = '{"stdout": "total 2\\ndocs\\nsetup.py\\n"}'
    assert _kept("path", "setup.py", text)
    assert not _kept("path", "setup.py", "see docs\\nsetup.py")  # no escapes: one path


_ESCAPE_PIECES = st.sampled_from(
    ("\\", "\\\\", "n", "r", "t", '"', "'", " ", "a", "b.py", "docs", "\n", "\x00", ",", "]",
     "C:", "xC:")
)  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(st.lists(_ESCAPE_PIECES, max_size=24).map("".join))
def test_the_reference_reads_escaped_lines_alike(text: str) -> None:
    assert (unescaped(text) or text) == unescape_lines(text)


@pytest.mark.parametrize(
    ("text", "paths"),
    [  # (review fixes) a line's escapes no longer break its real Windows paths
        (r'(Get-Content C:\temp\data.csv -Raw) -replace "\r\n", "\n" | Set-Content C:\temp\o.csv',
         ["C:\\temp\\data.csv", "C:\\temp\\o.csv"]),
        (r"The file C:\temp\notes.txt uses \n line endings, not \r\n.", ["C:\\temp\\notes.txt"]),
        (r'sed -i "s/\r\n/\n/" src\tests\test_app.py', ["src\\tests\\test_app.py"]),
        (r"sed -i 's/\r\n/\n/' src\tests\test_app.py", ["src\\tests\\test_app.py"]),
        (r'write(f, "line\n"); // see D:\work\notes\todo.md', ["D:\\work\\notes\\todo.md"]),
        (r'Python: open("C:\new\table.txt") fails because "\n" is a newline',
         ["C:\\new\\table.txt"]),
        (r"see \\n and src\tests\app.py", ["src\\tests\\app.py"]),  # no escape: \\ then n
        (r'"C:\\temp\\table.txt\n"', ["C:\\temp\\table.txt"]),  # JSON doubles a drive's
    ],
)  # fmt: skip
def test_an_escaped_string_leaves_the_real_paths_of_its_line(text: str, paths: list[str]) -> None:
    assert [p.replace("\\\\", "\\") for p in _values(text)] == paths
    _own_text_holds_every_fact(text)
    for path in paths:
        assert _kept("path", path, f"kept {path}")
    message = _message(text, "tool")
    assert extract_facts([message]) == reference.extract_facts([message])


# --------------------------------------------------------------------------- the reference

_REPRODUCERS = [
    r"open \\server\share\dir\file.txt and \\fs01\c$\x.log, \\wsl$\Ubuntu\home\a.py",
    r'{"p": "\\\\fs01\\share\\f.txt", "r": "\\d+\\.\\d+"} $\\alpha\beta$ \\srv\share.',
    "see 1.0.0-0.3.7 and 1.0.0-1.2.0, away 28.02.2024-03.03.2024 and 28.13.2024-03.03.2024",
    "at 2024-05-20 10:00:00-11:30:00, 2024-05-20T10:00:00+0530 and 2024-05-20T10:00-05:00",
    "x.log¹ src/app.py² Dockerfile³ .env⁴",
    r"srv\x.log¹ C:\a\x.log² \\srv\s\x.log³",  # (session 38: a footnote after a Windows path)
    r"\\\\srv\\\srv \\\\srv\\\\srv \\\\s\\\\\a.log \\\\srv\\srv\ ok",  # (s38: uneven runs)
    "2024-05-20 10:00:00,5,6\n2024-05-20 10:00:00,744,6\n2018-03-25 15:27:29,744 INFO",
    '{"stdout": "total 2\\ndocs\\nsetup.py\\n"}\n"docs\\nsetup.py"\nline\\r\\nlib\\new.py',
]


@pytest.mark.parametrize("text", _REPRODUCERS)
@pytest.mark.parametrize("role", ["user", "tool", "assistant"])
def test_the_reference_states_the_session_31_rules_alike(text: str, role: str) -> None:
    assert extract_facts([_message(text, role)]) == reference.extract_facts([_message(text, role)])
    _own_text_holds_every_fact(text)


_PIECES = st.sampled_from(
    (
        "\\", "\\\\", "srv", "share", "c$", "app.py", "n", "t", '"', " ", "\n", "-", ".",
        ",", ":", "1.0.0", "0.3.7", "28.02.2024", "03.03.2024", "2024-05-20", " 10:00",
        ":00", ",744", ",5", "-11:30", "+05:30", "x.log", "¹", "²", "/", "docs", "setup.py",
    )
)  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(st.lists(_PIECES, max_size=30).map("".join), st.sampled_from(("user", "tool")))
@example("srv\\x.log¹", "user")  # (session 38: the reference read the footnote's mark
@example("srv\\x.log¹", "tool")  # as more of the Windows path's name, not the matcher)
@example("\\" * 4 + "srv" + "\\" * 3 + "srv", "user")  # (session 38: the reference read a
@example("\\" * 4 + "srv" + "\\" * 4 + "srv", "tool")  # run of 3-5 backslashes after a UNC
@example("\\" * 4 + "srv" + "\\" * 5 + "srv", "tool")  # start as one separator, which the
@example("\\" * 4 + "srv" + "\\" * 2 + "srv" + "\\", "user")  # matcher does not; both want
# separators all single or all doubled now, a last one too, as for a drive path since s31)
def test_the_reference_agrees_on_generated_texts(text: str, role: str) -> None:
    assert extract_facts([_message(text, role)]) == reference.extract_facts([_message(text, role)])


_TOKENS = st.sampled_from(
    (
        r"\\srv\share\x.log", r"\\\\srv\\share\\x.log", r"src\app.py", "1.0.0",
        "0.3.7", "1.0.0-0.3.7", "1.0.0-1.2.0", "28.02.2024", "28.02.2024-03.03.2024",
        "2024-05-20", "2024-05-20 10:00", "2024-05-20 10:00:00", "2024-05-20T10:00:00,744",
        "2024-05-20 10:00:00-11:30:00", "2024-05-20T10:00:00+05:30", "x.log¹", "src/app.py²",
        '"docs\\nsetup.py\\n"', '"docs\\nsetup.py"', "$1.0.0", "$1,250.50", "v2.0-rc1",
        "python 3.8-3.12", "5", "744", "ok",
    )
)  # fmt: skip
_SEPARATORS = st.sampled_from((" ", ", ", ",", "\n", "; ", " (", ") ", "\t"))


@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(_TOKENS, _SEPARATORS), max_size=12))
def test_every_fact_is_found_in_its_own_generated_text(parts: list[tuple[str, str]]) -> None:
    # tokens of the shapes above, side by side as a log, a CSV line or prose puts them
    _own_text_holds_every_fact("".join(token + sep for token, sep in parts))


def test_a_pre_release_start_needs_a_semver_before_it() -> None:
    assert prerelease_start("1.0.0-0.3.7", 6)
    assert not prerelease_start("3.12-3.8", 5)  # two numbers: a range
    assert not prerelease_start("1.0.0-1.2.0", 6)  # higher: a range's end
    assert not prerelease_start("$1.0.0-0.3.7", 7)  # an amount is no version


def test_a_path_before_greps_context_dash_is_kept() -> None:
    # grep -A prints ``path-`` before a context line; the extraction strips the dash
    text = "src/rules/L031.py-\n"
    assert _values(text) == ["src/rules/L031.py"]
    _own_text_holds_every_fact(text)
    assert not _kept("path", "src/rules/L031.py", "see src/rules/L031.py-old")
    assert _kept("path", "x.log", "rotated x.log.- done")


# --------------------------------------------------------------------------- found on the way


@pytest.mark.parametrize(
    ("text", "paths"),
    [
        ("saved app.py~ and notes.txt", ["notes.txt"]),  # a backup: another file
        ("built lib.so+x and run.sh@v2", []),
        (r"in srv\\\x.log", ["x.log"]),  # three backslashes: no path of two names
    ],
)
def test_no_path_the_matcher_reads_as_part_of_a_longer_name(text: str, paths: list[str]) -> None:
    assert _values(text) == paths
    _own_text_holds_every_fact(text)


def test_a_date_after_a_dot_is_part_of_it() -> None:
    assert _values("tag 1.0.0.2024-05-20 pushed", kind="number") == []
    _own_text_holds_every_fact("tag 1.0.0.2024-05-20 pushed")


def test_a_path_ends_at_a_comma_whatever_digits_follow() -> None:
    assert _kept("path", "logs/run.1", "rotated logs/run.1,2 today")
    assert not _kept("path", "logs/run.1", "rotated logs/run.1.2 today")


def test_an_escaped_backslash_before_an_escape_is_no_evidence_but_the_escape_is() -> None:
    text = "\\\\r\\n"  # an escaped backslash, an r, then a newline escape
    assert escape_spans(text) == [(3, 5)]


def test_a_diff_headers_sides_are_the_file_itself() -> None:
    # git marks the old and new file a/ and b/: no directories, and a summary naming
    # the file lost them all (96 such facts on the corpus)
    text = (
        "diff --git a/django/urls/resolvers.py b/django/urls/resolvers.py\n"
        "--- a/django/urls/resolvers.py\n+++ b/django/urls/resolvers.py\n"
        "@@ -1 +1 @@\n-see a/b.txt\n+see b/x/y.txt\n"
    )
    assert _values(text) == ["django/urls/resolvers.py", "a/b.txt", "b/x/y.txt"]
    _own_text_holds_every_fact(text)
    assert _kept("path", "django/urls/resolvers.py", "fixed django/urls/resolvers.py")
    message = _message(text, "tool")
    assert extract_facts([message]) == reference.extract_facts([message])


def test_a_hyphenated_word_names_no_version() -> None:
    # "pre-release 1.0.0-0.3.7" named the version "release 1.0.0-0.3.7"
    text = "the pre-release 1.0.0-0.3.7 and the release 2.0.0 ship"
    assert sorted(_values(text, "user", "number")) == ["1.0.0-0.3.7", "2.0.0", "release 2.0.0"]
    message = _message(text, "user")
    assert extract_facts([message]) == reference.extract_facts([message])


def test_a_european_grouped_number_is_no_version() -> None:
    # 1.234.567,89 is one number: its "1.234.567" was a version fact no text held
    assert _values("total €1.234.567,89 due", "user", "number") == []
    assert _values("pins 1.0.0,1.1.0", "user", "number") == ["1.0.0", "1.1.0"]
    _own_text_holds_every_fact("total €1.234.567,89 due; pins 1.0.0,1.1.0")


def test_a_web_servers_date_is_no_path() -> None:
    text = '127.0.0.1 - - [20/May/2024:10:00:00 +0000] "GET /api/v1/users HTTP/1.1" 500'
    assert _values(text) == ["/api/v1/users"]
    assert _values("see src/May/2024.py") == ["src/May/2024.py"]
    message = _message(text, "tool")
    assert extract_facts([message]) == reference.extract_facts([message])


class _CountedText(str):
    """A text that counts the characters its find and rfind calls look at."""

    looked = 0

    def find(self, sub: str, start: Any = None, end: Any = None) -> int:  # type: ignore[override]
        found = str.find(self, sub, start, end)
        stop = len(self) if end is None else min(end, len(self))
        type(self).looked += (stop if found < 0 else found + 1) - (start or 0)
        return found

    def rfind(self, sub: str, start: Any = None, end: Any = None) -> int:  # type: ignore[override]
        found = str.rfind(self, sub, start, end)
        stop = len(self) if end is None else min(end, len(self))
        type(self).looked += stop - ((start or 0) if found < 0 else found)
        return found


class _CountedPattern:
    """A compiled pattern that counts the characters its searches look at (to where a
    match ends, or the end searched to), into :class:`_CountedText`'s count."""

    def __init__(self, pattern: re.Pattern[str]) -> None:
        self.pattern = pattern

    def _look(self, text: str, pos: int, endpos: int | None, end: int | None) -> None:
        stop = len(text) if endpos is None else min(endpos, len(text))
        _CountedText.looked += (stop if end is None else end) - pos

    def search(self, text: str, pos: int = 0, endpos: int | None = None) -> Any:
        found = self.pattern.search(text, pos, len(text) if endpos is None else endpos)
        self._look(text, pos, endpos, None if found is None else found.end())
        return found

    def match(self, text: str, pos: int = 0, endpos: int | None = None) -> Any:
        found = self.pattern.match(text, pos, len(text) if endpos is None else endpos)
        self._look(
            text, pos, pos + 1 if found is None else None, None if found is None else found.end()
        )
        return found

    def sub(self, repl: Any, text: str) -> str:
        self._look(text, 0, None, None)
        return self.pattern.sub(repl, text)

    def findall(self, text: str) -> list[Any]:
        self._look(text, 0, None, None)
        return self.pattern.findall(text)


class _IndexedText(_CountedText):
    """A counted text that also counts each character or slice Python code reads of it
    (a walk back over a run of backslashes, a slice of a line)."""

    def __getitem__(self, key: Any) -> str:
        got = str.__getitem__(self, key)
        _CountedText.looked += max(1, len(got))
        return got


def _escape_work(monkeypatch: pytest.MonkeyPatch, text: str) -> int:
    """What finding the escaped lines of `text` looks at: characters read by find and
    rfind, by the module's regex searches and by indexing."""
    names = ("_EVIDENCE", "_LINE_END", "_QUOTE_OR_END", "_SINGLE_DRIVE", "_WORD", "_FOLLOWS")
    for name in (*names, "_SINGLE", "_ESCAPE"):
        pattern = getattr(factescapes, name)
        if not isinstance(pattern, _CountedPattern):
            monkeypatch.setattr(factescapes, name, _CountedPattern(pattern))
    _CountedText.looked = 0
    escape_follows(_IndexedText(text))
    return _CountedText.looked


@pytest.mark.parametrize(
    "piece",
    # a long line cut by NULs, many strings, a line of drive paths, runs of backslashes
    [
        "a\\n \x00",
        '"a\\n", ',
        "'a\\n' \\\" \x00",
        "C:\\temp\\x.txt \\n ",
        "\\\\\\\\\\n' ",
    ],
)
def test_escaped_lines_are_found_in_linear_time(
    monkeypatch: pytest.MonkeyPatch, piece: str
) -> None:
    # (review fixes) each escape's line was looked for from the text's start or to its end
    # (a long line cut by the matcher's NULs: 2 MB took 8 s, quadratic). (s32) The work
    # counted is every character find, rfind, the module's regexes and indexing look at;
    # four times the text is at most about four times the work (a quadratic scan: 16)
    small = _escape_work(monkeypatch, piece * 2_000)
    large = _escape_work(monkeypatch, piece * 8_000)
    assert large <= 4.5 * small and small <= 12 * len(piece * 2_000)
    text = piece * 8_000
    assert (unescaped(text) or text) == unescape_lines(text)


def test_a_date_after_two_dots_is_a_range_end() -> None:
    # (review fixes) the ``.`` before a date that is part of a name or number is one
    # after a word; ``..`` between two dates is a range
    text = "created:2024-05-20..2024-05-25 and .2024-06-01"
    assert _values(text, kind="number") == ["2024-05-20", "2024-05-25", "2024-06-01"]
    assert _values("tag 1.0.0.2024-05-20 pushed", kind="number") == []
    _own_text_holds_every_fact(text)
    message = _message(text, "tool")
    assert extract_facts([message]) == reference.extract_facts([message])


@pytest.mark.parametrize(
    ("text", "paths"),
    [
        ("+++ a///x.py\n--- b///y.md", ["a///x.py", "b///y.md"]),  # no side of ``//x.py``
        ("diff --git a/x.py b/x.py c/d.py a/e.py", ["x.py", "c/d.py", "a/e.py"]),
        ("diff --git  a/x.py\nfoo a/y.py", ["a/x.py", "a/y.py"]),
        ("diff --git a/x.py\nfoo a/y.py", ["x.py", "a/y.py"]),
    ],
)
def test_a_diff_side_is_a_header_word(text: str, paths: list[str]) -> None:
    # (review fixes) the first or second word of a ``diff --git`` line, or right after
    # ``--- `` or ``+++ ``; never a third slash
    assert _values(text) == paths
    message = _message(text, "tool")
    assert extract_facts([message]) == reference.extract_facts([message])


def test_a_diff_side_is_found_looking_back_over_one_word() -> None:
    # (review fixes) each a/ path looked back over its whole line for a diff header
    text = _CountedText(" ".join(f"a/f{i}.py" for i in range(20_000)))
    _CountedText.looked = 0
    sides = [diff_side(text, m.start()) for m in re.finditer(r"a/", text)]
    assert not any(sides) and _CountedText.looked <= 2 * len(text)


@pytest.mark.parametrize(
    ("text", "paths"),
    [
        ("see foo¹bar.py", ["bar.py"]),
        ("see x.log² and foo-1.0⁴bar.tar.gz", ["x.log", "bar.tar.gz"]),
    ],
)
def test_a_superscript_ends_the_name_before_it(text: str, paths: list[str]) -> None:
    # (review fixes) ``foo¹bar.py`` gave the fact ``foo bar.py`` (the matcher's blank)
    assert _values(text) == paths
    _own_text_holds_every_fact(text)
    message = _message(text, "tool")
    assert extract_facts([message]) == reference.extract_facts([message])


@pytest.mark.parametrize(
    ("text", "paths"),
    [("see 12/abc/2024 and 2024/img/20", ["12/abc/2024", "2024/img/20"]),
     ("GET at 20/May/2024 and 01/DEC/23", [])],
)  # fmt: skip
def test_a_date_with_slashes_names_a_month(text: str, paths: list[str]) -> None:
    # (review fixes) any three letters between slashes made no path
    assert _values(text) == paths
    message = _message(text, "tool")
    assert extract_facts([message]) == reference.extract_facts([message])


@pytest.mark.parametrize(
    "text", ["see app.py..+r", "see app.py..@x", "see x.txt..1.0.0", "see setup.py.+-r", "a.py.-x"]
)
def test_a_name_going_on_after_dots_and_dashes_is_no_path_of_its_own(text: str) -> None:
    # (review fixes) the extraction took ``app.py`` the matcher reads as part of a name
    assert _values(text) == []
    _own_text_holds_every_fact("see app.py.. and Makefile..")
