"""Issue 14: the fast paths of fact extraction and matching answer exactly what the plain
algorithms answer.

The oracle is the extractor as it was before (``helpers/reference_facts``, verbatim
copies); generated texts mix every fact kind's shapes, unicode, texts without newlines,
texts naming the same facts thousands of times, and long texts (the per-text shortcuts
start at a few KB, lowered here so small examples exercise them too). Speed is measured
in ``bench/pathological_bench.py``, never asserted here.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from helpers.reference_facts import factpaths as reference_paths
from helpers.reference_facts import facts as reference
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxledger.compressor import (
    factbounds,
    factcodes,
    factkinds,
    factmatch,
    factnormal,
    factpaths,
    facts,
    factscan,
    factsentences,
)
from ctxledger.compressor.factmatch import JOIN, Haystack, JoinedHaystack
from ctxledger.compressor.factpathrules import cut_name

_FRAGMENTS = (
    "src/app.py", "/tmp/x.log", "./a/b.txt", "../up/c.rs", "~/h/.bashrc", "and/or", "s/a/b/",
    "https://example.com/x?y=1", "http://w3.org/2000/svg", "port 8080", "localhost:5432",
    "line 42", "lines 3-7", "v1.2.3", "1.2.3-rc1", "3 failed", "2 passed in 0.1s", "12 files",
    "$12.50", "2024-01-02", "Django 3.2", "exit code 2", "exited with 0", "<returncode>1</returncode>",
    "Traceback (most recent call last):\n  File \"x.py\", line 3, in f\nValueError: bad",
    "ValueError: boom", "KeyError", "error: no such thing", "fatal: not a git repo",
    "cat: x: No such file or directory", "bash: line 1: foo: command not found",
    "E   assert total == expected", "E   TypeError: nope", "FAILED (failures=2)", "Ran 5 tests", "OK (skipped=1)",
    "All tests passed!", "result: 5", "f(1) returned 3", "expected 1 but got 2", "✓ done",
    "Do not change the public API.", "You must keep python 3.8 support", "never touch x.py.",
    "I'll use json instead of yaml.", "The fix is to retry.", "Maybe the issue is x?",
    "`my_func()`", "`a b c`", "\"quoted value\"", "'it is'", "$ ls -la", "def foo_bar(x):",
    "class Foo:", "myVariableName", "snake_case_name", "self.log", "Makefile", "x.tar.gz",
    "sed -i 's/old/new/g' f.py", "```py\nx = 'a'\n```", "/settings/img/a.svg", "site-packages/x.py",
    "é", "Ünïcödé ß", "\u2018curly\u2019", "\u201cdq\u201d", "İstanbul", "ſ", "K", "٣", "x\u0301",
    "C:\\dir\\f.py", "a\x00b", "\u00a0", "\u2003",
    # session 29's shapes: Windows paths, second suffixes, dotfiles, build errors, versions
    ".\\scripts\\run.ps1", "D:/data/x.csv", "..\\up\\x.txt", "%C:\\x", "config.yaml.j2",
    "run.log.1", "x.d.ts", "Dockerfile.dev", "the Makefile.", ".env", ".env.local", "x.env",
    ".github/workflows/ci.yml", ".ssh/config", "config/.env", ".filter(", ".NET", "...",
    "make: *** [all] Error 2", "make[1]: *** No rule.  Stop.", "x.c:3:5: error: boom",
    "Note: error: fine", "gcc: fatal error: none", "v2.0-rc1", "release v2.0-rc1",
    "Python 3.8-compatible", "http://h:80/api/v1",
    # session 30's: relative Windows paths and their look-alikes, semver pre-releases
    "src\\app.py", "src\\\\app.py", "lib\\x\\models", "x.\\y.py", "a.py\\nb.py",
    "\\d+\\.\\d+", "2\\theta\\sin", "config\\.yaml", "1.0.0-0.3.7", "v2.0.0-rc.1+build.5",
    "1.0.0-alpha.1", "3.8-3.12",
)  # fmt: skip
_SEPARATORS = (" ", " ", "\n", "", ". ", "\t", "  ", ", ", "\r\n", ": ")


@st.composite
def _texts(draw: st.DrawFn, *, max_repeat: int = 400) -> str:
    """A text of fact-shaped fragments; sometimes one chunk repeated into a long text."""
    parts = draw(
        st.lists(
            st.one_of(st.sampled_from(_FRAGMENTS), st.text(max_size=12)), min_size=0, max_size=14
        )
    )
    seps = draw(st.lists(st.sampled_from(_SEPARATORS), min_size=len(parts), max_size=len(parts)))
    chunk = "".join(p + s for p, s in zip(parts, seps, strict=True))
    if draw(st.booleans()):
        chunk = chunk.replace("\n", " ")  # no newline at all
    repeat = draw(st.sampled_from((1, 1, 1, 2, 7, max_repeat)))
    return chunk * repeat


@st.composite
def _messages(draw: st.DrawFn) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for _ in range(draw(st.integers(1, 3))):
        role = draw(st.sampled_from(("user", "assistant", "tool")))
        message: dict[str, Any] = {"role": role, "content": draw(_texts())}
        if role == "assistant" and draw(st.booleans()):
            message["tool_calls"] = [draw(_calls())]
        out.append(message)
    return out


@st.composite
def _calls(draw: st.DrawFn) -> dict[str, Any]:
    text = draw(_texts(max_repeat=60))
    name, args = draw(
        st.sampled_from(
            (
                ("bash", {"command": text}),
                ("str_replace_based_edit_tool", {"command": "str_replace", "path": "a.py",
                                                 "old_str": "x", "new_str": text}),
                ("write_file", {"path": "/tmp/w.py", "content": text}),
                ("search", {"query": text[:60], "limit": 3}),
                ("bash", text),  # not JSON
            )
        )
    )  # fmt: skip
    arguments = args if isinstance(args, str) else json.dumps(args)
    return {"id": "c1", "type": "function", "function": {"name": name, "arguments": arguments}}


@pytest.fixture
def small_thresholds(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Long-text shortcuts from a few characters on, so generated texts take them."""
    monkeypatch.setattr(factmatch, "LONG_TEXT", 24)
    monkeypatch.setattr(facts, "_ASK_PREFIX", 16)
    monkeypatch.setattr(factscan, "_SMALL", 0)
    yield
    factmatch.LONG_HAYSTACKS.clear()


_SETTINGS = settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@_SETTINGS
@given(_messages())
def test_extraction_equals_the_reference_extractor(
    small_thresholds: None, messages: list[dict[str, Any]]
) -> None:
    ids = [f"m{i}" for i in range(len(messages))]
    assert facts.extract_facts(messages, ids=ids) == reference.extract_facts(messages, ids=ids)


def test_a_long_text_naming_the_same_facts_many_times_equals_the_reference() -> None:
    chunk = "retry src/app.py port 8080 `run_it()` ValueError: x\n3 failed é token "
    text = chunk * 2500 + "Do not touch src/app.py. " + chunk[::-1] * 300
    for role in ("user", "assistant", "tool"):
        for body in (text, text.replace("\n", " ")):
            message = {"role": role, "content": body}
            assert facts.extract_facts([message]) == reference.extract_facts([message])


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(("path", "error", "url")), st.integers(0, 9),
                  st.sampled_from(("a", "b", "c", ""))),
        max_size=30,
    )
)  # fmt: skip
def test_found_keeps_what_a_stable_sort_of_every_repeat_ranks_first(
    adds: list[tuple[str, int, str]],
) -> None:
    found = facts._Found()
    for kind, position, value in adds:
        found.add(kind, position, value)
    every = [(facts._RANK[k], p, k, v) for k, p, v in adds if v]
    every.sort(key=lambda item: (item[0], item[1]))
    first: dict[tuple[str, str], tuple[int, int, str, str]] = {}
    for item in every:
        first.setdefault((item[2], item[3]), item)
    assert found.sorted_items() == [i for i in every if first[(i[2], i[3])] is i]


@settings(max_examples=200, deadline=None)
@given(
    st.text(alphabet="ab \t\n", max_size=60),
    st.lists(st.tuples(st.integers(-3, 64), st.integers(-3, 64)), max_size=20),
)
def test_mask_of_many_spans_equals_blanking_a_char_list(
    text: str, spans: list[tuple[int, int]]
) -> None:
    assert factpaths.mask(text, spans) == reference_paths.mask(text, spans)


@settings(max_examples=150, deadline=None)
@given(st.text(alphabet="ab \t\n\u00a0\u2003x", max_size=400))
def test_ask_reads_a_prefix_and_says_what_the_whole_text_says(text: str) -> None:
    old = facts._ASK_PREFIX
    facts._ASK_PREFIX = 7
    try:
        short = facts._ask(text)
    finally:
        facts._ASK_PREFIX = old
    expected = reference.ask_value(text)  # (session 39: a cut the matcher finds, or none)
    assert short == expected == facts._ask(text)


_NEEDLE_ALPHABET = "ab_ \x00/.\u00e9K\u212a\u017fs1,-"


@_SETTINGS
@given(
    st.lists(st.text(alphabet=_NEEDLE_ALPHABET + "\t\n\u00a0", max_size=40), max_size=5),
    st.lists(
        st.tuples(
            st.sampled_from(("path", "identifier", "number")), st.text(_NEEDLE_ALPHABET, max_size=6)
        ),
        max_size=12,
    ),
)
def test_joined_haystack_answers_what_one_joined_text_answers(
    small_thresholds: None, texts: list[str], checks: list[tuple[str, str]]
) -> None:
    joined = Haystack(JOIN.join(texts))
    for fast in (JoinedHaystack(texts), factmatch.joined_haystack(texts)):
        for kind, raw in checks:
            for needle in (raw, factmatch.normalize(raw), factmatch.normalize_cased(raw)):
                assert fast.holds(kind, needle) == joined.holds(kind, needle), (kind, needle)
                assert fast.holds(kind, needle) == joined.holds(kind, needle)  # remembered


@_SETTINGS
@given(
    st.text(alphabet=_NEEDLE_ALPHABET + "\t\n", min_size=24, max_size=80),
    st.text(alphabet="Zq7" + _NEEDLE_ALPHABET, max_size=6),
    st.data(),
)
def test_a_long_text_answers_what_a_search_answers(
    small_thresholds: None, text: str, tail: str, data: st.DataObject
) -> None:
    """A long text skips the search for a needle holding a character it lacks (asked
    once per character): the answer is the search's, asked first or after others.
    Needles are pieces of the text (a character may occur only near its end) and
    strings of characters it may lack."""
    text += tail
    hay = Haystack(text)
    assert hay._answers is not None  # the long-text path
    pieces = st.tuples(st.integers(0, len(text)), st.integers(1, 6)).map(
        lambda at: text[at[0] : at[0] + at[1]]
    )
    raws = data.draw(st.lists(st.one_of(pieces, st.text("Zq7" + _NEEDLE_ALPHABET, max_size=6))))
    for raw in raws:
        for kind in ("path", "identifier", "number"):
            for needle in (raw, factmatch.normalize(raw), factmatch.normalize_cased(raw)):
                searched = hay.cased if kind in factmatch.CASE_SENSITIVE_KINDS else hay.folded
                expected = factmatch.contains(searched, needle, path=kind == "path")
                assert hay.holds(kind, needle) == expected, (kind, needle)
                assert hay.holds(kind, needle) == expected  # remembered


def test_a_long_text_is_prepared_once_per_process() -> None:
    text = "alpha src/app.py " * (factmatch.LONG_TEXT // 8)
    factmatch.LONG_HAYSTACKS.clear()
    first = JoinedHaystack(["short one", text])
    second = JoinedHaystack([text, "another"])
    assert factmatch.prepared(text) is factmatch.prepared(text)
    assert len(factmatch.LONG_HAYSTACKS) == 1
    for hay in (first, second):
        assert hay.holds("path", "src/app.py")
        assert not hay.holds("path", "src/app.p")
        assert hay.holds("identifier", "alpha")
        assert hay.holds("quoted", "one") == (hay is first)
        # a needle across two texts: the real join decides
        assert hay.holds("quoted", "one\x00alpha") == (hay is first)
    factmatch.LONG_HAYSTACKS.clear()


# --- the prechecks: "no" only when the pattern cannot match --------------------------------

_PRECHECKED = (
    (factkinds._RESULT_LINE, factkinds._RESULT_LITERALS),
    (factsentences._DECISION, factsentences._DECISION_LITERALS),
    (factsentences._CONSTRAINT, factsentences._CONSTRAINT_LITERALS),
)
_LINE_PATTERNS = (
    factkinds._EXCEPTION_LINE, factkinds._ERROR_PREFIX_LINE, factkinds._PYTEST_E_LINE,
    factkinds._SHELL_ERROR, factkinds._TEST_SUMMARY, factkinds._UNITTEST, facts._DOLLAR_LINE,
)  # fmt: skip


@_SETTINGS
@given(_texts(max_repeat=3))
def test_prechecks_never_skip_a_text_the_pattern_matches(small_thresholds: None, text: str) -> None:
    for pattern, literals in _PRECHECKED:
        if pattern.search(text):
            assert factscan.may_match_ignoring_case(text, literals), pattern.pattern
    checked = (
        *zip(factcodes.EXIT_CODES, factcodes.EXIT_LITERALS, strict=True),
        (factkinds._SHELL_ERROR, factkinds._SHELL_ERROR_LITERALS),
        (factkinds._EXCEPTION_LINE, factkinds._EXCEPTION_LINE_LITERALS),
        (factkinds._EXCEPTION_IN_LINE, ("Error", "Exception")),
        (facts._DEFINITION, ("def", "fn", "class", "func")),
        (facts._SNAKE, ("_",)),
        (facts._CAMEL, facts._CAPITALS),
        (facts._QUOTED, ("'", '"')),
    )
    for pattern, literals in checked:
        if pattern.search(text):
            assert factscan.has_any(text, literals), pattern.pattern
    if re.search(r"\d", text):
        assert factscan.may_have_digit(text)
    for line_pattern in _LINE_PATTERNS:
        assert [m.span() for m in factscan.line_matches(line_pattern, text)] == [
            m.span() for m in line_pattern.finditer(text)
        ]


def test_lower_maps_every_ignore_case_twin_of_an_ascii_letter_but_the_odd_three() -> None:
    letter = re.compile(r"(?i)[a-z]")
    for i in range(0x110000):
        c = chr(i)
        if c.isascii() or c in factscan.CASE_ODD or not letter.fullmatch(c):
            continue
        low = c.lower()
        assert len(low) == 1 and low.isascii() and re.fullmatch("(?i)" + low, c), hex(i)


def test_every_decimal_digit_is_seen_in_a_long_text() -> None:
    digit = re.compile(r"\d")
    filler = "é" * 3000
    for i in range(0x80, 0x110000):
        c = chr(i)
        if digit.match(c):
            assert factscan.may_have_digit(filler + c), hex(i)
    assert not factscan.may_have_digit(filler)
    assert not factscan.may_have_digit("\u0100" + filler)
    assert not factscan.may_have_digit("a" * 5000)


def test_the_regex_word_chars_are_the_matchers_word_chars() -> None:
    """``contains`` skips a word run with ``\\W``: it must agree with ``_is_word`` everywhere."""
    non_word = re.compile(r"\W")
    for i in range(0x110000):
        c = chr(i)
        assert bool(non_word.match(c)) != factbounds.is_word(c), hex(i)


_MATCH_ALPHABET = "ab_ .é-1,/:+v0\x00~rc"
#: pieces that put the boundary rules to work: versions, URLs, drives, dots, word runs
_MATCH_PIECES = (
    "v2.0", "2.0", "-rc1", "-beta", "+b", ".1", ",000", "http://h:80", "://", "c:", "/a/b",
    "a.a", "...", "a/", "$5", "aaaa", "\x00",
)  # fmt: skip


@st.composite
def _hay_and_needle(draw: st.DrawFn) -> tuple[str, str]:
    """A haystack of boundary-shaped pieces (sometimes repeated, so a needle occurs many
    times) and a needle: random, or cut from the haystack (so it occurs)."""
    if draw(st.integers(0, 4)) == 0:  # (session 40: a needle ending in a path, then "/")
        words = draw(st.sampled_from(("", "a ", "ab b ", "1 ")))
        needle = words + draw(st.sampled_from(("a/b", "c:/a", "/a", "a/é", "h://a/b")))
        more = draw(st.sampled_from(("/b", "/", "/.", "/_", "//a", "/é", "", "b")))
        return (needle + more + " ") * draw(st.sampled_from((1, 3, 12))), needle
    piece = st.one_of(st.sampled_from(_MATCH_PIECES), st.text(alphabet=_MATCH_ALPHABET, max_size=6))
    hay = "".join(draw(st.lists(piece, max_size=8))) * draw(st.sampled_from((1, 1, 3, 12)))
    if hay and draw(st.booleans()):
        start = draw(st.integers(0, len(hay) - 1))
        needle = hay[start : start + draw(st.integers(1, 6))]
    else:
        needle = draw(st.text(alphabet=_MATCH_ALPHABET, max_size=5))
    return hay, needle


def _plain(hay: str, sub: str, path: bool) -> bool:
    """The rules tried at every position, one occurrence at a time (the definition)."""
    if not sub:
        return False
    for start in range(len(hay) - len(sub) + 1):
        end = start + len(sub)
        if hay[start:end] != sub:
            continue
        before = (
            start == 0 or not factbounds.is_word(sub[0]) or not factbounds.is_word(hay[start - 1])
        )
        after = (
            end == len(hay) or not factbounds.is_word(sub[-1]) or not factbounds.is_word(hay[end])
        )
        # (session 31: a path's boundary is inside_longer_path's alone, a number's
        # continues_number's; session 34: no path beside a non-ASCII cased letter or mark)
        bounded = (
            not factbounds.inside_longer_path(hay, start, end, sub)
            and not cut_name(hay, start, end)
            if path
            else not factbounds.continues_number(hay, start, end, sub)
        )
        # (session 40: words whose last one holds a "/" are not followed by "/" and
        # more of a name: a longer path; review 1: one whole path or URL, no blank, is)
        longer = (
            not path
            and " " in sub
            and factbounds.is_word(sub[-1])
            and "/" in sub.split(" ")[-1]
            and hay[end : end + 1] == "/"
            and factbounds.is_word(hay[end + 1 : end + 2])
        )
        # (session 42: a word character and one "." at the needle's end, a sentence's
        # stop, is not followed by a word character: ``v1.2.`` is not in ``v1.2.x``)
        glued = (
            not path
            and sub[-1] == "."
            and factbounds.is_word(sub[-2:-1])
            and factbounds.is_word(hay[end : end + 1])
        )
        if before and after and bounded and not longer and not glued:
            return True
    return False


@settings(max_examples=600, deadline=None)
@given(_hay_and_needle(), st.booleans())
def test_contains_equals_the_position_by_position_search(
    hay_and_needle: tuple[str, str], path: bool
) -> None:
    """The word-run skip of ``contains`` and the one-regex search it hands over to after
    a few rejected occurrences find what trying every position finds, with the number
    and path boundaries too."""
    haystack, needle = hay_and_needle
    expected = _plain(haystack, needle, path)
    assert factmatch.contains(haystack, needle, path=path) == expected
    assert factbounds.search(haystack, needle, path=path) == expected
    old = factbounds.PLAIN_TRIES
    factbounds.PLAIN_TRIES = 1  # the regex after the first rejected occurrence
    try:
        assert factbounds.contains(haystack, needle, path=path) == expected
    finally:
        factbounds.PLAIN_TRIES = old


def test_a_needle_rejected_at_every_other_position_is_searched_once() -> None:
    """``a.a`` in ``a.a.a…`` (the review of session 28: ~0.8 µs per rejected occurrence
    in Python, 4 s for 10 MB); the answers of the regex search, on a text long enough
    to take it. Speed is measured in the session note, not asserted."""
    for needle, unit, path, found in (
        ("a.a", ".a", True, False),
        ("0.0", ".0", False, False),
        ("a-a", "-a", True, False),
        ("a.a", ".a", False, True),  # not a path: word boundaries only
    ):
        text = needle + unit * 50_000
        assert factmatch.contains(text, needle, path=path) is found
        assert factmatch.contains(text + " " + needle, needle, path=path) is True


def test_other_spaces_are_every_split_char_but_the_space() -> None:
    every = {chr(i) for i in range(0x110000) if chr(i).isspace()}
    assert set(factnormal.OTHER_SPACES) | {" "} == every
    assert len(factnormal.OTHER_SPACES) == len(every) - 1


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="ab \t\n\u00a0\u3000é", max_size=60))
def test_collapsing_skips_only_texts_already_collapsed(text: str) -> None:
    old = factnormal._PIECE
    factnormal._PIECE = 3
    try:
        assert factnormal._collapsed(text) == " ".join(text.split())
    finally:
        factnormal._PIECE = old
