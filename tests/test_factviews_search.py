"""factviews' search of long texts: the same answers as ``str.find`` / ``str.replace``.

``_find`` tries the occurrences of the needle's first character (a ``memchr``) before
falling back to ``str.find``; with the thresholds lowered, short generated texts take
every branch. ``split_summary`` and ``frame_text`` on a long merged message equal the
plain-search forms.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxledger.analysis import factviews
from ctxledger.analysis.factviews import frame_text, split_summary
from ctxledger.compressor.markers import merge_delimiter, merge_summary, wrap_summary

_ALPHABET = st.sampled_from(list("ab[-\n ]é"))


@pytest.fixture()
def low_thresholds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(factviews, "_LONG_SEARCH", 0)
    monkeypatch.setattr(factviews, "_PROBES", 2)


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    text=st.text(_ALPHABET, max_size=40),
    needle=st.text(_ALPHABET, min_size=1, max_size=4),
    start=st.integers(0, 45),
)
def test_find_is_str_find(low_thresholds: None, text: str, needle: str, start: int) -> None:
    assert factviews._find(text, needle, start) == text.find(needle, start)
    assert factviews._replace(text, needle, "|") == text.replace(needle, "|")


def test_find_on_a_long_text_with_many_first_characters() -> None:
    text = "[" * 100_000 + "[x"
    assert factviews._find(text, "[x") == text.find("[x")
    assert factviews._find(text, "[y") == -1


def _plain_frame_text(text: str) -> str:
    marks = (
        *factviews._prefixes(),
        factviews.summary_end_marker(),
        factviews.merge_delimiter().strip(),
        factviews.merge_lead().strip(),
    )
    return factviews._JOIN.join(m for m in marks if m and m in text)


@pytest.mark.parametrize("where", ["first", "last"])
def test_split_and_frame_of_a_long_merged_message(where: str) -> None:
    original = " ".join(["alpha", "src/app.py", "- dash", "[x]"] * 30_000)
    summary = "## Goal\n- fix [the] thing"
    if where == "last":
        text = merge_summary({"role": "user", "content": original}, summary)["content"]
    else:
        text = wrap_summary(summary) + merge_delimiter() + original
    assert isinstance(text, str) and len(text) > factviews._LONG_SEARCH
    split = split_summary(text)
    assert split is not None
    body, rest = split
    assert "fix [the] thing" in body and rest.replace(" ", "") == original.replace(" ", "")
    assert frame_text(text) == _plain_frame_text(text) != ""
    assert split_summary(original) is None and frame_text(original) == ""
