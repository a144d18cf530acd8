"""The ContextEngine protocol, the runtime state fold, and the built-in engine.

A context engine decides *whether* a session is worth compacting at a given size and
*how* to compact it; the service decides *when* to ask (preflight, in-loop, hygiene,
manual, overflow) and owns the HERMES_SPEC §2 guards (cooldown, anti-thrashing,
pressure warnings), which it records as events.

Runtime state is never kept only in memory: :func:`fold_runtime` folds the events of
one compression chain (usage reports, compactions, skips, cooldowns, warnings, window
changes) into a :class:`RuntimeState`, and :class:`RuntimeTracker` caches that fold
per chain and extends it with each record the ledger's projector folds (it listens
to ``Projector.listeners``; nothing is read back from the store after a chain's
first fold). A reopened ledger folds the same events to the same state, so it
decides exactly as the process that wrote them; a replay can explain every decision.

Plugging in another engine
--------------------------
Implement :class:`ContextEngine` and pass it as ``ContextService(ledger, engine=...)``:

* ``should_compress(session_id, prompt_tokens)`` -> ``(bool, reason)``: the size
  decision for automatic triggers only (the service applies the cooldown and
  anti-thrash guards on top, once, and manual ``/compress`` skips both).
* ``compress(session_id, trigger=..., focus=...)`` must write through the ledger, one
  atomic append per compaction (end the session and start its continuation together,
  e.g. with :func:`ctxledger.ledger.compaction.compact`), and return a ``CompactionOutcome``.
  Raise ``SummarizerError`` when the summary cannot be made and nothing was written
  (the service records the failure and a cooldown); let ``ConcurrencyError`` propagate
  (the service re-reads and continues on the compression tip).
* The lifecycle hooks (``on_session_start`` / ``on_session_end`` /
  ``on_session_reset`` / ``update_model``) and ``update_from_response`` let an engine
  keep caches; they must not be the only record of a decision.
* Optional: ``tools() -> list[dict]`` (extra tool schemas the agent may expose) and
  ``status(session_id) -> dict`` (the engine's own keys, merged into
  ``ContextService.status``; keys the service already reports are not overridden).
"""

from __future__ import annotations

import heapq
from typing import Any, Protocol, runtime_checkable

import msgspec

from ctxledger.compressor.config import CompressionConfig
from ctxledger.compressor.summarizers.base import Summarizer
from ctxledger.events import (
    CompressionChecked,
    CompressionSkipped,
    ContextLimitLearned,
    CooldownStarted,
    Event,
    MessageAppended,
    ModelSwitched,
    PressureWarning,
    Recorded,
    SessionStarted,
    SessionSwitched,
    SummaryGenerated,
    Trigger,
    UsageReported,
)
from ctxledger.ledger.compaction import CompactionOutcome, compact
from ctxledger.ledger.facade import Ledger
from ctxledger.runtime.pressure import AntiThrash, Cooldown

#: plan skip reasons (``CompactionPlan.skip_reason``) that count as a no-op pass for
#: anti-thrashing; "disabled" is configuration, not an ineffective pass
NOOP_REASONS = frozenset({"too_few_messages", "no_progress", "no_valid_cut"})


class RuntimeState(msgspec.Struct, frozen=True, kw_only=True):
    """What automatic compression remembers about one compression chain."""

    #: the chain's window as of the last folded event (it changes with model switches
    #: and learned limits, so every decision is judged against the window of its time)
    context_length: int = 0
    warned: bool = False
    anti: AntiThrash = msgspec.field(default_factory=AntiThrash)
    cooldown: Cooldown = msgspec.field(default_factory=Cooldown)
    first_after_compaction: bool = False
    last_fallback: bool = False
    #: the latest real prompt count of the chain's live session since it started, its
    #: model switched or a reported 0 (Hermes's kept count); a response without usage
    #: leaves it, and the in-loop check judges such a response by max(it, estimate)
    last_real_prompt: int | None = None


#: the named host agents whose strikes a chain keeps (the one with the fewest strikes goes
#: first, of those the least recently charged, so a blocked agent outlives the others): a
#: Hermes conversation has one long-lived agent and fresh copies that ask once (the
#: gateway's hygiene agent per message, a session's end renames the agent)
HOST_AGENTS_KEPT = 16


class HostAgents:
    """The anti-thrash strikes of a chain's named host agents, beside :class:`RuntimeState`
    (whose encoded form the guard-rule goldens fix; its ``anti`` is the shared slot).

    A pass a host agent decided (``ContextService.host_compress(agent=)``: the check's or
    skip's ``details["agent"]``) strikes in that agent's own slot, as Hermes counts
    ``_ineffective_compression_count`` in each agent's memory: another agent's pass
    neither uses nor clears it. Unnamed and ledger-decided passes strike in the shared
    slot, per chain (HERMES_SPEC §2), as before session 37; they hold unnamed asks only (a
    name opts out: the host keeps its own count, and a what-if's own loop decisions,
    which the host never made, would hold its replayed steps). A real prompt count below
    the threshold and a new window clear every slot (as the shared one); the fallback
    streak stays shared and holds every ask. At most :data:`HOST_AGENTS_KEPT` slots. Events
    without an agent (every ledger written before) fold exactly as :func:`fold_runtime`
    alone."""

    __slots__ = ("_pending", "_verdict", "slots")

    def __init__(self) -> None:
        self.slots: dict[str, AntiThrash] = {}  # agent -> its strikes (none: fresh)
        #: the agent, trigger and session of the last check, until its outcome
        self._pending: tuple[str, str, str] | None = None
        self._verdict: str | None = None  # the agent whose compaction the next count judges

    def fold(self, state: RuntimeState, event: Event, config: CompressionConfig) -> RuntimeState:
        """One transition (see :func:`fold_runtime`), each strike charged to its slot."""
        charged: str | None = None
        if isinstance(event, CompressionChecked):
            asking = host_agent(event)
            self._pending = None if asking is None else (asking, event.trigger, event.session_id)
        elif isinstance(event, CompressionSkipped):
            charged, self._pending = host_agent(event) or self._outcome_of(event), None
        elif isinstance(event, SessionSwitched):
            # only the check's own outcome: another writer's compaction (the CLI's, no
            # check) or an undo between a check and its outcome is not the agent's
            compaction, outcome = event.reason == "compression", self._outcome_of(event)
            self._pending = None
            if compaction:
                charged = self._verdict = outcome
        elif isinstance(event, UsageReported) and event.purpose == "agent":
            charged = self._verdict if state.first_after_compaction else None
            self._verdict = None
            if _fits(state, event, config):
                self.slots.clear()
        elif isinstance(event, ModelSwitched | ContextLimitLearned):
            self.slots.clear()
        if charged is None:
            return fold_runtime(state, event, config)
        return self._charge(charged, state, event, config)

    def _outcome_of(self, event: CompressionSkipped | SessionSwitched) -> str | None:
        """The agent of the pending check if `event` is its outcome (same trigger, session)."""
        if self._pending is None or self._pending[1:] != (event.trigger, event.session_id):
            return None
        return self._pending[0]

    def _charge(
        self, agent: str, state: RuntimeState, event: Event, config: CompressionConfig
    ) -> RuntimeState:
        replace = msgspec.structs.replace
        shared = state.anti
        own = replace(self.slots.pop(agent, AntiThrash()), fallback_streak=shared.fallback_streak)
        folded = fold_runtime(replace(state, anti=own), event, config)
        anti = folded.anti
        if anti.strikes or anti.last_pass_struck:  # a fresh slot is no slot
            self.slots[agent] = replace(anti, fallback_streak=0)
            if len(self.slots) > HOST_AGENTS_KEPT:  # fewest strikes, then least recent
                del self.slots[min(self.slots, key=lambda kept: self.slots[kept].strikes)]
        if isinstance(event, UsageReported) and _fits(state, event, config):
            shared = replace(shared, strikes=0, last_pass_struck=False)
        return replace(folded, anti=replace(shared, fallback_streak=anti.fallback_streak))

    def anti(self, shared: AntiThrash, agent: str | None) -> AntiThrash:
        """The strikes that hold `agent`'s ask: its own (a name opts out of the shared ones,
        as a Hermes agent counts only its own passes), and the chain's fallback streak."""
        if agent is None:
            return shared
        own = self.slots.get(agent, AntiThrash())
        return msgspec.structs.replace(own, fallback_streak=shared.fallback_streak)


def decided_by_host(event: CompressionChecked | CompressionSkipped) -> bool:
    """Whether a host decided the pass on its own (:meth:`ContextService.host_compress`)."""
    return event.details.get("decided_by") == "host"


def host_agent(event: CompressionChecked | CompressionSkipped) -> str | None:
    """The host agent that decided the pass (``host_compress(agent=)``), if one was named
    (an empty name is none): the fold and the what-if's history read it alike."""
    asking = event.details.get("agent")
    if not decided_by_host(event) or not isinstance(asking, str) or not asking:
        return None
    return asking


def _threshold(state: RuntimeState, config: CompressionConfig) -> int:
    """The threshold a real prompt count is judged against (strikes, their clearing)."""
    return max(1, config.threshold_tokens(state.context_length))


def _fits(state: RuntimeState, event: UsageReported, config: CompressionConfig) -> bool:
    """A real prompt count that clears the strikes, as :func:`_after_usage` judges it
    (:meth:`AntiThrash.after_real_prompt`): the per-agent slots clear at the same point."""
    if not event.counted or state.context_length < 1:
        return False
    return AntiThrash.clears(event.usage.prompt, _threshold(state, config))


def _after_usage(
    state: RuntimeState, event: UsageReported, config: CompressionConfig
) -> RuntimeState:
    if event.purpose != "agent" or state.context_length < 1:
        return state
    if not event.counted:
        # no real count, no verdict (HERMES_SPEC §2 judges by real counts, as Hermes does):
        # neither a strike nor a reset, but a compaction's pending verdict is consumed so
        # a much later reading is not charged to it. A reported 0 (some local servers)
        # is no count either, and like Hermes's ``last_prompt_tokens = 0`` it drops the
        # kept one; a response without usage keeps it.
        kept = state.last_real_prompt if not event.reported else None
        return msgspec.structs.replace(state, first_after_compaction=False, last_real_prompt=kept)
    prompt = event.usage.prompt
    threshold = _threshold(state, config)
    anti = state.anti.after_real_prompt(prompt, threshold, state.first_after_compaction)
    return msgspec.structs.replace(
        state, anti=anti, first_after_compaction=False, last_real_prompt=prompt
    )


def _after_switch(
    state: RuntimeState, event: SessionSwitched, config: CompressionConfig
) -> RuntimeState:
    anti = state.anti.after_compaction(
        event.tokens_before,
        event.tokens_after,
        fallback=state.last_fallback,
        min_saving=config.anti_thrash_min_saving,
    )
    # manual /compress clears a summarizer cooldown (HERMES_SPEC §2), but only when it worked
    cooldown = state.cooldown.clear() if event.trigger == "manual" else state.cooldown
    return msgspec.structs.replace(
        state, anti=anti, cooldown=cooldown, first_after_compaction=True, last_real_prompt=None
    )


def _after_new_window(
    state: RuntimeState, event: ModelSwitched | ContextLimitLearned
) -> RuntimeState:
    """A model switch or a window the provider stated, under the rule the event was
    written with (``scoped_guards``, see :mod:`ctxledger.events`).

    Scoped (hermes-agent 0.19's ``update_model``, which its loop also calls for a stated
    window): the strikes, the kept prompt count and a compaction's pending verdict
    judged the old window, so they go; the fallback streak and the summarizer cooldown
    go only with a different model (Hermes scopes them to the runtime that failed).
    Before (schema 1 rows): a switch cleared strikes and streak and kept the cooldown;
    a stated window changed only the window. Folding old rows the new way would change
    decisions their writer made (a reopened ledger, a what-if)."""
    replace = msgspec.structs.replace
    if not event.scoped_guards:
        if isinstance(event, ContextLimitLearned):
            return replace(state, context_length=event.context_length)
        return replace(
            state,
            context_length=event.context_length,
            anti=AntiThrash(),
            last_real_prompt=None,
            first_after_compaction=False,
        )
    new_model = isinstance(event, ModelSwitched) and event.model != event.previous_model
    return replace(
        state,
        context_length=event.context_length,
        anti=AntiThrash(fallback_streak=0 if new_model else state.anti.fallback_streak),
        cooldown=state.cooldown.clear() if new_model else state.cooldown,
        last_real_prompt=None,
        first_after_compaction=False,
    )


def fold_runtime(state: RuntimeState, event: Event, config: CompressionConfig) -> RuntimeState:
    """One transition of a chain's runtime state (pure); live use and replay share it.

    Changed from the first version: the threshold comes from the window *as of the
    event* (folded from SessionStarted / ModelSwitched / ContextLimitLearned) rather
    than from the window at the time of the fold, so a reopened ledger folds to the
    same state as the live process even after the window changed.
    """
    replace = msgspec.structs.replace
    if isinstance(event, UsageReported):
        return _after_usage(state, event, config)
    if isinstance(event, ModelSwitched | ContextLimitLearned):
        return _after_new_window(state, event)
    if isinstance(event, SessionStarted):
        return replace(state, context_length=event.context_length)
    if isinstance(event, SummaryGenerated):
        return replace(state, last_fallback=event.fallback)
    if isinstance(event, SessionSwitched):
        if event.reason == "compression":
            return _after_switch(state, event, config)
        return replace(state, last_real_prompt=None)  # another live session: no count yet
    if (
        isinstance(event, CompressionSkipped)
        and event.trigger != "manual"
        and event.reason in NOOP_REASONS
    ):
        anti = state.anti.after_compaction(
            0, 0, noop=True, min_saving=config.anti_thrash_min_saving
        )
        return replace(state, anti=anti)
    if isinstance(event, CooldownStarted):
        return replace(state, cooldown=state.cooldown.extend(event.until))
    if isinstance(event, PressureWarning):
        return replace(state, warned=not event.cleared)
    return state


class RuntimeTracker:
    """:class:`RuntimeState` per compression chain, folded from the ledger and cached.

    A chain is folded from its streams the first time it is asked for (or after
    :meth:`forget`); from then on the tracker rides along with the ledger's
    projector (``Projector.listeners``): every record the ledger folds is folded into
    the cached state of its chain, so the state always matches the projections and
    nothing is read or decoded twice. Records of chains nobody asked for are ignored.
    """

    def __init__(self, ledger: Ledger, config: CompressionConfig | None = None) -> None:
        self.ledger = ledger
        self.config = config or ledger.config
        self._states: dict[str, RuntimeState] = {}
        #: chain root -> its named host agents' strikes (:class:`HostAgents`)
        self._agents: dict[str, HostAgents] = {}
        #: session -> chain root (a session's root never changes once it started)
        self._roots: dict[str, str] = {}
        ledger.projector.listeners.append(self._on_record)

    def _root(self, session_id: str) -> str:
        root = self._roots.get(session_id)
        if root is None:
            root = self._roots[session_id] = self.ledger.chains.root(session_id)
        return root

    def _on_record(self, rec: Recorded) -> None:
        """Fold one record the projector just folded into its chain's cached state."""
        if not self._states or type(rec.event) is MessageAppended:
            return  # nothing cached, or an event the runtime fold ignores
        if rec.stream not in self.ledger.chains.state.sessions:
            return  # a session that never started: the projections skipped it too
        root = self._root(rec.stream)
        state = self._states.get(root)
        if state is None:
            return
        try:
            self._states[root] = self._fold(root, state, rec.event)
        except Exception:
            # never break the ledger's fold: drop the cache, and the next state() refolds
            # the chain from the store (raising there if the event really cannot be folded)
            del self._states[root]
            self._agents.pop(root, None)

    def state(self, session_id: str) -> RuntimeState:
        """The chain's state as of the ledger's last folded event."""
        root = self._root(session_id)
        cached = self._states.get(root)
        if cached is not None:
            return cached
        ledger = self.ledger
        seq = ledger.projector.last_seq
        state = RuntimeState()
        # decision events may land on a session after it ended, so merge the chain's
        # streams by seq instead of reading them one after the other; events the
        # projector has not folded yet reach the cache through the listener later
        streams = [ledger.store.read_session(sid) for sid in ledger.chains.chain(root)]
        self._agents[root] = HostAgents()
        for rec in heapq.merge(*streams, key=lambda r: r.seq):
            if rec.seq > seq:
                break
            state = self._fold(root, state, rec.event)
        self._states[root] = state
        return state

    def rebuilt(self, session_id: str) -> RuntimeState:
        """The state folded from scratch (what a reopened ledger computes)."""
        self.forget(session_id)
        return self.state(session_id)

    def _fold(self, root: str, state: RuntimeState, event: Event) -> RuntimeState:
        return self._agents.setdefault(root, HostAgents()).fold(state, event, self.config)

    def host_strikes(self, session_id: str) -> dict[str, int]:
        """The strikes of the chain's named host agents that have any (:class:`HostAgents`)."""
        self.state(session_id)
        agents = self._agents[self._root(session_id)]
        return {agent: anti.strikes for agent, anti in agents.slots.items()}

    def forget(self, session_id: str) -> None:
        root = self._root(session_id)
        self._states.pop(root, None)
        self._agents.pop(root, None)

    def guard(self, session_id: str, now: float, agent: str | None = None) -> tuple[bool, str]:
        """Whether automatic compression may run now: no cooldown, not blocked by strikes.
        `agent`: a host agent asking; its own strikes hold it, not another agent's nor
        the chain's shared ones (:class:`HostAgents`)."""
        state = self.state(session_id)
        if state.cooldown.active(now):
            return False, f"summarizer cooldown: {state.cooldown.remaining(now):.0f}s left"
        limit = self.config.anti_thrash_strikes
        anti = self._agents[self._root(session_id)].anti(state.anti, agent)
        if anti.blocked(limit):
            return False, anti.describe(limit)
        return True, "no cooldown, not blocked"


@runtime_checkable
class ContextEngine(Protocol):
    """What the service needs from a context engine (see the module docstring)."""

    name: str

    def update_from_response(self, session_id: str, event: UsageReported) -> None:
        """Called after every provider response with its recorded usage."""

    def should_compress(
        self, session_id: str, prompt_tokens: int | None = None
    ) -> tuple[bool, str]:
        """(decision, reason) for an automatic compaction at this size."""

    async def compress(
        self, session_id: str, *, trigger: Trigger, focus: str | None = None
    ) -> CompactionOutcome:
        """Compact now; append the events atomically; return what happened."""

    def on_session_start(self, session_id: str) -> None: ...

    def on_session_end(self, session_id: str) -> None: ...

    def on_session_reset(self, session_id: str) -> None: ...

    def update_model(self, session_id: str, model: str, context_length: int) -> None: ...


class BuiltinEngine:
    """The Hermes-style compressor over the ledger: the threshold decides, ``compact`` runs.

    It keeps no state: the guards' state is the service's :class:`RuntimeTracker`.
    """

    name = "ctxledger"

    def __init__(
        self, ledger: Ledger, summarizer: Summarizer, config: CompressionConfig | None = None
    ) -> None:
        self.ledger = ledger
        self.summarizer = summarizer
        self.config = config or ledger.config

    def threshold_tokens(self, session_id: str) -> int:
        return self.config.threshold_tokens(
            self.ledger.transcript.session(session_id).context_length
        )

    # --- protocol --------------------------------------------------------------------

    def update_from_response(self, session_id: str, event: UsageReported) -> None:
        """Nothing to do: the service's tracker folds the recorded ``UsageReported``."""
        return None

    def should_compress(
        self, session_id: str, prompt_tokens: int | None = None
    ) -> tuple[bool, str]:
        """The size decision only: the service applies the cooldown / anti-thrash guards."""
        if not self.config.enabled:
            return False, "compression is disabled"
        tokens = (
            prompt_tokens
            if prompt_tokens is not None
            else self.ledger.transcript.total_tokens(session_id)
        )
        threshold = self.threshold_tokens(session_id)
        if tokens < threshold:
            return False, f"{tokens:,} tokens is below the threshold ({threshold:,})"
        return True, f"{tokens:,} tokens ≥ threshold {threshold:,}"

    async def compress(
        self, session_id: str, *, trigger: Trigger, focus: str | None = None
    ) -> CompactionOutcome:
        return await compact(
            self.ledger,
            session_id,
            self.summarizer,
            config=self.config,
            focus=focus,
            trigger=trigger,
            record_abort=False,  # the service records the abort with its cooldown
        )

    def on_session_start(self, session_id: str) -> None:
        return None

    def on_session_end(self, session_id: str) -> None:
        return None

    def on_session_reset(self, session_id: str) -> None:
        return None

    def update_model(self, session_id: str, model: str, context_length: int) -> None:
        """Nothing cached depends on the window: the fold reads the recorded ModelSwitched."""
        return None

    def tools(self) -> list[dict[str, Any]]:
        return []

    def status(self, session_id: str) -> dict[str, Any]:
        """Nothing beyond what ``ContextService.status`` reports: the runtime state is the service's."""
        return {"engine": self.name}


__all__ = [
    "NOOP_REASONS",
    "BuiltinEngine",
    "ContextEngine",
    "HostAgents",
    "RuntimeState",
    "RuntimeTracker",
    "decided_by_host",
    "fold_runtime",
    "host_agent",
]
