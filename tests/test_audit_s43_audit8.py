"""Session 43 (helper ``audit8``): the audit's path facts beside a combining mark and in
device soup with ``$`` and letters outside ASCII, production and reference alike.

A combining mark is part of the character before it (one grapheme on screen). Before a
Windows anchor (``.\\``, ``..\\``, ``~\\``, a drive) the reference read the mark as a
name's letter, so ``\\\\srv\\share\\`` + U+0301 + ``.\\app.py`` gave ``app.py`` there and
``.\\app.py`` in production. The mark sits on a backslash or a blank: nothing of a name
is glued on, so the path a reader sees is ``.\\app.py``. The reference now judges a mark
before a Windows path by its base, as production does (a letter or a path character
as base is still a cut: ``a`` + U+0301 + ``.\\app.py`` is one relative path).

A UNC or device path whose first name starts with a letter outside ASCII
(``\\\\\\\\.\\\\éa…``) is no path in either, but the reference grew a candidate over it
(and over ``$``) and so swallowed a device path after it (``$\\\\.\\a``), which
production reads. A server's name is ASCII: the reference now starts no candidate
there, and the device-soup property draws ``$`` and such letters too.
"""

from __future__ import annotations

from typing import Any

import pytest
from helpers.fact_checks import facts_of
from helpers.fact_checks import view_keeps as _kept
from helpers.reference_facts import facts as reference
from hypothesis import example, given, settings
from hypothesis import strategies as st

from ctxledger.compressor.facts import extract_facts

ACUTE = "\u0301"


def _paths(extract: Any, text: str) -> list[str]:
    return [f.value for f in extract([{"role": "user", "content": text}]) if f.kind == "path"]


# --------------------------------------------------------------------------- a mark


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # the mark sits on a backslash or a blank: the relative path after it is whole
        (f"see  \\\\srv\\share\\{ACUTE}.\\app.py  now", [".\\app.py"]),
        (f"see  \\\\srv\\share\\{ACUTE}..\\app.py  now", ["..\\app.py"]),
        (f"see  {ACUTE}.\\app.py  now", [".\\app.py"]),
        (f"see  {ACUTE}..\\app.py  now", ["..\\app.py"]),
        (f"see {ACUTE}~\\app.py now", ["~\\app.py"]),
        (f"see ({ACUTE}C:\\dir\\app.py) now", ["C:\\dir\\app.py"]),
        (f"see \\{ACUTE}.\\app.py now", [".\\app.py"]),
        ("see \u00b4.\\app.py now", [".\\app.py"]),  # (a spacing acute: no mark)
        # on a letter or a path character the mark is part of a name: a cut, or one path
        (f"see a{ACUTE}.\\app.py now", [f"a{ACUTE}.\\app.py"]),
        (f"see \u00e9{ACUTE}.\\app.py now", [f"\u00e9{ACUTE}.\\app.py"]),
        (f"see \u7528{ACUTE}.\\app.py now", ["app.py"]),  # (a caseless letter: a cut)
        (f"see \\\\srv\\share\\{ACUTE}x\\app.py now", ["app.py"]),  # (a name starts with it)
    ],
)
def test_a_mark_before_a_windows_path_is_judged_by_its_base(text: str, expected: list[str]) -> None:
    assert facts_of(text, "path", "user") == expected  # (production is the reference)
    assert all(_kept("path", value, text) for value in expected)


_NAMES = st.lists(
    st.text(alphabet=["a", "x", "0", "_", ".", "\u00e9", ACUTE, "\u0308"], min_size=1, max_size=4),
    min_size=1,
    max_size=3,
)
_BEFORE = st.sampled_from([" ", "", "(", "\\", "a", "\u00e9", "\u7528", ACUTE, ACUTE * 2, "."])
_ROOTS = st.sampled_from(["C:\\", "\\\\srv\\share\\", "", ".\\", "..\\", "~\\", "D:/"])


@settings(max_examples=300, deadline=None)
@given(_NAMES, _BEFORE, _ROOTS)
@example([f"{ACUTE}."], " ", "\\\\srv\\share\\")
@example([f"{ACUTE}.."], " ", "")
@example([ACUTE], ACUTE, ".\\")
def test_marks_around_a_windows_path_agree(names: list[str], before: str, root: str) -> None:
    """Property: marks anywhere around and inside a Windows path's names, production and
    the reference give the same paths, each found in its own text (:func:`facts_of`)."""
    facts_of(f"see {before}{root}{chr(92).join(names)}\\app.py now", "path", "user")


# --------------------------------------------------------------------------- device soup


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # a first name outside ASCII starts no device path, nor swallows the one after ``$``
        ("\\\\\\\\.\\\\\u00e9a\\\\\\\\\\.\\\\$\\\\.\\a", ["\\\\.\\a"]),
        ("see \\\\.\\\u00e9a\\\\\\.\\\\$\\\\.\\a now", ["\\\\.\\a"]),
        ("see \\\\\u00e9a$\\\\srv\\share\\x.txt now", ["\\\\srv\\share\\x.txt"]),
        ("see \\\\.\\\u00e9a\\x.txt now", ["x.txt"]),
        ("see \\\\Jos\u00e9\\share\\x.txt now", ["x.txt"]),
        # ``$`` ends a share's name (``c$``) and stands before a path
        ("see \\\\srv\\c$\\x.txt now", ["\\\\srv\\c$\\x.txt"]),
        ("see $\\\\.\\pipe\\x now", ["\\\\.\\pipe\\x"]),
        ("see a$\\\\srv\\x.txt now", ["\\\\srv\\x.txt"]),
    ],
)
def test_a_device_path_after_a_name_outside_ascii(text: str, expected: list[str]) -> None:
    assert _paths(extract_facts, text) == expected
    assert _paths(reference.extract_facts, text) == expected
    assert all(_kept("path", value, text) for value in expected)
