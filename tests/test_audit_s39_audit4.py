"""Session 39 (helper ``audit4``): the audit's path facts where extraction and matcher
still disagreed.

1. a footnote's superscript digit after a name's dashes or dots (``app.py-²``,
   ``Makefile.² x``): the matcher reads it as a blank, so it finds the name; the
   extraction read it as more of the name and gave none (it could flake
   ``test_audit_s31_truth``'s property, which draws ``app.py``, ``-`` and ``²``).
3. paths mixing backslash runs and slashes (JSON-escaped Windows paths): ``.\\/x.log``
   (``.//x.log``) gave ``.\\/x.log``, whose fact reads ``/x.log`` (lost in its own
   text); a path escaped twice (``src\\\\\\\\app/x.py``) gave its tail ``app/x.py``
   or none, and trailing separators after a JSON-mixed path (``src\\\\a/b.json\\/``)
   left its tail to the POSIX finder: now the file's name the matcher finds, or none,
   as s38 reads a JSON-mixed path.
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Callable
from typing import Any

import pytest
from helpers.fact_checks import one_message as _message
from helpers.reference_facts import facts as reference
from hypothesis import example, given
from hypothesis import strategies as st

from ctxledger.compressor import factasks
from ctxledger.compressor.factasks import ASK_MARGIN
from ctxledger.compressor.factmatch import fact_in_text
from ctxledger.compressor.facts import ASK_MAX_CHARS, extract_facts

ROLES = ("user", "tool", "assistant")


def _paths(text: str, role: str = "tool") -> list[str]:
    return [f.value for f in extract_facts([_message(text, role)]) if f.kind == "path"]


def _agrees_and_holds(text: str) -> None:
    for role in ROLES:
        facts = extract_facts([_message(text, role)])
        assert facts == reference.extract_facts([_message(text, role)]), (text, role)
        for fact in facts:
            assert fact_in_text(fact, text), (text, role, fact)


# --------------------------------------------------------------------------- 1 footnote


@pytest.mark.parametrize(
    ("text", "paths"),
    [
        ("app.py-²-11:30", ["app.py"]),  # (the property's draw, s38-uncref)
        ("see app.py-² now", ["app.py"]),
        ("app.py-²x", ["app.py"]),
        ("app.py.² x", ["app.py"]),
        ("app.py-.² x", ["app.py"]),
        ("app.py.-²", ["app.py"]),
        ("Makefile-² x", ["Makefile"]),
        ("Makefile.² x", ["Makefile"]),
        (".env.² x", [".env"]),
        ("x.log¹ and app.py--³", ["x.log", "app.py"]),
        # as before: more of the name after the dashes or dots
        ("app.py-x", []),
        ("app.py.x", []),
        ("app.py--x", []),
        ("Makefile-x", ["Makefile-x"]),
        (".env-² x", []),  # (a dotfile takes no dash at all, as before)
    ],
)
def test_a_footnote_mark_after_dashes_or_dots_ends_the_name(text: str, paths: list[str]) -> None:
    assert _paths(text) == paths
    _agrees_and_holds(text)


# --------------------------------------------------------------------------- 3 mixed runs


@pytest.mark.parametrize(
    ("text", "paths"),
    [
        # ``.\`` then a separator: ``.//x.log``, whose fact would read ``/x.log``
        (r"see .\/x.log ok", ["x.log"]),
        (r'{"p": ".\\/x.log"}', ["x.log"]),
        (r"x .\.\/Makefile.", ["Makefile"]),
        (r"see .\/src ok", []),
        # escaped twice (four backslashes) beside a slash: the file's name
        (r"see src\\\\app/x.py ok", ["x.py"]),
        (r".\\\\/setup.py", ["setup.py"]),  # (the thorough profile's draw)
        (r"x .\\\\Users//setup.py.", ["setup.py"]),
        (r"C:\\\\Users\\\\me/report.docx", ["report.docx"]),
        # separators last aside: a JSON-mixed path, no tail of it
        (r'see src\\app/config.json\/"', []),
        (r"src\\app//.\"", []),  # (after a dot the escape reads as a separator: as before)
        # as before
        (r"see ..\/a.py ok", [r"..\/a.py"]),
        (r"see src\\\\app\\\\x.py ok", ["x.py"]),
        (r"see src\\a/config.json ok", ["config.json"]),
        (r"see .\\a/b.py ok", [r".\a/b.py"]),
        (r"see src\\app\\x.py ok", [r"src\app\x.py"]),
        (r"see src\\\\app/ ok", ["app/"]),  # (a folder at the end: as ``src\\app/``, s38)
        (r"see \\\\srv/\\\\a\\\\setup.py ok", ["srv/", "setup.py"]),  # (a UNC start's)
    ],
)
def test_a_path_mixing_backslash_runs_and_slashes_gives_what_the_matcher_finds(
    text: str, paths: list[str]
) -> None:
    assert _paths(text) == paths
    _agrees_and_holds(text)


_STARTS = st.sampled_from(("", ".", "..", "~", "C:", "src", "/home", "\\\\srv", "\\\\\\\\srv"))
_SEPARATORS = st.sampled_from(("\\", "\\\\", "\\\\\\\\", "/", "\\/", "\\\\/", "/\\\\", "//"))
_NAMES = st.sampled_from(
    ("src", "a", "me", "x.py", "config.json", "Makefile", "Makefile~", ".env", ".", "..")
)
_ENDS = st.sampled_from((" ok", "", '"', ".", "\n", ",", ":1", "²", "-² x", "\\/", '\\"'))


@given(
    st.tuples(_STARTS, st.lists(st.tuples(_SEPARATORS, _NAMES), min_size=1, max_size=4), _ENDS),
    st.sampled_from(("", "see ", '{"p": "')),
    st.booleans(),
)
@example(("src", [("\\\\", "app"), ("/", "config.json")], "\\/"), "see ", False)
@example((".", [("\\\\\\\\/", "setup.py")], ""), "", False)
@example((".", [("\\/", "x.py")], " ok"), "", True)
def test_mixed_separators_agree_with_the_reference_and_the_matcher(
    parts: tuple[str, list[tuple[str, str]], str], before: str, escaped: bool
) -> None:
    # paths of every backslash run beside slashes, in prose or a JSON line, maybe escaped
    start, pieces, end = parts
    text = before + start + "".join(sep + name for sep, name in pieces) + end
    _agrees_and_holds(json.dumps(text)[1:-1] if escaped else text)


# --------------------------------------------------------------------------- review 1


@pytest.mark.parametrize(
    ("text", "paths"),
    [
        # F4: a known file then ``+``, ``~``, ``@`` is one name to the matcher (a backup)
        ("see Makefile~ ok", []),
        ("see Makefile@x ok", []),
        ("see Makefile+x ok", []),
        ("see Dockerfile.a+b ok", []),
        ("see Dockerfile-dev~ ok", []),
        # as before
        ("see Makefile. ok", ["Makefile"]),
        ("see Makefile-dev ok", ["Makefile-dev"]),
        ("see Makefile~/x.py ok", ["Makefile~/x.py"]),
    ],
)
def test_a_known_file_then_a_backup_mark_is_no_known_file(text: str, paths: list[str]) -> None:
    assert _paths(text) == paths
    _agrees_and_holds(text)


@pytest.mark.parametrize(
    ("text", "paths"),
    [
        # F1: the backslash before a JSON string's closing quote escapes it, no separator
        (r"see src\\app/config.json\" ok", ["config.json"]),  # (as without the quote)
        (r'{"q": "x.py\\n/tmp/log.txt\""}', []),  # (as without it, on main too)
        (r"x .\\a/b.py\" ok", [r".\a/b.py"]),
        (r"C:\\a/b.txt\"", ["b.txt"]),
        (r"src\\app\\x.py\" ok", [r"src\app\x.py"]),
        # F2: a path a JSON string escaped twice, ending at the inner string's end
        (json.dumps(json.dumps({"q": "src\\app/config.json"})), ["config.json"]),
        # as before: an even run before the quote is a separator (a folder's)
        (r'see src\\app/config.json\\" ok', []),
        (r"x src\\app\\\" ok", []),
    ],
)
def test_the_escape_of_a_closing_quote_is_no_separator(text: str, paths: list[str]) -> None:
    assert _paths(text) == paths
    _agrees_and_holds(text)


def _asks(text: str) -> list[str]:
    return [f.value for f in extract_facts([_message(text, "user")]) if f.kind == "ask"]


_WORDS = "word " * 50  # (a blank every 5 characters up to 250)


@pytest.mark.parametrize(
    ("text", "ask"),
    [
        # the cap's cut fell inside a word, which the matcher finds nowhere: none now
        ("a" * 400, None),
        ("see " + "x" * 400, None),  # (not ``see``: any summary saying "see" holds it)
        ("please " + "项目" * 200, None),  # (CJK prose with no punctuation)
        ("x " * 10 + "y" * 390, None),
        ("fix " + "ß" * 400, None),  # (casefolded ``ss``: more of the word after)
        ("fix " + "a" * 295 + "ﬁ" * 20, None),  # (a ligature at the cut)
        ("fixe " + "e\u0301" * 200, None),  # (NFD: the cut between a letter and its accent)
        # the longest cut in the last 40 % the matcher finds
        (_WORDS + "x" * 200, _WORDS.rstrip()),
        (json.dumps({"q": "请" * 200}), json.dumps({"q": "请" * 200})[:296]),  # (at ``\\``)
        ("ab " * 66 + "cafe\u0301 " * 30, ("ab " * 66 + "cafe\u0301 " * 30)[:299].rstrip()),
        # as before: the cut at a blank, or after a ``/``
        # (session 40: ``…/ab`` at 300 goes on as a longer path, ``/ab/…``: after its ``/``)
        ("fix " + "ab/" * 150, ("fix " + "ab/" * 150)[:298]),
        ("word " * 100, ("word " * 60).rstrip()),
    ],
)
def test_a_long_ask_is_cut_where_the_matcher_finds_it(text: str, ask: str | None) -> None:
    assert _asks(text) == ([] if ask is None else [ask])
    _agrees_and_holds(text)


@pytest.mark.parametrize(
    "text",
    [
        _WORDS + "x" * 5000,  # (a long turn: its prefix is read)
        "see " + "x" * 5000,
        "please " + "fix the bug in app.py now " * 1000,
        " " * 3000 + _WORDS + "x" * 400,  # (blanks first: the whole turn is read)
    ],
)
def test_a_long_turn_s_ask_reads_its_prefix_as_the_whole(text: str) -> None:
    # (the reference cuts the whole turn; the extraction reads its first 2,400 characters)
    asks = _asks(text)
    assert asks == ([reference.ask_value(text)] if reference.ask_value(text) else [])
    assert all(fact_in_text(f, text) for f in extract_facts([_message(text, "user")]))


_Q = "q" + "ab" * 100  # (201 characters: a prefix that recurs later at a boundary)


@pytest.mark.parametrize(
    "text",
    [
        # review 2 of audit4 (F2, F3): a cut the matcher finds only where it recurs after
        # the turn's first 2,400 characters (or after an ASCII word run) is no match at
        # the turn's start: no ask, in the code and in the reference (which was the cut)
        "b" * 400 + " " + "x " * 1500 + "b" * 300 + " end",
        "请" * 400 + "。" + "x " * 1500 + "请" * 300 + "。",
        _Q + "cdefg" * 30 + " " + _Q + ". end",
        # the window ends before a char NFKC composes with nothing: cut inside 70 marks
        # (``\u0301`` after them composes with the ``İ``), it took the cut: lost in the turn
        "e\u0301 "
        + "\u3099" * 80
        + "\xb2"
        + "\u3099" * 80
        + "abab -\xdf\u304bworde\u0301x.py"
        + "ab" * 50
        + "\xe9.\u0301\u0327x.py\u0130x.pya\u0130"
        + "\u0316" * 70
        + "\u0301\u0301\u0327\u0301\xdf\xe9"
        + "\u3099" * 47
        + " end",
    ],
)
def test_a_long_turn_s_ask_is_matched_at_its_start(text: str) -> None:
    assert _asks(text) == [] and reference.ask_value(text) == ""


def test_the_ask_window_ends_before_a_char_nfkc_composes_with_nothing() -> None:
    # (the window's normalization is a prefix of the turn's: no char of _STARTER has or
    # maps to a combining mark, and none is the second of a canonical composition pair)
    starters = [chr(c) for c in range(0x30000) if factasks._STARTER.match(chr(c))]
    assert all(
        not any(unicodedata.combining(x) for x in unicodedata.normalize("NFKC", char))
        for char in starters
    )
    seconds = {
        part.split()[1]
        for part in map(unicodedata.decomposition, map(chr, range(0x30000)))
        if part and not part.startswith("<") and len(part.split()) == 2
    }
    assert not {f"{ord(char):04X}" for char in starters} & seconds


def test_a_long_turn_s_ask_cut_reads_a_bounded_prefix(monkeypatch: pytest.MonkeyPatch) -> None:
    # review 2 of audit4 (F1): blanks then a word run: the cut was searched for in the
    # whole turn (~120 scans of it, 18x main at 10 MB); now only in its first characters
    seen: list[int] = []

    def spy(function: Callable[..., Any]) -> Callable[..., Any]:
        def counted(*args: Any) -> Any:
            seen.append(max(len(arg) for arg in args))
            return function(*args)

        return counted

    for name in ("normalize", "matches_at_start", "contains"):  # (what factasks reads)
        if hasattr(factasks, name):
            monkeypatch.setattr(factasks, name, spy(getattr(factasks, name)))
    for text in (" " * 3000 + "请" * 50_000, ("a" + " " * 60 + "\n") * 60 + "请" * 50_000):
        seen.clear()
        assert _asks(text) == []
        assert seen and max(seen) <= ASK_MAX_CHARS + ASK_MARGIN + 1


@pytest.mark.parametrize(
    "text",
    [
        # the fuzz's draws (review 1's generator): ``x.py.\"`` is ``x.py./"`` to the matcher
        r'{"p": "{\"q\": \"setup.py..\"}"}',
        r'{"p": "{\"q\": \"Dockerfile.\"}"}',
        r'{"p": "{\"q\": \"src\\u00b2\\\"setup.py..\"}"}',
        r'{"p": "{\"q\": \"Dockerfileapp.py-..\"}"}',
        r'{"p": "{\"q\": \"~\\u2074.\"}"}',
        # a device path before the escaped quote (the reference read it with the escape)
        r'"\\\\.\\pipe\\name\"',
        r'{"p": "{\"q\": \"\\\\.\\uff3ca\\uff0f~data\"}"}',
    ],
)
def test_an_escaped_quote_after_dots_or_a_device_path(text: str) -> None:
    _agrees_and_holds(text)
