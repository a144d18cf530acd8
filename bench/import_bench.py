"""Importer and batch-trajectory benchmarks.

Prints one JSON object per line: {"bench", "value", "unit", "target", "ok", ...}.

* ``import_openai_jsonl``: parse rate of a generated OpenAI JSONL file (one message
  per line, a third of them tool calls / tool results), messages per second, best of
  ``--repeat`` runs. Target: at least 50,000 messages/s.
* ``trajectories_compress``: wall time of ``compress_file`` over generated ShareGPT
  trajectories with the offline summarizer (default 1,000 trajectories of ~12k-30k
  tokens; most need compressing to the 15,250-token default). Target: at most 30 s.
  ``cpu_seconds`` and ``load_average`` are printed too: on a shared machine the wall
  time follows the load, the CPU time much less.
* ``import_peak_memory``: peak RSS a ``ctxledger import`` process adds per MB of a JSONL
  file of tiny messages (``{"role": "user", "content": "m1"}``: the worst case per byte),
  the process importing one message subtracted, at ``--memory-messages`` and at 4x as
  many (``value_at_4x``, ``growth_at_4x``). Baseline: a process that only reads the
  file and decodes each line into a dict, measured the same way. Session 39: 51-52 MB
  per MB at 50k and 200k messages (baseline 11): the import held every message
  parsed, as events, encoded and folded. Session 40 (events made as the store takes
  them, appended a chunk at a time, not folded): see docs/notes/s40-import.md; the
  importers still hold every parsed message, so it still grows with the file. Session
  42 (docs/notes/s42-import7.md): SQLite's streamed append reads its link header back
  instead of holding it and writes with a 2 MB page cache: 20.6 -> 9.9 at 50k, 13.8 ->
  8.6 at 200k (peak 196 -> 156 MB).
* ``import_peak_memory_json_document``: the same for one JSON document (a list of the
  messages), which must be parsed whole; baseline ``json.load``.
* ``import_peak_memory_postgres`` (``--postgres``, or ``--pg-url``): the JSONL row with the
  ledger on a PostgreSQL server (a private one from ``tests/helpers/pg_server.py``
  unless a URL is given; a new schema per import): the client's peak, not the
  server's. Session 41: PostgreSQL's ``append_stream`` writes a chunk at a time (it read
  each request whole before).
* ``import_throughput`` (with ``--postgres``): messages per second of ``ctxledger
  import`` of the 4x JSONL file on each store, wall and CPU seconds of the importing
  process (from the ``import_peak_memory`` runs, one run each: figures follow the load).
* ``pg_append_stream_small_sessions`` (with ``--postgres``): one ``append_stream`` of
  2,000 sessions of 6 events, median seconds of 3 interleaved rounds; baseline the
  whole-list ``append_many``.

Run alone (``python bench/import_bench.py``) or import the ``bench_*`` functions.
Every file lives in a temporary directory; nothing is kept.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the checkout importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from ctxledger.compressor.summarizers.offline import OfflineSummarizer
from ctxledger.importers.openai import parse_openai
from ctxledger.trajectories import TrajectoryConfig, compress_file_sync

Result = dict[str, Any]

_WORDS = [
    "the",
    "context",
    "window",
    "compression",
    "summary",
    "tool",
    "result",
    "assistant",
    "user",
    "session",
    "token",
    "budget",
    "handoff",
    "protected",
    "head",
    "tail",
    "middle",
    "prune",
    "replay",
    "ledger",
    "event",
    "stream",
    "version",
    "hash",
    "chain",
    "file",
    "path",
    "error",
    "retry",
    "test",
    "passed",
    "failed",
    "function",
    "call",
    "arguments",
    "json",
    "value",
    "src",
    "main",
    "build",
    "import",
    "module",
]


def _text(rng: random.Random, low: int, high: int) -> str:
    return " ".join(rng.choices(_WORDS, k=rng.randint(low, high)))


def openai_jsonl(n: int, seed: int = 11) -> str:
    """`n` OpenAI messages, one per line: user, assistant with a tool call, tool result, ..."""
    rng = random.Random(seed)
    lines = [json.dumps({"role": "system", "content": "You are a coding agent."})]
    for i in range(n - 1):
        kind = i % 3
        if kind == 0:
            msg: dict[str, Any] = {"role": "user", "content": _text(rng, 5, 40)}
        elif kind == 1:
            args = json.dumps({"path": f"src/mod_{i}.py", "line": i})
            call = {
                "id": f"call_{i}",
                "type": "function",
                "function": {"name": "read_file", "arguments": args},
            }
            msg = {"role": "assistant", "content": _text(rng, 0, 20) or None, "tool_calls": [call]}
        else:
            msg = {"role": "tool", "tool_call_id": f"call_{i - 1}", "content": _text(rng, 20, 120)}
        lines.append(json.dumps(msg))
    return "\n".join(lines) + "\n"


def trajectory(rng: random.Random, index: int) -> dict[str, Any]:
    """A Hermes-style ShareGPT trajectory: system, task, then gpt tool calls and tool responses."""
    turns = [
        {"from": "system", "value": "You are a function-calling agent. " + _text(rng, 200, 400)},
        {"from": "human", "value": "Fix the failing test in src/app.py. " + _text(rng, 10, 40)},
    ]
    for i in range(rng.randint(30, 60)):
        call = json.dumps(
            {"name": "terminal", "arguments": {"command": f"pytest tests/test_{i}.py -q"}}
        )
        turns.append(
            {"from": "gpt", "value": f"{_text(rng, 5, 30)}\n<tool_call>\n{call}\n</tool_call>"}
        )
        body = json.dumps(
            {
                "tool_call_id": f"call_{index}_{i}",
                "name": "terminal",
                "content": _text(rng, 80, 600),
            }
        )
        turns.append({"from": "tool", "value": f"<tool_response>\n{body}\n</tool_response>"})
    turns.append({"from": "gpt", "value": "The test passes now. " + _text(rng, 10, 30)})
    return {"id": f"traj-{index}", "conversations": turns}


def bench_import_openai(messages: int = 100_000, repeat: int = 3) -> Result:
    text = openai_jsonl(messages)
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        sessions = parse_openai(text, path="bench.jsonl")
        best = min(best, time.perf_counter() - started)
    parsed = sum(len(s.messages) for s in sessions) + 1  # + the system prompt
    rate = parsed / best
    return {
        "bench": "import_openai_jsonl",
        "value": round(rate),
        "unit": "messages/s",
        "target": 50_000,
        "ok": rate >= 50_000,
        "messages": parsed,
        "seconds": round(best, 3),
    }


def bench_trajectories(count: int = 1000, concurrency: int = 16) -> Result:
    rng = random.Random(5)
    with tempfile.TemporaryDirectory() as tmp:
        src, out = Path(tmp) / "in.jsonl", Path(tmp) / "out.jsonl"
        src.write_text("".join(json.dumps(trajectory(rng, i)) + "\n" for i in range(count)))
        config = TrajectoryConfig(concurrency=concurrency)
        started, cpu_started = time.perf_counter(), time.process_time()
        report = compress_file_sync(src, out, config, OfflineSummarizer(), progress=False)
        seconds, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    return {
        "bench": "trajectories_compress",
        "value": round(seconds, 2),
        "unit": "s",
        "target": 30.0,
        "ok": seconds <= 30.0,
        "trajectories": count,
        "cpu_seconds": round(cpu, 2),
        "load_average": round(os.getloadavg()[0], 2),
        "compressed": report.compressed,
        "skipped_under_target": report.skipped_under_target,
        "still_over_limit": report.still_over_limit,
        "tokens_before": report.tokens_before,
        "tokens_after": report.tokens_after,
        "ratio": report.ratio,
    }


#: runs one measured step in a fresh process and prints its peak resident set (KiB) last:
#: VmHWM is the process's own (a child's ru_maxrss starts at its parent's size at fork)
_MEASURED = """
import sys, time
started, cpu = time.perf_counter(), time.process_time()
if sys.argv[1] == "import":
    from ctxledger.cli.main import cli
    cli.main(sys.argv[2:], standalone_mode=False)
elif sys.argv[1] == "decode-doc":
    import json
    rows = json.load(open(sys.argv[2]))
else:
    import json
    rows = [json.loads(line) for line in open(sys.argv[2])]
wall, cpu = time.perf_counter() - started, time.process_time() - cpu
with open("/proc/self/status") as status:
    peak = next(line.split()[1] for line in status if line.startswith("VmHWM"))
print(wall, cpu, peak)
"""

#: the last measured run's (wall seconds, CPU seconds), from its start to its end
_LAST_TIMES: list[tuple[float, float]] = []


def _peak_kib(*argv: str) -> int:
    """The peak resident set of :data:`_MEASURED` run with `argv`, in KiB."""
    done = subprocess.run(
        [sys.executable, "-c", _MEASURED, *argv], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"{argv[:1]} failed: {done.stderr[-500:]}")
    wall, cpu, peak = done.stdout.split()[-3:]
    _LAST_TIMES[:] = [(float(wall), float(cpu))]
    return int(peak)


#: a PostgreSQL server URL: the ledger of each import is a new schema there
_PG_URL: list[str] = []
_SCHEMAS = iter(range(10**9))


def _ledger(tmp: Path, name: str) -> str:
    """A new ledger: a file in `tmp`, or a new schema on the PostgreSQL server."""
    if _PG_URL:
        return f"{_PG_URL[0]}?schema=imp_{os.getpid()}_{next(_SCHEMAS)}"
    return str(tmp / f"{name}.db")


def _import_peaks(tmp: Path, messages: int, document: bool) -> tuple[float, float, float]:
    """(MB of input, MB the import's peak adds, MB the baseline's adds) for a file of
    `messages` tiny messages: JSONL, or one JSON document (a list of them); the import's
    (wall, CPU) seconds in ``_TIMES[messages]``."""
    big, small = tmp / f"big{messages}.json", tmp / "small.json"
    rows = [{"role": ("user", "assistant")[i % 2], "content": f"m{i}"} for i in range(messages)]
    if document:
        big.write_text("[" + ",\n".join(json.dumps(row) for row in rows) + "]\n")
    else:
        big.write_text("".join(json.dumps(row) + "\n" for row in rows))
    del rows
    small.write_text(json.dumps({"role": "user", "content": "m"}) + "\n")
    mb = big.stat().st_size / 2**20

    def imported(path: Path) -> int:
        db = _ledger(tmp, f"{path.stem}-{messages}")  # a new ledger each (no repeat)
        return _peak_kib("import", "-q", "--db", db, "import", str(path), "--format", "openai")

    peak = imported(big)
    _TIMES[messages] = _LAST_TIMES[0]
    added = (peak - imported(small)) / 1024
    decode = "decode-doc" if document else "decode"
    parsed = (_peak_kib(decode, str(big)) - _peak_kib(decode, str(small))) / 1024
    return mb, added, parsed


#: messages -> the (wall, CPU) seconds of the last import of a file of that many
_TIMES: dict[int, tuple[float, float]] = {}


def bench_import_memory(messages: int = 50_000, document: bool = False) -> Result:
    """The peak per MB at `messages` and at 4x as many: a bounded import grows far less
    than 4x (``growth``: the 4x file's added peak over the 1x file's)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    os.environ["PYTHONPATH"] = root + os.pathsep + os.environ.get("PYTHONPATH", "")
    with tempfile.TemporaryDirectory() as tmp:
        small = _import_peaks(Path(tmp), messages, document)
        large = _import_peaks(Path(tmp), 4 * messages, document)
    name = "import_peak_memory_json_document" if document else "import_peak_memory"
    return {
        "bench": name + ("_postgres" if _PG_URL else ""),
        "value": round(small[1] / small[0], 1),
        "unit": "MB peak RSS per MB of input",
        "messages": messages,
        "input_mb": round(small[0], 2),
        "value_at_4x": round(large[1] / large[0], 1),
        "input_mb_at_4x": round(large[0], 2),
        "growth_at_4x": round(large[1] / small[1], 2),
        "baseline": "decode the file into dicts (json.loads: every line, or the document)",
        "baseline_value": round(small[2] / small[0], 1),
        "baseline_value_at_4x": round(large[2] / large[0], 1),
    }


def bench_import_throughput(messages: int, sqlite: tuple[float, float]) -> Result:
    """Messages per second of the import of `messages` on PostgreSQL (the last run of
    :func:`bench_import_memory` there), with SQLite's (`sqlite`: its wall, CPU) beside."""
    wall, cpu = _TIMES[messages]
    return {
        "bench": "import_throughput",
        "value": round(messages / wall),
        "unit": "messages/s (PostgreSQL, wall)",
        "messages": messages,
        "wall_seconds": round(wall, 2),
        "cpu_seconds": round(cpu, 2),
        "baseline": "the same import into a SQLite file",
        "baseline_value": round(messages / sqlite[0]),
        "baseline_wall_seconds": round(sqlite[0], 2),
        "baseline_cpu_seconds": round(sqlite[1], 2),
        "ratio": round(sqlite[0] / wall, 2),
        "load_average": round(os.getloadavg()[0], 2),
    }


def bench_pg_small_sessions(streams: int = 2000, per: int = 6, rounds: int = 3) -> Result:
    """Seconds of one ``append_stream`` of `streams` sessions of `per` events each on
    PostgreSQL (an import of many small sessions; session 41, review 1: their streams
    are placed a group at a time), the whole-list ``append_many`` of them as baseline;
    `rounds` interleaved rounds, medians, a new schema each."""
    import statistics

    from ctxledger.eventstore.base import AppendRequest, StreamedRequest
    from ctxledger.eventstore.postgres import PostgresEventStore
    from ctxledger.testing.eventstore import message, started

    times: dict[str, list[tuple[float, float]]] = {"stream": [], "many": []}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(rounds):
            for mode in ("stream", "many") if r % 2 == 0 else ("many", "stream"):
                names = [f"ses_{i}" for i in range(streams)]
                events = {n: [started(n)] + [message(n) for _ in range(per - 1)] for n in names}
                url = _ledger(Path(tmp), "")  # a new schema
                with PostgresEventStore(url, index_dir=tmp) as store:
                    wall, cpu = time.perf_counter(), time.process_time()
                    if mode == "stream":
                        store.append_stream(StreamedRequest(n, iter(events[n]), 0) for n in names)
                    else:
                        store.append_many([AppendRequest(n, events[n], 0) for n in names])
                    times[mode].append((time.perf_counter() - wall, time.process_time() - cpu))

    def median(mode: str, at: int) -> float:
        return statistics.median(t[at] for t in times[mode])

    return {
        "bench": "pg_append_stream_small_sessions",
        "value": round(median("stream", 0), 3),
        "unit": "s (wall, median)",
        "streams": streams,
        "events_per_stream": per,
        "cpu_seconds": round(median("stream", 1), 3),
        "baseline": "append_many of the whole list",
        "baseline_value": round(median("many", 0), 3),
        "baseline_cpu_seconds": round(median("many", 1), 3),
        "ratio": round(median("many", 0) / median("stream", 0), 2),
        "load_average": round(os.getloadavg()[0], 2),
    }


def _pg_server(url: str | None) -> Any:
    """The server the PostgreSQL rows use: `url`, or a private one (returned, to clean up)."""
    if url is not None:
        _PG_URL[:] = [url]
        return None
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "tests", "helpers"))
    from pg_server import PgServer, find_bin_dir

    bin_dir = find_bin_dir()
    if bin_dir is None:
        raise SystemExit("no PostgreSQL server binaries; pass --pg-url")
    server = PgServer(bin_dir, fsync=True)
    server.start()
    _PG_URL[:] = [server.url]
    return server


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--trajectories", type=int, default=1000)
    parser.add_argument("--memory-messages", type=int, default=50_000)
    parser.add_argument("--postgres", action="store_true", help="the PostgreSQL rows too")
    parser.add_argument("--pg-url", default=None, help="their server (default: a private one)")
    parser.add_argument("--only-memory", action="store_true", help="the import rows only")
    args = parser.parse_args(argv)
    print(json.dumps(bench_import_memory(args.memory_messages)), flush=True)
    sqlite = _TIMES[4 * args.memory_messages]
    if args.postgres or args.pg_url:
        server = _pg_server(args.pg_url)
        try:
            print(json.dumps(bench_import_memory(args.memory_messages)), flush=True)
            print(json.dumps(bench_import_throughput(4 * args.memory_messages, sqlite)))
            print(json.dumps(bench_pg_small_sessions()), flush=True)
        finally:
            _PG_URL.clear()
            if server is not None:
                server.cleanup()
    if args.only_memory:
        return
    print(json.dumps(bench_import_memory(args.memory_messages, document=True)), flush=True)
    print(json.dumps(bench_import_openai(args.messages, args.repeat)), flush=True)
    print(json.dumps(bench_trajectories(args.trajectories)), flush=True)


if __name__ == "__main__":
    main()
