"""Driving a what-if: steps played through a :class:`ContextService` with the recorded host's loop.

:func:`drive` plays :data:`~ctxledger.analysis.history.Step` s with the checks of a loop
(:mod:`~ctxledger.analysis.whatif_loop`: HERMES_SPEC §2's by default, ``hygiene`` before
each user turn, ``preflight`` after the user message) and ``report_usage`` for each model
response; :func:`start_and_drive` starts the chain's first session as recorded first.
See :mod:`ctxledger.analysis.whatif` for how a recorded response is replayed.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterable
from typing import Any

import msgspec

from ctxledger.analysis.history import (
    AppendStep,
    CompressStep,
    LimitStep,
    ModelStep,
    PinStep,
    StartInfo,
    Step,
    SystemStep,
    UsageStep,
)
from ctxledger.analysis.replayids import PresetIds, ReplayClock
from ctxledger.analysis.whatif_loop import (
    EVERY_CALL,
    HERMES,
    PER_RUN,
    checks_after,
    request_end,
    runs,
    split,
)
from ctxledger.errors import InvalidInput
from ctxledger.integers import shown_ids
from ctxledger.limits import replaying_recorded
from ctxledger.messages import JSON, role_of
from ctxledger.runtime.service import ContextService
from ctxledger.usage import check_usage_report, normalize_usage


class CallTokens(msgspec.Struct, frozen=True, kw_only=True):
    """One model call: the prompt it sent (and what the recorded call sent, in a replay)."""

    turn: int
    session_id: str
    tokens: int
    recorded: int | None = None


class DriveResult(msgspec.Struct, frozen=True, kw_only=True):
    session_id: str
    calls: list[CallTokens]
    notes: list[str]


def _usage_report(step: UsageStep, live: int) -> JSON:
    """The usage report a recorded response gives in the what-if: the recorded one when
    the what-if view is the recorded view, or when it held no prompt count (no usage, or
    a reported 0: no count, as in the live run); else the provider's prompt rescaled to
    the what-if view, never below 1 (a count stays a count). A recorded report that
    today's checks refuse (older code took ``100.5`` tokens) is rebuilt from the
    figures the ledger recorded for it."""
    # (a scripted step records no prompt: its count is the what-if view's)
    counted = step.reported and (step.recorded_prompt is None or step.recorded_prompt > 0)
    raw = step.raw if step.raw is not None and _acceptable(step.raw) else None
    if not counted:
        if raw is not None:
            return raw
        return (
            {"prompt_tokens": 0, "completion_tokens": step.output_tokens} if step.reported else {}
        )
    if raw is not None and step.recorded_live == live:
        return raw  # the same view: nothing to rescale
    prompt = max(1, live + step.offset)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": step.output_tokens,
        "prompt_tokens_details": {"cached_tokens": min(step.cache_read, prompt)},
    }


def _acceptable(raw: JSON) -> bool:
    """Whether today's ``report_usage`` takes recorded report `raw` as it is."""
    try:
        check_usage_report(raw, None, None)
        normalize_usage(raw)
    except InvalidInput:
        return False
    return True


class _Driver:
    def __init__(
        self,
        svc: ContextService,
        session_id: str,
        ids: PresetIds | None,
        clock: ReplayClock | None,
        loop: str = HERMES,
    ) -> None:
        self.svc, self.sid, self.ids, self.clock, self.loop = svc, session_id, ids, clock, loop
        self.turn = 0
        #: every_call: the check after a run of appends that ends in its request, run
        #: before the next step (none: no model call followed it)
        self.pending = False
        self.calls: list[CallTokens] = []
        self.notes: list[str] = []

    def _follow(self, step: Step) -> None:
        if self.clock is not None and step.at is not None:
            self.clock.now = max(self.clock.now, step.at)

    async def play(self, step: Step) -> None:
        self._follow(step)
        svc = self.svc
        if self.pending:
            self.pending = False
            await self._preflight()
        if isinstance(step, AppendStep):
            await self._append(step)
        elif isinstance(step, UsageStep):
            await self._usage(step)
        elif isinstance(step, CompressStep) and step.beyond is not None:
            await self._host_decision(step, step.beyond)
        elif isinstance(step, CompressStep):
            self.sid = (await svc.compress(self.sid, focus=step.focus)).session_id
        elif isinstance(step, ModelStep):
            self.sid = (
                await svc.switch_model(
                    self.sid,
                    _model(step.model),
                    step.context_length,
                    scoped_guards=step.scoped_guards,
                )
            ).session_id
        elif isinstance(step, LimitStep):
            svc.ledger.learn_context_limit(
                svc.tip(self.sid),
                step.context_length,
                step.evidence,
                scoped_guards=step.scoped_guards,
            )
        elif isinstance(step, SystemStep):
            role = role_of(step.role)
            self.sid = (await svc.set_system_prompt(self.sid, step.text, role=role)).session_id
        else:
            self._pin(step)

    async def _usage(self, step: UsageStep) -> None:
        """A recorded model response: its report, rescaled to the what-if view."""
        svc = self.svc
        live = svc.ledger.transcript.total_tokens(svc.tip(self.sid))
        self.calls.append(
            CallTokens(
                turn=self.turn,
                session_id=svc.tip(self.sid),
                tokens=max(0, live + step.offset),
                recorded=step.recorded_prompt,
            )
        )
        raw = _usage_report(step, live)
        result = await svc.report_usage(
            self.sid,
            raw,
            model=_usage_model(step.model),
            cost_usd=_cost(step.cost_usd),
            tool_calls=step.tool_calls,
        )
        self.sid = result.session_id
        if checks_after(self.loop, step):
            await self._preflight()

    async def _host_decision(self, step: CompressStep, beyond: int) -> None:
        """A compaction the host decided on its own, replayed as the host judged it
        (`beyond`: what it counted past the ledger's view)."""
        source = f"the host's decision, replayed: estimate + {beyond:,} tokens it counted"
        result = await self.svc.host_compress(
            self.sid,
            source,
            beyond=beyond,
            focus=step.focus,
            agent=step.agent,
            refused=step.refused,
            hygiene=step.hygiene,
            hard_limit=step.hard_limit,
            requested=step.requested,
        )
        self.sid = result.session_id

    async def _append(self, step: AppendStep) -> None:
        """Append `step` with the checks of the loop (:mod:`~ctxledger.analysis.whatif_loop`)."""
        if step.user_turn:
            self.turn += 1
            if self.loop == HERMES:
                self.sid = (await self.svc.hygiene(self.sid)).session_id
            elif self.loop == PER_RUN:
                await self._preflight()  # (a run reads its history, then saves the message)
        await self._write(step)
        if step.user_turn and self.loop == HERMES:
            await self._preflight()

    async def play_run(self, run: list[AppendStep]) -> None:
        """every_call: appends with nothing recorded between them, as one request (one
        check, after its last message that is not the model's) and the reply to it."""
        end = request_end(run)
        for j, step in enumerate(run):
            self._follow(step)
            if self.pending:  # (the last run's request: something was recorded after it)
                self.pending = False
                await self._preflight()
            self.turn += step.user_turn
            if end is None or j != end[0]:
                await self._write(step)
                continue
            request, reply = split(step, end[1] + 1)
            await self._write(request)
            if reply.messages or j < len(run) - 1:
                await self._preflight()  # (the reply follows its call)
            else:
                self.pending = True  # (the run ended on it: a call follows, or none)
            if reply.messages:
                await self._write(reply)

    def _withdrawable(self, ids: list[str]) -> list[str]:
        """`ids` when they still end the what-if's view (else a note: a compaction of the
        what-if took them into a summary or a continuation, and the view keeps it)."""
        if not ids:
            return []
        live = self.svc.ledger.transcript.session(self.svc.tip(self.sid)).live
        if live[max(0, len(live) - len(ids)) :] == ids:
            return ids
        self.notes.append(
            f"turn {self.turn}: the withdrawal of {shown_ids(ids)} was not replayed "
            "(the what-if's view no longer ends with it)"
        )
        return []

    async def _write(self, step: AppendStep) -> None:
        if self.ids is not None and step.message_ids is not None:
            self.ids.preset(step.message_ids)
        try:
            withdraw = self._withdrawable(step.withdraw)
            result = await self.svc.append(
                self.sid, step.messages, withdraw=withdraw, withdraw_reason=step.withdraw_reason
            )
            self.sid = result.session_id
        except InvalidInput as exc:
            self.notes.append(f"turn {self.turn}: an append was skipped: {exc}")
        finally:
            if self.ids is not None:
                self.ids.preset(())

    async def _preflight(self) -> None:
        self.sid = (await self.svc.preflight(self.sid)).session_id

    def _pin(self, step: PinStep) -> None:
        tip = self.svc.tip(self.sid)
        if step.message_id in self.svc.ledger.transcript.session(tip).live:
            self.svc.ledger.pin(tip, step.message_id, step.pinned)
        else:
            self.notes.append(
                f"turn {self.turn}: pin of {step.message_id} skipped (not in the live view)"
            )


async def drive(
    svc: ContextService,
    session_id: str,
    steps: Iterable[Step],
    *,
    ids: PresetIds | None = None,
    clock: ReplayClock | None = None,
    loop: str = HERMES,
) -> DriveResult:
    """Play `steps` through `svc` on the session `session_id` (already started), checking
    where `loop` checks (:mod:`~ctxledger.analysis.whatif_loop`)."""
    driver = _Driver(svc, session_id, ids, clock, loop)
    for item in runs(steps) if loop == EVERY_CALL else steps:
        if isinstance(item, list):
            await driver.play_run(item)
        else:
            await driver.play(item)
    return DriveResult(session_id=svc.tip(driver.sid), calls=driver.calls, notes=driver.notes)


async def start_and_drive(
    svc: ContextService, start: StartInfo, steps: Iterable[Step], replay: bool = True, **kw: Any
) -> DriveResult:
    """Start the chain's first session as recorded (same id and encoding), then :func:`drive`;
    `replay=False` (a live recording) checks names and focus as any new input."""
    spec = start.spec()
    with replaying_recorded() if replay else contextlib.nullcontext():
        sid = await svc.start(msgspec.structs.replace(spec, model=_model(spec.model)))
        return await drive(svc, sid, steps, **kw)


# Recorded values replay as recorded: older ledgers hold values today's checks refuse
# in new input (a blank model name, a negative or NaN cost); the what-if run must not.
_NO_MODEL = "(no model name recorded)"


def _model(model: str) -> str:
    return model if model.strip() else _NO_MODEL


def _usage_model(model: str | None) -> str | None:
    return model if model is None or model.strip() else None


def _cost(cost: float | None) -> float | None:
    return cost if cost is None or (math.isfinite(cost) and cost >= 0) else None


def with_loop_note(
    result: DriveResult, recorded: str | None, chosen: str | None, run: str
) -> DriveResult:
    """`result` noting the loop the what-if ran, unless it is the default one, unsaid."""
    if recorded is None and run == HERMES:
        return result
    shown = run.replace("_", "-")
    why = "chosen with --loop" if chosen is not None else "the loop the chain's host named"
    if chosen is not None and recorded is not None and recorded != run:
        why += f"; the host named {recorded.replace('_', '-')}"
    note = f"the what-if checked for compaction where the {shown} loop checks ({why})"
    return msgspec.structs.replace(result, notes=[note, *result.notes])


__all__ = ["CallTokens", "DriveResult", "drive", "start_and_drive", "with_loop_note"]
