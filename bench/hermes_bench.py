"""ctxledger against Hermes on the same 5,000-message session: planning and a whole compaction.

Runs in the Hermes venv (``.venv-hermes``, where hermes-agent and this checkout are
both installed; ``bench/run.py`` picks that interpreter), offline: Hermes's
summarizer call (``ContextCompressor._generate_summary``) and ours are stubs that
answer at once, so only the work around the summary is timed. Both sides get the
session of ``planner_bench.py`` at a 128K window with default settings, in
interleaved runs (so both see the same machine load). Prints one JSON object per
line, ``{"bench", "value", "unit", "baseline", "ratio", "goal", ...}`` with Hermes as
the baseline:

* ``hermes_plan_5000``: our first plan of the list (no plan cache, one-liner memo
  emptied: a session never planned in this process) vs Hermes's planning (its
  phase-1 pruning and boundary search, as ``compress()`` runs them). CPU medians.
  Reported without a goal: issue 14's planning goal ("≤ 5 ms, also ≤ 0.1× Hermes's
  own planning") is stated for the plan with "the layout kept incrementally", which
  is the live session's plan below (``hermes_replan_5000``, and ``planner_bench``'s
  ``plan_synthetic_5000``); a first plan must read the whole list once.
  The figure is our cold ``plan()`` with every replacement text built, because
  Hermes's phase 1 builds its one-liners for every old result at once: the same
  text work on both sides (every compaction needs the texts for its summary
  request and its events). The row also carries ``draft_ms`` / ``draft_ratio``:
  ``planner.draft``, the whole decision (boundaries, kept and carried messages,
  orphan repairs, the prunes listed as (index, kind), summary budget, estimate,
  action: all equal to the complete plan's) with the texts left unbuilt — the
  cost of deciding alone, which no compaction stops at.
* ``hermes_replan_5000``: our re-plan of the session grown by two messages through
  a ``PlanCache`` (what ``prepare()`` does for a live session) vs the same Hermes
  planning (which keeps nothing between calls). CPU medians.
* ``hermes_compact_5000``: ``compact()`` on a ledger holding the session (live view,
  plan, request, events, one durable append; the ledger is opened before the clock
  starts) vs Hermes ``compress()`` on a copy of the list. Wall medians (the append's
  fsync is part of ours), CPU medians beside them. Each side's call starts after a
  full garbage collection (the setup's garbage — the ledger's opening, the list's
  copy — is neither side's); ``collect_after_ms`` / ``baseline_collect_after_ms`` are
  the CPU medians of the full collection run right after each call: what the call
  left for the collector (``compact()`` pauses the collector over its synchronous
  stretches, as the ledger's folds do, so part of its collector work is there).
  ``body_read_ms``: the CPU median of reading the live view just after opening —
  the message bodies the opening left in the log, read inside ``compact()`` (in
  the figure; a process that appended the session itself already holds them).
* ``hermes_compact_live_5000`` (reported beside the row above, no goal of its own):
  the same ``compact()`` with the session's bodies already in memory (read just after
  opening, before the clock) — the live agent's case, whose process appended the
  session itself. Everything else as above (the one-liner memo emptied, a full
  collection first); Hermes's figures are those of the same runs.
* ``hermes_compact_floor_5000`` (reported, no goal): the floor of any compaction that
  reads the session's bodies from the log, records its events and fsyncs, with no
  ctxledger code and no planning at all: one raw ``SELECT`` of the session stream's
  payloads decoded by msgspec (``read_ms``), then one ``synchronous=FULL`` transaction
  inserting exactly the rows ``compact()`` appended into the same table
  (``write_ms``); ``live_ratio`` is the write alone against Hermes (the bodies already
  in memory), ``fsync_ms`` a durable one-row commit (the fixed cost of any record).
  Same runs as Hermes's figures; wall medians, CPU beside them.

What each side's compaction figure includes (like for like, checked against
hermes-agent's ``ContextCompressor.compress``): Hermes's is in memory only — phase 1,
boundaries, the stubbed ``_generate_summary`` (which is where Hermes serializes the
turns into its prompt: that serialization is therefore *not* in its figure),
assembly, ``_sanitize_tool_pairs``, media stripping and three rough token estimates
of the lists; it persists nothing (the agent writes its session store after
``compress()`` returns). Ours also covers what Hermes leaves to its caller: reading
the live view, the plan, the summary request, the events (every replacement message
is recorded, in ``ToolResultsPruned`` and in the switch's plan), one atomic SQLite
append with its fsync, and folding the appended events. The one piece left out on
both sides is the summarizer's prompt: Hermes builds it inside the stubbed
``_generate_summary``; our stub, like the LLM summarizer, returns the hash of the
prompt it "sent", so ``record`` does not hash the canonical request (a summarizer
that sends no prompt — offline, fallback — makes it do so: ``request_hash_ms`` in
the row, not in the figure).

    .venv-hermes/bin/python bench/hermes_bench.py [--messages 5000] [--runs 7]
"""

from __future__ import annotations

import argparse
import copy
import gc
import json
import os
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import anyio
import msgspec

if __package__ in (None, ""):  # run as a script: make the checkout and planner_bench importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from planner_bench import synthetic_session

from ctxledger.compressor import prune
from ctxledger.compressor.config import CompressionConfig
from ctxledger.compressor.plancache import PlanCache
from ctxledger.compressor.planner import draft, plan, rough_counts
from ctxledger.compressor.summarizers.base import SummaryRequest, SummaryResult, request_hash
from ctxledger.ledger.compaction import compact, plan_compaction
from ctxledger.ledger.facade import Ledger

WINDOW = 128_000
MODEL = "gpt-4o"
STUB_SUMMARY = "## Goal\nFix the failing tests.\n\n## Progress\nRan the suite; read the modules."


class StubSummarizer:
    """Answers every request at once (the summarizer is excluded from the figure).

    Like a model-calling summarizer it names the prompt it sent (``prompt_hash``; the
    LLM summarizer hashes its request body), so ``record`` does not hash the request
    itself: on Hermes's side the prompt is built inside the stubbed
    ``_generate_summary`` and is not timed either. What that hash would cost is
    reported beside the figure (``request_hash_ms``).
    """

    kind = "stub"

    async def summarize(self, request: SummaryRequest) -> SummaryResult:
        return SummaryResult(text=STUB_SUMMARY, summarizer=self.kind, prompt_hash="stub-prompt")


def _hermes() -> Any:
    from agent.context_compressor import ContextCompressor

    compressor = ContextCompressor(
        model=MODEL,
        quiet_mode=True,
        config_context_length=WINDOW,
        provider="openai",
        base_url="http://127.0.0.1:9",  # never called: the summary is stubbed below
        api_key="unused",
    )
    compressor._generate_summary = lambda turns, focus_topic=None, memory_context="": STUB_SUMMARY
    return compressor


def _hermes_plan(messages: list[dict[str, Any]]) -> tuple[int, int]:
    """Hermes's planning, as compress() runs it: phase-1 pruning, then the boundaries."""
    h = _hermes()
    pruned, _ = h._prune_old_tool_results(
        messages, protect_tail_count=h.protect_last_n, protect_tail_tokens=h.tail_token_budget
    )
    start = h._align_boundary_forward(pruned, h._protect_head_size(pruned))
    return start, h._find_tail_cut_by_tokens(pruned, start)


def _timed(fn: Callable[[], object]) -> tuple[float, float]:
    """(wall ms, CPU ms) of one call."""
    start, start_cpu = time.perf_counter(), time.process_time()
    fn()
    return (time.perf_counter() - start) * 1000, (time.process_time() - start_cpu) * 1000


def _row(
    bench: str, value: float, baseline: float, goal: float | None, **extra: Any
) -> dict[str, Any]:
    row = {
        "bench": bench,
        "value": round(value, 3),
        "unit": "ms",
        "baseline": round(baseline, 3),
        "ratio": round(value / baseline, 4) if baseline else None,
    }
    if goal is not None:  # an issue-14 goal (a row without one is reported beside it)
        row["goal"] = f"ratio <= {goal}"
        row["met"] = bool(baseline) and value / baseline <= goal
    return {**row, **extra}


def bench_plans(session: list[dict[str, Any]], runs: int) -> list[dict[str, Any]]:
    config = CompressionConfig()
    counts = rough_counts(session)
    hermes: list[float] = []
    cold: list[float] = []
    complete: list[float] = []
    replan: list[float] = []
    for _ in range(runs):
        messages = copy.deepcopy(session)  # Hermes may rewrite what it is given
        hermes.append(_timed(lambda m=messages: _hermes_plan(m))[1])
        prune._describe_memo.cache_clear()
        cold.append(_timed(lambda: draft(session, config, counts, context_length=WINDOW))[1])
        prune._describe_memo.cache_clear()
        complete.append(_timed(lambda: plan(session, config, counts, context_length=WINDOW))[1])
        cache = PlanCache()
        plan(session[:-2], config, counts[:-2], context_length=WINDOW, cache=cache)
        replan.append(
            _timed(lambda c=cache: plan(session, config, counts, context_length=WINDOW, cache=c))[1]
        )
    base = statistics.median(hermes)
    extra = {"messages": len(session), "runs": runs, "clock": "cpu"}
    return [
        _row(
            "hermes_plan_5000",
            statistics.median(complete),
            base,
            None,  # reported: issue 14's plan goal is the live session's plan (below)
            mode="cold",
            draft_ms=round(statistics.median(cold), 3),
            draft_ratio=round(statistics.median(cold) / base, 4) if base else None,
            **extra,
        ),
        _row("hermes_replan_5000", statistics.median(replan), base, 0.1, mode="replan", **extra),
    ]


def _build_ledger(path: str, session: list[dict[str, Any]]) -> str:
    ledger = Ledger.open(path, config=CompressionConfig())
    system = session[0]["content"] if session[0]["role"] == "system" else None
    sid = ledger.start_session(model=MODEL, context_length=WINDOW, system_prompt=system)
    rest = session[1:] if system is not None else session
    for start in range(0, len(rest), 500):
        ledger.append_messages(sid, rest[start : start + 500])
    ledger.close()
    return sid


def _collect_ms() -> float:
    """CPU ms of a full garbage collection now (what a call left for the collector)."""
    start = time.process_time()
    gc.collect()
    return (time.process_time() - start) * 1000


async def _compact_once(
    template: str, work: str, sid: str, live: bool = False
) -> tuple[float, float, int, float]:
    """(wall ms, CPU ms, messages after, CPU ms of the full collection right after).

    `live`: the session's bodies are read before the clock (a process that appended the
    session itself holds them); otherwise ``compact()`` reads them from the log."""
    shutil.copyfile(template, work)
    ledger = Ledger.open(work, config=CompressionConfig())
    try:
        if live:
            ledger.api_messages(sid)
        prune._describe_memo.cache_clear()
        gc.collect()  # the opening's garbage is not the compaction's (Hermes's side alike)
        start, start_cpu = time.perf_counter(), time.process_time()
        outcome = await compact(ledger, sid, StubSummarizer(), trigger="manual")
        wall = (time.perf_counter() - start) * 1000
        cpu = (time.process_time() - start_cpu) * 1000
        after = _collect_ms()
    finally:
        ledger.close()
    assert outcome.action == "compressed", outcome.skip_reason
    return wall, cpu, outcome.messages_after, after


def _request_hash_ms(template: str, sid: str, runs: int) -> float:
    """CPU median of hashing the summary request (what a prompt-less summarizer adds)."""
    ledger = Ledger.open(template, config=CompressionConfig())
    try:
        request = plan_compaction(ledger, sid).request
    finally:
        ledger.close()
    assert request is not None
    return round(
        statistics.median(_timed(lambda: request_hash(request))[1] for _ in range(runs)), 3
    )


def _body_read_ms(template: str, sid: str, runs: int) -> float:
    """CPU median of reading the session's live view right after opening the ledger: the
    bodies a rebuild left in the log (part of the figure; a process that appended the
    messages itself holds them)."""
    times: list[float] = []
    for _ in range(runs):
        ledger = Ledger.open(template, config=CompressionConfig())
        try:
            gc.collect()
            times.append(_timed(lambda ledger=ledger: ledger.api_messages(sid))[1])
        finally:
            ledger.close()
    return round(statistics.median(times), 3)


def _compaction_rows(template: str, work: str, sid: str) -> list[tuple[Any, ...]]:
    """The finished rows one ``compact()`` of the session appends (read back from a copy
    it compacted): what the floor writes, byte for byte."""
    anyio.run(_compact_once, template, work, sid)
    conn = sqlite3.connect(template)
    try:
        (head,) = conn.execute("SELECT max(seq) FROM events").fetchone()
    finally:
        conn.close()
    conn = sqlite3.connect(work)
    try:
        return conn.execute(
            "SELECT event_id, stream_id, version, kind, schema, payload, hash, message_id, tokens"
            " FROM events WHERE seq > ? ORDER BY seq",
            (head,),
        ).fetchall()
    finally:
        conn.close()


def _floor_once(
    template: str, work: str, rows: list[tuple[Any, ...]]
) -> tuple[float, float, float, float, float]:
    """The cheapest compaction that reads the bodies, records the events and fsyncs, with
    no ctxledger code: one ``SELECT`` of the session stream's payloads decoded by msgspec,
    then one durable transaction inserting the rows ``compact()`` appended (same table,
    same indexes, ``synchronous=FULL``). Returns (read wall, read CPU, write wall, write
    CPU, wall of a durable one-row commit: the fsync alone) in ms."""
    shutil.copyfile(template, work)
    conn = sqlite3.connect(work, isolation_level=None)
    try:
        conn.execute("PRAGMA synchronous = FULL")
        (stream,) = conn.execute(  # the session's stream: the one holding its messages
            "SELECT stream_id FROM events GROUP BY stream_id ORDER BY count(*) DESC LIMIT 1"
        ).fetchone()
        conn.execute("CREATE TABLE fsync_only (n INTEGER)")
        decode = msgspec.json.decode
        select = "SELECT payload FROM events WHERE stream_id = ? ORDER BY version"
        insert = (
            "INSERT INTO events (event_id, stream_id, version, kind, schema, payload, hash,"
            " message_id, tokens) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
        )

        def read() -> None:
            for (payload,) in conn.execute(select, (stream,)):
                decode(payload)

        def write(batch: list[tuple[Any, ...]], sql: str = insert) -> None:
            conn.execute("BEGIN IMMEDIATE")
            conn.executemany(sql, batch)
            conn.execute("COMMIT")

        gc.collect()
        read_wall, read_cpu = _timed(read)
        write_wall, write_cpu = _timed(lambda: write(rows))
        fsync_wall, _ = _timed(lambda: write([(1,)], "INSERT INTO fsync_only VALUES (?)"))
    finally:
        conn.close()
    return read_wall, read_cpu, write_wall, write_cpu, fsync_wall


def _floor_row(
    floors: list[tuple[float, float, float, float, float]],
    hermes: tuple[list[float], list[float]],
    runs: int,
) -> dict[str, Any]:
    """``hermes_compact_floor_5000``: the floor (read + write, no planning, no ctxledger
    code) against Hermes ``compress()`` in the same runs; also the live floor (write only:
    the bodies already in memory) and the fsync alone."""
    read_wall, read_cpu, write_wall, write_cpu, fsync_wall = (
        statistics.median(f[k] for f in floors) for k in range(5)
    )
    base, base_cpu = statistics.median(hermes[0]), statistics.median(hermes[1])
    total = statistics.median(f[0] + f[2] for f in floors)
    total_cpu = statistics.median(f[1] + f[3] for f in floors)
    return _row(
        "hermes_compact_floor_5000",
        total,
        base,
        None,  # reported: what issue 14's 0.05x goal is compared with
        clock="wall",
        cpu_median_ms=round(total_cpu, 3),
        baseline_cpu_median_ms=round(base_cpu, 3),
        cpu_ratio=round(total_cpu / base_cpu, 4) if base_cpu else None,
        read_ms=round(read_wall, 3),
        read_cpu_ms=round(read_cpu, 3),
        write_ms=round(write_wall, 3),
        write_cpu_ms=round(write_cpu, 3),
        fsync_ms=round(fsync_wall, 3),
        live_ratio=round(write_wall / base, 4) if base else None,
        live_cpu_ratio=round(write_cpu / base_cpu, 4) if base_cpu else None,
        runs=runs,
    )


def bench_compact(session: list[dict[str, Any]], runs: int) -> list[dict[str, Any]]:
    hermes: list[float] = []
    hermes_cpu: list[float] = []
    ours: list[float] = []
    ours_cpu: list[float] = []
    live: tuple[list[float], list[float]] = ([], [])  # (wall, CPU) with the bodies in memory
    collects: tuple[list[float], list[float]] = ([], [])  # (ours, Hermes's)
    with tempfile.TemporaryDirectory() as tmp:
        template = os.path.join(tmp, "template.db")
        sid = _build_ledger(template, session)
        hashing = _request_hash_ms(template, sid, runs)
        bodies = _body_read_ms(template, sid, runs)
        rows = _compaction_rows(template, os.path.join(tmp, "rows.db"), sid)
        floors = []
        for i in range(runs):
            messages = copy.deepcopy(session)
            h = _hermes()
            gc.collect()
            wall, cpu = _timed(lambda m=messages, h=h: h.compress(m, force=True))
            collects[1].append(_collect_ms())
            hermes.append(wall)
            hermes_cpu.append(cpu)
            wall, cpu, after, collect = anyio.run(
                _compact_once, template, os.path.join(tmp, f"{i}.db"), sid
            )
            collects[0].append(collect)
            ours.append(wall)
            ours_cpu.append(cpu)
            wall, cpu, _, _ = anyio.run(
                _compact_once, template, os.path.join(tmp, f"live{i}.db"), sid, True
            )
            live[0].append(wall)
            live[1].append(cpu)
            floors.append(_floor_once(template, os.path.join(tmp, f"floor{i}.db"), rows))
    row = _row(
        "hermes_compact_5000",
        statistics.median(ours),
        statistics.median(hermes),
        0.05,
        clock="wall",
        cpu_median_ms=round(statistics.median(ours_cpu), 3),
        baseline_cpu_median_ms=round(statistics.median(hermes_cpu), 3),
        cpu_ratio=round(statistics.median(ours_cpu) / statistics.median(hermes_cpu), 4),
        request_hash_ms=hashing,
        body_read_ms=bodies,
        collect_after_ms=round(statistics.median(collects[0]), 3),
        baseline_collect_after_ms=round(statistics.median(collects[1]), 3),
        messages=len(session),
        messages_after=after,
        runs=runs,
    )
    return [
        row,
        _live_row(live, (hermes, hermes_cpu), len(session), runs),
        _floor_row(floors, (hermes, hermes_cpu), runs),
    ]


def _live_row(
    live: tuple[list[float], list[float]],
    hermes: tuple[list[float], list[float]],
    messages: int,
    runs: int,
) -> dict[str, Any]:
    """``hermes_compact_live_5000`` from the (wall, CPU) times of both sides' same runs."""
    base_cpu = statistics.median(hermes[1])
    return _row(
        "hermes_compact_live_5000",
        statistics.median(live[0]),
        statistics.median(hermes[0]),
        None,  # reported beside the goal row, which it does not replace
        clock="wall",
        cpu_median_ms=round(statistics.median(live[1]), 3),
        baseline_cpu_median_ms=round(base_cpu, 3),
        cpu_ratio=round(statistics.median(live[1]) / base_cpu, 4) if base_cpu else None,
        messages=messages,
        runs=runs,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--messages", type=int, default=5000)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args(argv)
    try:
        import agent.context_compressor  # noqa: F401
    except ImportError as exc:
        print(json.dumps({"bench": "hermes_plan_5000", "skipped": f"hermes-agent: {exc}"}))
        return 0
    session = synthetic_session(args.messages)
    for row in bench_plans(session, args.runs):
        print(json.dumps(row), flush=True)
    for row in bench_compact(session, args.runs):
        print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
