"""Session 40 (helper ``audit5``): audit verdicts checked against the post-compaction view.

A quoted value's normalized form dropped every quote at its ends, its own ones too:
``order.product_id = ""`` (a backtick span in the corpus) was ``order.product_id =``,
which any assignment states (``order.product_id = 5``), and ``sku="foo"`` was
``sku="foo``, stated by ``sku="foobar"``. The audit called those facts kept when the
view had lost the value. Now only one pair of quotes around the whole value goes
(``'other'`` is still ``other``).

A fact that is no path but ends with one (``Unable to load file src/project``, a
command ``cd /testbed``) was found where a ``/`` and more of a name follow it
(``Unable to load file src/project/__init__.py``: in the corpus, the very message the
quote was contrasted with). That is a longer path, another one: no match now, for
every kind but a path (a directory is still stated by a file under it).

A script's ``Error:`` label before the exception line it printed (``Error: ImportError:
Unable to find module …``) was part of the error fact, so a summary stating the
exception line (``ImportError: Unable to find module …``) was told it lost it. The
fact is now the exception line; other labels and messages keep their line.
"""

from __future__ import annotations

from typing import Any

import pytest
from helpers.reference_facts import facts as reference
from hypothesis import example, given, settings
from hypothesis import strategies as st

from ctxledger.compressor import factbounds
from ctxledger.compressor.factmatch import Haystack, fact_in_text, normalize_fact, retention
from ctxledger.compressor.facts import Fact, extract_facts


def _quoted(text: str) -> list[Fact]:
    message: dict[str, Any] = {"role": "assistant", "content": text}
    return [f for f in extract_facts([message]) if f.kind == "quoted"]


def _kept(fact: Fact, view: str) -> bool:
    kept, _ = retention([fact], view)
    return kept == [fact]


@pytest.mark.parametrize(
    ("span", "normalized", "other_value", "same_value"),
    [
        (
            'order.product_id = ""',
            'order.product_id = ""',
            "Before save: order.product_id = 7",
            'the test sets order.product_id = "" first',
        ),
        ('sku=""', 'sku=""', 'Product(sku="bar")', 'a product with sku="" is deferred'),
        ('sku="foo"', 'sku="foo"', 'Product(sku="foobar")', 'Product(sku="foo")'),
        ('x = "a"', 'x = "a"', 'x = "a b"', 'we set x = "a" here'),
        ("name == ''", "name == ''", "name == 'x'", "if name == '': return"),
    ],
)
def test_a_quote_that_ends_a_value_is_part_of_it(
    span: str, normalized: str, other_value: str, same_value: str
) -> None:
    (fact,) = _quoted(f"The fix: `{span}` now.")
    assert fact.value == span
    assert fact.normalized == normalized
    assert not _kept(fact, other_value)  # main: kept (the value was cut off)
    assert _kept(fact, same_value)
    assert fact_in_text(fact, f"The fix: `{span}` now.")


@pytest.mark.parametrize(
    ("value", "normalized"),
    [
        ("'other'", "other"),  # one pair around the whole value goes, as before
        ('"src.project"', "src.project"),
        ('"a" or "b"', 'a" or "b'),
        ("`x`", "x"),
        ('""', ""),
        (" 'a b' ", "a b"),
        # review 1: equal runs of one quote character go (main: every quote went)
        ('"""Return the value."""', "return the value."),
        ("'''doc'''", "doc"),
        ("``x = 1``", "x = 1"),
        ('""""""', ""),
        ('"""doc"', '""doc'),  # unequal runs: one pair
        ('"" or ""', '" or "'),  # two quotes are an empty string, no delimiter
        ("\"'foo bar'\"", "'foo bar'"),  # another character inside: its own
    ],
)
def test_the_pair_around_a_value_still_goes(value: str, normalized: str) -> None:
    assert normalize_fact("quoted", value) == normalized


def test_a_docstring_in_a_code_span_is_kept_by_its_text_in_one_pair_of_quotes() -> None:
    """Review 1: ``\"\"\"Return the value.\"\"\"`` lost one pair of its three: a summary
    stating ``"Return the value."`` no longer kept it (main did)."""
    (fact,) = _quoted('The fix: `"""Return the value."""` now.')
    assert _kept(fact, 'the docstring "Return the value." stays')
    assert not _kept(fact, 'the docstring "Return the value of x." stays')


_NAMES = st.from_regex(r"[a-z][a-z_]{0,8}", fullmatch=True)
_WORDS = st.from_regex(r"[a-z0-9]{1,6}", fullmatch=True)


@given(name=_NAMES, quote=st.sampled_from(['"', "'"]), word=_WORDS, other=_WORDS)
def test_an_assigned_string_is_kept_only_by_that_string(
    name: str, quote: str, word: str, other: str
) -> None:
    """`name = "word"` and `name = ""` are kept by a view holding that assignment, and
    not by one assigning another string (a longer one, or the empty one)."""
    for value in (word, ""):
        span = f"{name} = {quote}{value}{quote}"
        (fact,) = [f for f in _quoted(f"Then `{span}` holds.") if f.value == span]
        assert _kept(fact, f"so {span} holds")
        for different in {other, value + other, ""} - {value}:
            assert not _kept(fact, f"so {name} = {quote}{different}{quote} holds")


_CONTRAST = (
    'The error would be "Unable to load file src/project", '
    'not "Unable to load file src/project/__init__.py".'
)


def test_a_quote_ending_in_a_path_is_not_kept_by_a_longer_path() -> None:
    facts = _quoted(_CONTRAST)
    short = next(f for f in facts if f.value == "Unable to load file src/project")
    assert fact_in_text(short, _CONTRAST)
    view = "Summary: the loader said unable to load file src/project/__init__.py (exit 1)."
    assert not _kept(short, view)  # main: kept
    assert _kept(short, "the loader said: unable to load file src/project.")
    assert _kept(short, 'said "unable to load file src/project"')


@pytest.mark.parametrize(
    ("kind", "needle", "text", "held"),
    [
        ("quoted", "load file src/project", "can load file src/project/__init__.py", False),
        ("command", "cd /testbed", "ran cd /testbed/django && ls", False),
        ("command", "cd /testbed", "ran cd /testbed && ls", True),
        ("command", "ls src/app", "ran ls src/app/ then", True),  # a "/" alone ends it
        ("command", "ls src/app", "ran ls src/app.py", True),  # (a word boundary, as before)
        ("error", "no such file: /tmp/a", "no such file: /tmp/a/b.txt", False),
        ("quoted", "see https://h.io/a", "see https://h.io/a/b", False),  # words, then a URL
        ("quoted", "other", "see other/x.py", True),  # no "/" in its last word
        ("path", "src/project", "see src/project/__init__.py", True),  # a directory: kept
        # review 1 (lead's decision): one whole path or URL follows the path rule
        ("quoted", "src/project", "see src/project/__init__.py", True),
        ("url", "https://h.io/a", "see https://h.io/a/b", True),
        ("url", "https://github.com/org/repo", "https://github.com/org/repo/pull/5", True),
        ("url", "https://h.io/docs/", "see https://h.io/docs/intro", True),
        ("url", "https://h.io/docs", "see https://h.io/docs/intro", True),
        ("url", "https://h.io/docs", "see https://h.io/docsite", False),
    ],
)
def test_more_of_a_path_after_a_fact_ending_in_one(
    kind: str, needle: str, text: str, held: bool
) -> None:
    assert Haystack(text).holds(kind, needle) is held
    path = kind == "path"
    assert factbounds.search(text, needle, path=path) is held  # the one-regex form agrees


@pytest.mark.parametrize("quote", ['"', "`"])
def test_a_quoted_whole_path_is_stated_by_a_file_under_it(quote: str) -> None:
    """Review 1: a quoted or backticked value that is one whole path is a directory a
    file under it states (main kept it; the first rule 2 called it lost)."""
    text = f"The package folder {quote}src/project{quote} holds it."
    (fact,) = _quoted(text)
    assert fact.normalized == "src/project"
    assert _kept(fact, "edited src/project/__init__.py")
    assert not _kept(fact, "edited src/projects/__init__.py")


@given(
    words=st.lists(_WORDS, min_size=1, max_size=3),
    parts=st.lists(_WORDS, min_size=1, max_size=3),
    more=_WORDS,
    kind=st.sampled_from(["quoted", "command", "error", "identifier", "url"]),
)
def test_a_longer_path_never_states_a_fact_ending_in_a_path(
    words: list[str], parts: list[str], more: str, kind: str
) -> None:
    needle = " ".join([*words, "src/" + "/".join(parts)])
    text = f"x {needle}/{more} y " * 10  # repeated: the regex form takes over
    assert not Haystack(text).holds(kind, needle)
    assert Haystack(f"x {needle} y").holds(kind, needle)


@pytest.mark.parametrize(
    ("line", "error"),
    [
        (
            "Error: ImportError: Unable to find module for src/project in /testbed,",
            "ImportError: Unable to find module for src/project in /testbed,",
        ),
        ("ERROR:  pkg.mod.BadError: it broke badly", "pkg.mod.BadError: it broke badly"),
        ("error:\tKeyError: 'abc' was missing", "KeyError: 'abc' was missing"),
        ("Error: OperationalError: no such table: t", "OperationalError: no such table: t"),
        # review 1: a shell-shaped line (``prog: …: No such file``) loses its label too
        (
            "Error: FileNotFoundError: [Errno 2] No such file or directory: 'data.csv'",
            "FileNotFoundError: [Errno 2] No such file or directory: 'data.csv'",
        ),
        (
            "Error: PermissionError: [Errno 13] Permission denied: '/etc/x'",
            "PermissionError: [Errno 13] Permission denied: '/etc/x'",
        ),
        # review 1: ``Exception`` itself is a name, as ``MyException`` is
        ("Error: Exception: boom went the thing", "Exception: boom went the thing"),
        ("Error: MyException: boom went the thing", "MyException: boom went the thing"),
        ("Error: builtins.Exception: boom went it", "builtins.Exception: boom went it"),
        ("Error: Error: ValueError: x went wrong", None),  # ``Error`` is no exception's name
        # as before: no exception line after the label, another label, no blank
        ("Error: 'NoneType' object is not subscriptable", None),
        ("Error: ValueError happened somewhere here", None),
        ("Error occurred: TypeError: x is not subscriptable", None),
        ("Error:ValueError: no blank after the label", None),
    ],
)
@pytest.mark.parametrize("where", ["alone", "printed"])
def test_a_script_s_error_label_is_no_part_of_the_exception(
    line: str, error: str | None, where: str
) -> None:
    text = line if where == "alone" else f"Running the check...\n{line}\nDone."
    message: dict[str, Any] = {"role": "tool", "tool_call_id": "c", "content": text}
    errors = [f for f in extract_facts([message]) if f.kind == "error"]
    assert [f.value for f in errors] == [error or line.strip()]
    assert [(f.kind, f.value) for f in reference.extract_facts([message])] == [
        (f.kind, f.value) for f in extract_facts([message])
    ]
    assert fact_in_text(errors[0], text)
    if error is not None:  # a summary stating the exception line keeps it (main: lost)
        assert _kept(errors[0], f"- errors: exit code 1 · {error.lower()}")


@pytest.mark.parametrize(
    "line",
    [
        "Error: ImportError: Unable to find module for src/project",
        "Error: FileNotFoundError: [Errno 2] No such file or directory: 'a.csv'",
    ],
)
def test_a_labelled_line_after_a_traceback_gives_one_fact(line: str) -> None:
    """Review 1: the traceback's raised line, read separately, kept the label, so the
    line gave two facts (one the summary's exception line always lost)."""
    text = f'Traceback (most recent call last):\n  File "a.py", line 1, in <module>\n{line}\n'
    message: dict[str, Any] = {"role": "tool", "tool_call_id": "c", "content": text}
    errors = [f.value for f in extract_facts([message]) if f.kind == "error"]
    assert errors == [line.removeprefix("Error: ")]
    assert [(f.kind, f.value) for f in reference.extract_facts([message])] == [
        (f.kind, f.value) for f in extract_facts([message])
    ]


_SEGMENT_RUNS = st.lists(st.from_regex(r"[a-z][a-z0-9_]{0,9}", fullmatch=True), min_size=24)
_FRAMES = (
    "Error: ImportError: cannot load {}",
    "FAILED tests/{}::test_x",
    "ValueError: bad path /{}",
    "$ curl https://example.com/{}",
    "fix {} now",
    "I'll use {} instead of the old one.",
)


@settings(max_examples=150, deadline=None)
@given(segments=_SEGMENT_RUNS, frame=st.sampled_from(_FRAMES))
@example(segments=["abc"] * 60, frame="FAILED tests/{}::test_x")  # (review 1: cut before "/")
@example(segments=["abcdefghij"] * 30, frame=_FRAMES[0])  # (cut inside a name)
def test_a_fact_capped_in_a_long_slash_run_is_found_in_its_own_text(
    segments: list[str], frame: str
) -> None:
    """Review 1: a fact cut with no blank near its end (160 or 200 characters) ended
    before a ``/`` or inside a name, a path its own text goes on with: no match there,
    so a live message was LOST. The cut is now after a ``/`` near the end."""
    text = frame.format("/".join(segments))
    for role in ("tool", "user", "assistant"):
        message: dict[str, Any] = {"role": role, "content": text}
        if role == "tool":
            message["tool_call_id"] = "c"
        for fact in extract_facts([message]):
            assert fact_in_text(fact, text), (role, fact)
        assert extract_facts([message]) == reference.extract_facts([message])
