"""Relative Windows paths (session 30): ``src\\app.py`` is one path fact, as ``C:\\src\\app.py`` is.

Before, a backslash path without a drive, ``.\\``, ``..\\`` or ``~\\`` gave only its last
name (``app.py``): the directory was lost from the fact, and a summary naming only
another ``app.py`` kept it. It is found from a backslash after a name, written once or
doubled (a JSON string's escapes, ``src\\\\app.py``, as tool outputs print it), and
judged path-like: two names or more, each starting with a letter, digit or ``_``,
none but the last a file name, the last a file name with a known extension or three
names of two characters or more. Regex escapes and LaTeX have the same shape
(``\\d+\\.\\d+``, ``x\\in``, ``2\\theta\\sin``, ``config\\.yaml``) and stay no path.
A relative path is kept by its text with single or doubled separators.
"""

from __future__ import annotations

from typing import Any

from helpers.audit_harness import assistant, audit_of, status
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxledger.compressor.factmatch import Haystack, fact_in_text, normalize_fact
from ctxledger.compressor.facts import extract_facts


def _paths(text: str, role: str = "tool") -> list[str]:
    message: dict[str, Any] = {"role": role, "content": text}
    if role == "tool":
        message["tool_call_id"] = "c1"
    return [f.value for f in extract_facts([message]) if f.kind == "path"]


def test_a_relative_windows_path_is_one_path_fact() -> None:
    cases = {
        r"edit src\app.py now": [r"src\app.py"],
        r"see src\project\__init__.py.": [r"src\project\__init__.py"],
        r"built lib\x64\Release\app.dll": [r"lib\x64\Release\app.dll"],
        r"the models live in src\app\models": [r"src\app\models"],
        r"mixed src\app/views.py here": [r"src\app/views.py"],
        r"(scripts\build.ps1)": [r"scripts\build.ps1"],
        # a JSON string's escapes: the path they stand for
        '{"file": "src\\\\app.py", "line": 3}': [r"src\app.py"],
    }
    for text, expected in cases.items():
        for role in ("tool", "assistant", "user"):
            assert _paths(text, role) == expected, (text, role, _paths(text, role))


def test_a_relative_windows_path_in_a_tool_argument_is_a_path() -> None:
    message = {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "read_file", "arguments": '{"path": "src\\\\app.py"}'},
            }
        ],
    }
    assert [(f.kind, f.value) for f in extract_facts([message])] == [("path", r"src\app.py")]


def test_escapes_and_latex_are_no_relative_path() -> None:
    for text in (
        r"match \d+\.\d+ and \w+ then \n",
        r"use \frac{a}{b} and x\in\mathbb{R}",
        r"the term 2\theta\sin is wrong",
        r"grep -E 'config\.yaml' now",
        r"print('one\ntwo')",
        r"a\b is not a path",
        r"word\nword\nword is text",
    ):
        assert _paths(text) == [], (text, _paths(text))
    # an escaped listing is no path through the files it lists (``a.py`` is no directory)
    assert r"a.py\nb.py" not in _paths(r'"a.py\nb.py"')


def test_a_relative_windows_path_is_kept_across_separators_and_escapes() -> None:
    original = assistant(r"The failing module is src\app\views.py (not src\app\models.py).")
    for summary, kept in (
        (r"Fixed src\app\views.py.", True),
        ("Fixed src/app/views.py.", True),
        ('Fixed {"file": "src\\\\app\\\\views.py"}.', True),
        ("Fixed ./src/app/views.py.", True),
        ("Fixed views.py.", False),
        (r"Fixed src\app\views.py.bak.", False),
        (r"Fixed src\web\views.py.", False),
    ):
        audit = audit_of(original, summary)
        assert status(audit, r"src\app\views.py") == ("kept" if kept else "lost"), summary
        assert status(audit, "views.py") == "not extracted"


def test_a_path_from_escaped_text_is_kept_by_the_plain_one() -> None:
    output = '{"stdout": "", "changed": ["src\\\\app.py", "..\\\\lib\\\\x.dll"]}'
    facts = [f for f in extract_facts([{"role": "tool", "tool_call_id": "c", "content": output}])]
    paths = [f for f in facts if f.kind == "path"]
    assert [f.value for f in paths] == [r"src\app.py", r"..\lib\x.dll"]
    for fact in paths:
        assert fact_in_text(fact, output)  # found in its own escaped text
    audit = audit_of(
        assistant(output),
        r"Changed src\app.py and ..\lib\x.dll.",
    )
    assert status(audit, r"src\app.py") == "kept"
    assert status(audit, r"..\lib\x.dll") == "kept"


def test_doubled_separators_keep_only_a_relative_path_of_two_names() -> None:
    hay = Haystack("see src//app.py and //srv//x and build//")
    assert hay.holds("path", normalize_fact("path", "src/app.py"))
    assert not hay.holds("path", normalize_fact("path", "/srv/x"))
    assert not Haystack("see x/src//app.py.bak").holds("path", "src/app.py")


_NAME = st.text(alphabet="abcXYZ_019", min_size=1, max_size=6).filter(lambda s: s[0] != "0")


@settings(max_examples=200, deadline=None)
@given(
    st.lists(_NAME, min_size=1, max_size=3),
    _NAME,
    st.sampled_from(("py", "ps1", "dll", "json", "cs")),
    st.sampled_from(("\\", "\\\\")),
    st.sampled_from(("", ".", ",", " now", ")", '"')),
)
def test_every_relative_windows_path_is_one_fact_found_in_its_own_text(
    dirs: list[str], stem: str, ext: str, sep: str, tail: str
) -> None:
    written = sep.join([*dirs, f"{stem}.{ext}"])
    text = f"see {written}{tail}"
    facts = extract_facts([{"role": "tool", "tool_call_id": "c", "content": text}])
    assert [f.value for f in facts if f.kind == "path"] == [written.replace("\\\\", "\\")]
    for fact in facts:
        assert fact_in_text(fact, text), fact


def test_a_directory_path_is_no_text_with_escaped_newlines() -> None:
    assert _paths(r"src\app\models") == [r"src\app\models"]
    assert _paths("src\\\\tests\\\\unit") == [r"src\tests\unit"]  # doubled: no escape
    for text in (r"word\nword\nword", r"SELECT\nFROM\tWHERE", r"one\rtwo\rthree"):
        assert _paths(text) == [], text
