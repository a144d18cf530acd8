"""Session 31: path judgments that were slower than linear in one candidate's length give
the answers of the regexes they replace, now in linear time (timing is never asserted;
a long input here took minutes to hours before).

- ``has_ext``: ``\\.(ext)(\\.(suffix))*$`` was tried from every dot (2 MB of ``.1``: 1 s);
- ``_file_name_dir``: ``[\\w\\-.]*[A-Za-z][\\w\\-.]*`` backtracked over every letter of
  a long directory name (``a`` * 40,000 + ``+/x.zz``: 4 s; quadratic);
- ``factsed.sed_spans``: the sed-expression regex tried every pair of delimiters after each
  quoted ``'s/`` (``'s/`` + 16,000 ``x/``: 3 s; quadratic).
"""

from __future__ import annotations

import re

from helpers.reference_facts import facts as reference_facts
from helpers.reference_facts import pathmasks
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxledger.compressor import factpathrules, factpaths, factsed
from ctxledger.compressor.facts import extract_facts

_OLD_HAS_EXT = re.compile(
    r"\.(?:" + factpathrules.EXTENSIONS + r")(?:\.(?:" + factpathrules.SECOND_SUFFIXES + r"))*$",
    re.IGNORECASE,
)
_OLD_FILE_NAME_DIR = re.compile(r"[\w\-.]*[A-Za-z][\w\-.]*")

_NAMES = st.sampled_from(
    [*factpathrules.EXTENSIONS.split("|"), *factpathrules.SECOND_SUFFIXES.split("|")[:-1],
     "1", "12", "123", "1234", "٣", "PY", "Py", "K", "Kt", "x", "jinja2", "", "\n", "a\n"]
)  # fmt: skip


@settings(max_examples=600, deadline=None)
@given(names=st.lists(_NAMES, max_size=8), newline=st.booleans(), long=st.booleans())
def test_has_ext_is_the_anchored_regex(names: list[str], newline: bool, long: bool) -> None:
    # a long value is read reversed (a short one forward: lowered to 0, every one is)
    value = ".".join(names) + ("\n" if newline else "")
    before = factpathrules._SHORT_VALUE
    factpathrules._SHORT_VALUE = 0 if long else before
    try:
        assert factpathrules.has_ext(value) == (_OLD_HAS_EXT.search(value) is not None)
    finally:
        factpathrules._SHORT_VALUE = before


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet="aZ_-.+/é٣ 1", max_size=20))
def test_file_name_dir_is_the_backtracking_regex(name: str) -> None:
    assert factpathrules._file_name_dir(name) == (_OLD_FILE_NAME_DIR.fullmatch(name) is not None)


_SED_PIECES = st.sampled_from(
    ["'", '"', "s", "/", "|", "#", ",", ":", "@", "x", "g", "1", " ", "\n", "as", "'s/", '"s|']
)


@settings(max_examples=1500, deadline=None)
@given(st.lists(_SED_PIECES, max_size=30).map("".join))
def test_sed_spans_are_the_regex_spans(text: str) -> None:
    expected = [m.span() for m in pathmasks.SED_EXPRESSION.finditer(text)]
    assert factsed.sed_spans(text) == expected


def test_a_long_run_of_second_suffixes_is_judged_once() -> None:
    assert factpathrules.has_ext("a.py" + ".1" * 1_000_000)
    assert not factpathrules.has_ext("a" + ".1" * 1_000_000)
    assert factpaths.plausible_path("/" + "." * 2_000_000 + "x") is None  # one name, no extension
    assert factpaths.plausible_path("s" + ".c" * 1_000_000 + "x") is None


def test_a_long_directory_name_before_a_file_name() -> None:
    name = "ab" * 100_000
    assert factpaths.plausible_path(name + "/schema.prisma") == name + "/schema.prisma"
    assert factpaths.plausible_path(name + "+/schema.prisma") is None
    content = f"see {name}+/schema.prisma and src/app.py"
    message = {"role": "tool", "tool_call_id": "c", "content": content}
    assert [f.value for f in extract_facts([message]) if f.kind == "path"] == ["src/app.py"]


def test_an_unclosed_sed_expression_on_a_long_line() -> None:
    # the line's pieces are one long path; the next line's expression is masked
    text = "'s/" + "x/" * 200_000 + "\n's/a/b/g' src/app.py"
    assert factsed.sed_spans(text) == [(len(text) - 20, len(text) - 11)]
    assert factpaths.find_paths(text) == ["s/" + "x/" * 200_000, "src/app.py"]


class _CountedSearches:
    """A closing regex whose searches are counted (the real one searches)."""

    def __init__(self, pattern: re.Pattern[str], calls: list[int]) -> None:
        self.pattern, self.calls = pattern, calls

    def search(self, text: str, pos: int, endpos: int) -> re.Match[str] | None:
        self.calls.append(pos)
        return self.pattern.search(text, pos, endpos)


def test_a_closing_looked_for_in_vain_is_not_looked_for_again(monkeypatch) -> None:
    # review of session 31: the memo was tested only by speed (the 3 s it saved);
    # 2,000 unclosed starts on a line look for their closing once, not 2,000 times
    calls: list[int] = []
    counted = {key: _CountedSearches(p, calls) for key, p in factsed._SED_CLOSE.items()}
    monkeypatch.setattr(factsed, "_SED_CLOSE", counted)
    line = "'s/a " * 2_000
    assert factsed.sed_spans(line + "\n" + line + "\n's/a/b/g'") == [(20_002, 20_011)]
    assert len(calls) == 3  # once per line (the memo starts again on each line)


def test_a_unc_path_is_not_started_again_inside_the_last_one() -> None:
    # (review fixes) every ``$\\\\a`` inside a grown UNC candidate started a new one grown
    # to the end: quadratic (128 KB: 46 s; this megabyte: most of an hour); now each is
    # grown over once, and production agrees with the reference on what follows a ``$``
    content = "x " + "\\\\a$" * 250_000
    message = {"role": "tool", "tool_call_id": "c", "content": content}
    assert extract_facts([message]) == []
    text = r"x \\srv\share\x.txt$\\srv2\share\y.txt"
    message = {"role": "tool", "tool_call_id": "c", "content": text}
    assert [f.value for f in extract_facts([message])] == ["x.txt", "y.txt"]
    assert extract_facts([message]) == reference_facts.extract_facts([message])
