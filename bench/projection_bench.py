"""Projection benchmarks: a full rebuild from the log vs a raw scan + decode, same run.

Prints JSON lines like the other bench scripts. ``rebuild`` folds every event into the
transcript, accounting and chains projections (what ``ctxledger replay`` and opening a
ledger without a checkpoint do); the baseline only reads and decodes the payloads.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from store_bench import _batches, make_events

from ctxledger.events import EVENT_DECODER, SessionStarted
from ctxledger.eventstore import SQLiteEventStore
from ctxledger.projections import Projector

Result = dict[str, Any]


def _fill(path: str, events: int, streams: int = 10) -> None:
    with SQLiteEventStore(path, durability="normal") as store:
        for s in range(streams):
            sid = f"ses_{s:04d}"
            store.append(
                sid,
                [
                    SessionStarted(
                        event_id=f"start_{s}",
                        session_id=sid,
                        at=0.0,
                        model="m",
                        context_length=128_000,
                    )
                ],
                0,
            )
        for chunk in _batches(make_events(events, streams), 1000):
            store.append(chunk[0].session_id, chunk, None)


# VmHWM, not ru_maxrss: Linux carries ru_maxrss over fork and exec, so a child of this
# (big) bench process reported the parent's peak, not its own
_RSS_CHILD = """
import resource, sys
from ctxledger.eventstore import SQLiteEventStore
from ctxledger.projections import Projector
store = SQLiteEventStore(sys.argv[1])
if sys.argv[2] == "rebuild":
    projector = Projector.rebuild(store, use_checkpoint=False)
try:
    with open("/proc/self/status") as status:
        hwm = [line for line in status if line.startswith("VmHWM:")][0]
    print(int(hwm.split()[1]) // 1024)
except (OSError, IndexError):
    print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024)
"""


def _peak_rss_mb(path: str, what: str) -> int:
    """Peak RSS (MB) of a fresh process that opens the store and, for "rebuild", folds it."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {**os.environ, "PYTHONPATH": root + os.pathsep + os.environ.get("PYTHONPATH", "")}
    out = subprocess.run(
        [sys.executable, "-c", _RSS_CHILD, path, what],
        check=True,
        capture_output=True,
        text=True,
        env=env,
    )
    return int(out.stdout.split()[-1])


def bench_rebuild(events: int = 1_000_000, rounds: int = 3, workdir: str | None = None) -> Result:
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        path = os.path.join(tmp, "store.db")
        _fill(path, events)
        store = SQLiteEventStore(path)
        conn = sqlite3.connect(path)
        decode = EVENT_DECODER.decode
        ours, raw, ours_cpu, raw_cpu = [], [], [], []
        try:
            for _ in range(rounds):
                projector = None  # the previous round's state is not kept alive meanwhile
                t, c = time.perf_counter(), time.process_time()
                projector = Projector.rebuild(store, use_checkpoint=False)
                ours.append(events / (time.perf_counter() - t))
                ours_cpu.append(time.process_time() - c)
                t, c = time.perf_counter(), time.process_time()
                n = 0
                for (payload,) in conn.execute("SELECT payload FROM events"):
                    decode(payload)
                    n += 1
                raw.append(n / (time.perf_counter() - t))
                raw_cpu.append(time.process_time() - c)
            assert projector is not None and projector.last_seq == events + 10
            del projector
            peak_rss = _peak_rss_mb(path, "rebuild")
            floor_rss = _peak_rss_mb(path, "open")
        finally:
            store.close()
            conn.close()
    value, baseline = max(ours), max(raw)
    return {
        "bench": "projection_rebuild",
        "value": round(value, 1),
        "unit": "events/s",
        "baseline": round(baseline, 1),
        "ratio": round(value / baseline, 3),
        # CPU seconds (median of the rounds): steadier than wall time on a shared machine
        "cpu_s": round(statistics.median(ours_cpu), 3),
        "baseline_cpu_s": round(statistics.median(raw_cpu), 3),
        "cpu_ratio": round(statistics.median(raw_cpu) / statistics.median(ours_cpu), 3),
        "loadavg": round(os.getloadavg()[0], 2),
        "events": events,
        # a fresh process folding the whole log, and one that only opens it (the floor)
        "peak_rss_mb": peak_rss,
        "open_only_rss_mb": floor_rss,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--workdir", default=None)
    args = parser.parse_args(argv)
    print(json.dumps(bench_rebuild(args.events, workdir=args.workdir)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
