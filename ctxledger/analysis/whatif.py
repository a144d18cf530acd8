"""What-if replay: re-run a recorded chain's history under another configuration.

:func:`~ctxledger.analysis.history.history` reads what the agent did from the log — every message it appended
(across the whole chain, in seq order and in the batches it appended them),
every provider usage report, manual ``/compress`` requests (and a host's own
decisions), model switches, learned limits, pins and system prompt changes — as a list of :data:`Step`. Compactions,
skips, warnings and cooldowns are *decisions*, so they are not steps: the what-if
service makes its own.

:func:`drive` (:mod:`~ctxledger.analysis.whatif_drive`) plays steps through a
:class:`ContextService` with the agent loop of the host that recorded the chain
(:mod:`~ctxledger.analysis.whatif_loop`; HERMES_SPEC §2's when it said nothing:
``hygiene`` before each user turn, ``preflight`` after the user message), and
``report_usage`` for each model response. It is also how tests and the
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
import os
from collections.abc import Iterator
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
from ctxledger.analysis.whatif_drive import (
    CallTokens,
    DriveResult,
    drive,
    start_and_drive,
    with_loop_note,
)
from ctxledger.analysis.whatif_drive import _usage_report as _usage_report  # (tests read it here)
from ctxledger.analysis.whatif_loop import (
    replay_loop,
)
from ctxledger.analysis.whatif_warnings import comparison_warnings, threshold_notes
from ctxledger.compressor.config import CompressionConfig, checked_config
from ctxledger.compressor.summarizers.base import Summarizer
from ctxledger.errors import InvalidInput
from ctxledger.eventstore.contents import sharing_contents
from ctxledger.eventstore.files import NewFile, create_new_file
from ctxledger.eventstore.leftovers import remove_new_file
from ctxledger.eventstore.space import TEMPORARY
from ctxledger.inputfile import path_exists, path_text, shown_path
from ctxledger.ledger.facade import Ledger
from ctxledger.ledger.spec import check_loop
from ctxledger.runtime.service import ContextService

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

    `out` is made here first, with ``O_EXCL`` (a file there is refused and kept): so it
    is provably this what-if's, and a what-if cut short (an error, Ctrl-C) removes it,
    whatever it holds, with the side files and empty folders made for it
    (:func:`ctxledger.eventstore.leftovers.remove_new_file`).

    The temporary one is SQLite's temporary database: kept in the page cache and spilled
    to an unsynced, unnamed temporary file past it. A what-if reads it only while open,
    so nothing is written to a file it syncs, checkpoints or deletes (a replay holding a
    10 MB message wrote ~20 MB through a WAL into a file in a temporary directory).
    Either logs the tool-call ids it repairs at debug level (``Ledger.quiet_repairs``).
    """
    if out is not None and path_exists(out, "--out"):
        raise InvalidInput(f"{shown_path(out)} already exists: give --out a new file name")
    made: NewFile | None = None
    ledger: Ledger | None = None
    finished = False
    try:  # (the open too: Ctrl-C there left OUT made and not yet closed)
        if out is not None:  # OUT made here first (O_EXCL): provably this what-if's
            try:
                made = create_new_file(os.fspath(out))
            except FileExistsError:
                raise InvalidInput(
                    f"{shown_path(out)} already exists: give --out a new file name"
                ) from None
        ledger = Ledger.open(
            TEMPORARY if out is None else Path(out),
            clock=clock,
            ids=ids,
            config=config,
            durability="normal",
        )
        ledger.quiet_repairs = True
        yield ledger
        finished = True
    finally:
        if ledger is not None:
            ledger.close()
        if made is not None and not finished:  # cut short (an error, Ctrl-C): OUT goes
            remove_new_file(made)


async def replay_into(
    scratch: Ledger,
    hist: History,
    *,
    config: CompressionConfig,
    summarizer: Summarizer | None,
    loop: str | None = None,
) -> DriveResult:
    """Play a recorded history into `scratch` (whose ids must be a :class:`PresetIds`),
    with the loop `loop` (default: the one the chain's host named, else ``hermes``)."""
    svc = ContextService(scratch, summarizer=summarizer, config=config)
    ids = scratch.ids if isinstance(scratch.ids, PresetIds) else None
    clock = scratch.clock if isinstance(scratch.clock, ReplayClock) else None
    window = config.context_length or hist.start.context_length
    run = replay_loop(hist.start.loop, loop)
    named = hist.start.loop if loop is None else run
    start = msgspec.structs.replace(hist.start, context_length=window, loop=named)
    result = await start_and_drive(svc, start, hist.steps, ids=ids, clock=clock, loop=run)
    return with_loop_note(result, hist.start.loop, loop, run)


@contextlib.contextmanager
def replay_history(
    hist: History,
    *,
    config: CompressionConfig | None = None,
    summarizer: Summarizer | None = None,
    out: str | Path | None = None,
    loop: str | None = None,
) -> Iterator[tuple[Ledger, DriveResult]]:
    """Replay `hist` under `config` (default: the recorded one) into a scratch ledger, kept
    open for the ``with`` block (e.g. to diff it); no report is built (:func:`whatif_report`).
    `loop`: the agent loop to replay (default: the recorded host's; :func:`replay_into`)."""
    if loop is not None:
        loop = check_loop(loop)  # (before a scratch file is made)
    effective = config or hist.config
    clock = ReplayClock(hist.start.at or 0.0)
    ids = PresetIds(reserved=hist.message_ids)
    with whatif_reads(), scratch_ledger(out, config=effective, ids=ids, clock=clock) as scratch:
        yield (
            scratch,
            anyio.run(
                lambda: replay_into(
                    scratch, hist, config=effective, summarizer=summarizer, loop=loop
                )
            ),
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
    changes = config_changes(hist.config, effective)
    reproduction = _reproduction(
        ledger, hist, scratch, result.session_id, (recorded, alternative), turns, changes
    )
    return WhatIfReport(
        session_id=sid,
        root=hist.start.session_id,
        summarizer=getattr(summarizer, "kind", "offline") if summarizer is not None else "offline",
        config_changes=changes,
        recorded=recorded,
        whatif=alternative,
        turns=turns,
        reproduces_recorded=reproduction.exact,
        notes=hist.notes + result.notes + threshold_notes(hist, effective, changes),
        out=os.fspath(out) if out is not None else None,
        reproduction=reproduction,
    )


def _reproduction(
    ledger: Ledger,
    hist: History,
    scratch: Ledger,
    tip: str,
    reports: tuple[ChainReport, ChainReport],
    turns: list[TurnTokens],
    changes: dict[str, list[Any]],
) -> Reproduction:
    """Compare the two chains compaction by compaction and turn by turn (never claims more)."""
    recorded, alternative = reports
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
    if hist.kept_withdrawals:  # (the view differs where no count may show it)
        differences.append(
            f"withdrawals not replayed: {hist.kept_withdrawals:,} (the what-if keeps their messages)"
        )
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
        warnings=comparison_warnings(
            ledger, hist, scratch, tip, matching=matching, changed=changes
        ),
    )


def whatif(
    ledger: Ledger,
    session_id: str,
    *,
    config: CompressionConfig | None = None,
    summarizer: Summarizer | None = None,
    out: str | Path | None = None,
    loop: str | None = None,
) -> WhatIfReport:
    """Re-run the chain of `session_id` under `config` (default: the recorded one) and report;
    `loop`: the agent loop (default: the one the chain's host named, else ``hermes``).

    The original ledger is only read. `summarizer` defaults to the offline one. With a
    history already read, use :func:`replay_history` and :func:`whatif_report`.
    """
    checked_config(config)  # (a dict of settings was an AttributeError in the replay)
    if out is not None:  # (a number was a TypeError from os.stat)
        out = path_text(out, "out")
    with whatif_reads():
        hist = history(ledger, session_id)
        with replay_history(hist, config=config, summarizer=summarizer, out=out, loop=loop) as (
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
