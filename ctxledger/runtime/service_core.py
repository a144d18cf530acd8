"""The service's core: sessions, appends, views and tools (anyio: asyncio or trio).

What the service as a whole implements (triggers, guards, overflow recovery, the
concurrency rules) is told once, in :mod:`ctxledger.runtime.service`; this module holds
the part every decision builds on: opening a ledger, starting and continuing sessions,
appending with lost-race retries, the API view, persisted tool outputs and the agent
tools.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Self, TypeVar, cast

import anyio
import anyio.lowlevel

from ctxledger.clock import IdGenerator
from ctxledger.compressor.config import CompressionConfig, checked_config
from ctxledger.compressor.summarizers.base import Summarizer
from ctxledger.compressor.summarizers.offline import OfflineSummarizer
from ctxledger.errors import (
    ConcurrencyError,
    InvalidInput,
    SessionEndedError,
    UnknownBlob,
)
from ctxledger.events import (
    WITHDRAW_REASONS,
    Event,
    ReplyWithdrawn,
    SessionReason,
    ToolOutputPersisted,
    WithdrawReason,
)
from ctxledger.integers import shown as quoted
from ctxledger.ledger.eventcheck import listed
from ctxledger.ledger.facade import Ledger
from ctxledger.ledger.prompt import role_change
from ctxledger.ledger.spec import SessionSpec, checked_tools
from ctxledger.limits import check_seq
from ctxledger.messages import JSON, CallIdRepair, check_message_list, check_system_role
from ctxledger.runtime.caching import (
    apply_cache_markers,
    native_cache_layout,
    supports_prompt_caching,
)
from ctxledger.runtime.engine import BuiltinEngine, ContextEngine, RuntimeTracker
from ctxledger.runtime.outputs import PlannedOutput, plan_outputs
from ctxledger.runtime.overflow import (
    OverflowRecovery,
)
from ctxledger.runtime.service_io import (
    TurnResult,
    append_notices,
    json_safe,
)
from ctxledger.runtime.toolbudget import (
    DEFAULT_MAX_SLICE_CHARS,
    SliceResult,
    ToolBudget,
    read_persisted_tool,
    read_slice,
)
from ctxledger.tokens import count_message

T = TypeVar("T")

#: how often a write is retried at once after losing a race with another writer
RACE_RETRIES = 3
#: how long a write keeps retrying (with jittered pauses) before ConcurrencyError escapes
RACE_DEADLINE_SECONDS = 5.0
_HEX = frozenset("0123456789abcdef")


class ServiceCore:
    """Sessions, appends, views and tools: the part of the service that makes no decision.

    :class:`~ctxledger.runtime.service.ContextService` adds the triggers, compaction and
    overflow recovery on top.
    """

    def __init__(
        self,
        ledger: Ledger,
        *,
        summarizer: Summarizer | None = None,
        config: CompressionConfig | None = None,
        engine: ContextEngine | None = None,
        provider: str | None = None,
    ) -> None:
        if not isinstance(ledger, Ledger):  # ContextService("x.db") failed on .config
            raise InvalidInput(
                f"{type(self).__name__}() takes a Ledger, got {type(ledger).__name__}; "
                f"open a ledger file or URL with {type(self).__name__}.open(path)"
            )
        self.ledger = ledger
        self.config = checked_config(config) or ledger.config
        self.summarizer: Summarizer = summarizer or OfflineSummarizer()
        self.tracker = RuntimeTracker(ledger, self.config)
        self.engine: ContextEngine = engine or BuiltinEngine(ledger, self.summarizer, self.config)
        self.provider = provider
        self._locks: dict[str, tuple[object, anyio.Lock]] = {}
        #: compress-and-retry attempts of the current turn, per chain root (cleared by a success)
        self._overflow: dict[str, OverflowRecovery] = {}

    @classmethod
    def open(cls, path: str | Path, **kwargs: Any) -> Self:
        """Open a ledger (a SQLite file, created on first use, or a ``postgresql://`` URL)
        with the service on top.

        ``clock``, ``ids``, ``durability``, ``read_only`` and ``existing`` go to the ledger
        (:meth:`Ledger.open`); the rest to the service.
        Without ``config=``, the settings are resolved as by the CLI and
        :meth:`Ledger.open`: defaults < config file < ``CTXLEDGER_<KEY>`` variables.
        """
        opening = ("clock", "ids", "durability", "read_only", "existing")
        ledger_kwargs = {k: kwargs.pop(k) for k in opening if k in kwargs}
        ledger = Ledger.open(path, config=kwargs.get("config"), **ledger_kwargs)
        try:
            return cls(ledger, **kwargs)
        except BaseException:  # a bad service argument: the ledger just opened is closed
            ledger.close()
            raise

    async def aclose(self) -> None:
        self.ledger.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # --- sessions ------------------------------------------------------------------------

    async def start_session(
        self,
        *,
        model: str,
        context_length: int | None = None,
        system_prompt: str | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
        parent_session_id: str | None = None,
        reason: SessionReason = "new",
        title: str | None = None,
        session_id: str | None = None,
        system_role: str = "system",
        loop: str | None = None,
    ) -> str:
        """Start a session (a branch or delegate names its parent). Returns its id.
        `loop`: where the caller checks for compaction (``every_call``, ``per_run``,
        ``hermes``: :data:`~ctxledger.ledger.spec.LOOPS`), recorded so a what-if replays it;
        when not given a branch takes its parent's, else ``hermes`` (a delegate: ``hermes``)."""
        spec = SessionSpec(
            model=model,
            context_length=context_length,
            system_prompt=system_prompt,
            system_role=system_role,
            tools=tools,
            parent_session_id=parent_session_id,
            reason=reason,
            title=title,
            session_id=session_id,
            loop=loop,
        )
        return await self.start(spec)

    async def start(self, spec: SessionSpec) -> str:
        """Start the session `spec` describes and tell the engine. Returns its id."""
        if spec.tools is not None:
            json_safe(checked_tools(spec.tools), "tools")
        sid = self.ledger.start(spec)
        self.engine.on_session_start(sid)
        return sid

    async def end_session(self, session_id: str, reason: str = "closed") -> None:
        """End the live end of the session's chain (SessionEndedError if it already ended)."""
        if not isinstance(reason, str) or not reason:
            raise InvalidInput("reason must be a non-empty string")
        sid, _ = self._on_tip(session_id, lambda tip: self.ledger.end_session(tip, reason))
        self.engine.on_session_end(sid)
        self._overflow.pop(self.ledger.chains.root(sid), None)

    async def model_call_succeeded(self, session_id: str) -> None:
        """A model call on the session went through with no usage reported (a usage report
        says so itself): the turn's overflow-recovery attempts are over, so the next
        overflow starts counting again (a framework whose model reports no usage)."""
        self._overflow.pop(self.ledger.chains.root(self.tip(session_id)), None)

    async def reset_session(self, session_id: str) -> None:
        """Forget in-memory state about the chain (turn attempts, engine caches); the log stays."""
        sid = self.tip(session_id)
        self._overflow.pop(self.ledger.chains.root(sid), None)
        self.tracker.forget(sid)
        self.engine.on_session_reset(sid)

    def tip(self, session_id: str) -> str:
        """The live end of the session's compression chain (after reading new events)."""
        self.ledger.refresh()
        return self.ledger.tip(session_id)

    def _live_tip(self, session_id: str) -> str:
        sid = self.tip(session_id)
        view = self.ledger.transcript.session(sid)
        if view.ended:  # (a branch may go on from it: the ledger's one wording)
            raise SessionEndedError(self.ledger.chains.ended_note(sid))
        return sid

    def _lock(self, session_id: str) -> anyio.Lock:
        """The chain's lock for the running event loop.

        An anyio lock belongs to the loop it was first used in, and a service may be
        driven by several ``anyio.run`` calls in turn (a CLI, tests on both backends);
        a lock left by a finished loop cannot be held by anyone here, so it is replaced.
        """
        root = self.ledger.chains.root(session_id)
        loop = anyio.lowlevel.current_token()
        held = self._locks.get(root)
        if held is None or held[0] != loop:
            held = self._locks[root] = (loop, anyio.Lock())
        return held[1]

    def _retrying(self, write: Callable[[], T]) -> T:
        """Run a write whose content does not depend on the stream's state, re-reading on a lost race."""
        deadline, attempt = time.monotonic() + RACE_DEADLINE_SECONDS, 0
        while True:
            try:
                return write()
            except ConcurrencyError:
                attempt = self._after_lost_race(attempt, deadline)

    def _on_tip(self, session_id: str, write: Callable[[str], T]) -> tuple[str, T]:
        """Run `write` against the chain's live tip; after a lost race (another writer
        appended or compacted), re-read, find the tip again and redo it there."""
        deadline, attempt = time.monotonic() + RACE_DEADLINE_SECONDS, 0
        while True:
            sid = self._live_tip(session_id)
            try:
                return sid, write(sid)
            except (ConcurrencyError, SessionEndedError):
                # a closed (not compacted) session raises again from _live_tip, outside this try
                attempt = self._after_lost_race(attempt, deadline)

    def _after_lost_race(self, attempt: int, deadline: float) -> int:
        """Re-read after a lost race, or re-raise it once retrying is over.

        A plain append must not fail because other processes append too: the first
        :data:`RACE_RETRIES` retries run at once, later ones after a jittered pause,
        until :data:`RACE_DEADLINE_SECONDS` have passed.
        """
        attempt += 1
        if attempt >= RACE_RETRIES:
            if time.monotonic() >= deadline:
                raise  # called from an except block: re-raises the error being handled
            time.sleep(random.uniform(0, min(0.05, 0.001 * 2**attempt)))
        self.ledger.retry_on_conflict()
        return attempt

    def _record(self, sid: str, *events: tuple[type[Event], dict[str, Any]]) -> None:
        """Append decision events (skips, checks, cooldowns, warnings, notices) atomically."""
        ledger = self.ledger
        built = [kind(**ledger.event_fields(sid), **fields) for kind, fields in events]
        self._retrying(lambda: ledger.append_events(sid, built))

    # --- messages and the tool-output budget --------------------------------------------

    async def append(
        self,
        session_id: str,
        messages: Sequence[Mapping[str, Any]],
        *,
        expected_version: int | None = None,
        ids: Callable[[], IdGenerator] | None = None,
        system_role: str | None = None,
        withdraw: Sequence[str] = (),
        withdraw_reason: str = "incomplete",
    ) -> TurnResult:
        """Append messages to the session's tip, all or nothing; oversized tool outputs are
        stored out of the context in the same atomic append (HERMES_SPEC §6).

        With ``expected_version`` the append is optimistic: it goes to `session_id` itself
        only while that session is the tip at exactly that version, else
        ``ConcurrencyError`` (naming the tip and its version) and nothing is written.
        `ids`: a fresh id source for each try of the append (message, event and repaired
        call ids; the state API's ``Idempotency-Key`` derives them from the key).
        `system_role` (``system`` or ``developer``): the session's prompt is recorded in
        that role in the same append when it holds it in the other (None: as held).
        `withdraw`: ids of a reply ending the tip's live view that the caller went on
        without (the proxy's provisional replies): a ``ReplyWithdrawn`` in the same append,
        saying `withdraw_reason`.
        """
        check_message_list(messages)
        batch = list(messages)
        role = None if system_role is None else check_system_role(system_role)
        withdraw = listed(withdraw, "withdraw", str)  # a bare id would be read per character
        if withdraw and withdraw_reason not in WITHDRAW_REASONS:
            known = ", ".join(WITHDRAW_REASONS)
            raise InvalidInput(f"withdraw_reason must be one of {known}")
        if expected_version is None:
            sid, (message_ids, planned, repairs) = self._on_tip(
                session_id,
                lambda tip: self._with_ids(
                    ids, lambda: self._append_to(tip, batch, role, (withdraw, withdraw_reason))
                ),
            )
        else:
            check_seq(expected_version, "expected_version")  # (a huge one was quoted whole)
            sid = self._live_tip(session_id)
            if sid != session_id or self.ledger.version(sid) != expected_version:
                moved = session_id if sid != session_id else None
                raise ConcurrencyError(
                    sid, expected_version, self.ledger.version(sid), superseded=moved
                )
            # the store re-checks the version the projection read (== expected) atomically
            message_ids, planned, repairs = self._with_ids(
                ids, lambda: self._append_to(sid, batch, role, (withdraw, withdraw_reason))
            )
        notices = append_notices([(p.tool_call_id, p.chars, p.ref) for p in planned], repairs)
        return TurnResult(session_id=sid, message_ids=message_ids, notices=notices)

    def _with_ids(self, ids: Callable[[], IdGenerator] | None, write: Callable[[], T]) -> T:
        """`write()` drawing the ledger's ids from a fresh ``ids()`` when given. Swapped
        for the synchronous write only: nothing awaits in between, so no other task of
        the event loop draws an id from it (the server runs no ledger work in threads)."""
        if ids is None:
            return write()
        kept, self.ledger.ids = self.ledger.ids, ids()
        try:
            return write()
        finally:
            self.ledger.ids = kept

    def _append_to(
        self,
        sid: str,
        batch: list[Any],
        role: str | None = None,
        withdraw: tuple[Sequence[str], str] = ((), ""),
    ) -> tuple[list[str], list[PlannedOutput], list[CallIdRepair]]:
        """Check against the session's calls (re-used tool-call ids are repaired, as every
        entry point does), plan the tool-output budget, append atomically (with the
        prompt's change to `role`, if any)."""
        validated, repairs = self.ledger.check_messages(sid, batch, withdraw[0])
        json_safe(validated, "messages")
        budget = ToolBudget.for_window(self.ledger.transcript.session(sid).context_length)
        planned, blobs = plan_outputs(self.ledger.transcript, sid, validated, budget)
        extra: list[Event] = [*role_change(self.ledger, sid, role)]
        if withdraw[0]:  # (ids, reason)
            fields = self.ledger.event_fields(sid)
            extra.append(
                ReplyWithdrawn(  # (the reason was checked by append)
                    **fields,
                    message_ids=list(withdraw[0]),
                    reason=cast(WithdrawReason, withdraw[1]),
                )
            )
        ids = self._append_planned(sid, validated, planned, blobs, repairs, extra)
        return ids, planned, repairs

    def _append_planned(
        self,
        sid: str,
        msgs: list[JSON],
        planned: list[PlannedOutput],
        blobs: dict[str, bytes],
        repairs: list[CallIdRepair],
        extra: list[Event],
    ) -> list[str]:
        if not planned:
            return self.ledger.append_messages(sid, msgs, repairs=repairs, extra_events=extra)
        # the ToolOutputPersisted events name their messages, so the ids are reserved here
        encoding = self.ledger.transcript.session(sid).encoding
        reserved = [self.ledger.ids("msg") for _ in msgs]
        extra = extra + [
            ToolOutputPersisted(
                **self.ledger.event_fields(sid),
                message_id=reserved[p.index],
                tool_call_id=p.tool_call_id,
                tool_name=p.tool_name,
                blob_ref=p.ref,
                chars=p.chars,
                replacement=p.block,
                reason=p.reason,
                replacement_tokens=count_message({**msgs[p.index], "content": p.block}, encoding),
            )
            for p in planned
        ]
        return self.ledger.append_messages(
            sid, msgs, extra_events=extra, message_ids=reserved, blobs=blobs, repairs=repairs
        )

    async def read_persisted(
        self, session_id: str, ref: str, offset: int = 0, limit: int = DEFAULT_MAX_SLICE_CHARS
    ) -> SliceResult:
        """A slice of a persisted tool output: the handler of the ``read_persisted`` tool.

        `ref` must be the 64-hex-digit reference from a stored-output block of
        `session_id`'s compression chain; it is only ever a key of the content-addressed
        blob table, never a path. A ref the chain never persisted (another session's
        output, any other blob) is :class:`UnknownBlob`, as if it did not exist.
        """
        if not isinstance(ref, str) or len(ref) != 64 or not set(ref) <= _HEX:
            raise InvalidInput(
                f"ref must be the 64-hex-digit reference from the stored-output block, got {quoted(ref)}"
            )
        self.ledger.refresh()
        if not self._chain_persisted(session_id, ref):
            raise UnknownBlob(f"no persisted tool output {ref} in this session's chain")
        data = self.ledger.store.get_blob(ref).decode("utf-8", errors="replace")
        return read_slice(data, offset, limit)

    def _chain_persisted(self, session_id: str, ref: str) -> bool:
        """Whether a ``ToolOutputPersisted`` of `session_id`'s chain showed `ref`."""
        chain = set(self.ledger.chains.chain(self.ledger.resolve(session_id)))
        for shown in self.ledger.transcript.state.shown.values():
            if shown.origin == "persisted" and shown.session_id in chain:
                content = shown.message.get("content")
                if isinstance(content, str) and f'"{ref}"' in content:
                    return True
        return False

    # --- the view sent to the model ------------------------------------------------------

    def api_messages(self, session_id: str, *, cache: bool | None = None) -> list[JSON]:
        """System + live messages of the chain's tip, with prompt-cache markers when enabled (§7).

        Never rebuilt per call: the projection keeps the view current as events are
        folded; the caller gets a shallow copy of it. The list is the caller's (any
        thread may change it); the message dicts are shared with the ledger and must be
        treated as read-only, except the (at most four) marked ones, which are fresh
        deep copies.
        """
        ledger = self.ledger
        ledger.refresh()  # one PRAGMA: another connection's append since ours is folded too
        sid = ledger.tip(session_id)
        transcript = ledger.transcript
        messages = transcript.api_view(sid)
        use_cache = self.config.prompt_caching if cache is None else cache
        model = transcript.session(sid).model
        if use_cache and supports_prompt_caching(model, self.provider):
            native = native_cache_layout(self.provider)
            return apply_cache_markers(messages, ttl=self.config.cache_ttl, native_anthropic=native)
        # a copy, not the cached list: a caller on another thread (the framework adapters
        # run the service on a loop thread) must never share a list the fold appends to.
        # Right after an append the message dicts are out of the CPU cache, so this copy
        # alone costs several warm copies (docs/notes/issue14-api.md): it is the price
        # of a list that is the caller's own.
        return list(messages)

    # --- status and tools --------------------------------------------------------------------

    def status(self, session_id: str) -> dict[str, Any]:
        """The tip's numbers and the chain's runtime state (plus the engine's own status)."""
        sid = self.tip(session_id)
        view = self.ledger.transcript.session(sid)
        state = self.tracker.state(sid)
        now = self.ledger.clock()
        out: dict[str, Any] = {
            "session_id": sid,
            "engine": self.engine.name,
            "context_length": view.context_length,
            "threshold_tokens": self.config.threshold_tokens(view.context_length),
            "tokens": self.ledger.transcript.total_tokens(sid),
            "messages": len(view.live),
            # the latest response's count (None when it reported none); the in-loop check
            # of a response without one judges max(kept count, estimate), kept count below
            "last_prompt_tokens": self.ledger.usage(sid).last_prompt_tokens,
            "kept_prompt_tokens": state.last_real_prompt,
            "compactions": self.ledger.chains.compression_count(sid),
            "strikes": state.anti.strikes,
            "blocked": state.anti.blocked(self.config.anti_thrash_strikes),
            "cooldown_remaining": state.cooldown.remaining(now),
            "pressure_warned": state.warned,
        }
        engine_status = getattr(self.engine, "status", None)
        if callable(engine_status):
            out.update({k: v for k, v in engine_status(sid).items() if k not in out})
        return out

    def tools(self) -> list[JSON]:
        """Tool schemas the agent can expose: ``read_persisted``, plus the engine's own."""
        extra = getattr(self.engine, "tools", None)
        return [read_persisted_tool(), *(extra() if callable(extra) else [])]


__all__ = ["ServiceCore"]
