"""Batched append into the segment layout vs today's rows vs the raw insert (issue 14).

The same work as ``store_bench.bench_batched_append`` (appends of 1,000 events, durability
full, a fresh file each time), for three sides run in interleaved rounds (the order
reversed every other round): ``events`` (today's SQLiteEventStore), ``segment``
(:class:`segment_store.SegmentStore`, one row per append) and ``raw`` (executemany of the
pre-encoded payloads into a one-column table). Reports CPU (``time.process_time``) and
wall medians per event and each store's ratio to raw; after each store's round the log is
read back (``read_all``) and compared with the events it was given.

    python bench/segment_bench.py [--events 50000] [--rounds 5] [--reads]

``--reads`` measures the other side instead: one log of `events` events written by each
store (appends of 1,000), then ``read_all`` (decoded), ``read_heads`` (what a rebuild
reads) and ``read_at`` of one seq at a time (300 random seqs: a body read on demand) over
each, interleaved, CPU per event (medians). ``--most N`` (repeatable) adds a segment store
cutting each append into segments of at most N events.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import msgspec

if __package__ in (None, ""):  # run as a script: make the checkout importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from segment_store import SegmentStore
from store_bench import _raw_full, batched_writer, make_events, raw_batched_writer

from ctxledger.eventstore import SQLiteEventStore


def _one(
    open_: Callable[[str], Any], write: Callable[[Any], None], check: Callable[[Any], None] | None
) -> tuple[float, float]:
    """(CPU s, wall s) of `write` on a fresh file; `check(target)` after the clock stops."""
    with tempfile.TemporaryDirectory() as tmp:
        target = open_(os.path.join(tmp, "bench.db"))
        cpu, wall = time.process_time(), time.perf_counter()
        write(target)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        if check is not None:
            check(target)
        target.close()
    return cpu, wall


def run(events: int, rounds: int, batch: int = 1000, most: Sequence[int] = ()) -> dict[str, Any]:
    evs = make_events(events)
    payloads = [(msgspec.json.encode(e),) for e in evs]

    def check(store: SQLiteEventStore) -> None:
        got = [r.event for r in store.read_all()]
        if got != evs:
            raise RuntimeError(f"{type(store).__name__} did not read back what it was given")

    sides: dict[str, tuple[Callable[[str], Any], Callable[[Any], None], Any]] = {
        "events": (SQLiteEventStore, batched_writer(evs, batch), check),
        "segment": (SegmentStore, batched_writer(evs, batch), check),
        **{
            f"segment{n}": (partial(SegmentStore, most=n), batched_writer(evs, batch), check)
            for n in most
        },
        "raw": (_raw_full, raw_batched_writer(payloads, batch), None),
    }
    spent: dict[str, list[tuple[float, float]]] = {name: [] for name in sides}
    loads = []
    names = list(sides)
    for turn in range(rounds):
        for name in names if turn % 2 == 0 else names[::-1]:
            spent[name].append(_one(*sides[name]))
        loads.append(os.getloadavg()[0])
    cpu = {n: statistics.median(c for c, _ in v) / events * 1e6 for n, v in spent.items()}
    wall = {n: statistics.median(w for _, w in v) / events * 1e6 for n, v in spent.items()}
    return {
        "bench": "append_batched_segments",
        "events": events,
        "rounds": rounds,
        "cpu_us_per_event": {n: round(v, 2) for n, v in cpu.items()},
        "wall_us_per_event": {n: round(v, 2) for n, v in wall.items()},
        "cpu_ratio": {n: round(cpu["raw"] / cpu[n], 3) for n in names if n != "raw"},
        "wall_ratio": {n: round(wall["raw"] / wall[n], 3) for n in names if n != "raw"},
        "load_average": [round(x, 2) for x in loads],
    }


def _reads(store: SQLiteEventStore, seqs: list[int]) -> dict[str, tuple[Callable[[], int], int]]:
    """Each read, and how many events it must see (CPU is reported per event seen)."""
    return {
        "read_all": (lambda: sum(1 for _ in store.read_all()), -1),
        "read_heads": (lambda: sum(len(rows) for _, rows in store.read_heads()), -1),
        "read_at_one": (lambda: sum(len(store.read_at([seq])) for seq in seqs), len(seqs)),
    }


def run_reads(
    events: int, rounds: int, batch: int = 1000, most: Sequence[int] = ()
) -> dict[str, Any]:
    evs = make_events(events)
    seqs = random.Random(1).sample(range(1, events + 1), min(300, events))
    spent: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        stores = {
            "events": SQLiteEventStore(os.path.join(tmp, "e.db"), durability="normal"),
            "segment": SegmentStore(os.path.join(tmp, "s.db"), durability="normal"),
            **{
                f"segment{n}": SegmentStore(
                    os.path.join(tmp, f"s{n}.db"), durability="normal", most=n
                )
                for n in most
            },
        }
        for store in stores.values():
            batched_writer(evs, batch)(store)
        for turn in range(rounds):
            for layout in stores if turn % 2 == 0 else list(stores)[::-1]:
                for read, (fn, seen) in _reads(stores[layout], seqs).items():
                    cpu = time.process_time()
                    if fn() != (events if seen < 0 else seen):
                        raise RuntimeError(f"{layout} {read} did not read every event")
                    used = (time.process_time() - cpu) / (events if seen < 0 else seen)
                    spent.setdefault(f"{read}:{layout}", []).append(used)
        for store in stores.values():
            store.close()
    cpu_us = {k: statistics.median(v) * 1e6 for k, v in spent.items()}
    return {
        "bench": "read_segments",
        "events": events,
        "rounds": rounds,
        "cpu_us_per_event": {k: round(v, 2) for k, v in cpu_us.items()},
        "events_cpu_over_layout": {
            key: round(cpu_us[key.split(":")[0] + ":events"] / value, 3)
            for key, value in cpu_us.items()
            if not key.endswith(":events")
        },
        "load_average": round(os.getloadavg()[0], 2),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--events", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--reads", action="store_true", help="measure reads instead of appends")
    parser.add_argument(
        "--most", type=int, action="append", default=[],
        help="also a segment store cutting appends into segments of at most N events",
    )  # fmt: skip
    args = parser.parse_args(argv)
    if args.reads:
        result = run_reads(args.events, args.rounds, most=args.most)
    else:
        result = run(args.events, args.rounds, most=args.most)
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
