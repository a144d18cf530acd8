"""The synchronous facade over one ledger: a store plus its live projections.

Everything that writes goes through here: it validates, builds events with the
injected clock and ids, appends atomically with the expected version it read, and
folds the new events into the projections. The CLI and the async service are thin
layers over this class.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ctxledger import limits
from ctxledger.clock import Clock, IdGenerator, random_ids, system_clock
from ctxledger.compressor.config import CompressionConfig, checked_config
from ctxledger.compressor.settings import resolve_config
from ctxledger.errors import (
    CtxLedgerError,
    InvalidInput,
    SessionEndedError,
    UnknownMessage,
)
from ctxledger.events import (
    CompressionChecked,
    CompressionSkipped,
    ContextLimitLearned,
    CooldownStarted,
    Event,
    MessageAppended,
    MessagePinned,
    ModelSwitched,
    NoticeIssued,
    PressureWarning,
    ReplyWithdrawn,
    SessionReason,
    ToolCallIdsRepaired,
    UsageReported,
    envelope,
    said,
)
from ctxledger.events import SessionEnded as SessionEndedEvent
from ctxledger.eventstore.base import AppendRequest, Durability, EventStore, StreamedRequest
from ctxledger.eventstore.contents import remembering_hashes
from ctxledger.eventstore.opening import close_quietly, default_db_path, open_store
from ctxledger.eventstore.space import UNPERSISTED
from ctxledger.eventstore.verifier import VerifyReport
from ctxledger.integers import shown
from ctxledger.ledger.anchor import seal_anchor
from ctxledger.ledger.callrepairs import repair_event
from ctxledger.ledger.derived import store_quietly
from ctxledger.ledger.eventcheck import check_decodable, check_references, listed
from ctxledger.ledger.openingevents import opening_events
from ctxledger.ledger.ownfold import fold_written, log_end
from ctxledger.ledger.refs import resolve_message, resolve_session
from ctxledger.ledger.spec import (
    SessionSpec,
    check_end_reason,
    check_model,
    check_session_id,
    inherit_loop,
)
from ctxledger.ledger.streamappend import append_streamed
from ctxledger.limits import check_context_length, check_seq, check_text
from ctxledger.messages import (
    JSON,
    CallIdRepair,
    CallLedger,
    check_message_list,
    repair_call_ids,
    validate_messages,
)
from ctxledger.projections import (
    ChainsProjection,
    Lineage,
    Projector,
    SessionUsage,
    SessionView,
    TranscriptProjection,
)
from ctxledger.projections.stored import grew_from
from ctxledger.tokens import DEFAULT_ENCODING, count_messages
from ctxledger.usage import NO_USAGE, check_usage_report, normalize_usage

#: what the runtime records about its own decisions (``Ledger.append_events``)
DECISION_EVENTS = (
    CompressionChecked,
    CompressionSkipped,
    CooldownStarted,
    NoticeIssued,
    PressureWarning,
    ReplyWithdrawn,
)


class Ledger:
    """One event store and the projections folded from it."""

    def __init__(
        self,
        store: EventStore,
        *,
        clock: Clock = system_clock,
        ids: IdGenerator = random_ids,
        config: CompressionConfig | None = None,
        projector: Projector | None = None,
    ) -> None:
        if not isinstance(store, EventStore):  # Ledger("x.db") failed deep in the fold
            raise InvalidInput(
                f"Ledger() takes an opened event store, got {type(store).__name__}; "
                "open a ledger file or URL with Ledger.open(path)"
            )
        self.store = store
        self.clock = clock
        self.ids = ids
        self.config = checked_config(config) or CompressionConfig()
        self.projector = projector or Projector.rebuild(store)
        self._calls: dict[str, tuple[int, str | None, CallLedger]] = {}
        # the store's change token and the projector's position at the last fold
        self._seen: tuple[object, int] | None = None
        #: whether this ledger appended anything (its close then seals the head anchor)
        self._appended = False
        #: repairs of re-used tool-call ids logged at debug level, not as warnings (a
        #: what-if's scratch ledger: :func:`~ctxledger.ledger.callrepairs.repair_event`)
        self.quiet_repairs = False

    @classmethod
    def open(
        cls,
        path: str | Path | None = None,
        *,
        clock: Clock = system_clock,
        ids: IdGenerator = random_ids,
        config: CompressionConfig | None = None,
        durability: Durability = "full",
        read_only: bool = False,
        existing: bool = False,
    ) -> Ledger:
        """Open (creating if needed) and fold a ledger: a SQLite path or a ``postgresql://`` URL.
        `existing`: a missing file or a URL holding no ledger is refused (``open_store``),
        nothing created.

        Without `config`, the settings are resolved as everywhere else: defaults < the
        config file found (``$CTXLEDGER_CONFIG``, ``./ctxledger.toml``, the user config
        directory) < ``CTXLEDGER_<KEY>`` variables (``compressor.settings.resolve_config``).
        A `config` given here is an argument: it wins as a whole.
        """
        if checked_config(config) is None:  # (checked before the store is opened)
            config = resolve_config().config
        # SQLite makes missing parent folders (0700); read_only: an existing file, nothing written
        target = path if path is not None else default_db_path()
        store = open_store(target, durability=durability, read_only=read_only, existing=existing)
        try:
            return cls(store, clock=clock, ids=ids, config=config)
        except BaseException:  # a log the fold cannot read: closed (its -wal, -shm go too)
            close_quietly(store)
            raise

    def close(self) -> None:
        """Seal the head anchor (if this ledger appended to a file), then close the store.
        Message bodies a rebuild left in the log are read when first asked for: read those
        you need (``transcript``, ``api_messages``) before; after, it is a ``StoreError``."""
        if self._appended:
            self._appended = False
            self.seal_head()
        self.store.close()

    def seal_head(self) -> bool:
        """Advance the sealed head anchor beside the ledger file to the log's last event.

        Best effort: an in-memory store, a closed one or an unwritable folder seal nothing
        (False), a key file that is no key too (a warning): :mod:`ctxledger.ledger.anchor`."""
        path = getattr(self.store, "path", None)
        if not isinstance(path, str) or path in UNPERSISTED:
            return False
        return seal_anchor(self.store, path)

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- projections -----------------------------------------------------------------

    @property
    def transcript(self) -> TranscriptProjection:
        return self.projector.transcript

    @property
    def chains(self) -> ChainsProjection:
        return self.projector.chains

    def refresh(self, *, heads: bool = False) -> int:
        """Fold events other writers appended since we last looked (`heads`: messages
        from their heads, bodies left in the log: ``Projector.catch_up``).

        When the store's change token has not moved since the last fold, nothing was
        appended and the catch-up query is skipped (a read after our own append costs
        one ``PRAGMA``). The token is taken before folding, so an append that lands
        meanwhile moves it again and is folded by the next refresh.
        """
        token = self.store.change_token()
        if token is not None and self._seen == (token, self.projector.last_seq):
            return 0
        folded = self.projector.catch_up(self.store, heads=heads)
        self._seen = None if token is None else (token, self.projector.last_seq)
        return folded

    def version(self, session_id: str) -> int:
        if not isinstance(session_id, str):  # a list is unhashable: no TypeError
            return 0
        view = self.transcript.state.sessions.get(session_id)
        return view.version if view is not None else 0

    def append(
        self,
        requests: Sequence[AppendRequest],
        blobs: Mapping[str, bytes] | None = None,
        *,
        own: bool = False,
    ) -> None:
        """The one way anything writes to this ledger: check references, append atomically, fold.

        For writers that build their own events (a compaction, an undo, an import): one
        call is one transaction over every stream it names; a stale expected version
        raises ``ConcurrencyError`` and writes nothing. `own`: folded as written (``ownfold``).
        """
        limits.check_limit_variables()  # (a bad CTXLEDGER_MAX_* fails before any write)
        if not own:  # a compaction's own events are built here, typed
            check_decodable(requests, self.transcript.state.messages, self.store)
        check_references(requests, self.transcript.state.sessions)
        before = log_end(self.store, blobs) if own else None  # None: read back
        with remembering_hashes():  # (the refs hashed for blobs, for the derived values)
            try:
                versions = self.store.append_many(requests, blobs)
                self._appended = True
                if before is not None:  # else (or if it declines) the refresh reads them back
                    fold_written(self.projector, self.store, requests, versions, before)
            except BaseException as err:
                # folded what is there (a ConcurrencyError's caller reads the new version);
                # the append's error is the one raised: a server that went away fails the
                # read too, and its error would hide the append's "re-send the same events".
                # The refresh's own error is kept on it as a note (it may be the cause).
                try:
                    self.refresh()
                except CtxLedgerError as also:
                    err.add_note(f"the re-read after it failed too: {also}")
                raise
            store_quietly(self.store, requests)  # (after the commit: a failure loses only a cache)
        self.refresh()

    def _append_stream(self, requests: Iterable[StreamedRequest], *, fold: bool = True) -> None:
        """The import's append (``import_sessions`` only: it checks less than :meth:`append`
        across chunks, a re-send is not a no-op on SQLite), a chunk at a time in one transaction
        (:mod:`.streamappend`), folded from its heads unless `fold` is False."""
        limits.check_limit_variables()
        append_streamed(self.transcript.state, self.store, requests)
        self._appended = True
        if fold:
            self.refresh(heads=True)

    def event_fields(self, session_id: str) -> dict[str, Any]:
        """The fields every event needs (a new id, the session, the injected clock's time)."""
        return envelope(session_id, self.ids, self.clock)

    # --- sessions --------------------------------------------------------------------

    def start_events(self, sid: str, spec: SessionSpec) -> list[Event]:
        """The checked opening events of a session: start, system prompt, tools (pure).

        Shared by :meth:`start` and imports, so every session is checked alike
        (``spec.session_id`` is ignored: ``sid`` is the id).
        """
        return opening_events(sid, spec, self.config, self.event_fields)

    def start_session(
        self,
        *,
        model: str,
        context_length: int | None = None,
        system_prompt: str | None = None,
        system_role: str = "system",
        tools: Sequence[Mapping[str, Any]] | None = None,
        parent_session_id: str | None = None,
        reason: SessionReason = "new",
        title: str | None = None,
        source: str | None = None,
        encoding: str = DEFAULT_ENCODING,
        session_id: str | None = None,
    ) -> str:
        """Start a session (one atomic append: start, system prompt, tools). Returns its id."""
        return self.start(
            SessionSpec(
                model=model,
                context_length=context_length,
                system_prompt=system_prompt,
                system_role=system_role,
                tools=tools,
                parent_session_id=parent_session_id,
                reason=reason,
                title=title,
                source=source,
                encoding=encoding,
                session_id=session_id,
            )
        )

    def start(self, spec: SessionSpec) -> str:
        """Start the session `spec` describes (one atomic append). Returns its id."""
        reason, parent_session_id = spec.reason, spec.parent_session_id
        if reason == "compression":
            raise InvalidInput("continuations are started by a compaction, not by start_session")
        if parent_session_id is not None:  # (a branch takes its parent's loop)
            spec = inherit_loop(spec, self.transcript.session(parent_session_id).config)
        if reason in ("branch", "delegate") and parent_session_id is None:
            raise InvalidInput(f"a {reason} session needs a parent_session_id")
        sid = self.ids("ses") if spec.session_id is None else check_session_id(spec.session_id)
        if sid in self.transcript.state.sessions:
            raise InvalidInput(f"session {shown(sid)} already exists")
        events = self.start_events(sid, spec)
        self.append([AppendRequest(sid, events, 0)])
        return sid

    def live_session(self, session_id: str) -> SessionView:
        """The view of a session that can still be written to; SessionEndedError names
        its live continuation (``ChainsProjection.ended_note``)."""
        view = self.transcript.session(session_id)
        if view.ended:
            raise SessionEndedError(self.chains.ended_note(session_id))
        return view

    def call_ledger(self, session_id: str) -> CallLedger:
        """Tool calls issued and answered in the session's live view (cached).

        A session's live list grows (a compaction starts a new session), so the cache is
        keyed by how many live messages it has folded and the last of them, and catches
        up on the new ones: an append costs O(new messages), not a rescan of the session.
        A withdrawn reply (:class:`~ctxledger.events.ReplyWithdrawn`) shortens the list:
        then the view is folded again (:func:`~ctxledger.projections.stored.grew_from`).
        """
        live = self.transcript.session(session_id).live
        n, last, ledger = self._calls.get(session_id) or (0, None, CallLedger())
        if not grew_from(live, n, last):
            n, ledger = 0, CallLedger()
        # repaired re-used ids (replacement -> original) let a late result find its call
        ledger.fold(self.transcript.messages_of(live[n:]), self.transcript.state.call_renames)
        self._calls[session_id] = (len(live), live[-1] if live else None, ledger)
        return ledger

    def check_messages(
        self,
        session_id: str,
        messages: Sequence[Mapping[str, Any]],
        without: Sequence[str] = (),
    ) -> tuple[list[JSON], list[CallIdRepair]]:
        """The one validation policy: repair re-used tool-call ids, then validate (pure).

        Returns the messages as they will be stored and the repairs made; raises
        InvalidMessage naming the first problem that is not a re-used id. `without`: ids
        the same append withdraws (a ``ReplyWithdrawn``): checked against the view
        without them, so a result for a withdrawn call is refused.
        """
        self.live_session(session_id)
        check_message_list(messages)
        calls = self.call_ledger(session_id)
        if without:  # (not cached: the withdrawal is folded only if the append goes in)
            gone = set(without)
            kept = [mid for mid in self.transcript.session(session_id).live if mid not in gone]
            calls = CallLedger()
            calls.fold(self.transcript.messages_of(kept), self.transcript.state.call_renames)
        repaired, repairs = repair_call_ids(list(messages), calls, lambda i, j: self.ids("call"))
        return validate_messages(repaired, calls), repairs

    def repair_event(
        self,
        session_id: str,
        repairs: Sequence[CallIdRepair],
        message_ids: Sequence[str] | Mapping[int, str],
        source: str = "append",
    ) -> ToolCallIdsRepaired:
        """The event recording `repairs` of a batch whose messages got `message_ids`; logged
        (:func:`~ctxledger.ledger.callrepairs.repair_event`)."""
        fields = self.event_fields(session_id)
        return repair_event(fields, repairs, message_ids, source, quiet=self.quiet_repairs)

    def append_messages(
        self,
        session_id: str,
        messages: Sequence[Mapping[str, Any]],
        *,
        extra_events: Sequence[Event] = (),
        message_ids: Sequence[str] | None = None,
        blobs: Mapping[str, bytes] | None = None,
        repairs: Sequence[CallIdRepair] = (),
    ) -> list[str]:
        """Validate and append messages (all or nothing). Returns their new message ids.

        ``extra_events`` and ``blobs`` go into the same atomic append (e.g. a tool output
        persisted out of the context); ``message_ids`` lets the caller reserve the ids
        those events refer to. Re-used tool-call ids are repaired (see
        :meth:`check_messages`), logged as warnings and recorded as a
        ``ToolCallIdsRepaired`` event in the same append; ``repairs`` are those a caller
        already made with :meth:`check_messages` on these messages.
        """
        view = self.live_session(session_id)
        extra_events = listed(extra_events, "extra_events")
        withdrawn = [e.message_ids for e in extra_events if isinstance(e, ReplyWithdrawn)]
        without = [m for ids in withdrawn for m in listed(ids, "ReplyWithdrawn.message_ids", str)]
        validated, repaired = self.check_messages(session_id, messages, without)
        repairs = [*listed(repairs, "repairs", CallIdRepair), *repaired]
        counts = count_messages(validated, view.encoding) if validated else []
        events: list[Event] = []
        ids: list[str] = []
        if message_ids is not None and len(message_ids) != len(validated):
            raise InvalidInput("message_ids must have one id per message")
        reserved = (
            list(message_ids) if message_ids is not None else [self.ids("msg") for _ in validated]
        )
        for msg, tokens, mid in zip(validated, counts, reserved, strict=True):
            ids.append(mid)
            events.append(
                MessageAppended(
                    **self.event_fields(session_id),
                    message_id=mid,
                    message=msg,
                    tokens=tokens,
                    encoding=view.encoding,
                )
            )
        if repairs:
            events.append(self.repair_event(session_id, repairs, ids))
        events.extend(extra_events)
        if events:
            self.append([AppendRequest(session_id, events, self.version(session_id))], blobs)
        return ids

    def report_usage(
        self,
        session_id: str,
        raw: Mapping[str, Any] | None,
        *,
        shape: str | None = None,
        model: str | None = None,
        purpose: str = "agent",
        cost_usd: float | None = None,
        tool_calls: bool | None = None,
    ) -> UsageReported:
        """Record a provider usage report (normalized per HERMES_SPEC §5), ``tool_calls`` if said.
        A response without usage (``None``, ``{}``, only nulls) is recorded as "no usage
        reported" (shape ``none``) with the ledger's estimate of the prompt it answered."""
        self.transcript.session(session_id)
        check_usage_report(raw, model, cost_usd, tool_calls)
        if purpose not in ("agent", "summarizer"):
            raise InvalidInput(f"purpose must be 'agent' or 'summarizer', not {shown(purpose)}")
        found_shape, usage = normalize_usage(raw, shape)
        unreported = found_shape == NO_USAGE
        event = UsageReported(
            **self.event_fields(session_id),
            raw=dict(raw) if raw is not None else {},
            shape=found_shape,
            usage=usage,
            model=model,
            purpose=purpose,  # type: ignore[arg-type]
            cost_usd=cost_usd,
            # no usage reported: the prompt it answered, as estimated (HERMES_SPEC §2 preflight)
            estimated_prompt_tokens=self.transcript.total_tokens(session_id)
            if unreported
            else None,
            tool_calls=said(tool_calls),
        )
        self.append([AppendRequest(session_id, [event], self.version(session_id))])
        return event

    def switch_model(
        self, session_id: str, model: str, context_length: int, *, scoped_guards: bool = True
    ) -> None:
        check_model(model)  # as start_session checks it
        view = self.live_session(session_id)
        context_length = check_context_length(context_length)
        event = ModelSwitched(
            **self.event_fields(session_id),
            model=model,
            context_length=context_length,
            previous_model=view.model,
            previous_context_length=view.context_length,
            scoped_guards=scoped_guards,
        )
        self.append([AppendRequest(session_id, [event], self.version(session_id))])

    def learn_context_limit(  # scoped_guards=False: the rule before session 31 (a what-if)
        self, session_id: str, context_length: int, evidence: str, *, scoped_guards: bool = True
    ) -> bool:
        """Record a smaller real window learned from a provider error. False if not smaller."""
        check_text(evidence, "evidence (the provider's error text)")
        view = self.live_session(session_id)
        context_length = check_context_length(context_length, "a learned context length")
        if context_length >= view.context_length:
            return False
        event = ContextLimitLearned(
            **self.event_fields(session_id),
            previous_context_length=view.context_length,
            context_length=context_length,
            evidence=evidence[:2000],
            scoped_guards=scoped_guards,
        )
        self.append([AppendRequest(session_id, [event], self.version(session_id))])
        return True

    def pin(self, session_id: str, message_id: str, pinned: bool = True) -> None:
        view = self.live_session(session_id)
        if message_id not in view.live:
            raise UnknownMessage(
                f"message {shown(message_id)} is not in the live view of {shown(session_id)}"
            )
        event = MessagePinned(**self.event_fields(session_id), message_id=message_id, pinned=pinned)
        self.append([AppendRequest(session_id, [event], self.version(session_id))])

    def resolve_message(self, session_id: str, ref: str | int) -> str:
        """A live message's id from its id, ``show``'s short id or its index (``refs``)."""
        return resolve_message(self.transcript.session(session_id), ref)

    def end_session(self, session_id: str, reason: str = "closed") -> None:
        self.live_session(session_id)
        event = SessionEndedEvent(**self.event_fields(session_id), reason=check_end_reason(reason))
        self.append([AppendRequest(session_id, [event], self.version(session_id))])

    def append_events(self, session_id: str, events: Sequence[Event]) -> None:
        """Append decision events (skips, checks, warnings, notices, cooldowns) built by the runtime."""
        for event in listed(events, "events"):
            if not isinstance(event, DECISION_EVENTS):
                raise InvalidInput(
                    f"append_events takes decision events only, not {type(event).__name__}; "
                    "use the ledger method that writes it"
                )
        self.append([AppendRequest(session_id, list(events), self.version(session_id))])

    # --- reads ---------------------------------------------------------------------------

    def api_messages(self, session_id: str) -> list[JSON]:
        return self.transcript.api_messages(session_id)

    def usage(self, session_id: str) -> SessionUsage:
        return self.projector.accounting.session(session_id)

    def chain_usage(self, session_id: str) -> SessionUsage:
        return self.projector.accounting.chain(self.chains.chain(session_id))

    def tip(self, session_id: str) -> str:
        return str(self.chains.tip(session_id))

    def sessions(self) -> list[Lineage]:
        return list(self.chains.state.sessions.values())

    def resolve(self, ref: str) -> str:
        """A session id from a full id or a unique prefix (:func:`resolve_session`)."""
        return resolve_session(self.chains.state, ref)

    def projector_at(self, seq: int) -> Projector:
        """The projections as they were right after event `seq` (read-only)."""
        return Projector.rebuild(self.store, to_seq=check_seq(seq), check_streams=False)

    def verify(self) -> VerifyReport:
        return self.store.verify()

    def retry_on_conflict(self) -> None:
        """Re-read after a ConcurrencyError (another writer moved the session)."""
        self.refresh()
        self._calls.clear()
