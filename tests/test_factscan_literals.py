"""factscan's literal checks: a literal with a character the text lacks is absent at once.

``has_any`` and ``may_match_ignoring_case`` look for each distinct character of a
literal (a memchr) before the literal itself; the answers must be those of plain
``in`` searches, on any text (short texts with the size threshold lowered, and a
long one).
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxledger.compressor import factscan

_CHARS = st.sampled_from([*"abcE r\n'İıſK", "é", "٣"])
_LITERALS = st.lists(st.text(_CHARS, max_size=4), max_size=4).map(tuple)


@pytest.fixture()
def no_threshold(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(factscan, "_SMALL", 0)


@settings(
    max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(text=st.text(_CHARS, max_size=30), literals=_LITERALS)
def test_has_any_is_a_plain_search(
    no_threshold: None, text: str, literals: tuple[str, ...]
) -> None:
    assert factscan.has_any(text, literals) == any(lit in text for lit in literals)
    lowered_literals = tuple(lit.lower() for lit in literals)
    expected = any(odd in text for odd in factscan.CASE_ODD) or any(
        lit in text.lower() for lit in lowered_literals
    )
    assert factscan.may_match_ignoring_case(text, lowered_literals) == expected


def test_a_long_text_without_one_character_of_a_literal() -> None:
    text = "alpha beta src/app.py error token " * 40_000
    assert not factscan.has_any(text, ("Traceback", "exit code", "failed"))
    assert factscan.has_any(text, ("Traceback", "token a"))
    assert factscan.may_match_ignoring_case(text, ("never", "src/app"))
    assert not factscan.may_match_ignoring_case(text, ("never", "must"))
