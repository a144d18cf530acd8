"""Session 46 (helper ``audit11``): a file's ``-`` in pytest's brackets with a ``/``
anywhere after it.

Session 45 read ``[a/b.sql-utf-8-data/c.sql]`` as ambiguous (the file ``a/b.sql`` then a
parameter, or one path with a folder ``b.sql-utf-8-data``) and stated only ``c.sql``. But
it looked for the ``/`` only up to the next ``-`` after a known extension, so in
``[x/a.sql-b.sql-c/d.sql]`` the first ``-`` still read as a separator and ``x/a.sql``
was stated, false if the folder is ``a.sql-b.sql-c`` (pytest writes both alike). Now a
``-`` with a ``/`` anywhere after it in the bracket is no separator; what every reading
shares is the path after the first ``/`` past the last such ``-``.
"""

from __future__ import annotations

import pytest
from helpers.fact_checks import facts_of, view_keeps
from helpers.reference_facts.pathmasks import pytest_parameter_dashes
from hypothesis import example, given, settings
from hypothesis import strategies as st

from ctxledger.compressor.factparams import parameter_ids, parameter_spans


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # the brief's shape: the file before two glued names is not stated
        ("tests/x.py::t[x/a.sql-b.sql-c/d.sql]", ["tests/x.py", "d.sql"]),
        ("____ t[x/a.sql-b.sql-c/d.sql] ____", ["d.sql"]),
        ("    <Function t[x/a.sql-b.py-c.json-e/f/g.sql]>", ["f/g.sql"]),
        ("tests/x.py::t[x/a.sql-b.sql-c/d.sql-1-False]", ["tests/x.py", "d.sql"]),
        # no ``/`` after a later ``-``: that one is still a separator, as before
        ("tests/x.py::t[x/a.sql-b/c.sql-d.sql-1]", ["tests/x.py", "c.sql"]),
        ("tests/x.py::t[x/a.sql-b.sql-1]", ["tests/x.py", "x/a.sql"]),
        ("tests/x.py::t[x/a.sql-1-y/b.sql]", ["tests/x.py", "b.sql"]),
    ],
)
def test_a_file_s_dash_with_a_folder_anywhere_after_it(text: str, expected: list[str]) -> None:
    assert facts_of(text, "path") == expected


_BRIEF = "tests/x.py::t[x/a.sql-b.sql-c/d.sql] PASSED"


@pytest.mark.parametrize(
    ("value", "kept"),
    [
        ("d.sql", True),
        ("x/a.sql-b.sql-c/d.sql", True),  # (as written)
        ("x/a.sql", False),  # (false under the one-path reading)
        ("c/d.sql", False),
        ("b.sql-c/d.sql", False),
    ],
)
def test_a_view_with_the_brief_s_bracket(value: str, kept: bool) -> None:
    assert view_keeps("path", value, _BRIEF) is kept


def test_the_spans_and_ids_of_the_brief_s_bracket() -> None:
    text = "a.py::t[x/a.sql-b.sql-c/d.sql-1]"
    spans = parameter_spans(text)
    assert [text[s:e] for s, e in spans] == ["x/a.sql-b.sql-c/", "-"]
    assert spans == pytest_parameter_dashes(text)
    assert parameter_ids(text) == ["x/a.sql-b.sql-c/d.sql 1"]


_NAME = st.text("abcxyz019_", min_size=1, max_size=5)
_WORD = st.builds(str.__add__, st.sampled_from("abxz"), st.text("abcxyz019_", max_size=4))
_EXTENSION = st.sampled_from([".sql", ".py", ".json", ".tar.gz", ".js"])
_LINES = st.sampled_from(
    [
        "tests/test_x.py::test_y[{}] PASSED",
        "______ test_y[{}] ______",
        "    <Function test_y[{}]>",
    ]
)


@settings(max_examples=200, deadline=None)
@given(
    _LINES,
    _NAME,
    _NAME,
    _EXTENSION,
    # (a glued name of digits alone, ``-12-``, reads as grep's context line number to
    # the matcher, which then keeps ``F``: left, see the note; so each starts a letter)
    st.lists(st.tuples(_WORD, st.sampled_from(["", ".sql", ".py", "-8"])), min_size=1, max_size=4),
    _NAME,
    _NAME,
    _EXTENSION,
)
@example("a.py::t[{}]", "x", "a", ".sql", [("b", ".sql"), ("c", "")], "e", "d", ".sql")
def test_no_file_before_a_later_folder_is_stated(
    form: str,
    folder: str,
    file: str,
    extension: str,
    middle: list[tuple[str, str]],
    folder2: str,
    name: str,
    extension2: str,
) -> None:
    """Property: in ``[F-M1-…-Mk/G/P]`` (``F`` a path with a folder and a known
    extension, each ``M`` a name maybe with an extension) no file before the last
    ``/`` is stated: each ``-`` may be a folder's own. ``G/P`` is stated and kept."""
    first = f"{folder}/{file}{extension}"
    glued = "-".join(n + e for n, e in middle)
    stated = f"{folder2}/{name}{extension2}"
    line = form.format(f"{first}-{glued}/{stated}")
    paths = facts_of(line, "path")
    assert stated in paths
    if first != stated:  # (``[0/0.sql-0/0/0.sql]``: the same value twice)
        assert first not in paths
        assert not view_keeps("path", first, line)
    assert view_keeps("path", stated, line)
