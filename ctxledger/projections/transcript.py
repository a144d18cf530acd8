"""Transcript projection: the live API view of every session.

A pure fold over the log. A session's view is its system prompt plus its live
messages, by id. After a compaction, the continuation's view is exactly the layout
recorded in the parent's ``SessionSwitched`` (carried messages by id; summary, merged,
stub and stripped messages recorded in full). Originals are never removed from
``messages``: the state keeps every message ever appended, so any of them can be
looked up after any number of compactions.

A message folded from a full event keeps its body; one folded from a
:class:`~ctxledger.eventstore.rows.MessageHead` (a rebuild: ``Projector.catch_up``)
keeps only its seq and reads the body from the log the first time it is asked for
(:class:`~ctxledger.projections.bodies.Bodies`), then keeps it. Either way
``StoredMessage.message`` is the message exactly as appended.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

import msgspec

from ctxledger.errors import UnknownMessage, UnknownSession
from ctxledger.events import (
    ContextLimitLearned,
    Event,
    MessageAppended,
    MessagePinned,
    ModelSwitched,
    ReplyWithdrawn,
    SessionEnded,
    SessionStarted,
    SessionSwitched,
    SystemPromptSet,
    ToolCallIdsRepaired,
    ToolOutputPersisted,
    ToolsDeclared,
)
from ctxledger.eventstore.rows import ColumnRow, HeadRow
from ctxledger.integers import shown as quoted
from ctxledger.messages import JSON
from ctxledger.projections import rowfold
from ctxledger.projections.bodies import Bodies
from ctxledger.projections.roughsum import RoughSums
from ctxledger.projections.stored import (
    SessionView,
    StoredMessage,
    TranscriptState,
    grew_from,
    load_bodies,
    read_bodies,
    with_bodies,
)

__all__ = [
    "SessionView",
    "StoredMessage",
    "TranscriptProjection",
    "TranscriptState",
    "grew_from",
    "load_bodies",
    "read_bodies",
    "with_bodies",
]

#: how many sessions keep a cached API view (an agent process works on a handful)
_API_CACHE_SESSIONS = 64


class TranscriptProjection:
    """Fold events into :class:`TranscriptState`. ``apply`` must see events in log order."""

    name = "transcript"

    def __init__(self, state: TranscriptState | None = None) -> None:
        self.state = state or TranscriptState()
        #: per-session API view (system message + live messages), built on first read and
        #: kept current by the fold so a read after an append costs a list copy, not a
        #: rebuild by id. Derived data only: never serialized, never part of a fingerprint.
        self._api: dict[str, list[JSON]] = {}
        #: Hermes's rough estimate of each cached view, kept as it grows (derived as well)
        self._rough = RoughSums(self._api)
        self._dispatch = {
            SessionStarted: self._started,
            SystemPromptSet: self._system,
            ToolsDeclared: self._tools,
            ToolOutputPersisted: self._persisted,
            SessionSwitched: self._switched,
            SessionEnded: self._ended,
            ModelSwitched: self._model,
            ContextLimitLearned: self._limit,
            MessagePinned: self._pinned,
            ToolCallIdsRepaired: self._repaired,
            ReplyWithdrawn: self._withdrawn,
        }

    # --- folding -------------------------------------------------------------------

    def apply(self, seq: int, event: Event, version: int = 0) -> None:
        if type(event) is MessageAppended:
            # the hot path of a rebuild: most events are messages, so they skip the dispatch
            sid = event.session_id
            view = self.state.sessions.get(sid)
            if view is None:  # see below: a fold never fails on a stored event
                self.state.last_seq = seq
                return
            self.state.messages[event.message_id] = StoredMessage(
                body=event.message, tokens=event.tokens, session_id=sid, seq=seq
            )
            view.live.append(event.message_id)
            view.live_tokens += event.tokens
            if self._api:
                cached = self._api.get(sid)
                if cached is not None:
                    cached.append(event.message)
            view.version = version
            self.state.last_seq = seq
            return
        if type(event) is not SessionStarted and event.session_id not in self.state.sessions:
            # the log is immutable: an event naming a session that never started (written by
            # another tool, or before the ledger checked) is skipped, never a fold failure
            self.state.last_seq = seq
            return
        handler = self._dispatch.get(type(event))
        if handler is not None:
            handler(seq, event)
        current = self.state.sessions.get(event.session_id)
        if current is not None:
            current.version = version
        self.state.last_seq = seq

    def fold_rows(
        self,
        pages: Iterable[list[HeadRow]],
        bodies: Bodies,
        other: Callable[[int, Event, int], None],
        after: int,
    ) -> tuple[int, int]:
        """Fold ``read_rows`` pages after seq `after` (:func:`rowfold.fold_rows`); returns
        the last seq folded (`after` if none) and how many rows were folded."""
        return rowfold.fold_rows(self.state, self._api, pages, bodies, other, after)

    def fold_column_rows(
        self,
        pages: Iterable[tuple[Mapping[int, str], list[ColumnRow]]],
        bodies: Bodies,
        other: Callable[[int, Event, int], None],
        after: int,
        versions: rowfold.Versions,
    ) -> tuple[int, int]:
        """Fold ``read_heads`` pages (heads in columns: :func:`rowfold.fold_column_rows`;
        `versions` gives each stream's version as of a seq)."""
        return rowfold.fold_column_rows(
            self.state, self._api, pages, bodies, other, after, versions
        )

    def _view(self, session_id: str) -> SessionView:
        try:
            return self.state.sessions[session_id]
        except (KeyError, TypeError):  # TypeError: a list or a dict as the id
            raise UnknownSession(f"no session {quoted(session_id)} in the log") from None

    def _started(self, seq: int, e: Event) -> None:
        assert isinstance(e, SessionStarted)
        view = SessionView(
            session_id=e.session_id,
            model=e.model,
            context_length=e.context_length,
            encoding=e.encoding,
            reason=e.reason,
            parent_session_id=e.parent_session_id,
            compaction_id=e.compaction_id,
            config=e.config,
        )
        self.state.sessions[e.session_id] = view
        self._api.pop(e.session_id, None)
        switch = self.state.pending.pop(e.session_id, None)
        if switch is not None:
            parent = self.state.sessions[switch.session_id]
            view.tools, view.tools_tokens = parent.tools, parent.tools_tokens
            view.system_prompt = switch.system_prompt
            view.system_tokens = switch.system_prompt_tokens
            view.prompt_role = switch.system_prompt_role
            carried = {x.message_id for x in switch.layout}
            view.pinned = [p for p in parent.pinned if p in carried]
            for entry in switch.layout:
                view.live.append(entry.message_id)
                view.live_tokens += self.tokens_of(entry.message_id)

    def _system(self, seq: int, e: Event) -> None:
        assert isinstance(e, SystemPromptSet)
        view = self.state.sessions[e.session_id]
        view.system_prompt, view.system_tokens = e.text, e.tokens
        view.prompt_role = e.role
        self._api.pop(e.session_id, None)

    def _tools(self, seq: int, e: Event) -> None:
        assert isinstance(e, ToolsDeclared)
        view = self.state.sessions[e.session_id]
        view.tools, view.tools_tokens = e.tools, e.tokens

    def _persisted(self, seq: int, e: Event) -> None:
        assert isinstance(e, ToolOutputPersisted)
        if e.message_id not in self.state.messages:
            return  # names no message: nothing to show differently
        original = self.stored(e.message_id)
        shown = StoredMessage(
            body={**original.message, "content": e.replacement},
            tokens=e.replacement_tokens,
            session_id=original.session_id,
            origin="persisted",
            source_id=e.message_id,
            seq=seq,
        )
        view = self.state.sessions[e.session_id]
        if e.message_id in view.live:
            view.live_tokens += shown.tokens - self.tokens_of(e.message_id)
        self.state.shown[e.message_id] = shown
        self._show_in_cache(e.session_id, e.message_id, shown.message)

    def _show_in_cache(self, session_id: str, message_id: str, message: JSON) -> None:
        """Put a replacement into the cached views that show `message_id`.

        Another session can only show it by carrying it (a continuation), which is rare
        enough that dropping those caches is simpler than finding the position.
        """
        for other in [sid for sid in self._api if sid != session_id]:
            del self._api[other]
        cached = self._api.get(session_id) if isinstance(session_id, str) else None
        if cached is None:
            return
        live = self.state.sessions[session_id].live
        # the message is almost always among the last few (persisted in its own append)
        for back in range(1, len(live) + 1):
            if live[-back] == message_id:
                self._rough.replaced(session_id, cached, len(cached) - back, cached[-back], message)
                cached[-back] = message
                return

    def _switched(self, seq: int, e: Event) -> None:
        assert isinstance(e, SessionSwitched)
        view = self.state.sessions[e.session_id]
        view.ended, view.end_reason, view.continued_as = True, e.reason, e.new_session_id
        for entry in e.layout:
            if entry.message is not None:
                self.state.messages[entry.message_id] = StoredMessage(
                    body=entry.message,
                    tokens=entry.tokens,
                    session_id=e.new_session_id,
                    origin=entry.origin,
                    source_id=entry.source_id,
                    seq=seq,
                )
        self.state.pending[e.new_session_id] = e

    def _ended(self, seq: int, e: Event) -> None:
        assert isinstance(e, SessionEnded)
        view = self.state.sessions[e.session_id]
        view.ended, view.end_reason = True, e.reason

    def _model(self, seq: int, e: Event) -> None:
        assert isinstance(e, ModelSwitched)
        view = self.state.sessions[e.session_id]
        view.model, view.context_length = e.model, e.context_length

    def _limit(self, seq: int, e: Event) -> None:
        assert isinstance(e, ContextLimitLearned)
        self.state.sessions[e.session_id].context_length = e.context_length

    def _repaired(self, seq: int, e: Event) -> None:
        assert isinstance(e, ToolCallIdsRepaired)
        for entry in e.repairs:
            if entry.call_index is not None:
                self.state.call_renames[entry.replacement] = entry.original

    def _withdrawn(self, seq: int, e: Event) -> None:
        """The messages leave the live view (and the pins); ``messages`` keeps them."""
        assert isinstance(e, ReplyWithdrawn)
        view = self.state.sessions[e.session_id]
        gone = set(e.message_ids) & set(view.live)
        if not gone:
            return
        view.live = [mid for mid in view.live if mid not in gone]
        view.live_tokens -= sum(self.tokens_of(mid) for mid in gone)
        view.pinned = [mid for mid in view.pinned if mid not in gone]
        self._api.pop(e.session_id, None)  # (its rough sum goes with the list)

    def _pinned(self, seq: int, e: Event) -> None:
        assert isinstance(e, MessagePinned)
        view = self.state.sessions[e.session_id]
        if e.pinned and e.message_id not in view.pinned:
            view.pinned.append(e.message_id)
        elif not e.pinned and e.message_id in view.pinned:
            view.pinned.remove(e.message_id)

    # --- queries (read-only) ----------------------------------------------------------

    def session(self, session_id: str) -> SessionView:
        return self._view(session_id)

    def stored(self, message_id: str) -> StoredMessage:
        """The live form of a message (a persisted tool output shows its replacement)."""
        shown = self.state.shown.get(message_id)
        if shown is not None:
            return shown
        try:
            return self.state.messages[message_id]
        except KeyError:
            raise UnknownMessage(f"no message {quoted(message_id)} in the log") from None

    def original(self, message_id: str) -> JSON:
        """The message exactly as it was appended (or recorded by a compaction)."""
        try:
            return self.state.messages[message_id].message
        except KeyError:
            raise UnknownMessage(f"no message {quoted(message_id)} in the log") from None

    def tokens_of(self, message_id: str) -> int:
        return self.stored(message_id).tokens

    def live_ids(self, session_id: str) -> list[str]:
        return list(self._view(session_id).live)

    def live_messages(self, session_id: str) -> list[JSON]:
        """The session's live messages (without the system prompt), as stored; do not mutate."""
        return self.messages_of(self._view(session_id).live)

    def messages_of(self, message_ids: Iterable[str]) -> list[JSON]:
        """The live form of each message (as :meth:`stored`), bodies read in one batch."""
        stored = [self.stored(mid) for mid in message_ids]
        load_bodies(stored)
        return [m.message for m in stored]

    def api_messages(self, session_id: str) -> list[JSON]:
        """The OpenAI-shape list to send: system message (if any) then the live messages.

        The list is the caller's (a shallow copy of the cached view): it never changes
        after it is handed out, and changing it never changes the ledger's view. The
        message dicts are the projection's (do not mutate them).
        """
        return list(self.api_view(session_id))

    def api_view(self, session_id: str) -> list[JSON]:
        """The cached list behind :meth:`api_messages`, kept current as events fold.

        It is the projection's own list: read it at once and never keep or change it
        (the fold appends to it); :meth:`api_messages` hands out a copy.
        """
        cached = self._api.get(session_id) if isinstance(session_id, str) else None
        if cached is None:
            view = self._view(session_id)
            cached = (
                [{"role": view.system_role, "content": view.system_prompt}]
                if view.system_prompt is not None
                else []
            )
            cached.extend(self.live_messages(session_id))
            if len(self._api) >= _API_CACHE_SESSIONS:
                del self._api[next(iter(self._api))]  # the oldest entry; it is rebuilt on demand
            self._api[session_id] = cached
        return cached

    def api_tokens(self, session_id: str) -> list[int]:
        """Token counts parallel to :meth:`api_messages`."""
        view = self._view(session_id)
        counts = [view.system_tokens] if view.system_prompt is not None else []
        shown, messages = self.state.shown, self.state.messages
        if not shown:  # the common case: no persisted output shows a replacement
            try:
                counts.extend([messages[mid].tokens for mid in view.live])
                return counts
            except KeyError:  # (the list was not extended) the path below names the message
                pass
        tokens_of = self.tokens_of
        counts.extend(tokens_of(mid) for mid in view.live)
        return counts

    def rough_tokens(self, session_id: str) -> int:
        """Hermes's rough estimate (chars/4) of :meth:`api_view` + the tools schema, the
        preflight estimate of ``estimator = "rough"``: summed incrementally, so a read after
        an append costs the appended messages, not a walk of the view."""
        view = self.api_view(session_id)
        return self._rough.total(session_id, view, self._view(session_id).tools)

    def total_tokens(self, session_id: str) -> int:
        """System prompt + tools schema + live messages (the preflight estimate)."""
        view = self._view(session_id)
        return view.system_tokens + view.tools_tokens + view.live_tokens

    def builtins(self) -> dict[str, object]:
        """The state as plain data, every message with its body (for a fingerprint).

        The shape is the one the state had when every body was kept in memory, so a
        fold from heads and a fold from full events compare equal.
        """
        state = self.state
        load_bodies([*state.messages.values(), *state.shown.values()])
        out = msgspec.to_builtins(
            TranscriptState(
                sessions=state.sessions,
                pending=state.pending,
                call_renames=state.call_renames,
                last_seq=state.last_seq,
            )
        )
        out["messages"] = {k: _plain(m) for k, m in state.messages.items()}
        out["shown"] = {k: _plain(m) for k, m in state.shown.items()}
        assert isinstance(out, dict)
        return out

    def encode_state(self) -> bytes:
        """The state for a checkpoint; a body still in the log is saved as its seq only."""
        state = self.state
        return _STATE_ENCODER.encode(
            _WireState(
                sessions=state.sessions,
                messages={k: _wire(m) for k, m in state.messages.items()},
                shown={k: _wire(m) for k, m in state.shown.items()},
                pending=state.pending,
                call_renames=state.call_renames,
                last_seq=state.last_seq,
            )
        )

    @classmethod
    def decode_state(
        cls, data: bytes, bodies: Bodies | None = None, *, legacy: bool = False
    ) -> TranscriptProjection:
        """A projection from :meth:`encode_state`'s bytes; bodies saved as a seq are read
        through `bodies`. `legacy`: the bytes are a ``projector/v2`` checkpoint's (every
        body in full, the ``message`` field)."""
        wire: _WireState | _LegacyState = (
            msgspec.msgpack.decode(data, type=_LegacyState)
            if legacy
            else msgspec.msgpack.decode(data, type=_WireState)
        )

        def stored(m: _WireMessage | _LegacyMessage) -> StoredMessage:
            body = m.message if isinstance(m, _LegacyMessage) else m.body
            return StoredMessage(
                tokens=m.tokens,
                session_id=m.session_id,
                origin=m.origin,
                source_id=m.source_id,
                seq=m.seq,
                body=body,
                bodies=bodies if body is None else None,
            )

        return cls(
            TranscriptState(
                sessions=wire.sessions,
                messages={k: stored(m) for k, m in wire.messages.items()},
                shown={k: stored(m) for k, m in wire.shown.items()},
                pending=wire.pending,
                call_renames=wire.call_renames,
                last_seq=wire.last_seq,
            )
        )


def _plain(m: StoredMessage) -> dict[str, object]:
    return {
        "message": m.message,
        "tokens": m.tokens,
        "session_id": m.session_id,
        "origin": m.origin,
        "source_id": m.source_id,
        "seq": m.seq,
    }


class _WireMessage(msgspec.Struct, array_like=True, gc=False):
    """A checkpointed message: its body, or None when it is read from the log by seq."""

    tokens: int
    session_id: str
    origin: str
    source_id: str | None
    seq: int
    body: JSON | None


def _wire(m: StoredMessage) -> _WireMessage:
    return _WireMessage(m.tokens, m.session_id, m.origin, m.source_id, m.seq, m.body)


class _WireState(msgspec.Struct, kw_only=True):
    sessions: dict[str, SessionView]
    messages: dict[str, _WireMessage]
    shown: dict[str, _WireMessage]
    pending: dict[str, SessionSwitched]
    call_renames: dict[str, str]
    last_seq: int


class _LegacyMessage(msgspec.Struct, kw_only=True, gc=False):
    """A message as ``projector/v2`` checkpoints hold it (every body in full)."""

    message: JSON
    tokens: int
    session_id: str
    origin: str = "appended"
    source_id: str | None = None
    seq: int = 0


class _LegacyState(msgspec.Struct, kw_only=True):
    sessions: dict[str, SessionView] = msgspec.field(default_factory=dict)
    messages: dict[str, _LegacyMessage] = msgspec.field(default_factory=dict)
    shown: dict[str, _LegacyMessage] = msgspec.field(default_factory=dict)
    pending: dict[str, SessionSwitched] = msgspec.field(default_factory=dict)
    call_renames: dict[str, str] = msgspec.field(default_factory=dict)
    last_seq: int = 0


_STATE_ENCODER = msgspec.msgpack.Encoder()
