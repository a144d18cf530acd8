"""The async runtime an agent loop calls every turn (anyio: asyncio or trio).

``ContextService`` wraps a :class:`~ctxledger.ledger.Ledger` and a context engine
(the built-in compressor by default) and implements HERMES_SPEC §2, §5, §6 and §7:
preflight, in-loop and hygiene triggers, manual compression, pressure warnings,
anti-thrashing and cooldowns, overflow recovery, the tool-output budget and prompt
caching. Every decision is appended as an event with the numbers that made it.

Ledger calls run on the event loop's thread (SQLite appends take well under a
millisecond with WAL); one lock per compression chain serializes compactions, and
optimistic concurrency (expected versions) settles races with other processes.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio
import msgspec

from ctxledger.compaction import CompactionOutcome
from ctxledger.compressor.config import CompressionConfig
from ctxledger.compressor.summarizers.base import Summarizer
from ctxledger.errors import ConcurrencyError, InvalidInput, SessionEnded, SummarizerError
from ctxledger.events import (
    CompressionChecked,
    CompressionSkipped,
    CooldownStarted,
    Event,
    NoticeIssued,
    PressureWarning,
    ToolOutputPersisted,
    Trigger,
)
from ctxledger.ledger import Ledger
from ctxledger.runtime.caching import apply_cache_markers, supports_prompt_caching
from ctxledger.runtime.engine import BuiltinEngine, ContextEngine
from ctxledger.runtime.overflow import OverflowRecovery, classify_provider_error, recovery_action
from ctxledger.runtime.pressure import cooldown_seconds, hygiene_should_compress, pressure_check
from ctxledger.runtime.toolbudget import (
    SliceResult,
    ToolBudget,
    ToolResult,
    plan_persistence,
    preview_block,
    read_slice,
)
from ctxledger.tokens import count_message, rough_message_tokens

JSON = dict[str, Any]
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


class TurnResult(msgspec.Struct, frozen=True, kw_only=True):
    """What a service call did: the session to use from now on, and what to tell the user."""

    session_id: str
    compactions: list[CompactionOutcome] = msgspec.field(default_factory=list)
    notices: list[str] = msgspec.field(default_factory=list)
    message_ids: list[str] = msgspec.field(default_factory=list)


class Recovery(msgspec.Struct, frozen=True, kw_only=True):
    """How to retry after a provider error: with a lower output cap, or on a compacted session."""

    action: str  # "retry" | "fail"
    session_id: str
    max_tokens: int | None = None
    kind: str = ""
    reason: str = ""
    compaction: CompactionOutcome | None = None


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
        summarizer_configured: bool = True,
    ) -> None:
        from ctxledger.compressor.summarizers.offline import OfflineSummarizer

        self.ledger = ledger
        self.config = config or ledger.config
        self.summarizer = summarizer or OfflineSummarizer()
        self.engine: ContextEngine = engine or BuiltinEngine(ledger, self.summarizer, self.config)
        self.provider = provider
        self.summarizer_configured = summarizer_configured
        self._locks: dict[str, anyio.Lock] = {}
        self._overflow: dict[str, OverflowRecovery] = {}

    @classmethod
    def open(cls, path: str | Path, **kwargs: Any) -> ContextService:
        """Open a SQLite ledger file (created on first use) with the service on top."""
        ledger_kwargs = {k: kwargs.pop(k) for k in ("clock", "ids", "durability") if k in kwargs}
        return cls(Ledger.open(path, config=kwargs.get("config"), **ledger_kwargs), **kwargs)

    async def aclose(self) -> None:
        self.ledger.close()

    async def __aenter__(self) -> ContextService:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # --- sessions ------------------------------------------------------------------------

    async def start_session(self, **kwargs: Any) -> str:
        """Start a session (model, context_length, system_prompt, tools, parent_session_id, reason)."""
        sid = self.ledger.start_session(**kwargs)
        self.engine.on_session_start(sid)
        return sid

    async def end_session(self, session_id: str, reason: str = "closed") -> None:
        self.ledger.end_session(self.tip(session_id), reason)
        self.engine.on_session_end(session_id)

    def tip(self, session_id: str) -> str:
        """The live end of the session's compression chain (after reading new events)."""
        self.ledger.refresh()
        return self.ledger.tip(session_id)

    async def switch_model(self, session_id: str, model: str, context_length: int) -> TurnResult:
        """Record a model switch (threshold recomputed) and re-run the preflight check."""
        sid = self.tip(session_id)
        self.ledger.switch_model(sid, model, context_length)
        self.engine.update_model(sid, model, context_length)
        return await self.preflight(sid)

    def _lock(self, session_id: str) -> anyio.Lock:
        root = self.ledger.chains.root(session_id)
        return self._locks.setdefault(root, anyio.Lock())

    # --- messages and the tool-output budget --------------------------------------------

    async def append(self, session_id: str, messages: Sequence[Mapping[str, Any]]) -> TurnResult:
        """Append messages to the session's tip, persisting oversized tool outputs (§6)."""
        if isinstance(messages, Mapping) or not isinstance(messages, Sequence):
            raise InvalidInput("messages must be a list of message objects")
        sid = self.tip(session_id)
        msgs = [dict(m) for m in messages]
        extra, blobs = self._persist_plan(sid, msgs)
        ids = self._append_with_persistence(sid, msgs, extra, blobs)
        return TurnResult(session_id=sid, message_ids=ids)

    def _persist_plan(self, sid: str, msgs: list[JSON]) -> tuple[list[tuple[int, str, str, str, str]], dict[str, bytes]]:
        """Which new tool results to store out of the context: (index, call id, tool, ref, block)."""
        view = self.ledger.transcript.session(sid)
        budget = ToolBudget.for_window(view.context_length)
        names: dict[str, tuple[str, int | None]] = {}
        for msg in self.ledger.transcript.live_messages(sid)[-200:]:
            for call in msg.get("tool_calls") or ():
                names[call["id"]] = (call["function"]["name"], None)
        results: list[ToolResult] = []
        for i, msg in enumerate(msgs):
            if msg.get("role") == "assistant":
                for call in msg.get("tool_calls") or ():
                    if isinstance(call, Mapping) and isinstance(call.get("function"), Mapping):
                        names[str(call.get("id"))] = (str(call["function"].get("name")), i)
            elif msg.get("role") == "tool" and isinstance(msg.get("content"), str):
                name, parent = names.get(str(msg.get("tool_call_id")), ("unknown", None))
                results.append(
                    ToolResult(index=i, tool_call_id=str(msg["tool_call_id"]), tool_name=name, content=msg["content"], assistant_index=parent)
                )
        plan: list[tuple[int, str, str, str, str]] = []
        blobs: dict[str, bytes] = {}
        for d in plan_persistence(results, budget):
            content = msgs[d.index]["content"]
            data = content.encode("utf-8")
            ref = _sha256(data)
            blobs[ref] = data
            block = preview_block(content, ref=ref, tool_call_id=d.tool_call_id, preview_chars=budget.preview_chars)
            plan.append((d.index, d.tool_call_id, d.tool_name, ref, block + f"\n[persisted: {d.reason}]"))
        return plan, blobs

    def _append_with_persistence(
        self, sid: str, msgs: list[JSON], plan: list[tuple[int, str, str, str, str]], blobs: dict[str, bytes]
    ) -> list[str]:
        if not plan:
            return self.ledger.append_messages(sid, msgs)
        # message ids are generated inside append_messages; reserve them here so the
        # ToolOutputPersisted events can name them in the same atomic append
        view = self.ledger.transcript.session(sid)
        extra: list[Event] = []
        reserved = [self.ledger.ids("msg") for _ in msgs]
        for index, call_id, name, ref, block in plan:
            replacement = {**msgs[index], "content": block}
            extra.append(
                ToolOutputPersisted(
                    event_id=self.ledger.ids("evt"),
                    session_id=sid,
                    at=self.ledger.clock(),
                    message_id=reserved[index],
                    tool_call_id=call_id,
                    tool_name=name,
                    blob_ref=ref,
                    chars=len(msgs[index]["content"]),
                    replacement=block,
                    replacement_tokens=count_message(replacement, view.encoding),
                )
            )
        return self.ledger.append_messages(sid, msgs, extra_events=extra, message_ids=reserved, blobs=blobs)

    async def read_persisted(self, ref: str, offset: int = 0, limit: int = 20_000) -> SliceResult:
        """A slice of a persisted tool output (the handler of the ``read_persisted`` tool)."""
        if not isinstance(ref, str) or not _SHA256.match(ref):
            raise InvalidInput(f"ref must be the 64-hex-digit reference from the stored-output block, got {ref!r}")
        data = self.ledger.store.get_blob(ref).decode("utf-8", errors="replace")
        return read_slice(data, offset, limit)

    # --- the view sent to the model ------------------------------------------------------

    def api_messages(self, session_id: str, *, cache: bool | None = None) -> list[JSON]:
        """System + live messages of the tip, with prompt-cache markers when enabled (§7).

        Never mutates stored state: markers go on copies of the (at most 4) marked messages.
        """
        sid = self.ledger.tip(session_id)
        messages = self.ledger.transcript.api_messages(sid)
        view = self.ledger.transcript.session(sid)
        use_cache = self.config.prompt_caching if cache is None else cache
        if use_cache and supports_prompt_caching(view.model, self.provider):
            return apply_cache_markers(messages, ttl=self.config.cache_ttl, native_anthropic=self.provider == "anthropic")
        return messages

    # --- triggers ------------------------------------------------------------------------

    async def report_usage(
        self, session_id: str, raw: Mapping[str, Any], *, model: str | None = None, cost_usd: float | None = None
    ) -> TurnResult:
        """Record a provider response's usage; compress in the loop when the real prompt count says so."""
        sid = self.tip(session_id)
        event = self.ledger.report_usage(sid, raw, model=model, cost_usd=cost_usd)
        self.engine.update_from_response(sid, event)
        self._overflow.pop(sid, None)
        notices = self._pressure(sid, event.usage.prompt)
        result = await self._auto_compress(sid, "in_loop", event.usage.prompt, "provider prompt_tokens")
        return TurnResult(session_id=result.session_id, compactions=result.compactions, notices=notices + result.notices)

    async def preflight(self, session_id: str) -> TurnResult:
        """Before the first model call of a turn: system + messages + tools schema vs the threshold.

        Up to ``max_compression_attempts`` passes, stopping when under the threshold or
        when a pass made no progress (no rows removed and tokens not below 95 %).
        """
        sid = self.tip(session_id)
        outcomes: list[CompactionOutcome] = []
        notices: list[str] = []
        for _ in range(self.config.max_compression_attempts):
            tokens = self.ledger.transcript.total_tokens(sid)
            before_rows = len(self.ledger.transcript.session(sid).live)
            result = await self._auto_compress(sid, "preflight", tokens, "estimate: system + messages + tools")
            outcomes += result.compactions
            notices += result.notices
            if not result.compactions or result.compactions[-1].action != "compressed":
                break
            sid = result.session_id
            after = self.ledger.transcript.total_tokens(sid)
            rows = len(self.ledger.transcript.session(sid).live)
            if rows >= before_rows and after >= 0.95 * tokens:
                break
        return TurnResult(session_id=sid, compactions=outcomes, notices=notices)

    async def hygiene(self, session_id: str) -> TurnResult:
        """Gateway safety net before the agent runs: 85 % of the window or the hard message limit."""
        sid = self.tip(session_id)
        view = self.ledger.transcript.session(sid)
        live = self.ledger.transcript.live_messages(sid)
        rough = sum(rough_message_tokens(m) for m in live) + (len(view.system_prompt or "") // 4)
        decision = hygiene_should_compress(
            messages_count=len(live),
            real_prompt_tokens=self.ledger.usage(sid).last_prompt_tokens,
            rough_tokens=rough,
            context_length=view.context_length,
            hygiene_threshold=self.config.hygiene_threshold,
            min_messages=self.config.hygiene_min_messages,
            hard_message_limit=self.config.hygiene_hard_message_limit,
        )
        if not decision.should_compress:
            return TurnResult(session_id=sid)
        return await self._compress_now(sid, "hygiene", decision.tokens_used, f"{decision.source}: {decision.reason}")

    async def compress(self, session_id: str, focus: str | None = None) -> TurnResult:
        """Manual ``/compress [focus]``: always allowed (bypasses cooldown and anti-thrash)."""
        return await self._compress_now(self.tip(session_id), "manual", self.ledger.transcript.total_tokens(self.tip(session_id)), "manual request", focus=focus)

    async def _auto_compress(self, sid: str, trigger: Trigger, tokens: int, source: str) -> TurnResult:
        ok, reason = self.engine.should_compress(sid, tokens)
        if ok:
            return await self._compress_now(sid, trigger, tokens, source)
        if tokens >= self.config.threshold_tokens(self.ledger.transcript.session(sid).context_length):
            self._record(sid, CompressionSkipped, trigger=trigger, reason=reason, details={"tokens": tokens, "source": source})
        return TurnResult(session_id=sid)

    async def _compress_now(self, sid: str, trigger: Trigger, tokens: int, source: str, *, focus: str | None = None) -> TurnResult:
        requested = sid
        async with self._lock(sid):
            sid = self.tip(sid)
            if sid != requested:
                # another task (or process) compacted first: continue on its continuation
                return TurnResult(session_id=sid, notices=[f"session was already compacted; continuing on {sid}"])
            view = self.ledger.transcript.session(sid)
            threshold = self.config.threshold_tokens(view.context_length)
            self._record(sid, CompressionChecked, trigger=trigger, tokens=tokens, threshold_tokens=threshold, source=source)
            try:
                outcome = await self.engine.compress(sid, trigger=trigger, focus=focus)
            except SummarizerError as exc:
                return self._summarizer_failed(sid, trigger, exc)
            except ConcurrencyError:
                self.ledger.retry_on_conflict()
                tip = self.ledger.tip(sid)
                return TurnResult(session_id=tip, notices=[f"another writer compacted the session first; continuing on {tip}"])
            except SessionEnded:
                return TurnResult(session_id=self.tip(sid))
        return self._after_compaction(sid, outcome)

    def _summarizer_failed(self, sid: str, trigger: Trigger, exc: SummarizerError) -> TurnResult:
        seconds = cooldown_seconds(exc.failure_class, summarizer_configured=self.summarizer_configured)
        now = self.ledger.clock()
        self._record(sid, CompressionSkipped, trigger=trigger, reason=f"summarizer failed ({exc.failure_class}): compaction aborted, nothing changed", details={"error": str(exc)[:500]})
        if trigger != "manual":
            self._record(sid, CooldownStarted, until=now + seconds, seconds=seconds, failure_class=exc.failure_class)
        return TurnResult(session_id=sid, notices=[f"compression aborted: {exc}"])

    def _after_compaction(self, sid: str, outcome: CompactionOutcome) -> TurnResult:
        notices: list[str] = []
        if outcome.action != "compressed" or outcome.new_session_id is None:
            if outcome.skip_reason:
                notices.append(f"not compressed: {outcome.skip_reason}")
            return TurnResult(session_id=sid, compactions=[outcome], notices=notices)
        new = outcome.new_session_id
        notices.append(outcome.feedback)
        if outcome.fallback:
            failure_class = outcome.failure_class or "other"
            seconds = cooldown_seconds(failure_class, summarizer_configured=self.summarizer_configured)
            self._record(new, CooldownStarted, until=self.ledger.clock() + seconds, seconds=seconds, failure_class=failure_class)
            notices.append(f"the summarizer failed ({outcome.failure}); a fallback summary was used")
        count = self.ledger.chains.compression_count(new)
        if count >= 2:
            text = f"This session has been compressed {count} times; accuracy may degrade. Consider starting a new session."
            self._record(new, NoticeIssued, code="compressed_many_times", text=text)
            notices.append(text)
        notices += self._pressure(new, self.ledger.transcript.total_tokens(new))
        return TurnResult(session_id=new, compactions=[outcome], notices=notices)

    def _pressure(self, sid: str, tokens: int) -> list[str]:
        view = self.ledger.transcript.session(sid)
        threshold = self.config.threshold_tokens(view.context_length)
        warned = self.engine.status(sid).get("pressure_warned", False) if isinstance(self.engine, BuiltinEngine) else False
        decision = pressure_check(tokens, threshold, level=self.config.pressure_level, warned=bool(warned))
        if decision.warn or decision.clear:
            self._record(sid, PressureWarning, tokens=tokens, threshold_tokens=threshold, level=self.config.pressure_level, cleared=decision.clear, text=decision.text or "")
        return [decision.text] if decision.warn and decision.text else []

    def _record(self, sid: str, kind: type[Event], **fields: Any) -> None:
        event = kind(event_id=self.ledger.ids("evt"), session_id=sid, at=self.ledger.clock(), **fields)
        self.ledger.append_events(sid, [event])

    # --- overflow recovery -----------------------------------------------------------------

    async def handle_provider_error(
        self, session_id: str, status: int | None, body: Any, *, requested_max_tokens: int | None = None
    ) -> Recovery:
        """Classify a provider error and say how to retry (§2 overflow recovery).

        max-tokens errors lower the output cap (no compaction, the window unchanged);
        prompt-too-long / 413 learn a stated lower window, then compress and retry, at
        most ``max_compression_attempts`` times, each making progress, else raise
        ``ContextOverflowError``.
        """
        sid = self.tip(session_id)
        view = self.ledger.transcript.session(sid)
        cls = classify_provider_error(status, body)
        action = recovery_action(cls, context_length=view.context_length, requested_max_tokens=requested_max_tokens)
        if action.action == "lower_max_tokens":
            return Recovery(action="retry", session_id=sid, max_tokens=action.max_tokens, kind=cls.kind, reason=action.reason)
        if action.action != "compress":
            return Recovery(action="fail", session_id=sid, kind=cls.kind, reason=action.reason)
        if action.learn_context_length is not None:
            self.ledger.learn_context_limit(sid, action.learn_context_length, cls.evidence or cls.message)
        recovery = self._overflow.setdefault(sid, OverflowRecovery(max_attempts=self.config.max_compression_attempts))
        recovery.start_attempt(cls)
        before_tokens = self.ledger.transcript.total_tokens(sid)
        before_rows = len(self.ledger.transcript.session(sid).live)
        result = await self._compress_now(sid, "overflow", before_tokens, f"provider error: {cls.kind}")
        new = result.session_id
        after_tokens = self.ledger.transcript.total_tokens(new)
        rows_removed = before_rows - len(self.ledger.transcript.session(new).live)
        recovery.record_result(tokens_before=before_tokens, tokens_after=after_tokens, rows_removed=max(0, rows_removed))
        self._overflow[new] = self._overflow.pop(sid)
        return Recovery(
            action="retry", session_id=new, kind=cls.kind, reason=action.reason,
            compaction=result.compactions[-1] if result.compactions else None,
        )

    def status(self, session_id: str) -> dict[str, Any]:
        sid = self.tip(session_id)
        return {"session_id": sid, **self.engine.status(sid)}

    def tools(self) -> list[JSON]:
        """Tool schemas the agent can expose: read a persisted output."""
        from ctxledger.runtime.toolbudget import read_persisted_tool

        return [read_persisted_tool()]


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


__all__ = ["ContextEngine", "ContextService", "Recovery", "TurnResult"]
