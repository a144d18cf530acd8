"""The Hermes engine's ``should_defer_preflight_to_real_usage`` (session 38): Hermes
0.19.0 asks it before its turn preflight and its check before each model call, and its
own compressor defers a rough estimate at the threshold to the provider's count right
after a compaction and while the estimate has grown little since a request that fit
(#36718). The engine inherited ``False``: a schema-heavy estimate that stayed at the
threshold after a compaction compacted again at every check. Loads without Hermes."""

from __future__ import annotations

from ctxledger.integrations.hermes_host import RealUsageTrust

THRESHOLD = 54_400


def _trust() -> RealUsageTrust:
    trust = RealUsageTrust()
    trust.threshold_tokens = THRESHOLD
    return trust


def _compacted(trust: RealUsageTrust, rough: int) -> None:
    """What Hermes writes on its engine after a compaction it made."""
    trust.last_compression_rough_tokens = rough
    trust.awaiting_real_usage_after_compression = True


def test_an_estimate_at_the_threshold_waits_for_the_compacted_request_s_count() -> None:
    trust = _trust()
    assert not trust.should_defer_preflight_to_real_usage(60_000)  # no count: trusted
    _compacted(trust, 55_000)
    assert trust.should_defer_preflight_to_real_usage(55_000)
    assert trust.should_defer_preflight_to_real_usage(70_000)  # whatever its size
    assert not trust.should_defer_preflight_to_real_usage(50_000)  # under: nothing to defer


def test_after_a_count_that_fits_an_estimate_that_grew_little_waits_too() -> None:
    trust = _trust()
    _compacted(trust, 55_000)
    trust._real_prompt(33_000)  # the provider counted the compacted request: it fits
    assert not trust.awaiting_real_usage_after_compression
    assert trust.should_defer_preflight_to_real_usage(59_000)  # grew 4,000
    assert trust.last_rough_tokens_when_real_prompt_fit == 59_000
    assert not trust.should_defer_preflight_to_real_usage(63_200)  # grew 4,200 since
    assert trust.should_defer_preflight_to_real_usage(63_000)


def test_a_count_over_the_threshold_or_a_new_model_ends_the_deferral() -> None:
    trust = _trust()
    _compacted(trust, 55_000)
    trust._real_prompt(33_000)
    trust._real_prompt(56_000)  # the provider's count is over: the estimate is right
    assert not trust.should_defer_preflight_to_real_usage(55_500)
    _compacted(trust, 55_000)
    trust._forget_real_usage()  # another model, a session's end, a reset
    assert not trust.should_defer_preflight_to_real_usage(55_000)
    assert (trust.last_real_prompt_tokens, trust.last_compression_rough_tokens) == (0, 0)


def test_a_report_without_a_prompt_count_keeps_the_last_one() -> None:
    trust = _trust()
    _compacted(trust, 55_000)
    trust._real_prompt(30_000)
    trust._real_prompt(0)  # (a provider that sent no usage)
    assert trust.last_real_prompt_tokens == 30_000
    assert trust.should_defer_preflight_to_real_usage(56_000)
