"""When automatic compression may run: pressure warnings, anti-thrashing, cooldowns, hygiene.

Owns HERMES_SPEC §2 "Context pressure warnings", the anti-thrashing guard, the
summary-failure cooldown and the gateway hygiene check. Every piece is a pure
decision or an immutable state with pure transitions (each method returns a new
value); the caller keeps the state, injects ``now``, and records the decisions as
events (``PressureWarning``, ``CompressionSkipped``, ``CooldownStarted``).
"""

from __future__ import annotations

from typing import Final, Literal, NamedTuple

import msgspec

from ctxledger.errors import InvalidInput

DEFAULT_WARNING_LEVEL: Final = 0.85
#: a pass that saves less than this percentage of the prompt is ineffective
MIN_SAVING_PERCENT: Final = 10
#: automatic compression stops at this many strikes (manual compression still runs)
BLOCK_AT_STRIKES: Final = 2
#: two fallback summaries in a row mean the summarizer is not working
FALLBACK_STREAK_STRIKE: Final = 2

COOLDOWN_NOT_CONFIGURED_SECONDS: Final = 600.0
COOLDOWN_GENERIC_SECONDS: Final = 60.0
COOLDOWN_TRANSIENT_SECONDS: Final = 30.0
#: failures that a quick retry usually fixes (bad output shape, a dropped stream)
_TRANSIENT_FAILURES = frozenset({"malformed", "empty", "stream_closed", "closed_stream"})

TokenSource = Literal["real", "rough"]


def _non_negative(**values: int) -> None:
    for name, value in values.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise InvalidInput(f"{name} must be a non-negative integer, got {value!r}")


def _positive(**values: int) -> None:
    for name, value in values.items():
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise InvalidInput(f"{name} must be a positive integer, got {value!r}")


def _ratio(name: str, value: float) -> None:
    if not 0.0 < value <= 1.0:
        raise InvalidInput(f"{name} must be in (0, 1], got {value!r}")


# --- pressure warnings ---------------------------------------------------------------


class PressureDecision(msgspec.Struct, frozen=True, kw_only=True):
    """What to tell the user now, and the new ``warned`` state to keep.

    ``warn``: emit the warning (usage just reached the level). ``clear``: the earlier
    warning no longer holds (usage fell back below the level, e.g. after a compaction).
    """

    warn: bool
    clear: bool
    warned: bool
    tokens: int
    threshold_tokens: int
    level: float
    percent: int
    text: str | None = None


def pressure_check(
    tokens: int, threshold_tokens: int, *, level: float = DEFAULT_WARNING_LEVEL, warned: bool
) -> PressureDecision:
    """Warn once when ``tokens`` reach ``level`` of the compaction threshold.

    The level is a share of the *threshold*, not of the window: the warning comes a
    little before automatic compression would fire. Staying above the level does not
    warn again; dropping below it clears the warning so the next climb warns anew.
    """
    _non_negative(tokens=tokens)
    _positive(threshold_tokens=threshold_tokens)
    _ratio("level", level)
    # round away float noise so 0.85 x 50,000 is exactly 42,500, as the user would expect
    above = tokens >= round(level * threshold_tokens, 6)
    percent = tokens * 100 // threshold_tokens
    text = None
    if above and not warned:
        text = (
            f"Context is {percent}% of the way to the compaction threshold "
            f"({tokens:,}/{threshold_tokens:,} tokens); older turns will be summarized soon."
        )
    return PressureDecision(
        warn=above and not warned,
        clear=warned and not above,
        warned=above,
        tokens=tokens,
        threshold_tokens=threshold_tokens,
        level=level,
        percent=percent,
        text=text,
    )


# --- anti-thrashing ------------------------------------------------------------------


class AntiThrash(msgspec.Struct, frozen=True, kw_only=True):
    """Strikes against automatic compression; blocked at two.

    A compaction pass earns at most one strike: it saved < 10 %, it was a no-op, it
    was the second fallback summary in a row, or (judged later) the first real prompt
    count after it was still at or above the threshold. Any real count below the
    threshold resets the strikes: compression is working again.
    """

    strikes: int = 0
    fallback_streak: int = 0
    #: the last pass already struck, so its follow-up prompt must not strike twice
    last_pass_struck: bool = False
    last_reason: str | None = None

    @property
    def blocked(self) -> bool:
        return self.strikes >= BLOCK_AT_STRIKES

    def allows(self, *, manual: bool = False) -> bool:
        """Whether a compression may run now; manual ``/compress`` always may."""
        return manual or not self.blocked

    @staticmethod
    def manual_bypasses() -> bool:
        """Manual compression ignores the guard (and clears any cooldown): always True."""
        return True

    def after_compaction(
        self,
        tokens_before: int,
        tokens_after: int,
        noop: bool = False,
        fallback: bool = False,
        min_saving_percent: float = MIN_SAVING_PERCENT,
    ) -> AntiThrash:
        """The state after one compaction pass (pure).

        ``min_saving_percent`` is the configured ``anti_thrash_min_saving`` (as a percentage).
        """
        _non_negative(tokens_before=tokens_before, tokens_after=tokens_after)
        streak = self.fallback_streak
        reason: str | None = None
        if noop:
            reason = "compaction changed nothing"
        else:
            streak = streak + 1 if fallback else 0
            saved = tokens_before - tokens_after
            if saved * 100 < min_saving_percent * tokens_before:
                share = saved * 100 / tokens_before if tokens_before else 0.0
                reason = f"compaction saved only {share:.1f}% ({tokens_before:,} -> {tokens_after:,} tokens)"
            elif streak >= FALLBACK_STREAK_STRIKE:
                reason = f"{streak} fallback summaries in a row"
        return AntiThrash(
            strikes=self.strikes + (reason is not None),
            fallback_streak=streak,
            last_pass_struck=reason is not None,
            last_reason=reason or self.last_reason,
        )

    def after_real_prompt(
        self, prompt_tokens: int, threshold_tokens: int, first_after_compaction: bool
    ) -> AntiThrash:
        """The state after the provider reported a real prompt size (pure)."""
        _non_negative(prompt_tokens=prompt_tokens)
        _positive(threshold_tokens=threshold_tokens)
        if prompt_tokens < threshold_tokens:
            return msgspec.structs.replace(self, strikes=0, last_pass_struck=False)
        if first_after_compaction and not self.last_pass_struck:
            return msgspec.structs.replace(
                self,
                strikes=self.strikes + 1,
                last_pass_struck=True,
                last_reason=(
                    f"first prompt after compaction still at {prompt_tokens:,} tokens "
                    f"(threshold {threshold_tokens:,})"
                ),
            )
        return self

    def describe(self) -> str:
        """A sentence for ``CompressionSkipped.reason`` when blocked."""
        if not self.blocked:
            return f"automatic compression allowed ({self.strikes} strike(s))"
        return (
            f"automatic compression paused after {self.strikes} ineffective passes "
            f"(last: {self.last_reason}); run /compress manually or start a new session"
        )


# --- cooldown ------------------------------------------------------------------------


def cooldown_seconds(failure_class: str, *, summarizer_configured: bool = True) -> float:
    """How long automatic compression waits after a summary failure of this class."""
    if not summarizer_configured or failure_class == "not_configured":
        return COOLDOWN_NOT_CONFIGURED_SECONDS
    if failure_class in _TRANSIENT_FAILURES:
        return COOLDOWN_TRANSIENT_SECONDS
    return COOLDOWN_GENERIC_SECONDS


class Cooldown(msgspec.Struct, frozen=True, kw_only=True):
    """Automatic compression is paused until ``until`` (seconds, the injected clock's)."""

    until: float | None = None

    def start(self, now: float, seconds: float) -> Cooldown:
        """Pause for ``seconds`` from ``now``; never shortens a longer pause already running."""
        if seconds < 0:
            raise InvalidInput(f"cooldown seconds must not be negative, got {seconds}")
        end = now + seconds
        if self.until is not None and self.until > end:
            return self
        return Cooldown(until=end)

    def active(self, now: float) -> bool:
        return self.until is not None and now < self.until

    def remaining(self, now: float) -> float:
        return max(0.0, self.until - now) if self.until is not None else 0.0

    def clear(self) -> Cooldown:
        """Manual compression clears the pause."""
        return Cooldown()


# --- gateway hygiene -----------------------------------------------------------------


class HygieneDecision(NamedTuple):
    should_compress: bool
    reason: str
    tokens_used: int
    source: TokenSource


def hygiene_should_compress(
    *,
    messages_count: int,
    real_prompt_tokens: int | None,
    rough_tokens: int,
    context_length: int,
    hygiene_threshold: float = 0.85,
    min_messages: int = 4,
    hard_message_limit: int = 5000,
) -> HygieneDecision:
    """The safety net before a turn for sessions that grew between turns.

    Fires at ``hygiene_threshold`` of the *window* (deliberately above the agent's
    own threshold, which would compress every turn here) or past the hard message
    limit, and only with at least ``min_messages``. The last real prompt count is
    preferred; a missing (or zero, i.e. never reported) one falls back to the rough
    estimate.
    """
    _non_negative(messages_count=messages_count, rough_tokens=rough_tokens)
    _positive(context_length=context_length, min_messages=min_messages, hard_message_limit=hard_message_limit)
    _ratio("hygiene_threshold", hygiene_threshold)
    if real_prompt_tokens is not None:
        _non_negative(real_prompt_tokens=real_prompt_tokens)
    source: TokenSource = "real" if real_prompt_tokens else "rough"
    tokens = real_prompt_tokens if real_prompt_tokens else rough_tokens
    if messages_count < min_messages:
        return HygieneDecision(False, f"only {messages_count} messages (hygiene needs {min_messages})", tokens, source)
    limit = int(round(context_length * hygiene_threshold, 6))
    if tokens >= limit:
        reason = (
            f"{tokens:,} {source} tokens reach {hygiene_threshold:.0%} of the "
            f"{context_length:,}-token window ({limit:,})"
        )
        return HygieneDecision(True, reason, tokens, source)
    if messages_count > hard_message_limit:
        reason = f"{messages_count:,} messages exceed the hard limit of {hard_message_limit:,}"
        return HygieneDecision(True, reason, tokens, source)
    reason = f"{tokens:,} {source} tokens are below {limit:,} ({hygiene_threshold:.0%} of the window)"
    return HygieneDecision(False, reason, tokens, source)


__all__ = [
    "BLOCK_AT_STRIKES",
    "DEFAULT_WARNING_LEVEL",
    "MIN_SAVING_PERCENT",
    "AntiThrash",
    "Cooldown",
    "HygieneDecision",
    "PressureDecision",
    "TokenSource",
    "cooldown_seconds",
    "hygiene_should_compress",
    "pressure_check",
]
