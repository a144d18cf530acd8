"""How ``ledger_guard_rules.db`` (and ``ledger_guard_rules.json``) were made: run with the
ctxledger of main before session 31 changed what a model switch or a stated window does
to the compression guards (commit 8d2d889: a switch cleared strikes and the fallback
streak and kept the summarizer cooldown; a stated window changed only the window).

Three chains, their window changes all stored at schema 1:

* ``ses_strikes``: recorded through the what-if driver (so a what-if with the recorded
  config must reproduce it): compactions that do not get under the threshold block the
  chain by strikes, a window the provider stated (blocked still, under that rule), more
  turns.
* ``ses_streak``: a summarizer answering HTTP 500: two fallback summaries in a row (the
  breaker) and a cooldown, a switch to the same model with another window (the streak
  went, under that rule), then a switch to another model (the cooldown stayed).
* ``ses_cooldown``: a dropped connection (30 s cooldown), a switch to another model
  (the cooldown stayed), a usage report over the threshold inside the cooldown.

The JSON records what that main computed: the sha256 of every chain's runtime states
after each of its events (folded from scratch, as a reopened ledger does; the states at
window changes, cooldowns and compactions listed), the guard's verdict at the end,
and the what-if of ``ses_strikes``. ``tests/test_guard_rules_golden.py`` checks that
today's code reopens it to the same states and verdicts and that the what-if stays
exact. Recipe (``old`` = a checkout of 8d2d889)::

    PYTHONPATH=old python tests/golden/make_guard_rules_ledger.py out.db out.json
    python -c "import sqlite3; c = sqlite3.connect('out.db'); c.execute('VACUUM'); c.execute('PRAGMA journal_mode=DELETE')"
"""

from __future__ import annotations

import hashlib
import heapq
import json
import os
import sys
from typing import Any

import anyio
import msgspec

from ctxledger.analysis.history import AppendStep, LimitStep, StartInfo, UsageStep
from ctxledger.analysis.whatif import start_and_drive, whatif
from ctxledger.clock import SequentialIds
from ctxledger.compressor.config import CompressionConfig
from ctxledger.compressor.summarizers.base import SummaryRequest, SummaryResult
from ctxledger.demo.synth import SessionSynth
from ctxledger.errors import SummarizerError
from ctxledger.ledger.facade import Ledger
from ctxledger.runtime.engine import RuntimeState, fold_runtime
from ctxledger.runtime.service import ContextService

CONFIG = CompressionConfig(threshold_floor_tokens=0)
WINDOW = 16_384
THRESHOLD = 8_192
CHAINS = ("ses_strikes", "ses_streak", "ses_cooldown")


class Clock:
    def __init__(self) -> None:
        self.now = 1_767_225_600.0

    def __call__(self) -> float:
        return self.now


class Switchable:
    """Answers HTTP 500 or drops its connection while ``failure`` is set; else a short summary."""

    kind = "switchable"

    def __init__(self) -> None:
        self.failure: str | None = None

    async def summarize(self, request: SummaryRequest) -> SummaryResult:
        if self.failure == "server":
            raise SummarizerError("HTTP 500", failure_class="server")
        if self.failure == "network":
            raise SummarizerError("connection refused", failure_class="network")
        return SummaryResult(text="## Goal\nkeep going", summarizer=self.kind)


def turn_steps(turn: list[Any], offset: int) -> list[Any]:
    steps: list[Any] = [AppendStep(messages=turn[:1])]
    i = 1
    while i < len(turn):
        j = i + 1
        while j < len(turn) and turn[j].get("role") == "tool":
            j += 1
        steps.append(UsageStep(output_tokens=20, offset=offset))
        steps.append(AppendStep(messages=turn[i:j]))
        i = j
    return steps


async def strikes(svc: ContextService) -> None:
    synth = SessionSynth(3, big_outputs=False)
    steps: list[Any] = []
    for i in range(24):
        steps += turn_steps(synth.turn(i), 6_000)
    steps.append(LimitStep(context_length=12_000, evidence="maximum context length is 12000"))
    for i in range(24, 36):
        steps += turn_steps(synth.turn(i), 6_000)
    start = StartInfo(
        session_id="ses_strikes",
        model="local-model",
        context_length=WINDOW,
        system_prompt="You are a coding agent.",
    )
    await start_and_drive(svc, start, steps)


async def started(svc: ContextService, sid: str) -> str:
    sid = await svc.start_session(
        model="local-model",
        context_length=WINDOW,
        system_prompt="You are a coding agent.",
        session_id=sid,
    )
    synth = SessionSynth(5, big_outputs=False, id_prefix=sid)
    i = 0
    while svc.ledger.transcript.total_tokens(sid) < THRESHOLD + 1_000:
        await svc.append(sid, synth.turn(i))
        i += 1
    return sid


async def streak(svc: ContextService, summarizer: Switchable, clock: Clock) -> None:
    sid = await started(svc, "ses_streak")
    summarizer.failure = "server"
    for n in range(2):
        sid = (await svc.compress(sid)).session_id
        synth = SessionSynth(9, big_outputs=False, id_prefix=f"{sid}_c{n}")
        for i in range(3):
            await svc.append(sid, synth.turn(i))
    clock.now += 5
    svc.ledger.switch_model(svc.tip(sid), "local-model", WINDOW * 2)
    clock.now += 5
    svc.ledger.switch_model(svc.tip(sid), "other-model", WINDOW * 2)
    summarizer.failure = None


async def cooldown(svc: ContextService, summarizer: Switchable, clock: Clock) -> None:
    sid = await started(svc, "ses_cooldown")
    over = {"prompt_tokens": THRESHOLD + 500, "completion_tokens": 5}
    summarizer.failure = "network"
    await svc.report_usage(sid, over)
    summarizer.failure = None
    clock.now += 5
    svc.ledger.switch_model(svc.tip(sid), "other-model", WINDOW)
    await svc.report_usage(sid, over)


#: events whose states the JSON lists (for a readable failure); all of them are digested
LISTED = ("ModelSwitched", "ContextLimitLearned", "CooldownStarted", "SessionSwitched")


def digest(value: object) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()


def states(ledger: Ledger, root: str) -> list[list[Any]]:
    """[seq, kind, state] after each event of the chain, folded from scratch."""
    state = RuntimeState()
    streams = [ledger.store.read_stream(sid) for sid in ledger.chains.chain(root)]
    out: list[list[Any]] = []
    for rec in heapq.merge(*streams, key=lambda r: r.seq):
        state = fold_runtime(state, rec.event, CONFIG)
        out.append([rec.seq, type(rec.event).__name__, msgspec.to_builtins(state)])
    return out


async def record(path: str) -> float:
    clock = Clock()
    summarizer = Switchable()
    ledger = Ledger.open(path, clock=clock, ids=SequentialIds(), config=CONFIG, durability="normal")
    svc = ContextService(ledger, config=CONFIG, summarizer=summarizer)
    await strikes(svc)
    await streak(svc, summarizer, clock)
    await cooldown(svc, summarizer, clock)
    ledger.close()
    return clock.now


def main(path: str, facts: str) -> None:
    for suffix in ("", "-wal", "-shm", ".lock", ".head", ".leases"):
        if os.path.exists(path + suffix):
            os.remove(path + suffix)
    now = anyio.run(record, path)
    ledger = Ledger.open(path, config=CONFIG)
    svc = ContextService(ledger, config=CONFIG)
    out: dict[str, Any] = {"now": now, "chains": {}}
    for root in CHAINS:
        tip = ledger.tip(root)
        folded = states(ledger, root)
        out["chains"][root] = {
            "tip": tip,
            "states_sha256": digest(folded),
            "listed": [row for row in folded if row[1] in LISTED],
            "guard": list(svc.tracker.guard(tip, now)),
        }
    report = whatif(ledger, "ses_strikes")
    rep = report.reproduction
    out["whatif_strikes"] = {
        "exact": report.reproduces_recorded,
        "compactions": list(rep.compactions),
        "turns_differing": rep.turns_differing,
    }
    ledger.close()
    with open(facts, "w") as f:
        json.dump(out, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
