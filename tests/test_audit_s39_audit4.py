"""Session 39 (helper ``audit4``): the audit's path facts where extraction and matcher
still disagreed.

1. a footnote's superscript digit after a name's dashes or dots (``app.py-²``,
   ``Makefile.² x``): the matcher reads it as a blank, so it finds the name; the
   extraction read it as more of the name and gave none (it could flake
   ``test_audit_s31_truth``'s property, which draws ``app.py``, ``-`` and ``²``).
"""

from __future__ import annotations

from typing import Any

import pytest
from helpers.reference_facts import facts as reference

from ctxledger.compressor.factmatch import fact_in_text
from ctxledger.compressor.facts import extract_facts

ROLES = ("user", "tool", "assistant")


def _message(text: str, role: str) -> dict[str, Any]:
    message: dict[str, Any] = {"role": role, "content": text}
    if role == "tool":
        message["tool_call_id"] = "c"
    return message


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
