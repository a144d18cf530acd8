"""Pressure warnings, anti-thrashing, cooldown and gateway hygiene (HERMES_SPEC §2)."""

from __future__ import annotations

import pytest

from ctxledger.compressor.config import CompressionConfig
from ctxledger.errors import InvalidInput
from ctxledger.runtime.pressure import (
    AntiThrash,
    Cooldown,
    HygieneDecision,
    hygiene_should_compress,
    pressure_check,
)

CONFIG = CompressionConfig()
STRIKES = CONFIG.anti_thrash_strikes
MIN_SAVING = CONFIG.anti_thrash_min_saving


def warn_at(threshold: int, level: float = CONFIG.pressure_level) -> int:
    """The warning level the config computes for a threshold, as the service passes it
    (a config whose threshold is the whole window: its pressure_tokens(t) is level x t)."""
    config = CompressionConfig(pressure_level=level, threshold=1.0, threshold_floor_tokens=0)
    return config.pressure_tokens(threshold)


def hygiene(
    messages_count: int,
    real_prompt_tokens: int | None,
    estimated: int,
    context_length: int,
    **kw: int,
) -> HygieneDecision:
    """hygiene_should_compress with the config's limits, as the service calls it."""
    return hygiene_should_compress(
        messages_count=messages_count,
        real_prompt_tokens=real_prompt_tokens,
        estimated_tokens=estimated,
        context_length=context_length,
        limit_tokens=kw.pop(
            "limit_tokens",
            CONFIG.hygiene_threshold_tokens(context_length) if context_length > 0 else 1,
        ),
        min_messages=kw.pop("min_messages", CONFIG.hygiene_min_messages),
        hard_message_limit=kw.pop("hard_message_limit", CONFIG.hygiene_hard_message_limit),
    )


# --- pressure warnings ---------------------------------------------------------------


def test_warns_at_85_percent_of_threshold_with_the_numbers() -> None:
    decision = pressure_check(42_500, 50_000, warn_at(50_000), warned=False)
    assert decision.warn and decision.warned and not decision.clear
    assert decision.percent == 85
    assert decision.text is not None
    assert "85%" in decision.text and "42,500/50,000 tokens" in decision.text


def test_no_warning_just_below_the_level() -> None:
    decision = pressure_check(42_499, 50_000, warn_at(50_000), warned=False)
    assert not decision.warn and not decision.warned and decision.text is None


def test_warns_only_once_while_above() -> None:
    first = pressure_check(45_000, 50_000, warn_at(50_000), warned=False)
    again = pressure_check(48_000, 50_000, warn_at(50_000), warned=first.warned)
    assert first.warn and not again.warn and again.warned and again.text is None


def test_clears_when_usage_drops_below_after_compression() -> None:
    warned = pressure_check(46_000, 50_000, warn_at(50_000), warned=False).warned
    after = pressure_check(20_000, 50_000, warn_at(50_000), warned=warned)
    assert after.clear and not after.warned and not after.warn
    rewarn = pressure_check(43_000, 50_000, warn_at(50_000), warned=after.warned)
    assert rewarn.warn, "the next climb warns again"


def test_level_is_configurable_and_validated() -> None:
    assert pressure_check(35_000, 50_000, warn_at(50_000, level=0.7), warned=False).warn
    with pytest.raises(InvalidInput):
        pressure_check(1, 50_000, -1, warned=False)
    with pytest.raises(InvalidInput):
        pressure_check(1, 0, 0, warned=False)
    with pytest.raises(InvalidInput):
        pressure_check(-1, 10, 8, warned=False)


def test_the_warning_fires_where_the_config_says() -> None:
    # one rounding: at a 32,768 window the threshold is 27,852 and the config's level
    # 23,674 (85 % of it, rounded down); the warning used to round up on its own (23,675)
    config = CompressionConfig()
    threshold, level = config.threshold_tokens(32_768), config.pressure_tokens(32_768)
    assert (threshold, level) == (27_852, 23_674)
    assert pressure_check(level, threshold, level, warned=False).warn
    assert not pressure_check(level - 1, threshold, level, warned=False).warn


# --- anti-thrashing ------------------------------------------------------------------


def test_effective_pass_is_not_a_strike() -> None:
    state = AntiThrash().after_compaction(
        100_000, 60_000, noop=False, fallback=False, min_saving=MIN_SAVING
    )
    assert state.strikes == 0 and not state.blocked(STRIKES)


def test_pass_saving_less_than_ten_percent_is_a_strike() -> None:
    state = AntiThrash().after_compaction(
        100_000, 90_001, noop=False, fallback=False, min_saving=MIN_SAVING
    )
    assert state.strikes == 1
    assert (
        AntiThrash()
        .after_compaction(100_000, 90_000, noop=False, fallback=False, min_saving=MIN_SAVING)
        .strikes
        == 0
    )


def test_noop_pass_is_a_strike() -> None:
    assert (
        AntiThrash()
        .after_compaction(5_000, 5_000, noop=True, fallback=False, min_saving=MIN_SAVING)
        .strikes
        == 1
    )


def test_two_fallback_summaries_in_a_row_block_until_a_summary_succeeds() -> None:
    # hermes-agent 0.19's breaker (s29): before, the streak was one strike, which a
    # prompt that fit reset, so a broken summarizer kept replacing turns by fallbacks
    one = AntiThrash().after_compaction(
        100_000, 40_000, noop=False, fallback=True, min_saving=MIN_SAVING
    )
    two = one.after_compaction(100_000, 40_000, noop=False, fallback=True, min_saving=MIN_SAVING)
    assert not one.blocked(STRIKES) and two.blocked(STRIKES)
    assert two.strikes == 0 and "2 fallback summaries in a row" in two.describe(STRIKES)
    fits = two.after_real_prompt(40_000, 100_000, first_after_compaction=True)
    assert fits.blocked(STRIKES), "a prompt that fits says nothing about the summarizer"
    healed = fits.after_compaction(
        100_000, 40_000, noop=False, fallback=False, min_saving=MIN_SAVING
    )
    assert not healed.blocked(STRIKES) and healed.fallback_streak == 0
    broken = one.after_compaction(
        100_000, 40_000, noop=False, fallback=False, min_saving=MIN_SAVING
    ).after_compaction(100_000, 40_000, noop=False, fallback=True, min_saving=MIN_SAVING)
    assert not broken.blocked(STRIKES), "a real summary in between breaks the streak"


def test_two_strikes_block_automatic_but_not_manual_compression() -> None:
    state = AntiThrash()
    state = state.after_compaction(
        100_000, 95_000, noop=False, fallback=False, min_saving=MIN_SAVING
    )
    assert not state.blocked(STRIKES)
    state = state.after_compaction(
        95_000, 94_000, noop=False, fallback=False, min_saving=MIN_SAVING
    )
    assert state.blocked(STRIKES)
    assert "paused" in state.describe(STRIKES) and "/compress" in state.describe(STRIKES)


def test_the_configured_strike_limit_decides_blocking() -> None:
    state = AntiThrash(strikes=2, last_reason="compaction changed nothing")
    assert state.blocked(2) and not state.blocked(3)
    assert "allowed" in state.describe(3) and "paused after 2" in state.describe(2)


def test_first_real_prompt_still_over_threshold_is_a_strike() -> None:
    state = AntiThrash().after_compaction(
        100_000, 50_000, noop=False, fallback=False, min_saving=MIN_SAVING
    )
    state = state.after_real_prompt(101_000, 100_000, first_after_compaction=True)
    assert state.strikes == 1
    later = state.after_real_prompt(102_000, 100_000, first_after_compaction=False)
    assert later.strikes == 1, "only the first count after a compaction judges it"


def test_a_pass_earns_at_most_one_strike() -> None:
    state = AntiThrash().after_compaction(
        100_000, 99_000, noop=False, fallback=False, min_saving=MIN_SAVING
    )
    state = state.after_real_prompt(120_000, 100_000, first_after_compaction=True)
    assert state.strikes == 1 and not state.blocked(STRIKES)


def test_real_count_below_threshold_resets_strikes() -> None:
    state = AntiThrash(strikes=2)
    assert state.blocked(STRIKES)
    reset = state.after_real_prompt(40_000, 100_000, first_after_compaction=False)
    assert reset.strikes == 0 and not reset.blocked(STRIKES)


def test_transitions_are_pure() -> None:
    state = AntiThrash()
    state.after_compaction(10, 10, noop=True, fallback=False, min_saving=MIN_SAVING)
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


def test_extend_keeps_the_later_end() -> None:
    long = Cooldown(until=600.0)
    assert long.extend(40.0) == long and long.extend(650.0).until == 650.0
    assert Cooldown().extend(30.0).until == 30.0


@pytest.mark.parametrize(
    ("failure", "seconds"),
    [
        ("not_configured", 600.0),
        ("malformed", 30.0),
        ("network", 30.0),
        ("empty", 60.0),
        ("timeout", 60.0),
        ("server", 60.0),
        ("auth", 60.0),
        ("other", 60.0),
        (None, 60.0),
    ],
)
def test_cooldown_lengths_come_from_the_config(failure: str | None, seconds: float) -> None:
    assert CONFIG.cooldown_for(failure) == seconds
    custom = CompressionConfig(
        cooldown_no_summarizer=1.0, cooldown_malformed=2.0, cooldown_generic=3.0
    )
    assert custom.cooldown_for(failure) == {600.0: 1.0, 30.0: 2.0, 60.0: 3.0}[seconds]


# --- gateway hygiene -----------------------------------------------------------------


def test_hygiene_fires_at_85_percent_of_window_with_real_count() -> None:
    fire, reason, tokens, source = hygiene(40, 170_000, 10, 200_000)
    assert (fire, tokens, source) == (True, 170_000, "real")
    assert "170,000" in reason


def test_hygiene_does_not_fire_below() -> None:
    fire, _, tokens, source = hygiene(40, 169_999, 190_000, 200_000)
    assert (fire, tokens, source) == (False, 169_999, "real"), (
        "the real count wins over the estimate"
    )


def test_hygiene_falls_back_to_the_estimate() -> None:
    decision = hygiene(40, None, 180_000, 200_000)
    assert (decision.should_compress, decision.tokens_used, decision.source) == (
        True,
        180_000,
        "estimate",
    )


def test_hygiene_needs_four_messages() -> None:
    decision = hygiene(3, 199_000, 0, 200_000)
    assert not decision.should_compress and "3 messages" in decision.reason


def test_hygiene_fires_at_the_hard_message_limit() -> None:
    # hermes-agent 0.19's gateway: ``len(history) >= limit`` (test_parity_hygiene.py)
    assert hygiene(5_000, 1_000, 0, 200_000).should_compress
    assert not hygiene(4_999, 1_000, 0, 200_000).should_compress


def test_hygiene_validates_inputs() -> None:
    with pytest.raises(InvalidInput):
        hygiene(10, None, 1, 0)
    with pytest.raises(InvalidInput):
        hygiene(10, None, 1, 100, limit_tokens=-1)


def test_hygiene_fires_at_the_configs_limit() -> None:
    config = CompressionConfig(hygiene_threshold=0.57)
    limit = config.hygiene_threshold_tokens(100)
    assert limit == 57  # 0.57 x 100 is 56.99999999999999 in floats: the config rounds it once
    assert hygiene(10, limit, 0, 100, limit_tokens=limit).should_compress
    assert not hygiene(10, limit - 1, 0, 100, limit_tokens=limit).should_compress


def test_the_configured_minimum_saving_decides_a_strike() -> None:
    assert (
        AntiThrash().after_compaction(1000, 850, min_saving=MIN_SAVING).strikes == 0
    )  # 15 % saved ≥ the default 10 %
    assert AntiThrash().after_compaction(1000, 850, min_saving=0.20).strikes == 1
