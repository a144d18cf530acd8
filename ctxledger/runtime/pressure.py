"""When automatic compression may run: pressure warnings, anti-thrashing, cooldowns, hygiene.

Owns HERMES_SPEC §2 "Context pressure warnings", the anti-thrashing guard, the
summary-failure cooldown and the gateway hygiene check. Every piece is a pure
decision or an immutable state with pure transitions (each method returns a new
value); the caller keeps the state, injects ``now``, and records the decisions as
events (``PressureWarning``, ``CompressionSkipped``, ``CooldownStarted``).

Settings are never defaulted here: limits, levels and lengths come from
:class:`~ctxledger.compressor.config.CompressionConfig` (``pressure_tokens``,
``hygiene_threshold_tokens``, ``anti_thrash_strikes``, ``anti_thrash_min_saving``,
``cooldown_for``), so every decision uses the config's one rounding.
"""

from __future__ import annotations

from typing import Final, Literal, NamedTuple

import msgspec

from ctxledger.errors import InvalidInput
from ctxledger.integers import shown

#: two fallback summaries in a row mean the summarizer is not working: automatic
#: compression pauses until a summary succeeds (hermes-agent 0.19's breaker)
FALLBACK_STREAK_STRIKE: Final = 2
#: what a hygiene decision at the hard message limit says (a what-if's warning reads it)
HARD_LIMIT_REACHED: Final = "messages reach the hard limit"

TokenSource = Literal["real", "estimate"]


def _non_negative(**values: int) -> None:
    for name, value in values.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise InvalidInput(f"{name} must be a non-negative integer, got {shown(value)}")


def _positive(**values: int) -> None:
    for name, value in values.items():
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise InvalidInput(f"{name} must be a positive integer, got {shown(value)}")


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
    warn_at_tokens: int
    percent: int
    text: str | None = None


def pressure_check(
    tokens: int, threshold_tokens: int, warn_at_tokens: int, *, warned: bool
) -> PressureDecision:
    """Warn once when ``tokens`` reach ``warn_at_tokens`` (``CompressionConfig.pressure_tokens``).

    The level is a share of the *threshold*, not of the window: the warning comes a
    little before automatic compression would fire. Staying above the level does not
    warn again; dropping below it clears the warning so the next climb warns anew.
    """
    _non_negative(tokens=tokens, warn_at_tokens=warn_at_tokens)
    _positive(threshold_tokens=threshold_tokens)
    above = tokens >= warn_at_tokens
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
        warn_at_tokens=warn_at_tokens,
        percent=percent,
        text=text,
    )


# --- anti-thrashing ------------------------------------------------------------------


class AntiThrash(msgspec.Struct, frozen=True, kw_only=True):
    """Strikes against automatic compression; blocked at ``anti_thrash_strikes``.

    A compaction pass earns at most one strike: it saved less than
    ``anti_thrash_min_saving``, it was a no-op, or (judged later) the first real prompt
    count after it was still at or above the threshold. Any real count below the
    threshold resets the strikes: compression is working again.

    Apart from the strikes, two fallback summaries in a row (the summarizer keeps
    failing) block automatic compression until a compaction's summary succeeds (a
    manual ``/compress``, an overflow recovery) or the model changes; a prompt that
    fits does not lift it, since it says nothing about the summarizer (hermes-agent
    0.19's fallback breaker). Manual ``/compress`` is never blocked (the service does
    not ask).
    """

    strikes: int = 0
    fallback_streak: int = 0
    #: the last pass already struck, so its follow-up prompt must not strike twice
    last_pass_struck: bool = False
    last_reason: str | None = None

    def blocked(self, limit: int) -> bool:
        """Whether automatic compression is paused: ``limit`` strikes (``anti_thrash_strikes``)
        or the fallback streak."""
        return self.strikes >= limit or self.fallback_streak >= FALLBACK_STREAK_STRIKE

    def after_compaction(
        self,
        tokens_before: int,
        tokens_after: int,
        noop: bool = False,
        fallback: bool = False,
        *,
        min_saving: float,
    ) -> AntiThrash:
        """The state after one compaction pass (pure).

        ``min_saving`` is the configured ``anti_thrash_min_saving`` (a fraction of the prompt).
        """
        _non_negative(tokens_before=tokens_before, tokens_after=tokens_after)
        streak = self.fallback_streak
        reason: str | None = None
        if noop:
            reason = "compaction changed nothing"
        else:
            streak = streak + 1 if fallback else 0
            saved = tokens_before - tokens_after
            if saved * 100 < min_saving * 100 * tokens_before:
                share = saved * 100 / tokens_before if tokens_before else 0.0
                reason = f"compaction saved only {share:.1f}% ({tokens_before:,} -> {tokens_after:,} tokens)"
        return AntiThrash(
            strikes=self.strikes + (reason is not None),
            fallback_streak=streak,
            last_pass_struck=reason is not None,
            last_reason=reason or self.last_reason,
        )

    @staticmethod
    def clears(prompt_tokens: int, threshold_tokens: int) -> bool:
        """Whether a real prompt of this size clears the strikes (a prompt that fits)."""
        return prompt_tokens < threshold_tokens

    def after_real_prompt(
        self, prompt_tokens: int, threshold_tokens: int, first_after_compaction: bool
    ) -> AntiThrash:
        """The state after the provider reported a real prompt size (pure)."""
        _non_negative(prompt_tokens=prompt_tokens)
        _positive(threshold_tokens=threshold_tokens)
        if AntiThrash.clears(prompt_tokens, threshold_tokens):
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

    def describe(self, limit: int) -> str:
        """A sentence for ``CompressionSkipped.reason`` (when blocked at ``limit`` strikes)."""
        if not self.blocked(limit):
            return f"automatic compression allowed ({self.strikes} strike(s))"
        if self.strikes < limit:
            return (
                f"automatic compression paused after {self.fallback_streak} fallback summaries "
                "in a row (the summarizer keeps failing); run /compress manually once it "
                "works again, or start a new session"
            )
        return (
            f"automatic compression paused after {self.strikes} ineffective passes "
            f"(last: {self.last_reason}); run /compress manually or start a new session"
        )


# --- cooldown ------------------------------------------------------------------------


class Cooldown(msgspec.Struct, frozen=True, kw_only=True):
    """Automatic compression is paused until ``until`` (seconds, the injected clock's).

    The length of a pause is the config's (``CompressionConfig.cooldown_for``).
    """

    until: float | None = None

    def start(self, now: float, seconds: float) -> Cooldown:
        """Pause for ``seconds`` from ``now``; never shortens a longer pause already running."""
        if seconds < 0:
            raise InvalidInput(f"cooldown seconds must not be negative, got {seconds}")
        return self.extend(now + seconds)

    def extend(self, until: float) -> Cooldown:
        """Pause until ``until`` at least: a later, shorter cooldown never cuts a longer one short."""
        if self.until is not None and self.until >= until:
            return self
        return Cooldown(until=until)

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
    estimated_tokens: int,
    context_length: int,
    limit_tokens: int,
    min_messages: int,
    hard_message_limit: int,
) -> HygieneDecision:
    """The safety net before a turn for sessions that grew between turns.

    Fires at ``limit_tokens`` (``CompressionConfig.hygiene_threshold_tokens``: a share
    of the *window*, deliberately above the agent's own threshold, which would
    compress every turn here) or at the hard message limit (hermes-agent 0.19 fires at
    it, not past it), and only with at least ``min_messages``. The last real prompt
    count is preferred; a missing (or zero, i.e. never reported) one falls back to the
    estimate.
    """
    _non_negative(
        messages_count=messages_count, estimated_tokens=estimated_tokens, limit_tokens=limit_tokens
    )
    _positive(
        context_length=context_length,
        min_messages=min_messages,
        hard_message_limit=hard_message_limit,
    )
    if real_prompt_tokens is not None:
        _non_negative(real_prompt_tokens=real_prompt_tokens)
    source: TokenSource = "real" if real_prompt_tokens else "estimate"
    tokens = real_prompt_tokens if real_prompt_tokens else estimated_tokens
    if messages_count < min_messages:
        return HygieneDecision(
            False, f"only {messages_count} messages (hygiene needs {min_messages})", tokens, source
        )
    share = f"{limit_tokens / context_length:.0%}"
    if tokens >= limit_tokens:
        reason = f"{tokens:,} {source} tokens reach {share} of the {context_length:,}-token window ({limit_tokens:,})"
        return HygieneDecision(True, reason, tokens, source)
    if messages_count >= hard_message_limit:
        reason = f"{messages_count:,} {HARD_LIMIT_REACHED} of {hard_message_limit:,}"
        return HygieneDecision(True, reason, tokens, source)
    reason = f"{tokens:,} {source} tokens are below {limit_tokens:,} ({share} of the window)"
    return HygieneDecision(False, reason, tokens, source)


__all__ = [
    "FALLBACK_STREAK_STRIKE",
    "HARD_LIMIT_REACHED",
    "AntiThrash",
    "Cooldown",
    "HygieneDecision",
    "PressureDecision",
    "TokenSource",
    "hygiene_should_compress",
    "pressure_check",
]
