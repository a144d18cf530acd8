"""What makes a what-if's comparison with the recorded chain weaker than it looks.

The reproduction line ("reproduced: 0 of 1 recorded compactions") is a fact; these
warnings say when it is not the what-if's fault: the log carries no provider usage, a
recorded compaction was the source agent's, the chain was imported (no agent loop
ran as its messages arrived) while the what-if runs the loop's automatic triggers over
them, the agent ran preflight where the what-if's loop runs none (after a final answer or
after tool results: a chain recorded before its host named its loop, or a loop chosen
with ``replay --loop``), or the what-if's hygiene compacted where the agent, which may
run no hygiene, did not.
"""

from __future__ import annotations

import collections
import itertools
from collections.abc import Collection

from ctxledger.analysis.compactions import CompactionRecord, chain_compactions
from ctxledger.analysis.history import History, LimitStep, ModelStep, UsageStep
from ctxledger.analysis.whatif_loop import EVERY_CALL, HERMES, PER_RUN
from ctxledger.compressor.config import CompressionConfig
from ctxledger.compressor.settings import window_budgets
from ctxledger.events import CompressionChecked
from ctxledger.ledger.facade import Ledger
from ctxledger.ledger.spec import recorded_loop
from ctxledger.runtime.engine import decided_by_host
from ctxledger.runtime.pressure import HARD_LIMIT_REACHED

#: triggers the what-if's loop fires on its own (HERMES_SPEC §2), as opposed to a
#: compaction a step asked for (``manual``) or one an import recorded
_AUTOMATIC = frozenset({"preflight", "in_loop", "hygiene", "overflow"})
#: triggers of a compaction the user asked for: forced (``manual``) or not (``requested``)
_ASKED = frozenset({"manual", "requested"})


def comparison_warnings(
    ledger: Ledger,
    hist: History,
    scratch: Ledger,
    tip: str,
    *,
    matching: int = 0,
    changed: Collection[str] = (),
) -> list[str]:
    """The warnings of the what-if of `hist` (recorded in `ledger`) whose chain ends at
    `tip` in `scratch`; its first `matching` compactions match the recorded ones, and it
    ran with the settings named in `changed` changed."""
    out: list[str] = []
    usage = [s for s in hist.steps if isinstance(s, UsageStep)]
    counted = any(s.recorded_prompt for s in usage)
    if not counted:
        out.append(
            "the recorded log carries no provider usage: recorded tokens sent are 0 and the "
            "what-if's token counts are its own estimates, not comparable to what was billed"
        )
    recorded = chain_compactions(ledger, hist.session_id)
    imported = [r for r in recorded if r.summary.imported]
    if imported:
        out.append(
            f"{len(imported)} recorded compaction(s) were made by the source agent "
            f"({imported[0].summary.summarizer}); its triggers and summaries are not ctxledger's, "
            "so the what-if cannot reproduce them, only compare with them"
        )
    whatif = chain_compactions(scratch, tip)
    if not usage and hist.start.source is not None:
        out.extend(_imported(hist.start.source, recorded, whatif))
    doubles = _doubled(whatif)
    doubled = len(doubles) - len(_doubled(recorded))
    if doubled > 0:
        out.append(_doubled_warning(doubled, recorded, {r.switch.trigger for r in doubles}))
    loop = recorded_loop(scratch.transcript.session(scratch.chains.root(tip)).config) or HERMES
    if not any(key.startswith("hygiene_") for key in changed):
        out.extend(_hygiene_warning(scratch, recorded, whatif))
    out.extend(_loop_warnings(ledger, recorded[matching:], loop))
    return out


def _hygiene_warning(
    scratch: Ledger, recorded: list[CompactionRecord], whatif: list[CompactionRecord]
) -> list[str]:
    """The what-if's hygiene compactions (in `scratch`) when the recording has none
    (under its recorded hygiene settings: changed ones are the what-if's point), with
    what each one judged, as its check recorded it: the last prompt the provider
    counted, else (no count in the session since its last compaction, or none in the
    log) the view's own count, or the hard message limit."""
    if any(r.switch.trigger == "hygiene" for r in recorded):
        return []
    checks = [_last_check(scratch, r) for r in whatif if r.switch.trigger == "hygiene"]
    # (a host's replayed hygiene, Hermes's gateway, is no work of the what-if's loop)
    hygiene = [c for c in checks if c is None or not decided_by_host(c)]
    if not hygiene:
        return []
    judged = collections.Counter(_hygiene_judged(c) for c in hygiene)
    on = (
        f", {next(iter(judged))}"
        if len(judged) == 1
        else ": " + ", ".join(f"{n} {how}" for how, n in sorted(judged.items()))
    )
    return [
        f"the what-if's loop made {len(hygiene)} hygiene compaction(s) (before a user turn"
        f"{on}) and the recording has none: an agent that "
        "runs no hygiene (the Agents SDK session, the LangChain middleware and the proxy "
        "run none) never compacts there (`replay --loop` replays another loop)"
    ]


def _hygiene_judged(check: CompressionChecked | None) -> str:
    """What a hygiene check judged, from its recorded ``source`` ("real: …",
    "estimate: …", "…: N messages reach the hard limit of M")."""
    source = check.source if check is not None else ""
    if HARD_LIMIT_REACHED in source:
        return "at the hard message limit"
    if source.startswith("real:"):
        return "on the last prompt the provider counted"
    return "on the view's own token count"


def _loop_warnings(ledger: Ledger, unmatched: list[CompactionRecord], loop: str) -> list[str]:
    """Where the what-if's `loop` (:mod:`~ctxledger.analysis.whatif_loop`) checks at other
    points than the agent did. ``hermes`` runs hygiene before a user turn and preflight
    right after it, where the adapters and the proxy run no hygiene and check before
    every model call or when a run reads its history; ``every_call`` checks after tool
    results but not after a final answer, ``per_run`` the other way round. Only the
    `unmatched` recorded compactions are counted: one the what-if reproduced is no
    reason to doubt it."""
    # (per_run checks after a final answer is saved, every_call after tool results)
    answered, tools = _preflight_points(
        ledger, unmatched, answered=loop != PER_RUN, tools=loop != EVERY_CALL
    )
    if not answered and not tools:
        return []
    if loop != HERMES:
        where = "after a final answer" if answered else "after tool results"
        return [
            f"{answered + tools} recorded compaction(s) ran preflight {where}, where the "
            f"what-if's {loop.replace('_', '-')} loop runs none, so it cannot match them"
        ]
    return [
        f"{answered + tools} recorded compaction(s) ran preflight where the what-if's loop "
        f"runs none: {answered} after a final answer (an Agents SDK session checks when a "
        f"run reads its history), {tools} after tool results (the LangChain middleware and "
        "the proxy check before every model call); the what-if runs preflight only right "
        "after a user message, so it compacts later there and cannot match them "
        "(`replay --loop per-run` or `--loop every-call` replays those hosts' loops)"
    ]


def _preflight_points(
    ledger: Ledger, recorded: list[CompactionRecord], *, answered: bool, tools: bool
) -> tuple[int, int]:
    """How many recorded preflight compactions were made after a final answer (the view
    they compacted ends in an assistant message without tool calls) and after tool
    results (it ends in a tool message): not right after a user message, where the
    what-if's loop runs preflight. A host's own decision (``host_compress``: Hermes) is
    left out: the what-if replays it. Only the kinds asked for (`answered`, `tools`) are
    counted (the other is 0)."""
    counts = [0, 0]
    for r in recorded:
        if r.switch.trigger != "preflight":
            continue
        live = ledger.transcript.live_ids(r.session_id)
        last = ledger.transcript.messages_of(live[-1:])[0] if live else {}  # (its body only)
        role = last.get("role")
        final = role == "assistant" and not last.get("tool_calls")
        if ((final and answered) or (role == "tool" and tools)) and not _host_decided(ledger, r):
            counts[0 if final else 1] += 1
    return counts[0], counts[1]


def _host_decided(ledger: Ledger, r: CompactionRecord) -> bool:
    """Whether the check that made compaction `r` was a host's decision."""
    last = _last_check(ledger, r)
    return last is not None and decided_by_host(last)


def _last_check(ledger: Ledger, r: CompactionRecord) -> CompressionChecked | None:
    """The check that made compaction `r`: its session's last one before it."""
    last = None
    for x in ledger.store.read_session(r.session_id):
        if x.seq >= r.seq:
            break
        if isinstance(x.event, CompressionChecked):
            last = x.event
    return last


def _doubled_warning(doubled: int, recorded: list[CompactionRecord], kinds: set[str]) -> str:
    """What to say of `doubled` compactions asked for (their triggers `kinds`: ``manual``,
    ``requested``) the what-if made right after one of its own: a host deciding every
    compaction when the recording has no automatic one (Hermes's context engine
    recorded each as asked for until session 37; since, a decision of Hermes's own is a
    host's ``preflight``, which the what-if judges instead of doubling), else the
    what-if's settings."""
    said = (
        f"{doubled} compaction(s) the agent asked for ({', '.join(sorted(kinds))}) came "
        "right after one the what-if's loop made on its own at the same point, nothing "
        "appended between, so the what-if compacted twice where the recording compacted "
        "once: "
    )
    if any(r.switch.trigger in _AUTOMATIC for r in recorded):
        return said + "no automatic compaction of the recording happened there"
    return said + (
        "the recording has no automatic compaction at all (a host that decides when to "
        "compact, such as Hermes's context engine, asks for each one)"
    )


def _doubled(compactions: list[CompactionRecord]) -> list[CompactionRecord]:
    """The compactions asked for (:data:`_ASKED`) of a chain made right after an
    automatic one: of the session that one started, at the size it left (nothing
    appended in between). Pairs are counted, not placed: a recorded pair at one point
    offsets a what-if's at another. Hygiene then the turn's messages then the one asked
    for is not caught (its sizes differ): in a Hermes chain hygiene's threshold sits
    above the host's."""
    return [
        after
        for before, after in itertools.pairwise(compactions)
        if before.switch.trigger in _AUTOMATIC
        and after.switch.trigger in _ASKED
        and after.session_id == before.new_session_id
        and after.switch.tokens_before == before.switch.tokens_after
    ]


def _imported(
    source: str, recorded: list[CompactionRecord], whatif: list[CompactionRecord]
) -> list[str]:
    """A warning when the chain was imported (its first session names its source) and
    no model call was recorded since, the what-if compacted on its loop's own triggers
    and the recording has no such compaction: no trigger ran as the messages arrived.
    (Not said of a live chain without usage: a model that reports none is one.)"""
    automatic = [r for r in whatif if r.switch.trigger in _AUTOMATIC]
    if not automatic or any(r.switch.trigger in _AUTOMATIC for r in recorded):
        return []
    triggers = sorted({r.switch.trigger for r in automatic})
    return [
        f"the chain was imported ({source}) and no model call is recorded since: no "
        "trigger ran as its messages arrived; the what-if runs the agent loop over them "
        f"and made {len(automatic)} compaction(s) of its own ({', '.join(triggers)}) that "
        "the recording has no counterpart for"
    ]


def threshold_notes(
    hist: History, config: CompressionConfig, changes: Collection[str]
) -> list[str]:
    """What a changed ``threshold`` (or floor) comes to on the windows the what-if runs
    on: the floor (``threshold_floor_tokens``, 64,000 by default) raises a small window's
    threshold, up to 85 % of the window, so there a lower ``threshold`` may change nothing
    at all while the what-if's headline lists it as changed. Each window where the floor
    moves the what-if's threshold is noted; "does nothing" is said only when the
    recorded and the what-if's thresholds are equal on every window, in order."""
    if not {"threshold", "threshold_floor_tokens"} & set(changes):
        return []
    windows = _windows(hist, config.context_length or hist.start.context_length)
    notes: list[str] = []
    first = "the replay runs on" if len(windows) == 1 else "the replay starts on"
    for i, window in enumerate(dict.fromkeys(windows)):
        note = window_budgets(config, window).note
        if note is not None:
            where = first if i == 0 else "the chain switches to"
            notes.append(f"on the {window:,}-token window {where}: the {note}")
    recorded = [hist.config.threshold_tokens(w) for w in _windows(hist, hist.start.context_length)]
    if notes and recorded == [config.threshold_tokens(w) for w in windows]:
        same = (
            f"the recorded config's is {recorded[0]:,} too"
            if len(windows) == 1
            else "the recorded config's threshold is the same on each window the chain runs on"
        )
        notes[-1] += f"; {same}: the change does nothing here"
    return notes


def _windows(hist: History, start: int) -> list[int]:
    """The windows a replay of `hist` that starts on a `start`-token window runs on, in
    order: a model switch sets the window, a learned limit only lowers it (as
    ``Ledger.learn_context_limit`` does)."""
    out = [start]
    for step in hist.steps:
        if isinstance(step, ModelStep) or (
            isinstance(step, LimitStep) and step.context_length < out[-1]
        ):
            out.append(step.context_length)
    return out
