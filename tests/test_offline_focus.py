"""``--focus`` raises the retention of the topic's facts and says what it focused on (issue 17, point 5)."""

from __future__ import annotations

import pytest
from test_offline_summarizer import coding_session, summarize

from ctxledger.compressor.factmatch import Fact
from ctxledger.compressor.facts import extract_facts, retention
from ctxledger.compressor.summarizers.offline import focus_messages
from ctxledger.compressor.summarizers.packing import FOCUS_SHARE
from ctxledger.tokens import count_messages, count_text


def _split(turns: list[dict[str, object]], topic: str) -> tuple[list[Fact], list[Fact]]:
    about = focus_messages(turns, topic)  # type: ignore[arg-type]
    facts = extract_facts(turns)  # type: ignore[arg-type]
    return [f for f in facts if f.message_index in about], [
        f for f in facts if f.message_index not in about
    ]


def _kept(facts: list[Fact], text: str) -> float:
    return len(retention(facts, text)[0]) / max(1, len(facts))


@pytest.mark.parametrize("seed", [1, 2, 3, 21])
@pytest.mark.parametrize("topic", ["redis cache", "auth", "pytest"])
def test_focus_keeps_more_of_the_topics_facts(seed: int, topic: str) -> None:
    turns = coding_session(seed, 40)
    budget = int(0.2 * sum(count_messages(turns)))
    on, off = _split(turns, topic)
    assert on and off
    plain, focused = summarize(turns, budget), summarize(turns, budget, focus=topic)
    assert count_text(focused) <= budget
    assert _kept(on, focused) > _kept(on, plain)
    assert _kept(on, focused) >= 0.7
    # the rest of the budget is spent as before: the other turns keep what a plain
    # summary of the remaining budget keeps
    rest = summarize(turns, int(budget * (1 - FOCUS_SHARE)))
    assert _kept(off, focused) >= _kept(off, rest) - 0.05


def test_the_summary_says_what_it_focused_on() -> None:
    turns = coding_session(2, 30)
    text = summarize(turns, 1_500, focus="redis cache")
    assert "- Focus: redis cache (" in text and "packed first" in text


def test_an_absent_topic_is_said_and_changes_nothing_else() -> None:
    turns = coding_session(2, 30)
    plain = summarize(turns, 1_500)
    text = summarize(turns, 1_500, focus="kubernetes ingress")
    assert "- Focus requested: kubernetes ingress (no summarized turn mentions it" in text
    assert text != plain
    assert _kept(extract_facts(turns), text) >= _kept(extract_facts(turns), plain) - 0.05  # type: ignore[arg-type]
