"""A version is kept only by a summary that states that version, not a longer one.

Session 28 stopped ``v2.0`` matching inside ``v2.0.1``; it still matched inside
``v2.0-rc1``, ``v2.0-beta`` and ``v2.0+build``, so a summary naming only the release
candidate was counted as keeping the release. A dotted version followed by a
pre-release or build suffix (``factbounds.VERSION_SUFFIX``) is a longer version; a
word after a hyphen is not (``Python 3.8-compatible``), nor is sentence punctuation.
The extraction of a named version (``release v2.0-rc1``) follows the same rule, so a
summary's own facts never hold the shorter version either.
"""

from __future__ import annotations

from helpers.audit_harness import assistant, audit_of, status
from hypothesis import example, given, settings
from hypothesis import strategies as st

from ctxledger.compressor.factmatch import contains, fact_in_text
from ctxledger.compressor.facts import extract_facts

_ORIGINAL = "We pin release v2.0 of the SDK. Python 3.1 is the floor. Node 1.2.3 runs it."


def test_a_version_is_not_kept_by_a_pre_release_or_build_of_it() -> None:
    for summary in (
        "SDK release v2.0-rc1 pinned. Python 3.1-rc2 and Node 1.2.3-beta installed.",
        "SDK release v2.0+build7 pinned. Python 3.1-1 and Node 1.2.3+local installed.",
        "SDK release v2.0.1 pinned. Python 3.1.4 and Node 1.2.3.1 installed.",
        "SDK release v2.0-beta pinned. Python 3.1-dev and Node 1.2.3-alpha.1 installed.",
    ):
        audit = audit_of(assistant(_ORIGINAL), summary)
        for value in ("v2.0", "release v2.0", "Python 3.1", "1.2.3"):
            assert status(audit, value) == "lost", (summary, value)


def test_a_version_is_kept_before_punctuation_or_a_word() -> None:
    for summary in (
        "Pinned release v2.0. Floor: Python 3.1, Node 1.2.3.",
        "Pinned release v2.0; floor Python 3.1 (Node 1.2.3)!",
        "Keep release v2.0-compatible code on Python 3.1-compatible syntax, Node 1.2.3.",
    ):
        audit = audit_of(assistant(_ORIGINAL), summary)
        for value in ("v2.0", "release v2.0", "Python 3.1", "1.2.3"):
            assert status(audit, value) == "kept", (summary, value)


def test_a_pre_release_is_not_kept_by_its_release() -> None:
    audit = audit_of(
        assistant("We pin release v2.0-rc1 of the SDK and test 1.2.3-beta."),
        "SDK release v2.0 pinned; tested 1.2.3.",
    )
    assert status(audit, "v2.0-rc1") == "lost"
    assert status(audit, "release v2.0-rc1") == "lost"
    assert status(audit, "1.2.3-beta") == "lost"


def test_a_named_version_is_extracted_with_its_suffix_never_without() -> None:
    # before, "release v2.0-rc1" yielded the fact "release v2.0": a summary's own facts
    # then held the shorter version, and the audit counted it as kept through them
    cases = {
        "We ship release v2.0-rc1.": "release v2.0-rc1",
        "Runs on Python 3.9-rc1 only": "Python 3.9-rc1",
        "Needs Django 4.2+ or later": "Django 4.2",
        "Python 3.8-compatible code": "Python 3.8",
    }
    for text, value in cases.items():
        numbers = [f.value for f in extract_facts([{"role": "tool", "content": text}])]
        assert value in numbers, (text, numbers)
    for text in ("We ship release v2.0-rc1.", "Runs on Python 3.9-rc1_x"):
        numbers = [f.normalized for f in extract_facts([{"role": "tool", "content": text}])]
        assert "release v2.0" not in numbers and "python 3.9" not in numbers, numbers


_SUFFIXES = st.one_of(
    st.sampled_from(("-rc1", "-beta", "-alpha.2", "-1", "+build", "+20240101", ".1", "-dev3")),
    st.from_regex(r"[+][0-9a-z]{1,5}|-[a-z]{0,3}[0-9]", fullmatch=True),
)


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from(("v", "", "python ", "release v", "node ")),
    st.lists(st.integers(0, 99), min_size=2, max_size=3).map(lambda p: ".".join(map(str, p))),
    _SUFFIXES,
    st.sampled_from(("", ".", ",", " and more", ")")),
)
# session 42: ``-pp0`` then a sentence's stop is a pre-release, not a wheel's PyPy tag
@example("v", "0.0", "-pp0", ".")
@example("", "1.2", "-cp3", ".")
def test_a_version_never_matches_as_the_prefix_of_a_longer_version(
    head: str, number: str, suffix: str, tail: str
) -> None:
    needle = head + number
    longer = f"we use {needle}{suffix}{tail}"
    assert not contains(longer, needle)
    assert contains(f"we use {needle}{tail}", needle)  # the version itself still matches


def test_every_version_fact_is_found_in_its_own_text() -> None:
    for text in (
        "release v2.0-rc1-hotfix and Python 3.8-compatible, 1.2.3-rc1.2 and v1.0+b.1",
        "Django 4.2-LTS; node 18.1.0-nightly; $5.50-10; pip 23.1.2",
    ):
        for fact in extract_facts([{"role": "tool", "tool_call_id": "c", "content": text}]):
            assert fact_in_text(fact, text), fact


def test_a_version_range_states_both_ends() -> None:
    # review of session 29: "-3.12" read as a pre-release suffix, so "Python 3.8-3.12"
    # did not keep Python 3.8 (and was extracted as one fact "Python 3.8-3.12")
    audit = audit_of(
        assistant("We need Python 3.8 support. Pin numpy 1.24.0 for now. Deployed v2.0."),
        "Supports Python 3.8-3.12; numpy 1.24.0-1.26.0 works; deployed v2.0-v2.1.",
    )
    for value in ("Python 3.8", "numpy 1.24.0", "1.24.0", "v2.0"):
        assert status(audit, value) == "kept", value
    for text, ends in {
        "Supports Python 3.8-3.12.": ["Python 3.8", "Python 3.12"],
        "use 1.2.3-1.4.0 here": ["1.2.3", "1.4.0"],
        "roll v1.2-v1.4 out": ["v1.2", "v1.4"],
        # a right side that goes on is the release's own part, not a range's end
        "uname: 5.14.0-362.8.1.el9_3.x86_64": ["5.14.0-362.8.1"],
        "maven 1.0.0-20231012.142536-3 built": [],
    }.items():
        numbers = [f.value for f in extract_facts([{"role": "tool", "content": text}])]
        assert numbers == ends, (text, numbers)
    # a release's own suffix still makes a longer version ("2.0-1" is a Debian revision)
    assert not contains("installed 2.0-1 and 3.1-rc1", "2.0")
    assert not contains("installed 3.1-rc1", "3.1")
