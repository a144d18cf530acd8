"""Pressure warnings, anti-thrashing, cooldown and gateway hygiene (HERMES_SPEC §2)."""

from __future__ import annotations

import pytest

from ctxledger.errors import InvalidInput
from ctxledger.runtime.pressure import (
    AntiThrash,
    Cooldown,
    cooldown_seconds,
    hygiene_should_compress,
    pressure_check,
)

# --- pressure warnings ---------------------------------------------------------------


def test_warns_at_85_percent_of_threshold_with_the_numbers() -> None:
    decision = pressure_check(42_500, 50_000, warned=False)
    assert decision.warn and decision.warned and not decision.clear
    assert decision.percent == 85
    assert decision.text is not None
    assert "85%" in decision.text and "42,500/50,000 tokens" in decision.text


def test_no_warning_just_below_the_level() -> None:
    decision = pressure_check(42_499, 50_000, warned=False)
    assert not decision.warn and not decision.warned and decision.text is None


def test_warns_only_once_while_above() -> None:
    first = pressure_check(45_000, 50_000, warned=False)
    again = pressure_check(48_000, 50_000, warned=first.warned)
    assert first.warn and not again.warn and again.warned and again.text is None


def test_clears_when_usage_drops_below_after_compression() -> None:
    warned = pressure_check(46_000, 50_000, warned=False).warned
    after = pressure_check(20_000, 50_000, warned=warned)
    assert after.clear and not after.warned and not after.warn
    rewarn = pressure_check(43_000, 50_000, warned=after.warned)
    assert rewarn.warn, "the next climb warns again"


def test_level_is_configurable_and_validated() -> None:
    assert pressure_check(35_000, 50_000, level=0.7, warned=False).warn
    for bad in (0.0, 1.5):
        with pytest.raises(InvalidInput):
            pressure_check(1, 50_000, level=bad, warned=False)
    with pytest.raises(InvalidInput):
        pressure_check(1, 0, warned=False)
    with pytest.raises(InvalidInput):
        pressure_check(-1, 10, warned=False)


# --- anti-thrashing ------------------------------------------------------------------


def test_effective_pass_is_not_a_strike() -> None:
    state = AntiThrash().after_compaction(100_000, 60_000, noop=False, fallback=False)
    assert state.strikes == 0 and not state.blocked


def test_pass_saving_less_than_ten_percent_is_a_strike() -> None:
    state = AntiThrash().after_compaction(100_000, 90_001, noop=False, fallback=False)
    assert state.strikes == 1
    assert AntiThrash().after_compaction(100_000, 90_000, noop=False, fallback=False).strikes == 0


def test_noop_pass_is_a_strike() -> None:
    assert AntiThrash().after_compaction(5_000, 5_000, noop=True, fallback=False).strikes == 1


def test_two_fallback_summaries_in_a_row_is_a_strike() -> None:
    one = AntiThrash().after_compaction(100_000, 40_000, noop=False, fallback=True)
    two = one.after_compaction(100_000, 40_000, noop=False, fallback=True)
    assert (one.strikes, two.strikes) == (0, 1)
    broken = one.after_compaction(100_000, 40_000, noop=False, fallback=False).after_compaction(
        100_000, 40_000, noop=False, fallback=True
    )
    assert broken.strikes == 0, "a real summary in between breaks the streak"


def test_two_strikes_block_automatic_but_not_manual_compression() -> None:
    state = AntiThrash()
    state = state.after_compaction(100_000, 95_000, noop=False, fallback=False)
    assert state.allows()
    state = state.after_compaction(95_000, 94_000, noop=False, fallback=False)
    assert state.blocked and not state.allows()
    assert state.allows(manual=True) and AntiThrash.manual_bypasses()
    assert "paused" in state.describe() and "/compress" in state.describe()


def test_first_real_prompt_still_over_threshold_is_a_strike() -> None:
    state = AntiThrash().after_compaction(100_000, 50_000, noop=False, fallback=False)
    state = state.after_real_prompt(101_000, 100_000, first_after_compaction=True)
    assert state.strikes == 1
    later = state.after_real_prompt(102_000, 100_000, first_after_compaction=False)
    assert later.strikes == 1, "only the first count after a compaction judges it"


def test_a_pass_earns_at_most_one_strike() -> None:
    state = AntiThrash().after_compaction(100_000, 99_000, noop=False, fallback=False)
    state = state.after_real_prompt(120_000, 100_000, first_after_compaction=True)
    assert state.strikes == 1 and not state.blocked


def test_real_count_below_threshold_resets_strikes() -> None:
    state = AntiThrash(strikes=2)
    assert state.blocked
    reset = state.after_real_prompt(40_000, 100_000, first_after_compaction=False)
    assert reset.strikes == 0 and not reset.blocked


def test_transitions_are_pure() -> None:
    state = AntiThrash()
    state.after_compaction(10, 10, noop=True, fallback=False)
    assert state.strikes == 0
    with pytest.raises(AttributeError):
        state.strikes = 3  # type: ignore[misc]


# --- cooldown ------------------------------------------------------------------------


def test_cooldown_runs_until_its_end() -> None:
    cooldown = Cooldown().start(1_000.0, 60.0)
    assert cooldown.active(1_059.9) and not cooldown.active(1_060.0)
    assert cooldown.remaining(1_030.0) == pytest.approx(30.0)
    assert not Cooldown().active(0.0)


def test_manual_compression_clears_cooldown() -> None:
    assert not Cooldown().start(0.0, 600.0).clear().active(1.0)


def test_shorter_cooldown_never_cuts_a_longer_one() -> None:
    long = Cooldown().start(0.0, 600.0)
    assert long.start(10.0, 30.0).until == 600.0
    assert long.start(590.0, 60.0).until == 650.0
    with pytest.raises(InvalidInput):
        long.start(0.0, -1.0)


@pytest.mark.parametrize(
    ("failure", "configured", "seconds"),
    [("not_configured", True, 600.0), ("server", False, 600.0), ("malformed", True, 30.0),
     ("stream_closed", True, 30.0), ("timeout", True, 60.0), ("other", True, 60.0)],
)
def test_cooldown_lengths(failure: str, configured: bool, seconds: float) -> None:
    assert cooldown_seconds(failure, summarizer_configured=configured) == seconds


# --- gateway hygiene -----------------------------------------------------------------


def test_hygiene_fires_at_85_percent_of_window_with_real_count() -> None:
    fire, reason, tokens, source = hygiene_should_compress(
        messages_count=40, real_prompt_tokens=170_000, rough_tokens=10, context_length=200_000
    )
    assert (fire, tokens, source) == (True, 170_000, "real")
    assert "170,000" in reason


def test_hygiene_does_not_fire_below() -> None:
    fire, _, tokens, source = hygiene_should_compress(
        messages_count=40, real_prompt_tokens=169_999, rough_tokens=190_000, context_length=200_000
    )
    assert (fire, tokens, source) == (False, 169_999, "real"), "the real count wins over the estimate"


def test_hygiene_falls_back_to_rough_estimate() -> None:
    decision = hygiene_should_compress(
        messages_count=40, real_prompt_tokens=None, rough_tokens=180_000, context_length=200_000
    )
    assert (decision.should_compress, decision.tokens_used, decision.source) == (True, 180_000, "rough")


def test_hygiene_needs_four_messages() -> None:
    decision = hygiene_should_compress(
        messages_count=3, real_prompt_tokens=199_000, rough_tokens=0, context_length=200_000
    )
    assert not decision.should_compress and "3 messages" in decision.reason


def test_hygiene_fires_past_hard_message_limit() -> None:
    assert hygiene_should_compress(
        messages_count=5_001, real_prompt_tokens=1_000, rough_tokens=0, context_length=200_000
    ).should_compress
    assert not hygiene_should_compress(
        messages_count=5_000, real_prompt_tokens=1_000, rough_tokens=0, context_length=200_000
    ).should_compress


def test_hygiene_validates_inputs() -> None:
    with pytest.raises(InvalidInput):
        hygiene_should_compress(messages_count=10, real_prompt_tokens=None, rough_tokens=1, context_length=0)
    with pytest.raises(InvalidInput):
        hygiene_should_compress(
            messages_count=10, real_prompt_tokens=None, rough_tokens=1, context_length=100, hygiene_threshold=2.0
        )


def test_the_configured_minimum_saving_decides_a_strike() -> None:
    from ctxledger.runtime.pressure import AntiThrash

    assert AntiThrash().after_compaction(1000, 850).strikes == 0  # 15 % saved ≥ the default 10 %
    assert AntiThrash().after_compaction(1000, 850, min_saving_percent=20).strikes == 1
