"""Session 45 (helper ``audit10``): a file's ``-`` in a pytest node id's brackets with a
``/`` after it.

pytest joins a parametrized case's parameter ids with ``-`` and writes a string
parameter whole. So ``tests/x.py::t[a/b.sql-utf-8-data/c.sql]`` may be the file
``a/b.sql`` and then the parameter ``utf-8-data/c.sql``, or one path with a folder
``b.sql-utf-8-data``: the text does not say which. Main stated the whole, a false fact
under the first reading; ``a/b.sql`` would be false under the second. Both share only
the path after the ``/`` that follows the ``-`` (``c.sql``), and that is what is stated
now (:func:`ctxledger.compressor.factparams.parameter_spans`, and the reference's
``pytest_parameter_dashes``), as session 44 did for a bracket's first name. The
matcher reads the same brackets (it blanks only the separators): a view keeps the
shared part and the whole as written, and not ``a/b.sql``.

The same brackets are read where pytest writes a case without its file: a failure's
or error's header line and ``--collect-only``'s ``<Function …>``, each a whole line
that starts and ends at a newline or at the JOIN between a view's texts (the review:
``^``/``$`` saw only newlines, so such a line first or last in a text was read alone but
not joined). A tree's branch at a text's start is read alike (same review).
"""

from __future__ import annotations

import pytest
from helpers.fact_checks import facts_of, view_keeps
from helpers.reference_facts.pathmasks import pytest_parameter_dashes, tree_branches
from hypothesis import example, given, settings
from hypothesis import strategies as st

from ctxledger.compressor import factmatch
from ctxledger.compressor.factgrep import branch_spans
from ctxledger.compressor.factmatch import (
    JOIN,
    Haystack,
    JoinedHaystack,
    joined_haystack,
    normalize_fact,
)
from ctxledger.compressor.factparams import parameter_ids, parameter_spans


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # the brief's shape: only the path after the glued parameter's ``/``
        ("tests/x.py::t[a/b.sql-utf-8-data/c.sql]", ["tests/x.py", "c.sql"]),
        ("tests/x.py::t[a/b.sql-utf-8-data/sub/c.sql]", ["tests/x.py", "sub/c.sql"]),
        ("tests/x.py::T::t[a/b.sql-x/sub/c.sql-1-False]", ["tests/x.py", "sub/c.sql"]),
        # a folder's own ``-`` after a name with an extension is read alike
        ("tests/x.py::t[examples/three.js-master/src/a.json]", ["tests/x.py", "src/a.json"]),
        # two in a row: the path after the last one
        ("tests/x.py::t[a/b.sql-x/c.sql-y/d/e.sql]", ["tests/x.py", "d/e.sql"]),
        # a ``-`` with a ``/`` anywhere after it is no separator (session 46): the folder
        # may be ``b.sql-x.py-u-8``, so ``a/b.sql`` is not stated
        ("tests/x.py::t[a/b.sql-x.py-u-8/e/f.sql]", ["tests/x.py", "e/f.sql"]),
        # with a dashed first name too (session 44), and with empty, ``.``, ``..`` names
        ("tests/x.py::t[u-8/b.sql-x/c/d.sql]", ["tests/x.py", "c/d.sql"]),
        ("tests/x.py::t[a/b.sql-x//./../c/d.sql]", ["tests/x.py", "c/d.sql"]),
        ("tests/x.py::t[a/b.sql-x/]", ["tests/x.py"]),  # (nothing after it)
        # no extension before the ``-``: one path, as before
        ("tests/x.py::t[a/b-x/c.sql]", ["tests/x.py", "a/b-x/c.sql"]),
        ("tests/x.py::t[a/b.txt2-x/c.sql]", ["tests/x.py", "a/b.txt2-x/c.sql"]),
        # no node id, a blank inside: no parameter ids, as before
        ("see [a/b.sql-utf-8-data/c.sql]", ["a/b.sql-utf-8-data/c.sql"]),
        ("tests/x.py::t[a/b.sql-x/c.sql y]", ["tests/x.py", "a/b.sql-x/c.sql"]),
    ],
)
def test_a_file_s_dash_with_a_folder_after_it(text: str, expected: list[str]) -> None:
    assert facts_of(text, "path") == expected


_BRIEF = "tests/x.py::t[a/b.sql-utf-8-data/c.sql] PASSED"


@pytest.mark.parametrize(
    ("value", "view", "kept"),
    [
        ("c.sql", _BRIEF, True),
        ("a/b.sql-utf-8-data/c.sql", _BRIEF, True),  # (as written)
        # not written which: each is false under one of the readings
        ("a/b.sql", _BRIEF, False),
        ("utf-8-data/c.sql", _BRIEF, False),
        ("data/c.sql", _BRIEF, False),
    ],
)
def test_a_view_with_a_file_s_dash_and_a_folder(value: str, view: str, kept: bool) -> None:
    assert view_keeps("path", value, view) is kept


def test_the_spans_blank_each_parameter_up_to_its_shared_path() -> None:
    text = "a.py::t[a/b.sql-x.py-u-8/e.sql-1] a.py::t[u-8/b.sql-x/c.sql]"
    spans = parameter_spans(text)
    # (session 46: the ``-`` after ``b.sql`` has a ``/`` after it too: no separator)
    assert [text[s:e] for s, e in spans] == ["a/b.sql-x.py-u-8/", "-", "u-8/b.sql-x/"]
    assert spans == pytest_parameter_dashes(text)
    # the matcher's second reading blanks the separators only
    assert parameter_ids(text) == ["a/b.sql-x.py-u-8/e.sql 1"]


_NAME = st.text("abcxyz019_", min_size=1, max_size=6)
_FOLDER = st.one_of(_NAME, st.sampled_from(["", ".", ".."]))
_EXTENSION = st.sampled_from([".sql", ".py", ".json", ".yaml.j2", ".tar.gz", ".js"])
#: (not ``-`` alone: the matcher reads ``a.sql--/`` as ending the name, see the note)
_GLUED = st.sampled_from(["utf-8-data", "x", "1", "master", "a-b", "L001-test", "-x"])
_AFTER = st.lists(st.sampled_from(["autodetect", "False", "1", "a-b"]), max_size=2)


#: the lines pytest writes a case's parameters in (item 2: without a file too)
_LINES = st.sampled_from(
    [
        "tests/test_x.py::test_y[{}] PASSED",
        "tests/test_x.py::TestX::test_y[{}] - assert 0",
        "______ test_y[{}] ______",
        "_ TestX.test_y[{}] __",
        "____ ERROR at setup of test_y[{}] ____",
        "    <Function test_y[{}]>",
    ]
)


@settings(max_examples=200, deadline=None)
@given(
    _LINES,
    st.lists(_NAME, min_size=1, max_size=2),
    _NAME,
    _EXTENSION,
    _GLUED,
    st.lists(_FOLDER, max_size=3),
    _NAME,
    _EXTENSION,
    _AFTER,
)
@example("a.py::t[{}]", ["a"], "b", ".sql", "utf-8-data", [], "c", ".sql", [])
@example("___ t[{}] ___", ["examples"], "three", ".js", "master", ["src"], "a", ".json", ["1"])
@example("a.py::t[{}]", ["a"], "b", ".sql", "x", ["", "..", "d"], "c", ".sql", [])
@example("a.py::t[{}]", ["0"], "0", ".sql", "utf-8-data", ["0"], "0", ".sql", [])
def test_a_file_s_dash_before_a_folder_states_only_the_path_after_it(
    form: str,
    folders: list[str],
    file: str,
    extension: str,
    glued: str,
    after_folders: list[str],
    name: str,
    extension2: str,
    after: list[str],
) -> None:
    """Property: in ``[F-G/P]`` of a node id, a failure's or error's header or a
    collected case (``F`` a path with a folder ending with a known
    extension, ``G`` any name, ``P`` a path) only ``P`` is stated, from its first real
    name on, found in its own line; neither ``F``, nor ``G/P``, nor the whole is
    stated. The view keeps ``P`` and the whole as written, not ``F``."""
    first = "/".join([*folders, file]) + extension
    names = [*after_folders, name]
    rest = "/".join(names) + extension2
    lead = next(at for at, folder in enumerate(names) if folder not in ("", ".", ".."))
    stated = "/".join(names[lead:]) + extension2
    whole = f"{first}-{glued}/{rest}"
    line = form.format("-".join([whole, *after])) + "\n"
    paths = facts_of(line, "path")
    assert stated in paths
    # (review) the line read alike as the first or last text of a view's join
    for texts in (["x", line[:-1]], [line[:-1], "y"]):
        assert joined_haystack(texts).holds("path", normalize_fact("path", stated))
    assert not ({first, f"{glued}/{rest}", whole, f"/{stated}"} - {stated}) & set(paths)
    assert view_keeps("path", stated, line)
    assert view_keeps("path", whole, line)
    assert first == stated or not view_keeps("path", first, line)


# Item 2: the lines where pytest writes a case's parameters without its file (a
# failure's or error's header, ``--collect-only``'s ``<Function …>``) are read as a
# node id's brackets: a path glued to the next parameter is stated, and a parameter
# glued before one states the shared part only. Other brackets stay as they were.


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # the corpus's header (sqlfluff-1763): the shared part, as its node id states
        (
            "____ test__cli__command__fix[L001-test/fixtures/linter/indentation_errors.sql] ____",
            ["fixtures/linter/indentation_errors.sql"],
        ),
        # a path glued to the next parameter: stated (main stated no path here)
        ("_____ test_read[data/utf-8.sql-autodetect-False] _____", ["data/utf-8.sql"]),
        ("_ TestX.test_read[data/utf-8.sql-autodetect-False] __", ["data/utf-8.sql"]),
        ("__ ERROR at setup of test_read[data/a.sql-1] __", ["data/a.sql"]),
        ("__ ERROR at teardown of T.test_read[data/a.sql-1] __", ["data/a.sql"]),
        ("    <Function test_read[data/utf-8.sql-autodetect-False]>", ["data/utf-8.sql"]),
        ("____ test_a[a/b.sql-utf-8-data/c.sql] ____", ["c.sql"]),
        # bare names: left whole, as in a node id
        ("____ test_x[a.py-b.py] ____", ["a.py-b.py"]),
        # not such a line: read as before
        ("see test_read[data/a.sql-1] here", []),
        ("x = t[utf-8-data/a.sql]", ["utf-8-data/a.sql"]),
        ("____ test_read[utf-8-data/a.sql] ____ and more", ["utf-8-data/a.sql"]),
        ("____ test_read[utf-8-data/a.sql]____", ["utf-8-data/a.sql"]),
        ("____test_read[utf-8-data/a.sql] ____", ["utf-8-data/a.sql"]),
        ("____ ERROR at test_read[utf-8-data/a.sql] ____", ["utf-8-data/a.sql"]),
        ("<Function test_read[utf-8-data/a.sql]> x", ["utf-8-data/a.sql"]),
        ("<Method test_read[utf-8-data/a.sql]>", ["utf-8-data/a.sql"]),
        # review: one ``\r`` before the line's end is still the line (CRLF output)
        ("____ test_read[utf-8-data/a.sql] ____\r", ["a.sql"]),
        ("____ test_read[utf-8-data/a.sql] ____\r\nE  x", ["a.sql"]),
        ("  <Function test_read[data/a.sql-1]>\r\n", ["data/a.sql"]),
        ("____ test_read[utf-8-data/a.sql] ____\r\r", ["utf-8-data/a.sql"]),
        ("____ test_read[utf-8-data/a.sql] ____ \r", ["utf-8-data/a.sql"]),
    ],
)
def test_a_case_written_without_its_file(text: str, expected: list[str]) -> None:
    assert facts_of(text, "path") == expected


_HEADER = "_____ test_read[data/utf-8.sql-autodetect-False] _____"


@pytest.mark.parametrize(
    ("value", "view", "kept"),
    [
        ("data/utf-8.sql", _HEADER, True),
        ("utf-8.sql", _HEADER, True),
        ("data/utf-8.sql", "see test_read[data/utf-8.sql-autodetect-False] here", False),
        ("data/utf-8", _HEADER, False),  # (a name's piece)
    ],
)
def test_a_view_with_a_case_written_without_its_file(value: str, view: str, kept: bool) -> None:
    assert view_keeps("path", value, view) is kept


def test_the_header_brackets_are_the_references() -> None:
    text = (
        "a.py::t[a/b.sql-1]\n___ t[u-8/a.sql-x] ___\n  <Function t[d/e.py-2]>\n"
        "___ ERROR at setup of T.t[d/a.sql-x/c.py] ___"
    )
    spans = parameter_spans(text)
    assert [text[s:e] for s, e in spans] == ["-", "u-8/", "-", "-", "d/a.sql-x/"]
    assert spans == pytest_parameter_dashes(text)
    assert parameter_ids(text) == ["a/b.sql 1", "u-8/a.sql x", "d/e.py 2"]


# The review of session 45: a case line, and a tree's branch, at a text's start or end
# is a whole line in a view's join too (a JOIN ends a line, as a newline does).

_FUNCTION = "    <Function test_read[data/a.sql-1]>"
_TREE = "|----__init__.py"


@pytest.mark.parametrize(
    ("texts", "value"),
    [
        (["x", _HEADER], "data/utf-8.sql"),
        ([_HEADER, "y"], "data/utf-8.sql"),
        (["x", _HEADER, "y"], "data/utf-8.sql"),
        (["x", _FUNCTION], "data/a.sql"),
        ([_FUNCTION, "y"], "data/a.sql"),
        (["x", "__ ERROR at setup of T.t[u-8/a.sql] __\r"], "a.sql"),
        (["x", _TREE], "__init__.py"),
        ([_TREE, "y"], "__init__.py"),
    ],
)
@pytest.mark.parametrize("long_text", [False, True])
def test_a_line_at_a_text_s_edge_is_read_alike_joined(
    texts: list[str], value: str, long_text: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each text's own facts are kept by a view of the texts joined (short texts: one
    haystack; long ones: a :class:`JoinedHaystack`)."""
    if long_text:
        monkeypatch.setattr(factmatch, "LONG_TEXT", 8)
        monkeypatch.setattr(factmatch, "LONG_HAYSTACKS", factmatch._LongHaystacks())
    assert value in [v for text in texts for v in facts_of(text, "path")]
    needle = normalize_fact("path", value)
    assert Haystack(JOIN.join(texts)).holds("path", needle)
    assert joined_haystack(texts).holds("path", needle)


def test_a_tree_branch_after_a_join_is_the_reference_s() -> None:
    text = f"x\x00{_TREE}\x00  `--a.py\n+--b.py"
    spans = branch_spans(text)
    assert [text[s:e] for s, e in spans] == ["|----", "  `--", "+--"]
    assert spans == tree_branches(text)


_JOINED_PIECES = [
    "____ ",
    " ____",
    "ERROR at setup of ",
    "<Function ",
    ">",
    "t",
    "T.",
    "[",
    "]",
    "data/",
    "a.sql",
    "u-8",
    "-",
    "1",
    "|----",
    "__init__.py",
    "tests/x.py::",
    "src/x.py-12-",
    "\n",
    "\r",
    " ",
    "x",
]
_TEXTS = st.lists(
    st.lists(st.sampled_from(_JOINED_PIECES), max_size=14).map("".join), min_size=1, max_size=4
)


@settings(max_examples=300, deadline=None)
@given(_TEXTS)
@example(["x", _HEADER])
@example([_FUNCTION, "y"])
@example(["x", _TREE])
def test_the_joined_haystack_answers_as_the_joined_text(texts: list[str]) -> None:
    """Property: every text's path facts, and a few paths of the pieces, get the same
    answer from :class:`JoinedHaystack` (long texts apart) as from one haystack of the
    joined text, and each text's facts are kept by it."""
    old, old_hays = factmatch.LONG_TEXT, factmatch.LONG_HAYSTACKS
    factmatch.LONG_TEXT = 8  # every text of 8+ chars takes the long-text path
    factmatch.LONG_HAYSTACKS = factmatch._LongHaystacks()
    try:
        facts = {v for text in texts for v in facts_of(text, "path")}
        whole, fast = Haystack(JOIN.join(texts)), JoinedHaystack(texts)
        for value in [*sorted(facts), "data/a.sql", "a.sql", "__init__.py", "u-8/a.sql"]:
            needle = normalize_fact("path", value)
            assert fast.holds("path", needle) == whole.holds("path", needle), value
            assert value not in facts or whole.holds("path", needle), value
    finally:
        factmatch.LONG_TEXT, factmatch.LONG_HAYSTACKS = old, old_hays
