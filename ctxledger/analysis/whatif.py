"""What-if replay: re-run a recorded chain's history under another configuration.

:func:`~ctxledger.analysis.history.history` reads what the agent did from the log — every message it appended
(across the whole chain, in seq order and in the batches it appended them),
every provider usage report, manual ``/compress`` requests (and a host's own
decisions), model switches, learned limits, pins and system prompt changes — as a list of :data:`Step`. Compactions,
skips, warnings and cooldowns are *decisions*, so they are not steps: the what-if
service makes its own.

:func:`drive` plays steps through a :class:`ContextService` with the agent loop of
HERMES_SPEC §2: ``hygiene`` before each user turn, ``preflight`` after the user
message, ``report_usage`` for each model response. It is also how tests and the
benchmarks record a generated session (:func:`scripted_steps`), so a what-if with
the recorded configuration reproduces such a chain exactly.

A recorded usage report is replayed as the prompt the alternative view would have
sent: the provider's count minus our count of the recorded view (what our count
misses: framing, hidden tokens) plus our count of the what-if view. When the views
are the same size the recorded report is replayed verbatim. A response that reported
no usage is replayed as such (never as a count of 0), and whether a response asked
for tools is passed on as recorded (ledgers from before session 30 did not record it:
those replay it as not said).

:func:`whatif` runs it all into a scratch ledger (SQLite's private temporary database,
gone when it closes, or a file at ``out``): the original ledger is only read. Its two halves
are :func:`replay_history` (the replay, scratch ledger kept open for a ``with`` block)
and :func:`whatif_report` (the comparison: two chain audits, built only when asked for). Appended
messages keep their recorded ids, so a diff lines the two chains up by message.
Not replayed (listed in the report's notes): overflow recovery (it depended on a
provider error about the recorded view) and reverts.
"""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import anyio
import msgspec

from ctxledger.analysis.audit import ChainReport, chain_report
from ctxledger.analysis.compactions import (
    chain_signature,
    remembering_compactions,
)
from ctxledger.analysis.history import (
    AppendStep,
    CompressStep,
    History,
    LimitStep,
    ModelStep,
    PinStep,
    StartInfo,
    Step,
    SystemStep,
    UsageStep,
    history,
    scripted_steps,
)
from ctxledger.analysis.replayids import PresetIds, ReplayClock
from ctxledger.analysis.whatif_warnings import comparison_warnings
from ctxledger.compressor.config import CompressionConfig
from ctxledger.compressor.summarizers.base import Summarizer
from ctxledger.errors import InvalidInput
from ctxledger.eventstore.contents import sharing_contents
from ctxledger.eventstore.space import TEMPORARY
from ctxledger.ledger.facade import Ledger
from ctxledger.limits import replaying_recorded
from ctxledger.messages import JSON, role_of
from ctxledger.runtime.service import ContextService
from ctxledger.usage import check_usage_report, normalize_usage

# --------------------------------------------------------------------------- driving


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
        self, svc: ContextService, session_id: str, ids: PresetIds | None, clock: ReplayClock | None
    ) -> None:
        self.svc, self.sid, self.ids, self.clock = svc, session_id, ids, clock
        self.turn = 0
        self.calls: list[CallTokens] = []
        self.notes: list[str] = []

    async def play(self, step: Step) -> None:
        if self.clock is not None and step.at is not None:
            self.clock.now = max(self.clock.now, step.at)
        svc = self.svc
        if isinstance(step, AppendStep):
            await self._append(step)
        elif isinstance(step, UsageStep):
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
        elif isinstance(step, CompressStep) and step.beyond is not None:
            source = f"the host's decision, replayed: estimate + {step.beyond:,} tokens it counted"
            result = await svc.host_compress(
                self.sid,
                source,
                beyond=step.beyond,
                focus=step.focus,
                agent=step.agent,
                refused=step.refused,
            )
            self.sid = result.session_id
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

    async def _append(self, step: AppendStep) -> None:
        svc = self.svc
        if step.user_turn:
            self.turn += 1
            self.sid = (await svc.hygiene(self.sid)).session_id
        if self.ids is not None and step.message_ids is not None:
            self.ids.preset(step.message_ids)
        try:
            self.sid = (await svc.append(self.sid, step.messages)).session_id
        except InvalidInput as exc:
            self.notes.append(f"turn {self.turn}: an append was skipped: {exc}")
        finally:
            if self.ids is not None:
                self.ids.preset(())
        if step.user_turn:
            self.sid = (await svc.preflight(self.sid)).session_id

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
) -> DriveResult:
    """Play `steps` through `svc` on the session `session_id` (already started)."""
    driver = _Driver(svc, session_id, ids, clock)
    for step in steps:
        await driver.play(step)
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


# --------------------------------------------------------------------------- reports


class TurnTokens(msgspec.Struct, frozen=True, kw_only=True):
    turn: int
    recorded: int
    whatif: int


class Reproduction(msgspec.Struct, frozen=True, kw_only=True):
    """What the what-if reproduced of the recorded chain, and what differs, with numbers.

    ``exact`` only when every recorded compaction (inputs, summary, layout, tokens) and
    every turn's token count matched; otherwise ``differences`` says what did not.
    """

    exact: bool
    #: [recorded, what-if]
    compactions: list[int]
    #: leading compactions of the two chains that are the same (inputs, summary, layout, tokens)
    matching_compactions: int
    #: [recorded, what-if]
    tokens_sent: list[int]
    #: [recorded, what-if]
    model_calls: list[int]
    #: turns whose prompt tokens differ, of all turns compared
    turns_differing: int
    turns: int
    differences: list[str]
    warnings: list[str]


class WhatIfReport(msgspec.Struct, frozen=True, kw_only=True):
    session_id: str
    root: str
    summarizer: str
    #: setting -> [recorded value, what-if value], for every setting that differs
    config_changes: dict[str, list[Any]]
    recorded: ChainReport
    whatif: ChainReport
    turns: list[TurnTokens]
    #: every recorded plan and count matched (``reproduction.exact``)
    reproduces_recorded: bool
    notes: list[str]
    out: str | None = None
    reproduction: Reproduction | None = None


def _turn_tokens(calls: list[CallTokens]) -> list[TurnTokens]:
    turns: dict[int, list[int]] = {}
    for call in calls:
        sums = turns.setdefault(call.turn, [0, 0])
        sums[0] += call.recorded or 0
        sums[1] += call.tokens
    return [TurnTokens(turn=t, recorded=r, whatif=w) for t, (r, w) in sorted(turns.items())]


def config_changes(before: CompressionConfig, after: CompressionConfig) -> dict[str, list[Any]]:
    old, new = before.to_snapshot(), after.to_snapshot()
    return {k: [old.get(k), new[k]] for k in sorted(new) if old.get(k) != new[k]}


# --------------------------------------------------------------------------- what-if


@contextlib.contextmanager
def whatif_reads() -> Iterator[None]:
    """The reads of one what-if run, shared: a large message content (a blob) is read and
    decoded once for the history, the replay and the report (see
    :mod:`ctxledger.eventstore.contents`), and each chain's compactions are read once by
    the report. Wrap :func:`history` and :func:`replay_history` in it (:func:`whatif` does);
    joins an enclosing block."""
    with sharing_contents(), remembering_compactions():
        yield


@contextlib.contextmanager
def scratch_ledger(
    out: str | Path | None, *, config: CompressionConfig, ids: PresetIds, clock: ReplayClock
) -> Iterator[Ledger]:
    """A fresh ledger at `out` (kept), or else a private temporary one (gone when closed).

    The temporary one is SQLite's temporary database: kept in the page cache and spilled
    to an unsynced, unnamed temporary file past it. A what-if reads it only while open,
    so nothing is written to a file it syncs, checkpoints or deletes (a replay holding a
    10 MB message wrote ~20 MB through a WAL into a file in a temporary directory).
    """
    if out is not None and Path(out).exists():
        raise InvalidInput(f"{out} already exists: give --out a new file name")
    ledger = Ledger.open(
        TEMPORARY if out is None else Path(out),
        clock=clock,
        ids=ids,
        config=config,
        durability="normal",
    )
    try:
        yield ledger
    finally:
        ledger.close()


async def replay_into(
    scratch: Ledger,
    hist: History,
    *,
    config: CompressionConfig,
    summarizer: Summarizer | None,
) -> DriveResult:
    """Play a recorded history into `scratch` (whose ids must be a :class:`PresetIds`)."""
    svc = ContextService(scratch, summarizer=summarizer, config=config)
    ids = scratch.ids if isinstance(scratch.ids, PresetIds) else None
    clock = scratch.clock if isinstance(scratch.clock, ReplayClock) else None
    window = config.context_length or hist.start.context_length
    start = msgspec.structs.replace(hist.start, context_length=window)
    return await start_and_drive(svc, start, hist.steps, ids=ids, clock=clock)


@contextlib.contextmanager
def replay_history(
    hist: History,
    *,
    config: CompressionConfig | None = None,
    summarizer: Summarizer | None = None,
    out: str | Path | None = None,
) -> Iterator[tuple[Ledger, DriveResult]]:
    """Replay `hist` under `config` (default: the recorded one) into a scratch ledger, kept
    open for the ``with`` block (e.g. to diff it); no report is built (:func:`whatif_report`)."""
    effective = config or hist.config
    clock = ReplayClock(hist.start.at or 0.0)
    ids = PresetIds(reserved=hist.message_ids)
    with whatif_reads(), scratch_ledger(out, config=effective, ids=ids, clock=clock) as scratch:
        yield (
            scratch,
            anyio.run(lambda: replay_into(scratch, hist, config=effective, summarizer=summarizer)),
        )


def whatif_report(
    ledger: Ledger,
    hist: History,
    scratch: Ledger,
    result: DriveResult,
    *,
    config: CompressionConfig | None = None,
    summarizer: Summarizer | None = None,
    out: str | Path | None = None,
) -> WhatIfReport:
    """Compare the recorded chain of `hist` with its replay (`result` in `scratch`): two chain audits."""
    with whatif_reads():
        return _report(ledger, hist, scratch, result, config=config, summarizer=summarizer, out=out)


def _report(
    ledger: Ledger,
    hist: History,
    scratch: Ledger,
    result: DriveResult,
    *,
    config: CompressionConfig | None,
    summarizer: Summarizer | None,
    out: str | Path | None,
) -> WhatIfReport:
    sid = hist.session_id
    effective = config or hist.config
    recorded_calls = [s for s in hist.steps if isinstance(s, UsageStep)]
    recorded = chain_report(
        ledger, sid, sum(s.recorded_prompt or 0 for s in recorded_calls), len(recorded_calls)
    )
    alternative = chain_report(
        scratch, result.session_id, sum(c.tokens for c in result.calls), len(result.calls)
    )
    turns = _turn_tokens(result.calls)
    reproduction = _reproduction(
        ledger, hist, scratch, result.session_id, recorded, alternative, turns
    )
    return WhatIfReport(
        session_id=sid,
        root=hist.start.session_id,
        summarizer=getattr(summarizer, "kind", "offline") if summarizer is not None else "offline",
        config_changes=config_changes(hist.config, effective),
        recorded=recorded,
        whatif=alternative,
        turns=turns,
        reproduces_recorded=reproduction.exact,
        notes=hist.notes + result.notes,
        out=os.fspath(out) if out is not None else None,
        reproduction=reproduction,
    )


def _reproduction(
    ledger: Ledger,
    hist: History,
    scratch: Ledger,
    tip: str,
    recorded: ChainReport,
    alternative: ChainReport,
    turns: list[TurnTokens],
) -> Reproduction:
    """Compare the two chains compaction by compaction and turn by turn (never claims more)."""
    mine, theirs = chain_signature(ledger, hist.session_id), chain_signature(scratch, tip)
    matching = 0
    for a, b in zip(mine, theirs, strict=False):
        if a != b:
            break
        matching += 1
    differing = [t for t in turns if t.recorded != t.whatif]
    differences: list[str] = []
    if len(mine) != len(theirs):
        differences.append(f"compactions: recorded {len(mine)}, what-if {len(theirs)}")
    if matching < min(len(mine), len(theirs)):
        differences.append(
            f"compaction {matching + 1} differs (the first {matching} match: inputs, summary, "
            "layout and tokens)"
        )
    if recorded.tokens_sent != alternative.tokens_sent:
        differences.append(
            f"tokens sent: recorded {recorded.tokens_sent:,}, what-if {alternative.tokens_sent:,}"
        )
    if differing:
        differences.append(f"prompt tokens differ in {len(differing)} of {len(turns)} turns")
    if recorded.model_calls != alternative.model_calls:
        differences.append(
            f"model calls: recorded {recorded.model_calls}, what-if {alternative.model_calls}"
        )
    return Reproduction(
        exact=not differences,
        compactions=[len(mine), len(theirs)],
        matching_compactions=matching,
        tokens_sent=[recorded.tokens_sent, alternative.tokens_sent],
        model_calls=[recorded.model_calls, alternative.model_calls],
        turns_differing=len(differing),
        turns=len(turns),
        differences=differences,
        warnings=comparison_warnings(ledger, hist, scratch, tip),
    )


def whatif(
    ledger: Ledger,
    session_id: str,
    *,
    config: CompressionConfig | None = None,
    summarizer: Summarizer | None = None,
    out: str | Path | None = None,
) -> WhatIfReport:
    """Re-run the chain of `session_id` under `config` (default: the recorded one) and report.

    The original ledger is only read. `summarizer` defaults to the offline one. With a
    history already read, use :func:`replay_history` and :func:`whatif_report`.
    """
    with whatif_reads():
        hist = history(ledger, session_id)
        with replay_history(hist, config=config, summarizer=summarizer, out=out) as (
            scratch,
            result,
        ):
            return whatif_report(
                ledger, hist, scratch, result, config=config, summarizer=summarizer, out=out
            )


__all__ = [
    "AppendStep",
    "CallTokens",
    "CompressStep",
    "DriveResult",
    "History",
    "LimitStep",
    "ModelStep",
    "PinStep",
    "PresetIds",
    "ReplayClock",
    "Reproduction",
    "StartInfo",
    "Step",
    "SystemStep",
    "TurnTokens",
    "UsageStep",
    "WhatIfReport",
    "config_changes",
    "drive",
    "history",
    "replay_history",
    "replay_into",
    "scratch_ledger",
    "scripted_steps",
    "start_and_drive",
    "whatif",
    "whatif_reads",
    "whatif_report",
]
