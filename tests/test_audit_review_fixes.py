"""The findings of session 30's review of the audit's fact changes, each held here.

* 1a: a number of over 4,300 digits (``int()``'s limit) crashed extraction and the
  matcher: versions compare as digit strings, an exit code has at most 20 digits;
* 2a: the regex of a version's lower pre-releases (``lower_tail``) grew with the
  square of the version's length; a long version is checked per match instead;
* 1b–1g: facts that were no facts (a division as a path, LaTeX as a Windows path, a
  time range as a zone, a cut amount, a dashed banner as ``ls -l``, a bullet as a diff).
"""

from __future__ import annotations

from typing import Any

import pytest
from helpers.reference_facts import facts as reference
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxledger.compressor import factbounds, factkinds
from ctxledger.compressor.factbounds import contains, search
from ctxledger.compressor.factcodes import exit_code, stated_exit_codes
from ctxledger.compressor.factkinds import error_lines
from ctxledger.compressor.factmatch import Fact, fact_in_text, normalize, normalize_fact, retention
from ctxledger.compressor.facts import extract_facts

_LONG = 5000  # digits: over int()'s 4,300


def _facts(text: str, role: str = "user") -> list[Fact]:
    message: dict[str, Any] = {"role": role, "content": text}
    if role == "tool":
        message["tool_call_id"] = "c"
    return extract_facts([message])


def _fact(kind: str, value: str) -> Fact:
    return Fact(kind=kind, value=value, normalized=normalize_fact(kind, value), message_index=0)


def _kept(fact: Fact, text: str) -> bool:
    return bool(retention([fact], text)[0])


# --------------------------------------------------------------------------- 1a


@pytest.mark.parametrize(
    "text",
    [
        "see 1.0.0-0." + "1" * _LONG,
        "see v1." + "1" * _LONG + "-0.1",
        "Python 3." + "9" * _LONG + "-3.1",
        "exit code " + "1" * _LONG,
        "ok\nexited with " + "7" * _LONG + "\n",
    ],
)
def test_a_number_of_thousands_of_digits_is_extracted_without_error(text: str) -> None:
    for role in ("user", "tool"):
        for fact in _facts(text, role):  # (an ask is cut inside the long word: known)
            assert fact.kind == "ask" or fact_in_text(fact, text), fact


def test_a_long_version_with_its_pre_release_is_one_fact() -> None:
    version = "1.0.0-0." + "1" * _LONG
    assert version in [f.value for f in _facts("see " + version)]


def test_an_exit_code_has_at_most_twenty_digits() -> None:
    assert error_lines("exit code " + "1" * 20) == ["exit code " + "1" * 20]
    assert error_lines("exit code " + "1" * 21) == []
    assert error_lines("exit code " + "1" * _LONG) == []
    assert exit_code("exit code 3; exit code " + "1" * _LONG) == 3


@pytest.mark.parametrize(
    ("kind", "value", "text", "kept"),
    [
        ("number", "1.0.0", "upgrade to 1.0.0-0." + "1" * _LONG, False),
        ("number", "1.0.0", "upgrade to 1.0.0-2." + "1" * _LONG, True),
        ("error", "exit code 2", "exited with 2; exit code " + "1" * _LONG, True),
        ("error", "exit code 3", "exited with 2; exit code " + "1" * _LONG, False),
        ("error", "exit code " + "1" * _LONG, "exited with " + "1" * _LONG, False),
        ("number", "python 3.12.0", "python 3.12." + "1" * _LONG + "-3.12.0", False),
        ("number", "python 3.12.1", "python 3.12." + "0" * _LONG + "1-3.12.1", True),
    ],
)
def test_the_matcher_reads_thousands_of_digits(
    kind: str, value: str, text: str, kept: bool
) -> None:
    assert _kept(_fact(kind, value), text) is kept


def test_a_long_version_among_near_misses() -> None:
    version = "v1.0." + "9" * _LONG
    near = " ".join(f"{version}-0.{i}" for i in range(9))  # past PLAIN_TRIES
    assert not _kept(_fact("number", version), near)
    assert _kept(_fact("number", version), near + " and " + version + ".")
    assert _kept(_fact("number", version), near + " " + version + "-" + version[1:] + "1")


# --------------------------------------------------------------------------- 2a


@pytest.mark.parametrize(
    "version",
    ["v1.0." + "1" * 4000, "v" + ".".join(["5"] * 1000), "1.2." + "9" * 300, "2.1." + "10" * 13],
)
def test_the_regex_of_a_version_grows_linearly(version: str) -> None:
    # the regex built for a needle stays within a constant times the needle's length
    # (lower_tail's size was quadratic: 8 MB for 4,000 digits)
    factbounds._patterns.cache_clear()
    plain, _ = factbounds._patterns(version, False)
    assert len(plain.pattern) <= 4 * len(version) + 2000
    assert factbounds.lower_tail(version) is None  # checked per match (search)
    near = " ".join(f"{version}-0.{i}" for i in range(10))
    assert not search(near, version)
    assert search(near + " " + version, version)
    assert search(near, version) == contains(near, version)


def test_a_short_version_keeps_its_regex() -> None:
    assert factbounds.lower_tail("1.2.3") is not None
    assert factbounds.lower_tail("1.0." + "2" * (factbounds.SHORT_DOTTED - 4)) is not None
    assert factbounds.lower_tail("1.0." + "2" * (factbounds.SHORT_DOTTED - 3)) is None


def test_a_long_version_in_a_url_is_checked_per_match() -> None:
    path = "/pkg/v1.0." + "7" * 40
    hay = " ".join(f"http://h{path}-0.{i}" for i in range(10))
    assert not search(hay, path, path=True)
    assert search(hay + f" http://h{path}/x", path, path=True)
    assert search(hay, path, path=True) == contains(hay, path, path=True)


@pytest.mark.parametrize(
    "text",
    [
        "<returncode>3</returncode>",
        "Exited with code 3",
        "exit status: 3",
        "subprocess: non-zero exit status 3",
        '{"exitCode": 3}',
        '{"returncode": 3}',
        '{"exit_code": 3}',
    ],
)
def test_the_matcher_reads_every_exit_code_the_extraction_reads(text: str) -> None:
    # the folded patterns are written with the extraction's, not made by text
    # replacement on them
    assert error_lines(text) == ["exit code 3"]
    assert stated_exit_codes(normalize(text)) == {3}
    assert exit_code(text) == 3


# --------------------------------------------------------------------------- 1b–1g


def _values(text: str, role: str = "user", kind: str | None = None) -> list[str]:
    return [f.value for f in _facts(text, role) if f.kind != "ask" and kind in (None, f.kind)]


@pytest.mark.parametrize(
    "text",
    [
        "ratio = hits/self.total",
        "x = a/np.sqrt(n)",
        "result = df/df.sum()",
        "speed in km/h.ok",
        "mean = total/batch.size",
    ],
)
def test_a_division_in_code_is_no_path(text: str) -> None:  # 1b
    assert _values(text, kind="path") == []


def test_a_file_under_a_directory_still_needs_no_known_extension() -> None:  # 1b
    text = "see prisma/schema.prisma and docs/index.mdx"
    assert _values(text, kind="path") == ["prisma/schema.prisma", "docs/index.mdx"]


@pytest.mark.parametrize(
    "path",
    ["src/time.prisma", "deploy/os.release", "a/schema.prisma", "docs/docs.prisma"],
)
def test_a_file_named_like_a_module_or_its_directory_is_a_path(path: str) -> None:
    # the division rule judged the word alone (review of the fix): a module name
    # (``os``, ``time``), a one-letter directory or a file named like its directory
    # made these no path
    assert _values(f"edit {path} first", kind="path") == [path]


@pytest.mark.parametrize(
    "text",
    [r"$\sum_{i} w_i\cdot\log p_i$", r"$x_i\cdot\sigma$", r"pattern ab\w+\d+"],
)
def test_latex_and_regexes_are_no_relative_windows_paths(text: str) -> None:  # 1c
    assert _values(text, kind="path") == []


def test_a_relative_windows_directory_path_is_still_one() -> None:  # 1c
    assert _values(r"look in src\app\models now", kind="path") == [r"src\app\models"]


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("Book the room for 2024-05-20 10:00-11:30", "2024-05-20 10:00"),
        ("shift 2024-05-20T09:00-17:00", "2024-05-20T09:00"),
        ("at 2014-12-22T03:12:58.019077+00:00 ok", "2014-12-22T03:12:58.019077+00:00"),
        ("at 2024-05-20T10:00:00-05:00 ok", "2024-05-20T10:00:00-05:00"),
        ("at 2024-05-20T10:00Z ok", "2024-05-20T10:00Z"),
    ],
)
def test_a_time_range_is_no_time_zone(text: str, value: str) -> None:  # 1d
    assert _values(text, kind="number") == [value]


def test_a_summary_restating_the_start_of_a_time_range_keeps_it() -> None:  # 1d
    facts = [f for f in _facts("Book the room for 2024-05-20 10:00-11:30") if f.kind == "number"]
    kept, lost = retention(facts, "Room booked for 2024-05-20 10:00 until 11:30.")
    assert kept == facts and lost == []


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("The fee is $3,50", "$3,50"),
        ("raised $1,2345", "$1,2345"),
        ("fees: $375, $500", "$375"),
        ("total $1,250.50 due", "$1,250.50"),
    ],
)
def test_an_amount_is_whole_and_found_in_its_own_text(text: str, value: str) -> None:  # 1e
    facts = [f for f in _facts(text) if f.kind == "number"]
    assert facts[0].value == value
    assert all(fact_in_text(f, text) for f in facts)


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("---------- 2024-01-02 12:00:01 deploy of v2.3.1 failed ----------", "v2.3.1"),
        ("---------- server on localhost:8080 ----------", "localhost:8080"),
        ("---------- coverage: platform linux, python 3.11.4-final-0 ---", "3.11.4"),
    ],
)
def test_a_dashed_banner_is_no_file_listing(line: str, expected: str) -> None:  # 1f
    assert expected in _values("ok\n" + line + "\n", "tool", "number")


def test_a_file_listing_line_has_no_number_facts() -> None:  # 1f
    text = "drwxr-xr-x 3 root root 4096 May  6  2025 tests\n-rw-r--r-- 1 u u 9 May 6 12:00 python 3.11\n"
    assert _values(text, "tool", "number") == []


def test_a_two_number_range_written_high_to_low_is_two_versions() -> None:  # 1g
    assert _values("Python 3.12-3.8", kind="number") == ["Python 3.12", "Python 3.8"]
    assert _values("see 1.0.0-0.3.7", kind="number") == ["1.0.0-0.3.7"]  # semver: one
    assert _kept(_fact("number", "3.12"), "supports 3.12-3.8")
    assert not _kept(_fact("number", "1.0.0"), "supports 1.0.0-0.3.7")


def test_a_markdown_bullet_naming_an_exception_is_an_error_line() -> None:  # 1g
    line = "- if the config file is missing, a FileNotFoundError is raised at startup"
    assert _values("Notes:\n" + line + "\n", "tool", "error") == [line]
    diff = "@@ -1,2 +1,2 @@\n-    raise KeyError(name)\n+        except TypeError:\n+from x import ValueError\n"
    assert _values(diff, "tool", "error") == ["KeyError", "TypeError", "ValueError"]


# --------------------------------------------------------------------------- 2c


class _CountingText(str):
    """A text that counts the searches of each literal in it."""

    searched: dict[str, int]

    def __contains__(self, literal: object) -> bool:
        self.searched[str(literal)] = self.searched.get(str(literal), 0) + 1
        return super().__contains__(str(literal))


def test_a_tool_error_literal_is_searched_once() -> None:  # 2c
    text = _CountingText("x" * 100_000 + "\nmain.c:3:5: error: expected ';'\n")
    text.searched = {}
    assert "main.c:3:5: error: expected ';'" in factkinds.error_lines(text)
    for literal in factkinds._TOOL_ERROR_LITERALS:
        assert text.searched.get(literal, 0) <= 1, (literal, text.searched)


# --------------------------------------------------------------------------- the reference

_REPRODUCERS = [
    "see 1.0.0-0." + "1" * _LONG,
    "see v1." + "1" * _LONG + "-0.1",
    "Python 3." + "9" * _LONG + "-3.1",
    "ratio = hits/self.total; x = a/np.sqrt(n); result = df/df.sum(); speed in km/h.ok",
    "see prisma/schema.prisma and docs/index.mdx, ~/np.sqrt",
    r"$\sum_{i} w_i\cdot\log p_i$ and $x_i\cdot\sigma$, pattern ab\w+\d+, src\app\models",
    "Book the room for 2024-05-20 10:00-11:30; shift 2024-05-20T09:00-17:00",
    "at 2014-12-22T03:12:58.019077+00:00, 2024-05-20T10:00Z, 2018-03-25 15:27:29,744",
    "The fee is $3,50, raised $1,2345, $375, $500, $1,250.50, $12,3456, $1,234,5",
    "---------- 2024-01-02 12:00:01 deploy of v2.3.1 failed ----------\n"
    "---------- server on localhost:8080 ----------\n"
    "---------- coverage: platform linux, python 3.11.4-final-0 ---\n"
    "drwxr-xr-x 3 root root 4096 May  6  2025 tests\n",
    "Python 3.12-3.8, numpy 1.27.0-1.26.0, 1.0.0-0.3.7, 1.0.0-0.3..7, v2.0-1.5)",
]


@pytest.mark.parametrize("text", _REPRODUCERS)
@pytest.mark.parametrize("role", ["user", "tool", "assistant"])
def test_the_reference_states_the_review_rules_alike(text: str, role: str) -> None:
    message: dict[str, Any] = {"role": role, "content": text}
    if role == "tool":
        message["tool_call_id"] = "c"
    assert extract_facts([message]) == reference.extract_facts([message])


_PIECES = st.sampled_from(
    (
        "$", "1", "0", "12", "345", "007", ",", ".", "-", ":", "T", " ", "Z", "+", "\n",
        "2024-05-20", " 10:00", ":59", ".123", ",744", "+00:00", "-0500", "drwxr-xr-x",
        "-rw-r--r--", "----------", " 1 ", " root", "v1.0.0", "1.0.0", "Python ", "3.12",
        "/", "np.sqrt", "self.total", "docs", "x", "\\", "cdot", "w+", "src", "app.py",
        "\tab",
    )
)  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(st.lists(_PIECES, max_size=30).map("".join), st.sampled_from(("user", "tool")))
def test_the_reference_agrees_on_generated_texts(text: str, role: str) -> None:
    message: dict[str, Any] = {"role": role, "content": text}
    if role == "tool":
        message["tool_call_id"] = "c"
    assert extract_facts([message]) == reference.extract_facts([message])
