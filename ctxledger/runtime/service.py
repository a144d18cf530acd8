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

from collections.abc import Mapping
from contextlib import AbstractAsyncContextManager
from typing import Any

import msgspec

from ctxledger.compressor.assemble import reason_line
from ctxledger.errors import (
    ConcurrencyError,
    ContextOverflowError,
    FailureClass,
    InvalidInput,
    SessionEndedError,
    SummarizerError,
)
from ctxledger.events import (
    CompressionChecked,
    CompressionSkipped,
    CooldownStarted,
    Event,
    NoticeIssued,
    PressureWarning,
    Trigger,
)
from ctxledger.integers import shown
from ctxledger.ledger.compaction import CompactionOutcome, abort_feedback, abort_record
from ctxledger.ledger.prompt import set_system_prompt
from ctxledger.runtime.engine import ContextEngine
from ctxledger.runtime.lease import chain_lease
from ctxledger.runtime.overflow import (
    OverflowRecovery,
    ProviderErrorClass,
    classify_provider_error,
    made_progress,
    recovery_action,
)
from ctxledger.runtime.pressure import HygieneDecision, hygiene_should_compress, pressure_check
from ctxledger.runtime.service_core import RACE_RETRIES, ServiceCore
from ctxledger.runtime.service_io import (
    Recovery,
    TurnResult,
    check_error_report,
    focus_topic,
    host_details,
    host_size,
    is_int,
)


class ContextService(ServiceCore):
    """The API an agent runtime uses every turn."""

    async def switch_model(
        self, session_id: str, model: str, context_length: int, *, scoped_guards: bool = True
    ) -> TurnResult:
        """Record a model switch (the threshold follows the new window), then re-run preflight.

        ``scoped_guards=False`` (a what-if of an old ledger): the guards follow the rule
        the switch was recorded under (:mod:`ctxledger.events`)."""
        if not isinstance(model, str) or not model.strip():
            raise InvalidInput("model must be a non-empty string")
        if not is_int(context_length) or context_length < 1024:
            raise InvalidInput(
                f"context_length must be an integer ≥ 1024, got {shown(context_length)}"
            )
        sid, _ = self._on_tip(
            session_id,
            lambda tip: self.ledger.switch_model(
                tip, model, context_length, scoped_guards=scoped_guards
            ),
        )
        self.engine.update_model(sid, model, context_length)
        return await self.preflight(sid)

    async def set_system_prompt(
        self, session_id: str, text: str, *, seen: str | None = None, role: str | None = None
    ) -> TurnResult:
        """Record a changed system prompt on the session's tip, then run preflight (the
        estimate now counts it: a grown prompt can compact here). The same prompt as the
        current one writes nothing and runs nothing (a client that posts its prompt before
        every call), unless `seen`, the prompt the caller read before deciding to call, is
        another: another worker recorded this change since, and preflight runs as after
        a write (:mod:`ctxledger.ledger.prompt`). `role`: ``system`` or ``developer`` (None: as now)."""
        sid, wrote = self._on_tip(
            session_id, lambda tip: set_system_prompt(self.ledger, tip, text, role)
        )
        if wrote or (
            seen is not None and seen != self.ledger.transcript.session(sid).system_prompt
        ):
            return await self.preflight(sid)
        return TurnResult(session_id=sid)

    # --- triggers ------------------------------------------------------------------------

    async def report_usage(
        self,
        session_id: str,
        raw: Mapping[str, Any] | None,
        *,
        model: str | None = None,
        cost_usd: float | None = None,
        tool_calls: bool | None = None,
    ) -> TurnResult:
        """Record a provider response's usage (Anthropic, OpenAI chat or Responses shape);
        compress in the loop when the real prompt count (input + cache read + cache
        write, never output or reasoning) reaches the threshold.

        ``tool_calls``: whether the response asked for tools (recorded with the usage).
        After a final answer (``False``) the in-loop check waits for the next turn's
        preflight, as Hermes checks only after a response whose tools ran; ``None``
        (not said) checks.

        A response without usage (``None``, ``{}``, only nulls), or whose prompt count
        is 0, is recorded and judged by ``_unreported_prompt``."""
        # (the arguments are checked by the ledger's report_usage, before it appends)
        sid, event = self._on_tip(
            session_id,
            lambda tip: self.ledger.report_usage(
                tip, raw, model=model, cost_usd=cost_usd, tool_calls=tool_calls
            ),
        )
        self.engine.update_from_response(sid, event)
        if event.purpose == "agent":
            self._overflow.pop(self.ledger.chains.root(sid), None)  # the call went through
        if event.counted:
            prompt, source = (
                event.usage.prompt,
                "provider prompt tokens (input + cache read + cache write)",
            )
        else:
            prompt, source = self._unreported_prompt(sid)
        if tool_calls is False:  # a final answer: the next turn's preflight decides
            return self._with(TurnResult(session_id=sid), notices=self._pressure(sid, prompt))
        result = await self._auto_compress(sid, "in_loop", prompt, source)
        if result.compressed:
            return result
        # warn only when nothing was compacted now (a compaction re-checks on its continuation)
        return self._with(result, notices=self._pressure(result.session_id, prompt))

    def _unreported_prompt(self, sid: str) -> tuple[int, str]:
        """The in-loop figure of a response without a prompt count: the larger of the live
        session's latest real count (Hermes 0.19's in-loop figure: kept however stale,
        until a compaction, a model switch or a reported 0) and the estimate of system +
        messages + tools (what Hermes's check before the next call judges). So the
        decision is the one Hermes makes by the next call, whether or not the integrator
        runs ``preflight`` before every call, and a stale count never hides growth."""
        estimate = self._estimate(sid)
        real = self.tracker.state(sid).last_real_prompt
        if real is not None and real >= estimate:
            return real, "no usage reported: the session's latest provider prompt count"
        return estimate, "no usage reported: estimate of system + messages + tools schema"

    async def preflight(self, session_id: str) -> TurnResult:
        """Before a model call (at least the first of a turn; before every call of a tool
        loop, as Hermes 0.19 checks and as the proxy and the integrations run it):
        system + messages + tools schema vs the threshold.

        Up to ``max_compression_attempts`` passes, stopping when under the threshold or
        when a pass made no progress (no rows removed and tokens not below 95 %).
        """
        sid = self._live_tip(session_id)
        outcomes: list[CompactionOutcome] = []
        notices: list[str] = []
        aborted: str | None = None  # an abort ends the passes
        for attempt in range(1, self.config.max_compression_attempts + 1):
            tokens = self._estimate(sid)  # the configured estimator, as hygiene's fallback
            rows = len(self.ledger.transcript.session(sid).live)
            source = f"estimate: system + messages + tools schema (pass {attempt})"
            result = await self._auto_compress(sid, "preflight", tokens, source)
            outcomes += result.compactions
            notices += result.notices
            aborted = result.aborted
            if result.session_id == sid:
                break  # under the threshold, guarded, skipped or aborted
            sid = result.session_id
            if not result.compressed:
                continue  # another writer compacted first: judge its continuation
            after = self._estimate(sid)
            after_rows = len(self.ledger.transcript.session(sid).live)
            if not made_progress(tokens, after, max(0, rows - after_rows)):
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
        return TurnResult(session_id=sid, compactions=outcomes, notices=notices, aborted=aborted)

    async def hygiene(self, session_id: str) -> TurnResult:
        """Gateway safety net before the agent runs: 85 % of the window or the hard message limit,
        with at least ``hygiene_min_messages``; the last real prompt count is preferred."""
        sid = self._live_tip(session_id)
        real = self.ledger.usage(sid).last_prompt_tokens
        decision = self._hygiene_due(sid, real, 0 if real else self._estimate(sid))
        if not decision.should_compress:
            return TurnResult(session_id=sid)
        source = f"{decision.source}: {decision.reason}"
        return await self._auto_compress(
            sid, "hygiene", decision.tokens_used, source, size_decided=True
        )

    def _hygiene_due(
        self, sid: str, real: int | None, estimated: int, hard_limit: int | None = None
    ) -> HygieneDecision:
        view = self.ledger.transcript.session(sid)
        return hygiene_should_compress(
            messages_count=len(view.live),
            real_prompt_tokens=real,
            estimated_tokens=max(0, estimated),  # (a what-if's host size may be below 0)
            context_length=view.context_length,
            limit_tokens=self.config.hygiene_threshold_tokens(view.context_length),
            min_messages=self.config.hygiene_min_messages,
            hard_message_limit=hard_limit or self.config.hygiene_hard_message_limit,
        )

    def _estimate(self, sid: str) -> int:
        """System prompt + messages + tools schema by the configured estimator (HERMES_SPEC §2:
        the tools schema can be 20-30K tokens, so it is never left out)."""
        transcript = self.ledger.transcript
        if self.config.estimator == "exact":
            return transcript.total_tokens(sid)  # kept current by the projection: no walk
        return transcript.rough_tokens(sid)  # summed as the view grows: no walk either

    async def compress(self, session_id: str, focus: str | None = None) -> TurnResult:
        """Manual ``/compress [focus]``: always allowed (bypasses cooldown and anti-thrash)."""
        focus = focus_topic(focus)
        sid = self._live_tip(session_id)
        tokens = self._estimate(sid)
        return await self._compress_now(sid, "manual", tokens, "manual /compress", focus=focus)

    async def host_compress(
        self,
        session_id: str,
        source: str,
        *,
        tokens: int | None = None,
        beyond: int | None = None,
        focus: str | None = None,
        agent: str | None = None,
        refused: bool = False,
        hygiene: bool = False,
        hard_limit: int | None = None,
        requested: bool = False,
    ) -> TurnResult:
        """A compaction a host decided on its own (Hermes's ``compress(force=False)``):
        trigger ``preflight``, the plan not forced, the guards (cooldown, anti-thrash)
        applying as for every automatic compaction (``compress``: the user asked).

        `refused`: its provider refused the request for its size (Hermes's overflow
        retries): trigger ``overflow``, the size not judged, in a what-if either.
        `hygiene`: its safety net before a turn (Hermes's gateway hygiene): trigger
        ``hygiene``; a what-if judges its size by :meth:`hygiene`'s rule, as the host did,
        with the host's message limit `hard_limit` if given (``details["hard_limit"]``).
        `requested`: the user asked, not forcing it (Hermes's TUI and ACP ``/compress``):
        trigger ``requested``, the guards applying, the size not judged (a what-if too).

        `tokens`: the request size the host measured (default: this ledger's estimate);
        it decided, so the size is not judged again. The ledger's own estimate of the
        view is recorded beside it (``CompressionChecked.details["estimate"]``): what
        the host counts beyond the view (its system prompt, its tools schema) is the
        difference, which a what-if replays (:mod:`ctxledger.analysis.history`).

        `beyond` (a what-if replaying such a decision): the host's size is this ledger's
        estimate plus `beyond`, judged against the threshold as the host judged it;
        below, nothing is recorded. `agent`: the host agent deciding (``details["agent"]``):
        its passes' anti-thrash strikes are its own, as a host's in-memory count is;
        another agent's ask neither uses nor clears them, and a name opts out of the
        chain's shared strikes; the fallback streak and the cooldown hold every ask
        (:class:`~ctxledger.runtime.engine.HostAgents`). Unnamed, a what-if may not replay
        it exactly (its own loop's no-op passes strike the shared slot): name the agent."""
        focus = focus_topic(focus)
        trigger, tokens = host_size(
            agent, tokens, beyond, hard_limit, refused=refused, hygiene=hygiene, requested=requested
        )
        sid = self._live_tip(session_id)
        estimate = self._estimate(sid)
        measured = estimate + beyond if beyond is not None else tokens
        due = not hygiene or beyond is None  # (a what-if: judged by the hygiene rule)
        if not (due or self._hygiene_due(sid, None, measured or 0, hard_limit).should_compress):
            return TurnResult(session_id=sid)
        return await self._auto_compress(
            sid,
            trigger,
            estimate if measured is None else measured,
            source,
            size_decided=beyond is None or trigger != "preflight",
            focus=focus,
            host=host_details(estimate, agent, hard_limit),
        )

    async def _auto_compress(
        self,
        sid: str,
        trigger: Trigger,
        tokens: int,
        source: str,
        *,
        size_decided: bool = False,
        focus: str | None = None,
        host: dict[str, Any] | None = None,
    ) -> TurnResult:
        """Compress when the size calls for it and the guards allow; record a skip otherwise.
        `host`: what a host's decision adds to the recorded details (:meth:`host_compress`)."""
        threshold = self.config.threshold_tokens(self.ledger.transcript.session(sid).context_length)
        if not size_decided:
            ok, reason = self.engine.should_compress(sid, tokens)
            if not ok and tokens < threshold:
                return TurnResult(session_id=sid)  # nothing to decide below the threshold
        else:
            ok, reason = self.config.enabled, "compression is disabled"
        if ok:
            ok, reason = self.tracker.guard(sid, self.ledger.clock(), (host or {}).get("agent"))
        if ok:
            return await self._compress_now(sid, trigger, tokens, source, focus=focus, host=host)
        details = {
            "tokens": tokens,
            "threshold_tokens": threshold,
            "source": source,
            **(host or {}),
        }
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
        host: dict[str, Any] | None = None,
    ) -> TurnResult:
        async with self._lock(requested), self._lease(requested):
            for attempt in range(1, RACE_RETRIES + 1):
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
                        **(host or {}),
                    },
                }
                self._record(sid, (CompressionChecked, check))
                try:
                    outcome = await self.engine.compress(sid, trigger=trigger, focus=focus)
                except SummarizerError as exc:
                    return self._summarizer_failed(sid, trigger, exc)
                except (ConcurrencyError, SessionEndedError):
                    self.ledger.retry_on_conflict()  # next pass: on the tip, or re-planned with the new events
                    continue
                return self._after_compaction(sid, outcome, trigger)
        return TurnResult(
            session_id=self.tip(requested),
            notices=["compaction abandoned: other writers kept changing the session"],
        )

    def _lease(self, session_id: str) -> AbstractAsyncContextManager[bool]:
        """The cross-process compaction lease of the chain (see :mod:`.lease`): another
        process compacting it makes this one wait, then find the continuation."""
        wait = float(getattr(self.summarizer, "timeout", 120.0)) + 30.0
        self.ledger.refresh()
        root = self.ledger.chains.root(session_id)
        return chain_lease(self.ledger.store, root, wait)

    def _cooldown(self, failure_class: FailureClass) -> tuple[type[Event], dict[str, Any]]:
        seconds = self.config.cooldown_for(failure_class)
        return CooldownStarted, {
            "until": self.ledger.clock() + seconds,
            "seconds": seconds,
            "failure_class": failure_class,
        }

    def _summarizer_failed(self, sid: str, trigger: Trigger, exc: SummarizerError) -> TurnResult:
        """An aborted compaction: nothing changed; record why and pause automatic compression."""
        reason, details = abort_record(exc)  # the error redacted once, as recorded
        cooldown = self._cooldown(exc.failure_class)
        self._record(
            sid,
            (CompressionSkipped, {"trigger": trigger, "reason": reason, "details": details}),
            cooldown,
        )
        said = reason_line(details["error"], redacted=True) or exc.failure_class
        paused = f"automatic compression paused for {cooldown[1]['seconds']:.0f}s"
        if trigger != "manual":  # the reason as the manual feedback gives it
            notices = [f"compression aborted: {said}; {paused}"]
        else:  # what Hermes's /compress reports: nothing was removed, and why
            notices = [abort_feedback(self.ledger, sid, said), paused[0].upper() + paused[1:]]
        return TurnResult(session_id=sid, notices=notices, aborted=said)

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
        if outcome.fallback:  # the feedback names it, with its reason (redacted)
            events.append(self._cooldown(outcome.failure_class or "other"))
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


__all__ = ["ContextEngine", "ContextService", "Recovery", "TurnResult"]
