"""The ContextEngine protocol and the built-in engine (the ctxledger compressor).

A context engine decides *whether* and *how* a session is compacted; the service
decides *when* to ask (preflight, in-loop, hygiene, manual, overflow). The built-in
engine keeps its runtime state (pressure warning, anti-thrash strikes, cooldown) as a
fold over the chain's events, so a reopened ledger decides exactly as before and a
replay can explain every decision.

To plug another engine, implement :class:`ContextEngine` and pass it to
``ContextService(engine=...)``; its ``compress`` must append its own events through
the ledger (one atomic append per compaction) and return a ``CompactionOutcome``.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import msgspec

from ctxledger.compaction import CompactionOutcome, compact
from ctxledger.compressor.config import CompressionConfig
from ctxledger.compressor.summarizers.base import Summarizer
from ctxledger.events import (
    CompressionSkipped,
    CooldownStarted,
    Event,
    PressureWarning,
    SessionSwitched,
    SummaryGenerated,
    Trigger,
    UsageReported,
)
from ctxledger.ledger import Ledger
from ctxledger.runtime.pressure import AntiThrash, Cooldown

#: CompressionSkipped reasons that count as a no-op pass for anti-thrashing
NOOP_REASONS = ("no progress", "no_progress", "too few messages", "nothing to compress")


class RuntimeState(msgspec.Struct, frozen=True, kw_only=True):
    """What automatic compression remembers about one compression chain."""

    warned: bool = False
    anti: AntiThrash = msgspec.field(default_factory=AntiThrash)
    cooldown: Cooldown = msgspec.field(default_factory=Cooldown)
    first_after_compaction: bool = False
    last_fallback: bool = False
    compactions: int = 0


def fold_runtime(state: RuntimeState, event: Event, threshold_tokens: int) -> RuntimeState:
    """One transition of the runtime state (pure); the same function serves live use and replay."""
    replace = msgspec.structs.replace
    if isinstance(event, UsageReported) and event.purpose == "agent":
        anti = state.anti.after_real_prompt(event.usage.prompt, max(1, threshold_tokens), state.first_after_compaction)
        return replace(state, anti=anti, first_after_compaction=False)
    if isinstance(event, SummaryGenerated):
        return replace(state, last_fallback=event.fallback)
    if isinstance(event, SessionSwitched) and event.reason == "compression":
        anti = state.anti.after_compaction(event.tokens_before, event.tokens_after, fallback=state.last_fallback)
        cooldown = state.cooldown.clear() if event.trigger == "manual" else state.cooldown
        return replace(state, anti=anti, cooldown=cooldown, first_after_compaction=True, compactions=state.compactions + 1)
    if isinstance(event, CompressionSkipped) and event.trigger != "manual" and event.reason.startswith(NOOP_REASONS):
        before = int(event.details.get("tokens_before", 0) or 0)
        return replace(state, anti=state.anti.after_compaction(before, before, noop=True))
    if isinstance(event, CooldownStarted):
        return replace(state, cooldown=Cooldown(until=event.until))
    if isinstance(event, PressureWarning):
        return replace(state, warned=not event.cleared)
    return state


@runtime_checkable
class ContextEngine(Protocol):
    """What the service needs from a context engine (the built-in one is the default)."""

    name: str

    def update_from_response(self, session_id: str, event: UsageReported) -> None:
        """Called after every provider response with its recorded usage."""

    def should_compress(self, session_id: str, prompt_tokens: int | None = None) -> tuple[bool, str]:
        """(decision, reason) for an automatic compaction at this size."""

    async def compress(self, session_id: str, *, trigger: Trigger, focus: str | None = None) -> CompactionOutcome:
        """Compact now; append the events; return what happened."""

    def has_content_to_compress(self, session_id: str) -> bool: ...

    def on_session_start(self, session_id: str) -> None: ...

    def on_session_end(self, session_id: str) -> None: ...

    def on_session_reset(self, session_id: str) -> None: ...

    def update_model(self, session_id: str, model: str, context_length: int) -> None: ...

    def status(self, session_id: str) -> dict[str, Any]: ...


class BuiltinEngine:
    """The Hermes-style compressor over the ledger, with state folded from events."""

    name = "ctxledger"

    def __init__(self, ledger: Ledger, summarizer: Summarizer, config: CompressionConfig | None = None) -> None:
        self.ledger = ledger
        self.summarizer = summarizer
        self.config = config or ledger.config
        self._states: dict[str, tuple[int, RuntimeState]] = {}

    # --- state ---------------------------------------------------------------------

    def threshold_tokens(self, session_id: str) -> int:
        return self.config.threshold_tokens(self.ledger.transcript.session(session_id).context_length)

    def state(self, session_id: str) -> RuntimeState:
        """The chain's runtime state as of the ledger's last folded event (cached per chain)."""
        root = self.ledger.chains.root(session_id)
        seq = self.ledger.projector.last_seq
        cached = self._states.get(root)
        if cached is not None and cached[0] == seq:
            return cached[1]
        chain = self.ledger.chains.chain(session_id)
        members = set(chain)
        thresholds = {sid: self.threshold_tokens(sid) for sid in chain}
        if cached is None:
            state = RuntimeState()
            records = (rec for sid in chain for rec in self.ledger.store.read_stream(sid))
        else:
            # fold only what was appended since (the chain may have grown a continuation)
            state = cached[1]
            records = (r for r in self.ledger.store.read_all(cached[0] + 1, seq) if r.stream in members)
        for rec in records:
            if rec.seq <= seq:
                state = fold_runtime(state, rec.event, thresholds[rec.stream])
        self._states[root] = (seq, state)
        return state

    # --- protocol --------------------------------------------------------------------

    def update_from_response(self, session_id: str, event: UsageReported) -> None:
        """State is folded from the recorded UsageReported (see :meth:`state`); nothing to do."""
        return None

    def should_compress(self, session_id: str, prompt_tokens: int | None = None) -> tuple[bool, str]:
        if not self.config.enabled:
            return False, "compression is disabled"
        tokens = prompt_tokens if prompt_tokens is not None else self.ledger.transcript.total_tokens(session_id)
        threshold = self.threshold_tokens(session_id)
        if tokens < threshold:
            return False, f"{tokens:,} tokens is below the threshold ({threshold:,})"
        state = self.state(session_id)
        now = self.ledger.clock()
        if state.cooldown.active(now):
            return False, f"summarizer cooldown: {state.cooldown.remaining(now):.0f}s left"
        if not state.anti.allows():
            return False, state.anti.describe()
        return True, f"{tokens:,} tokens ≥ threshold {threshold:,}"

    async def compress(self, session_id: str, *, trigger: Trigger, focus: str | None = None) -> CompactionOutcome:
        return await compact(self.ledger, session_id, self.summarizer, config=self.config, focus=focus, trigger=trigger)

    def has_content_to_compress(self, session_id: str) -> bool:
        from ctxledger.compaction import plan_compaction

        return plan_compaction(self.ledger, session_id, config=self.config, force=True).plan.action == "compress"

    def on_session_start(self, session_id: str) -> None:
        return None

    def on_session_end(self, session_id: str) -> None:
        self._states.pop(self.ledger.chains.root(session_id), None)

    def on_session_reset(self, session_id: str) -> None:
        self._states.pop(self.ledger.chains.root(session_id), None)

    def update_model(self, session_id: str, model: str, context_length: int) -> None:
        """The threshold derives from the session's recorded window; nothing cached to fix."""
        self._states.pop(self.ledger.chains.root(session_id), None)

    def status(self, session_id: str) -> dict[str, Any]:
        state = self.state(session_id)
        view = self.ledger.transcript.session(session_id)
        now = self.ledger.clock()
        return {
            "engine": self.name,
            "context_length": view.context_length,
            "threshold_tokens": self.threshold_tokens(session_id),
            "tokens": self.ledger.transcript.total_tokens(session_id),
            "last_prompt_tokens": self.ledger.usage(session_id).last_prompt_tokens,
            "compactions": state.compactions,
            "strikes": state.anti.strikes,
            "blocked": state.anti.blocked,
            "cooldown_remaining": state.cooldown.remaining(now),
            "pressure_warned": state.warned,
        }
