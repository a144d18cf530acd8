"""Semver pre-releases are one version; a range needs a plausible upper end (session 30).

``1.0.0-0.3.7`` (semver's own example of a pre-release) read as a range, 1.0.0 to
0.3.7: two facts, and ``1.0.0`` kept by a summary naming only the pre-release. A
``-`` and a dotted number after a version is a range's other end only when it is not
lower than the version (``3.8-3.12``, ``1.24.0-1.26.0``; with a ``v``, ``v2.0-v2.1``,
always); lower, it is the version's pre-release (``1.0.0-0.3.7``, ``2.0-1.5``). A
pre-release followed by build metadata (``2.0.0-rc.1+build.5``) yielded no version
at all; it is one fact. The matcher's regex (built per needle) and its per-occurrence
rule agree; a hypothesis test holds them to the same answers.
"""

from __future__ import annotations

import re

from helpers.audit_harness import assistant, audit_of, status
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxledger.compressor.factbounds import (
    SHORT_DOTTED,
    contains,
    lower_tail,
    prerelease_end,
    search,
)
from ctxledger.compressor.factmatch import fact_in_text
from ctxledger.compressor.facts import extract_facts


def _numbers(text: str) -> list[str]:
    facts = extract_facts([{"role": "assistant", "content": text}])
    return [f.value for f in facts if f.kind == "number"]


def test_a_semver_pre_release_is_one_fact() -> None:
    cases = {
        "Installed 1.0.0-0.3.7 today.": ["1.0.0-0.3.7"],
        "Installed 1.0.0-alpha.1 today.": ["1.0.0-alpha.1"],
        "Installed 2.0.0-rc.1+build.5 today.": ["2.0.0-rc.1+build.5"],
        "Installed v2.0.0-rc.1+build.5 today.": ["v2.0.0-rc.1+build.5"],
        "Installed v2.0-1.5 today.": ["v2.0"],  # two numbers: no semver, a range
        "Pinned release 1.0.0-0.3.7 and release 2.0.0-rc.1+build.5.": [
            "release 1.0.0-0.3.7",
            "1.0.0-0.3.7",
            "release 2.0.0-rc.1+build.5",
            "2.0.0-rc.1+build.5",
        ],
    }
    for text, expected in cases.items():
        assert _numbers(text) == expected, (text, _numbers(text))


def test_a_range_with_a_plausible_upper_end_is_two_versions() -> None:
    assert _numbers("Supports Python 3.8-3.12.") == ["Python 3.8", "Python 3.12"]
    assert _numbers("numpy 1.24.0-1.26.0 works") == [
        "numpy 1.24.0",
        "1.24.0",
        "1.26.0",
        "numpy 1.26.0",
    ]
    assert _numbers("tested v2.0-v1.9 both") == ["v2.0", "v1.9"]  # a ``v``: a range
    assert _numbers("tested 1.2.3-1.2.3 only") == ["1.2.3"]  # the same version twice


def test_a_version_is_not_kept_by_its_numeric_pre_release() -> None:
    audit = audit_of(
        assistant("We ship release 1.0.0 next week; Python 3.8 is the floor."),
        "Shipped release 1.0.0-0.3.7 (a pre-release); Python 3.8-3.12 supported.",
    )
    assert status(audit, "release 1.0.0") == "lost"
    assert status(audit, "1.0.0") == "lost"
    assert status(audit, "Python 3.8") == "kept"  # a range states its lower end
    kept = audit_of(assistant("We ship release 1.0.0-0.3.7 now."), "Shipped release 1.0.0-0.3.7.")
    assert status(kept, "release 1.0.0-0.3.7") == "kept"
    assert status(kept, "1.0.0-0.3.7") == "kept"
    lost = audit_of(assistant("We ship release 1.0.0-0.3.7 now."), "Shipped release 1.0.0.")
    assert status(lost, "1.0.0-0.3.7") == "lost"


def test_every_version_fact_is_found_in_its_own_text() -> None:
    for text in (
        "got 1.0.0-0.3.7.",
        "got 2.0.0-rc.1+build.5,",
        "v2.0-1.5)",
        "version 2.0-1.5 now",
    ):
        for fact in extract_facts([{"role": "tool", "tool_call_id": "c", "content": text}]):
            assert fact_in_text(fact, text), (text, fact)


_NUMBER = st.one_of(
    st.sampled_from(("0", "1", "2", "3", "9", "10", "12", "99", "100", "007", "00")),
    st.from_regex(r"[0-9]{1,30}", fullmatch=True),
)
_VERSION = st.lists(_NUMBER, min_size=2, max_size=6).map(".".join)
#: day-first dates and near misses (a day of 32, a month of 13, a year of 3 digits)
_DATE = st.tuples(
    st.sampled_from(("1", "01", "03", "28", "31", "32", "0")),
    st.sampled_from(("1", "02", "03", "12", "13", "0")),
    st.sampled_from(("2024", "2023", "999", "02024")),
).map(".".join)


def _value(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def _day_first_date(version: str) -> bool:
    """``28.02.2024``: two day-first dates are a range (session 31)."""
    parts = version.split(".")
    return (
        len(parts) == 3
        and len(parts[2]) == 4
        and all(1 <= len(p) <= 2 for p in parts[:2])
        and 1 <= int(parts[0]) <= 31
        and 1 <= int(parts[1]) <= 12
    )


@settings(max_examples=600, deadline=None)
@given(
    st.one_of(_VERSION, _DATE),
    st.one_of(_VERSION, _DATE),
    st.sampled_from(("", ".", " x", "+b", "-1", "x", ".x")),
)
def test_the_regex_and_the_rule_agree_on_pre_releases(left: str, right: str, tail: str) -> None:
    # numbers with leading zeros, long ones, and versions past SHORT_DOTTED (whose
    # pre-releases search checks per match instead of in the regex)
    text = f"{left}-{right}{tail}"
    lower = _value(right) < _value(left) and left.count(".") >= 2  # semver only
    lower = lower and not (_day_first_date(left) and _day_first_date(right))
    ends = tail in ("", ".", " x")
    assert (prerelease_end(text, len(left), left) != -1) == (lower and ends)
    if len(left) <= SHORT_DOTTED:
        pattern = lower_tail(left)
        by_regex = pattern is not None and re.match(pattern, text[len(left) :]) is not None
        assert by_regex == (lower and ends)
    # contains (the rule per occurrence) and search (the regex) agree, repeated or not
    for hay in (text, " ".join([text] * 10), " ".join([text] * 10 + [left])):
        assert contains(hay, left) == search(hay, left)


def test_a_named_range_restated_keeps_both_ends() -> None:
    # the extraction makes "Python 3.12" of "Python 3.8-3.12"; that fact was found
    # nowhere, not even in its own text, so restating the range lost it
    text = "CI runs Python 3.8-3.12 and numpy 1.24.0-1.26.0."
    facts = extract_facts([{"role": "assistant", "content": text}])
    assert {"Python 3.12", "numpy 1.26.0"} <= {f.value for f in facts}
    for fact in facts:
        assert fact_in_text(fact, text), fact
    for summary, kept in (
        ("CI: Python 3.8-3.12, numpy 1.24.0-1.26.0.", True),
        ("CI: python 3.10-3.12; numpy 1.25.0-1.26.0", True),
        ("CI: Python 3.8-3.12.1, numpy 1.24.0-1.26.0.1.", False),
        ("CI: Python 3.8-3.13, numpy 1.24.0-1.27.0.", False),
        ("CI: CPython 3.8-3.12, mynumpy 1.24.0-1.26.0.", False),
    ):
        audit = audit_of(assistant(text), summary)
        for value in ("Python 3.12", "numpy 1.26.0"):
            assert status(audit, value) == ("kept" if kept else "lost"), (summary, value)
    # a lower end after a semver version is its pre-release; after two numbers a range
    # written high to low (review 1g)
    audit = audit_of(assistant(text), "CI: Python 3.13-3.12, numpy 1.27.0-1.26.0.")
    assert status(audit, "Python 3.12") == "kept"
    assert status(audit, "numpy 1.26.0") == "lost"
