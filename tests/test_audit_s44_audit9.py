"""Session 44 (helper ``audit9``): a parameter before a path with a folder in a pytest
node id's brackets.

pytest joins a parametrized case's parameter ids with ``-`` and writes a string
parameter whole, escaping no ``-``. So ``test_fix[L001-test/fixtures/a.sql]`` (sqlfluff's
rule ``L001`` and the file ``test/fixtures/a.sql``) is written just as one parameter
``L001-test/fixtures/a.sql`` (a folder named ``L001-test``) would be. Main read the
whole for the path: a false fact when the first is meant. Cutting at the ``-`` would be
a false fact when the second is meant (``[test-data/a.sql]``). Both readings share the
path from its second name on, ``fixtures/a.sql``: that is what is stated
(:func:`ctxledger.compressor.factparams.parameter_spans`, and the reference's
``pytest_parameter_dashes``). The error side is a less specific fact, never a false one;
the matcher is unchanged: the view keeps the shared part and the whole as written, and
not ``test/fixtures/a.sql``, which it does not say.

Item 2: a path's second readings (the words after escapes, a tree's branches, pytest
parameter ids, grep's context lines) are made one at a time, cheapest first, and answer
as their join did (:meth:`ctxledger.compressor.factmatch.Haystack.holds`).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from helpers.fact_checks import facts_of, view_keeps
from helpers.reference_facts.pathmasks import pytest_parameter_dashes
from hypothesis import example, given, settings
from hypothesis import strategies as st

from ctxledger.compressor import factmatch
from ctxledger.compressor.factescapes import escape_follows
from ctxledger.compressor.factgrep import grep_follows, tree_follows
from ctxledger.compressor.factmatch import Haystack
from ctxledger.compressor.factparams import parameter_ids, parameter_spans
from ctxledger.compressor.factscan import JOIN

_FIX = "test/cli/commands_test.py::test__cli__command__fix"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # the corpus's shape (sqlfluff-1763)
        (
            f"{_FIX}[L001-test/fixtures/linter/indentation_errors.sql] PASSED",
            ["test/cli/commands_test.py", "fixtures/linter/indentation_errors.sql"],
        ),
        ("tests/x.py::test_a[utf-8-data/a.sql]", ["tests/x.py", "a.sql"]),
        ("tests/x.py::test_a[utf-8-data/in/a.sql]", ["tests/x.py", "in/a.sql"]),
        # a folder's own ``-`` is read alike (pytest writes both alike)
        ("tests/x.py::test_a[test-data/in/a.sql]", ["tests/x.py", "in/a.sql"]),
        ("tests/x.py::test_a[three.js-master/src/a.json]", ["tests/x.py", "src/a.json"]),
        # with parameters after the path too
        ("tests/x.py::T::test_a[L001-t/d/a.sql-v1-False]", ["tests/x.py", "d/a.sql"]),
        ("tests/x.py::test_a[-/a.sql]", ["tests/x.py", "a.sql"]),
        # empty, ``.`` and ``..`` names after the first are blanked with it (``/a.sql``,
        # ``../c.sql`` would be other files, and not written there)
        ("tests/x.py::test_a[utf-8-data//a.sql]", ["tests/x.py", "a.sql"]),
        ("tests/x.py::test_a[a-b//c/d.sql]", ["tests/x.py", "c/d.sql"]),
        ("tests/x.py::test_a[a-b///c.sql]", ["tests/x.py", "c.sql"]),
        ("tests/x.py::test_a[a-b/../c.sql]", ["tests/x.py", "c.sql"]),
        ("tests/x.py::test_a[a-b/.//./x/../c.sql-1]", ["tests/x.py", "x/../c.sql"]),
        ("tests/x.py::test_a[a-b/...x/c.sql]", ["tests/x.py"]),  # (``...x/`` is a name)
        # a first name with no ``-``, a ``-`` only after the first ``/``: as before
        ("tests/x.py::test_a[utf8/a.sql]", ["tests/x.py", "utf8/a.sql"]),
        ("tests/x.py::test_a[t/my-data/a.sql]", ["tests/x.py", "t/my-data/a.sql"]),
        ("tests/x.py::test_a[/abs/my-d/a.sql]", ["tests/x.py", "/abs/my-d/a.sql"]),
        # no folder: a bare name is left whole (no path: ``-v2`` is more of its name)
        ("tests/x.py::test_a[L031-aliases.sql]", ["tests/x.py", "L031-aliases.sql"]),
        # no node id, a blank inside, a NUL inside: no parameter ids, as on main
        ("see [utf-8-data/a.sql]", ["utf-8-data/a.sql"]),
        ("tests/x.py::test_a[utf-8-data/a.sql x]", ["tests/x.py", "utf-8-data/a.sql"]),
        ("tests/x.py::test_a[b\x00utf-8-data/a.sql]", ["tests/x.py", "utf-8-data/a.sql"]),
        ("x.txt::test_a[utf-8-data/a.sql]", ["x.txt", "utf-8-data/a.sql"]),
    ],
)
def test_a_first_name_with_a_dash_in_a_parameter_id(text: str, expected: list[str]) -> None:
    assert facts_of(text, "path") == expected


_L001 = f"{_FIX}[L001-test/fixtures/linter/indentation_errors.sql] PASSED"


@pytest.mark.parametrize(
    ("value", "view", "kept"),
    [
        ("fixtures/linter/indentation_errors.sql", _L001, True),
        ("linter/indentation_errors.sql", _L001, True),
        ("L001-test/fixtures/linter/indentation_errors.sql", _L001, True),
        # not written which: ``test/`` may be the end of a folder's name ``L001-test``
        ("test/fixtures/linter/indentation_errors.sql", _L001, False),
        ("d/a.sql", "tests/x.py::test_a[L001-t/d/a.sql-v1]", True),
        ("t/d/a.sql", "tests/x.py::test_a[L001-t/d/a.sql-v1]", False),
    ],
)
def test_a_view_with_a_parameter_before_the_path(value: str, view: str, kept: bool) -> None:
    assert view_keeps("path", value, view) is kept


def test_the_first_name_is_blanked_for_paths_only() -> None:
    text = "a.py::t[utf-8-x/b.sql-1] a.py::t[k-y/c.sql]"
    spans = parameter_spans(text)
    assert [text[s:e] for s, e in spans] == ["utf-8-x/", "-", "k-y/"]
    assert spans == pytest_parameter_dashes(text)
    # the matcher's second reading blanks the separators only; a bracket without one
    # is not read twice
    assert parameter_ids(text) == ["utf-8-x/b.sql 1"]


_NAME = st.text("abcxyz019_", min_size=1, max_size=6)
#: a folder: a name, or an empty, ``.`` or ``..`` one (blanked with the first name when
#: it comes right after it: ``[utf-8-data//a.sql]`` states ``a.sql``)
_FOLDER = st.one_of(_NAME, st.sampled_from(["", ".", ".."]))
_FIRST = st.sampled_from(["utf-8", "L001", "a-b", "-", "x.sql-1", "test-data", "1-2-3"])
_EXTENSION = st.sampled_from([".sql", ".py", ".json", ".yaml.j2", ".tar.gz"])
_AFTER = st.lists(st.sampled_from(["autodetect", "False", "1", "-1", "a-b"]), max_size=2)


@settings(max_examples=200, deadline=None)
@given(
    _FIRST,
    _NAME,
    st.lists(_FOLDER, max_size=3),
    _NAME,
    _EXTENSION,
    _AFTER,
    st.booleans(),
)
@example("L001", "test", ["fixtures", "linter"], "indentation_errors", ".sql", [], False)
@example("utf-8", "data", [], "a", ".sql", ["1"], True)
@example("utf-8", "data", [""], "a", ".sql", [], False)
@example("a-b", "b", ["..", "", "x", ".."], "c", ".sql", ["1"], False)
def test_a_path_after_a_dash_in_its_first_name_is_stated_from_its_second(
    first: str,
    head: str,
    folders: list[str],
    name: str,
    extension: str,
    after: list[str],
    in_class: bool,
) -> None:
    """Property: a path in a node id's brackets whose first name holds a ``-`` (a
    parameter glued on, or the folder's own) is stated from its second name on (past
    empty, ``.`` and ``..`` names), found in its own line; neither the whole nor the
    path after the ``-`` is stated, and the view keeps the shared part and the whole but
    not the path after the ``-``."""
    names = [*folders, name]
    shared = "/".join(names) + extension
    lead = next(at for at, folder in enumerate(names) if folder not in ("", ".", ".."))
    stated = "/".join(names[lead:]) + extension
    cut = f"{head}/{shared}"
    whole = f"{first}-{cut}"
    node = "tests/test_x.py::" + ("TestX::" if in_class else "") + "test_y"
    line = f"{node}[{'-'.join([whole, *after])}] PASSED\n"
    paths = facts_of(line, "path")
    assert stated in paths
    assert whole not in paths and cut not in paths and f"/{stated}" not in paths
    assert view_keeps("path", stated, line)
    assert not view_keeps("path", cut, line)
    if not after:
        assert view_keeps("path", whole, line)


# Item 2: a path's second readings are made one at a time, cheapest first, and answer
# as their join did (a path glued to its parameters in 3 MB of ids no longer reads
# grep's separators over the whole text once the parameter ids have found it), and
# none is made for a needle with an ASCII letter or digit the text lacks.

_SOUP = [
    "a.py::t[",
    "x/a.sql",
    "-",
    "1",
    "]",
    " ",
    "\n",
    "\\n",
    '"',
    "src/x.py",
    "-12-",
    ":",
    "|--",
    "`--",
    "setup.py",
    "__init__.py",
    "README.md",
    "d/",
    "é",
    "\u0301",
    "\x00",
    "\\",
    "n",
    "q",
    "\u0303",
]
_NEEDLES = ["x/a.sql", "a.sql", "setup.py", "src/x.py", "__init__.py", "x.py", "d/a.sql"]
_NEEDLES += ["nq.py", "d/nq.sql", "\u00f1q.py", "n/a.sql"]


def _joined_answer(text: str, needle: str, windows: bool) -> bool:
    """What main answered: the first reading, then every second reading joined (built
    here as main built it, in its order, not from production's ``_FOLLOWS``)."""
    if Haystack(text)._holds_fact("path", needle, windows):
        return True
    read = [
        *(escape_follows(text) or []),
        *(grep_follows(text) or []),
        *(tree_follows(text) or []),
        *(parameter_ids(text) or []),
    ]
    return bool(read) and Haystack(JOIN.join(read))._holds_fact("path", needle, windows)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(_SOUP), max_size=30), st.booleans())
@example(["a.py::t[", "x/a.sql", "-", "1", "]"], False)
@example(["src/x.py", "-12-", "setup.py", "\n", "src/x.py", ":", "1"], False)
@example(["|--", "__init__.py"], False)
@example(['"', "d/", "\\n", "setup.py", '"'], False)
@example(['"', "\\n", "\u0303", "q.py", '"'], False)
def test_the_second_readings_one_at_a_time_answer_as_their_join(
    pieces: list[str], windows: bool
) -> None:
    text = "".join(pieces)
    for needle in _NEEDLES:
        fresh = Haystack(text)
        assert fresh.holds("path", needle, windows) is _joined_answer(text, needle, windows)


def test_a_path_found_in_parameter_ids_reads_no_grep_separators() -> None:
    text = "a.py::t[x/a.sql-1] " * 2_000
    hay = Haystack(text)
    assert hay.holds("path", "x/a.sql")
    assert len(hay._follows) == 3  # (the escapes, the tree's branches, the ids)
    # a needle with a letter the text lacks is in no reading: none more is made
    assert not hay.holds("path", "nothere/q.sql")
    assert len(hay._follows) == 3
    assert not hay.holds("path", "a/x.sql")  # (its letters are all there: grep is read)
    assert len(hay._follows) == 4


# Session 45 (audit10, item 3): the joined second readings (asked by a needle that may
# span texts: empty, or with edge blanks) reuse the readings already read one at a
# time. Their join is still every reading's pieces joined in ``_FOLLOWS``' order, and
# no reading is read twice, whatever was asked before.

_SPANNING = ["", " a.sql", "x.py "]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from(_SOUP), max_size=30),
    st.lists(st.sampled_from(_NEEDLES + _SPANNING), max_size=4),
)
@example(["a.py::t[", "x/a.sql", "-", "1", "]", "src/x.py", "-12-", "|--", "x.py"], ["a/x.sql"])
@example(["\\n", "|--", "setup.py"], ["setup.py", ""])
def test_the_joined_second_readings_read_each_reading_once(
    pieces: list[str], asked: list[str]
) -> None:
    text = "".join(pieces)
    expected = JOIN.join([p for follows in factmatch._FOLLOWS for p in follows(text) or []])
    calls: list[str] = []

    def counted(follows: Callable[[str], list[str] | None]) -> Callable[[str], list[str] | None]:
        def read(text: str) -> list[str] | None:
            calls.append(follows.__name__)
            return follows(text)

        return read

    real = factmatch._FOLLOWS
    factmatch._FOLLOWS = tuple(counted(follows) for follows in real)
    try:
        hay = Haystack(text)
        for needle in asked:
            hay.holds("path", needle)
        assert hay._follows_joined().text == expected
        hay.holds("path", "")
    finally:
        factmatch._FOLLOWS = real
    assert len(calls) == len(set(calls)) <= len(real)
