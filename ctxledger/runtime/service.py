"""The async runtime an agent loop calls every turn (anyio: asyncio or trio).

``ContextService`` wraps a :class:`~ctxledger.ledger.facade.Ledger` and a context engine
(the built-in compressor by default, see :mod:`ctxledger.runtime.engine` for plugging
another) and implements HERMES_SPEC §2, §5, §6 and §7: preflight, in-loop and hygiene
triggers, manual compression, pressure warnings, anti-thrashing and cooldowns,
overflow recovery, the tool-output budget and prompt caching. Every decision is
appended as an event with the numbers that made it, and the guards' state is folded
back from those events (:class:`~ctxledger.runtime.engine.RuntimeTracker`), so a
reopened ledger decides as the process that wrote it.

Ledger calls run on the event loop's thread (an append is well under a millisecond
with WAL). One lock per compression chain serializes compactions inside a process;
across processes, optimistic concurrency settles races: a stale expected version
raises ``ConcurrencyError`` with nothing written, and the loser re-reads and
continues on the compression tip (or re-plans when only messages were added).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import anyio
import anyio.lowlevel
import msgspec

from ctxledger.compressor.config import CompressionConfig
from ctxledger.compressor.summarizers.base import Summarizer
from ctxledger.compressor.summarizers.offline import OfflineSummarizer
from ctxledger.errors import (
    ConcurrencyError,
    ContextOverflowError,
    InvalidInput,
    SessionEnded,
    SummarizerError,
)
from ctxledger.events import (
    CompressionChecked,
    CompressionSkipped,
    CooldownStarted,
    Event,
    NoticeIssued,
    PressureWarning,
    SessionReason,
    ToolOutputPersisted,
    Trigger,
)
from ctxledger.ledger.compaction import CompactionOutcome
from ctxledger.ledger.facade import Ledger
from ctxledger.messages import validate_messages
from ctxledger.runtime.caching import apply_cache_markers, supports_prompt_caching
from ctxledger.runtime.engine import BuiltinEngine, ContextEngine, RuntimeTracker
from ctxledger.runtime.outputs import PlannedOutput, plan_outputs
from ctxledger.runtime.overflow import (
    OverflowRecovery,
    ProviderErrorClass,
    classify_provider_error,
    recovery_action,
)
from ctxledger.runtime.pressure import hygiene_should_compress, pressure_check
from ctxledger.runtime.results import (
    Recovery,
    TurnResult,
    check_error_report,
    check_usage_report,
    focus_topic,
    is_int,
    json_safe,
)
from ctxledger.runtime.toolbudget import (
    DEFAULT_MAX_SLICE_CHARS,
    SliceResult,
    ToolBudget,
    read_persisted_tool,
    read_slice,
)
from ctxledger.tokens import count_message, rough_message_tokens, rough_tools_tokens

JSON = dict[str, Any]
T = TypeVar("T")

#: how often a write is retried after losing a race with another writer
_RACE_RETRIES = 3
_HEX = frozenset("0123456789abcdef")


class ContextService:
    """The API an agent runtime uses every turn."""

    def __init__(
        self,
        ledger: Ledger,
        *,
        summarizer: Summarizer | None = None,
        config: CompressionConfig | None = None,
        engine: ContextEngine | None = None,
        provider: str | None = None,
    ) -> None:
        self.ledger = ledger
        self.config = config or ledger.config
        self.summarizer: Summarizer = summarizer or OfflineSummarizer()
        self.tracker = RuntimeTracker(ledger, self.config)
        self.engine: ContextEngine = engine or BuiltinEngine(ledger, self.summarizer, self.config)
        self.provider = provider
        self._locks: dict[str, tuple[object, anyio.Lock]] = {}
        #: compress-and-retry attempts of the current turn, per chain root (cleared by a success)
        self._overflow: dict[str, OverflowRecovery] = {}

    @classmethod
    def open(cls, path: str | Path, **kwargs: Any) -> ContextService:
        """Open a ledger (a SQLite file, created on first use, or a ``postgresql://`` URL)
        with the service on top.

        ``clock``, ``ids`` and ``durability`` go to the ledger; the rest to the service.
        """
        ledger_kwargs = {k: kwargs.pop(k) for k in ("clock", "ids", "durability") if k in kwargs}
        return cls(Ledger.open(path, config=kwargs.get("config"), **ledger_kwargs), **kwargs)

    async def aclose(self) -> None:
        self.ledger.close()

    async def __aenter__(self) -> ContextService:
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
    ) -> str:
        """Start a session (a branch or delegate names its parent). Returns its id."""
        if tools is not None:
            json_safe(list(tools), "tools")
        sid = self.ledger.start_session(
            model=model,
            context_length=context_length,
            system_prompt=system_prompt,
            tools=tools,
            parent_session_id=parent_session_id,
            reason=reason,
            title=title,
            session_id=session_id,
        )
        self.engine.on_session_start(sid)
        return sid

    async def end_session(self, session_id: str, reason: str = "closed") -> None:
        """End the live end of the session's chain (SessionEnded if it already ended)."""
        if not isinstance(reason, str) or not reason:
            raise InvalidInput("reason must be a non-empty string")
        sid, _ = self._on_tip(session_id, lambda tip: self.ledger.end_session(tip, reason))
        self.engine.on_session_end(sid)
        self._overflow.pop(self.ledger.chains.root(sid), None)

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
        if view.ended:
            raise SessionEnded(
                f"session {sid!r} has ended ({view.end_reason}); start a new session"
            )
        return sid

    async def switch_model(self, session_id: str, model: str, context_length: int) -> TurnResult:
        """Record a model switch (the threshold follows the new window), then re-run preflight."""
        if not isinstance(model, str) or not model.strip():
            raise InvalidInput("model must be a non-empty string")
        if not is_int(context_length) or context_length < 1024:
            raise InvalidInput(f"context_length must be an integer ≥ 1024, got {context_length!r}")
        sid, _ = self._on_tip(
            session_id, lambda tip: self.ledger.switch_model(tip, model, context_length)
        )
        self.engine.update_model(sid, model, context_length)
        return await self.preflight(sid)

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
        for attempt in range(_RACE_RETRIES):
            try:
                return write()
            except ConcurrencyError:
                if attempt == _RACE_RETRIES - 1:
                    raise
                self.ledger.retry_on_conflict()
        raise AssertionError("unreachable")

    def _on_tip(self, session_id: str, write: Callable[[str], T]) -> tuple[str, T]:
        """Run `write` against the chain's live tip; after a lost race (another writer
        appended or compacted), re-read, find the tip again and redo it there."""
        for attempt in range(_RACE_RETRIES):
            sid = self._live_tip(session_id)
            try:
                return sid, write(sid)
            except (ConcurrencyError, SessionEnded):
                # a closed (not compacted) session raises again from _live_tip, outside this try
                if attempt == _RACE_RETRIES - 1:
                    raise
                self.ledger.retry_on_conflict()
        raise AssertionError("unreachable")

    def _record(self, sid: str, *events: tuple[type[Event], dict[str, Any]]) -> None:
        """Append decision events (skips, checks, cooldowns, warnings, notices) atomically."""
        ledger = self.ledger
        built = [
            kind(event_id=ledger.ids("evt"), session_id=sid, at=ledger.clock(), **fields)
            for kind, fields in events
        ]
        self._retrying(lambda: ledger.append_events(sid, built))

    # --- messages and the tool-output budget --------------------------------------------

    async def append(self, session_id: str, messages: Sequence[Mapping[str, Any]]) -> TurnResult:
        """Append messages to the session's tip, all or nothing; oversized tool outputs are
        stored out of the context in the same atomic append (HERMES_SPEC §6)."""
        if isinstance(messages, str | bytes | Mapping) or not isinstance(messages, Sequence):
            raise InvalidInput("messages must be a list of message objects")
        batch = list(messages)
        sid, (ids, planned) = self._on_tip(session_id, lambda tip: self._append_to(tip, batch))
        notices = [
            f"tool output of call {p.tool_call_id!r} ({p.chars:,} chars) stored outside the context as {p.ref}"
            for p in planned
        ]
        return TurnResult(session_id=sid, message_ids=ids, notices=notices)

    def _append_to(self, sid: str, batch: list[Any]) -> tuple[list[str], list[PlannedOutput]]:
        """Validate against the session's calls, plan the tool-output budget, append atomically."""
        validated = validate_messages(batch, self.ledger.call_ledger(sid))
        json_safe(validated, "messages")
        budget = ToolBudget.for_window(self.ledger.transcript.session(sid).context_length)
        planned, blobs = plan_outputs(self.ledger.transcript, sid, validated, budget)
        return self._append_planned(sid, validated, planned, blobs), planned

    def _append_planned(
        self, sid: str, msgs: list[JSON], planned: list[PlannedOutput], blobs: dict[str, bytes]
    ) -> list[str]:
        if not planned:
            return self.ledger.append_messages(sid, msgs)
        # the ToolOutputPersisted events name their messages, so the ids are reserved here
        encoding = self.ledger.transcript.session(sid).encoding
        reserved = [self.ledger.ids("msg") for _ in msgs]
        extra: list[Event] = [
            ToolOutputPersisted(
                event_id=self.ledger.ids("evt"),
                session_id=sid,
                at=self.ledger.clock(),
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
            sid, msgs, extra_events=extra, message_ids=reserved, blobs=blobs
        )

    async def read_persisted(
        self, ref: str, offset: int = 0, limit: int = DEFAULT_MAX_SLICE_CHARS
    ) -> SliceResult:
        """A slice of a persisted tool output: the handler of the ``read_persisted`` tool.

        `ref` must be the 64-hex-digit reference from the stored-output block; it is
        only ever a key of the content-addressed blob table, never a path.
        """
        if not isinstance(ref, str) or len(ref) != 64 or not set(ref) <= _HEX:
            raise InvalidInput(
                f"ref must be the 64-hex-digit reference from the stored-output block, got {ref!r:.80}"
            )
        data = self.ledger.store.get_blob(ref).decode("utf-8", errors="replace")
        return read_slice(data, offset, limit)

    # --- the view sent to the model ------------------------------------------------------

    def api_messages(self, session_id: str, *, cache: bool | None = None) -> list[JSON]:
        """System + live messages of the chain's tip, with prompt-cache markers when enabled (§7).

        Never rebuilt per call: the projection keeps the view current as events are
        folded, so a read after an append costs a catch-up query and one shallow list
        copy (the floor for handing out a list). The list is the caller's; the message
        dicts are shared with the ledger and must be treated as read-only, except the
        (at most four) marked ones, which are fresh deep copies.
        """
        self.ledger.refresh()
        sid = self.ledger.tip(session_id)
        view = self.ledger.transcript.session(sid)
        messages = self.ledger.transcript.api_view(sid)
        use_cache = self.config.prompt_caching if cache is None else cache
        if use_cache and supports_prompt_caching(view.model, self.provider):
            return apply_cache_markers(
                messages, ttl=self.config.cache_ttl, native_anthropic=self.provider == "anthropic"
            )
        return list(messages)

    # --- triggers ------------------------------------------------------------------------

    async def report_usage(
        self,
        session_id: str,
        raw: Mapping[str, Any],
        *,
        model: str | None = None,
        cost_usd: float | None = None,
    ) -> TurnResult:
        """Record a provider response's usage (Anthropic, OpenAI chat or Responses shape);
        compress in the loop when the real prompt count (input + cache read + cache
        write, never output or reasoning) reaches the threshold."""
        check_usage_report(raw, model, cost_usd)
        sid, event = self._on_tip(
            session_id,
            lambda tip: self.ledger.report_usage(tip, raw, model=model, cost_usd=cost_usd),
        )
        self.engine.update_from_response(sid, event)
        if event.purpose == "agent":
            self._overflow.pop(self.ledger.chains.root(sid), None)  # the call went through
        prompt = event.usage.prompt
        result = await self._auto_compress(
            sid, "in_loop", prompt, "provider prompt tokens (input + cache read + cache write)"
        )
        if result.compressed:
            return result
        # warn only when nothing was compacted now (a compaction re-checks on its continuation)
        return self._with(result, notices=self._pressure(result.session_id, prompt))

    async def preflight(self, session_id: str) -> TurnResult:
        """Before the first model call of a turn: system + messages + tools schema vs the threshold.

        Up to ``max_compression_attempts`` passes, stopping when under the threshold or
        when a pass made no progress (no rows removed and tokens not below 95 %).
        """
        sid = self._live_tip(session_id)
        outcomes: list[CompactionOutcome] = []
        notices: list[str] = []
        for attempt in range(1, self.config.max_compression_attempts + 1):
            tokens = self.ledger.transcript.total_tokens(sid)
            rows = len(self.ledger.transcript.session(sid).live)
            source = f"estimate: system + messages + tools schema (pass {attempt})"
            result = await self._auto_compress(sid, "preflight", tokens, source)
            outcomes += result.compactions
            notices += result.notices
            if result.session_id == sid:
                break  # under the threshold, guarded, skipped or aborted
            sid = result.session_id
            if not result.compressed:
                continue  # another writer compacted first: judge its continuation
            after = self.ledger.transcript.total_tokens(sid)
            after_rows = len(self.ledger.transcript.session(sid).live)
            if after_rows >= rows and after >= 0.95 * tokens:
                reason = f"preflight stopped: pass {attempt} made no progress"
                details = {
                    "tokens_before": tokens,
                    "tokens_after": after,
                    "rows_before": rows,
                    "rows_after": after_rows,
                }
                self._record(
                    sid,
                    (
                        CompressionSkipped,
                        {"trigger": "preflight", "reason": reason, "details": details},
                    ),
                )
                notices.append(reason)
                break
        return TurnResult(session_id=sid, compactions=outcomes, notices=notices)

    async def hygiene(self, session_id: str) -> TurnResult:
        """Gateway safety net before the agent runs: 85 % of the window or the hard message limit,
        with at least ``hygiene_min_messages``; the last real prompt count is preferred."""
        sid = self._live_tip(session_id)
        view = self.ledger.transcript.session(sid)
        real = self.ledger.usage(sid).last_prompt_tokens
        decision = hygiene_should_compress(
            messages_count=len(view.live),
            real_prompt_tokens=real,
            estimated_tokens=0 if real else self._estimate(sid),
            context_length=view.context_length,
            limit_tokens=self.config.hygiene_threshold_tokens(view.context_length),
            min_messages=self.config.hygiene_min_messages,
            hard_message_limit=self.config.hygiene_hard_message_limit,
        )
        if not decision.should_compress:
            return TurnResult(session_id=sid)
        source = f"{decision.source}: {decision.reason}"
        return await self._auto_compress(
            sid, "hygiene", decision.tokens_used, source, size_decided=True
        )

    def _estimate(self, sid: str) -> int:
        """System prompt + messages + tools schema by the configured estimator (HERMES_SPEC §2:
        the tools schema can be 20-30K tokens, so it is never left out)."""
        transcript = self.ledger.transcript
        if self.config.estimator == "exact":
            return transcript.total_tokens(sid)  # kept current by the projection: no walk
        rough = sum(rough_message_tokens(m) for m in transcript.api_view(sid))
        return rough + rough_tools_tokens(transcript.session(sid).tools)

    async def compress(self, session_id: str, focus: str | None = None) -> TurnResult:
        """Manual ``/compress [focus]``: always allowed (bypasses cooldown and anti-thrash)."""
        focus = focus_topic(focus)
        sid = self._live_tip(session_id)
        tokens = self.ledger.transcript.total_tokens(sid)
        return await self._compress_now(sid, "manual", tokens, "manual /compress", focus=focus)

    async def _auto_compress(
        self, sid: str, trigger: Trigger, tokens: int, source: str, *, size_decided: bool = False
    ) -> TurnResult:
        """Compress when the size calls for it and the guards allow; record a skip otherwise."""
        threshold = self.config.threshold_tokens(self.ledger.transcript.session(sid).context_length)
        if not size_decided:
            ok, reason = self.engine.should_compress(sid, tokens)
            if not ok and tokens < threshold:
                return TurnResult(session_id=sid)  # nothing to decide below the threshold
        else:
            ok, reason = self.config.enabled, "compression is disabled"
        if ok:
            ok, reason = self.tracker.guard(sid, self.ledger.clock())
        if ok:
            return await self._compress_now(sid, trigger, tokens, source)
        details = {"tokens": tokens, "threshold_tokens": threshold, "source": source}
        self._record(
            sid, (CompressionSkipped, {"trigger": trigger, "reason": reason, "details": details})
        )
        return TurnResult(session_id=sid, notices=[f"automatic compression skipped: {reason}"])

    async def _compress_now(
        self,
        requested: str,
        trigger: Trigger,
        tokens: int,
        source: str,
        *,
        focus: str | None = None,
    ) -> TurnResult:
        async with self._lock(requested):
            for attempt in range(1, _RACE_RETRIES + 1):
                sid = self.tip(requested)
                if sid != requested:
                    # another task or process compacted first: continue on its continuation
                    return TurnResult(
                        session_id=sid,
                        notices=[f"session was already compacted; continuing on {sid}"],
                    )
                view = self.ledger.transcript.session(sid)
                check = {
                    "trigger": trigger,
                    "tokens": tokens,
                    "source": source,
                    "threshold_tokens": self.config.threshold_tokens(view.context_length),
                    "details": {
                        "attempt": attempt,
                        "focus": focus,
                        "context_length": view.context_length,
                    },
                }
                self._record(sid, (CompressionChecked, check))
                try:
                    outcome = await self.engine.compress(sid, trigger=trigger, focus=focus)
                except SummarizerError as exc:
                    return self._summarizer_failed(sid, trigger, exc)
                except (ConcurrencyError, SessionEnded):
                    self.ledger.retry_on_conflict()  # next pass: on the tip, or re-planned with the new events
                    continue
                return self._after_compaction(sid, outcome, trigger)
        return TurnResult(
            session_id=self.tip(requested),
            notices=["compaction abandoned: other writers kept changing the session"],
        )

    def _cooldown(self, failure_class: str) -> tuple[type[Event], dict[str, Any]]:
        seconds = self.config.cooldown_for(failure_class)
        return CooldownStarted, {
            "until": self.ledger.clock() + seconds,
            "seconds": seconds,
            "failure_class": failure_class,
        }

    def _summarizer_failed(self, sid: str, trigger: Trigger, exc: SummarizerError) -> TurnResult:
        """An aborted compaction: nothing changed; record why and pause automatic compression."""
        reason = f"summarizer failed ({exc.failure_class}): compaction aborted, nothing changed"
        details = {
            "error": str(exc)[:500],
            "failure_class": exc.failure_class,
            "status": exc.status,
        }
        cooldown = self._cooldown(exc.failure_class)
        self._record(
            sid,
            (CompressionSkipped, {"trigger": trigger, "reason": reason, "details": details}),
            cooldown,
        )
        seconds = cooldown[1]["seconds"]
        return TurnResult(
            session_id=sid,
            notices=[
                f"compression aborted: {exc}; automatic compression paused for {seconds:.0f}s"
            ],
        )

    def _after_compaction(
        self, sid: str, outcome: CompactionOutcome, trigger: Trigger
    ) -> TurnResult:
        if outcome.action != "compressed" or outcome.new_session_id is None:
            notices = [outcome.feedback] if trigger == "manual" and outcome.feedback else []
            if outcome.skip_reason:
                notices.append(f"not compressed: {outcome.skip_reason}")
            return TurnResult(session_id=sid, compactions=[outcome], notices=notices)
        new = outcome.new_session_id
        notices = [outcome.feedback]
        events: list[tuple[type[Event], dict[str, Any]]] = []
        if outcome.fallback:
            events.append(self._cooldown(outcome.failure_class or "other"))
            notices.append(
                f"the summarizer failed ({outcome.failure}); a fallback summary was used"
            )
        count = self.ledger.chains.compression_count(new)
        if count >= 2:
            text = f"This session has been compressed {count} times; accuracy may degrade. Consider starting a new session."
            events.append((NoticeIssued, {"code": "compressed_many_times", "text": text}))
            notices.append(text)
        if events:
            self._record(new, *events)
        # only clear here: a warning belongs to a real prompt count (report_usage), and
        # one issued between preflight passes would announce what is already happening
        notices += self._pressure(new, self.ledger.transcript.total_tokens(new), warn=False)
        return TurnResult(session_id=new, compactions=[outcome], notices=notices)

    def _pressure(self, sid: str, tokens: int, *, warn: bool = True) -> list[str]:
        """Warn once at ``pressure_level`` of the threshold; clear the warning when back under."""
        context_length = self.ledger.transcript.session(sid).context_length
        threshold = self.config.threshold_tokens(context_length)
        warned = self.tracker.state(sid).warned
        decision = pressure_check(
            tokens, threshold, self.config.pressure_tokens(context_length), warned=warned
        )
        if not (decision.clear or (warn and decision.warn)):
            return []
        fields = {
            "tokens": tokens,
            "threshold_tokens": threshold,
            "level": self.config.pressure_level,
            "cleared": decision.clear,
            "text": decision.text or "",
        }
        self._record(sid, (PressureWarning, fields))
        return [decision.text] if decision.warn and decision.text else []

    @staticmethod
    def _with(result: TurnResult, *, notices: list[str]) -> TurnResult:
        return msgspec.structs.replace(result, notices=[*result.notices, *notices])

    # --- overflow recovery -----------------------------------------------------------------

    async def handle_provider_error(
        self,
        session_id: str,
        status: int | None,
        body: Any,
        *,
        requested_max_tokens: int | None = None,
    ) -> Recovery:
        """Classify a provider error and say how to retry (HERMES_SPEC §2 overflow recovery).

        max-tokens errors lower the output cap (no compaction, the window unchanged);
        prompt-too-long / 413 learn a stated lower window, then compress and retry, at
        most ``max_compression_attempts`` times per turn, each making progress, else
        raise ``ContextOverflowError``. Other errors return ``action="fail"``.
        """
        check_error_report(status, requested_max_tokens)
        sid = self._live_tip(session_id)
        cls = classify_provider_error(status, body)
        view = self.ledger.transcript.session(sid)
        action = recovery_action(
            cls, context_length=view.context_length, requested_max_tokens=requested_max_tokens
        )
        facts = {
            "status": status,
            "kind": cls.kind,
            "evidence": cls.evidence,
            "requested_max_tokens": requested_max_tokens,
        }
        if action.action == "lower_max_tokens":
            reason = f"{action.reason}; not compressing"
            self._skip_overflow(sid, reason, {**facts, "max_tokens": action.max_tokens})
            return Recovery(
                action="retry",
                session_id=sid,
                max_tokens=action.max_tokens,
                kind=cls.kind,
                reason=action.reason,
            )
        if action.action != "compress":
            if cls.kind == "max_tokens_too_large":
                self._skip_overflow(sid, action.reason, facts)
            return Recovery(action="fail", session_id=sid, kind=cls.kind, reason=action.reason)
        return await self._recover_overflow(
            sid, cls, action.learn_context_length, action.reason, facts
        )

    def _skip_overflow(self, sid: str, reason: str, details: dict[str, Any]) -> None:
        self._record(
            sid, (CompressionSkipped, {"trigger": "overflow", "reason": reason, "details": details})
        )

    async def _recover_overflow(
        self,
        sid: str,
        cls: ProviderErrorClass,
        learn: int | None,
        reason: str,
        facts: dict[str, Any],
    ) -> Recovery:
        root = self.ledger.chains.root(sid)
        recovery = self._overflow.setdefault(
            root, OverflowRecovery(max_attempts=self.config.max_compression_attempts)
        )
        try:
            attempt = recovery.start_attempt(cls)
        except ContextOverflowError as exc:
            self._give_up(root, sid, exc, facts)
            raise
        if learn is not None:
            sid, _ = self._on_tip(
                sid,
                lambda tip: self.ledger.learn_context_limit(
                    tip, learn, cls.evidence or cls.message
                ),
            )
        before_tokens = self.ledger.transcript.total_tokens(sid)
        before_rows = len(self.ledger.transcript.session(sid).live)
        source = f"provider error: {cls.kind} ({cls.evidence[:120]}), attempt {attempt}"
        result = await self._compress_now(sid, "overflow", before_tokens, source)
        new = result.session_id
        after_tokens = self.ledger.transcript.total_tokens(new)
        removed = max(0, before_rows - len(self.ledger.transcript.session(new).live))
        try:
            recovery.record_result(
                tokens_before=before_tokens, tokens_after=after_tokens, rows_removed=removed
            )
        except ContextOverflowError as exc:
            why = f" ({'; '.join(result.notices)})" if result.notices else ""
            error = ContextOverflowError(f"{exc}{why}")
            self._give_up(root, new, error, facts)
            raise error from None
        compaction = result.compactions[-1] if result.compactions else None
        return Recovery(
            action="retry", session_id=new, kind=cls.kind, reason=reason, compaction=compaction
        )

    def _give_up(
        self, root: str, sid: str, exc: ContextOverflowError, facts: dict[str, Any]
    ) -> None:
        self._overflow.pop(root, None)
        self._skip_overflow(sid, f"overflow recovery gave up: {exc}", facts)

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
            "last_prompt_tokens": self.ledger.usage(sid).last_prompt_tokens,
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


__all__ = ["ContextEngine", "ContextService", "Recovery", "TurnResult"]
