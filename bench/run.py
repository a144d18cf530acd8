"""Run every benchmark and print one JSON object per line (figures beside raw baselines).

    python bench/run.py            # full sizes (1M events; several minutes on 2 cores)
    python bench/run.py --quick    # small sizes, for a smoke check

Each bench script also runs alone; see its docstring. Nothing here is asserted:
speed is measured, never tested.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

FULL: list[list[str]] = [
    ["store_bench.py"],
    ["layout_bench.py"],
    ["projection_bench.py"],
    ["planner_bench.py"],
    ["summarizer_bench.py"],
    ["import_bench.py"],
    ["service_bench.py"],
    ["policy_bench.py"],
    ["analysis_bench.py"],
    ["contention_bench.py"],
    ["pathological_bench.py"],
    ["lost_calls_bench.py"],
    ["server_bench.py"],
    ["pg_bench.py"],
    ["hostile_bench.py"],
    ["hermes_bench.py"],
]
#: the real-transcript audit bench runs only where the corpus is (CI has only the project)
CORPUS = os.environ.get("CTXLEDGER_CORPUS") or os.path.join(
    os.path.dirname(os.path.dirname(HERE)), "shared", "corpus"
)
if os.path.isdir(CORPUS):
    FULL.append(["audit_corpus_bench.py"])
#: arguments of a full run (a script not named here takes its own defaults)
ARGS: dict[str, list[str]] = {
    # the batched append's floor in today's table and in a layout of one row per <= 64 events
    "layout_bench.py": ["--events", "50000", "--rounds", "5", "--work", "heads", "segment64"],
}
QUICK: dict[str, list[str]] = {
    "store_bench.py": ["--events", "100000"],
    "projection_bench.py": ["--events", "100000"],
    "import_bench.py": [
        "--messages",
        "20000",
        "--trajectories",
        "100",
        "--memory-messages",
        "50000",
    ],
    "analysis_bench.py": ["--messages", "100000"],
    "contention_bench.py": ["--appends", "60", "--rounds", "1"],
    "policy_bench.py": ["--turns", "100", "--samples", "500"],
    "lost_calls_bench.py": ["--turns", "1000", "--runs", "2"],
    "pg_bench.py": ["--quick"],
    "audit_corpus_bench.py": ["--limit", "8"],
    "hermes_bench.py": ["--runs", "3"],
    "layout_bench.py": ["--events", "5000", "--rounds", "1", "--work", "heads", "segment64"],
}
#: scripts that run in another interpreter: hermes-agent lives in its own venv (``make
#: hermes-venv``), where this checkout is installed too
INTERPRETERS: dict[str, str] = {
    "hermes_bench.py": os.path.join(os.path.dirname(HERE), ".venv-hermes", "bin", "python"),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="smaller sizes")
    parser.add_argument("--only", default=None, help="comma-separated script names to run")
    args = parser.parse_args(argv)
    failed = 0
    for (script,) in FULL:
        if (
            args.only
            and script.removesuffix(".py") not in args.only.split(",")
            and script not in args.only.split(",")
        ):
            continue
        path = os.path.join(HERE, script)
        if not os.path.exists(path):
            continue
        extra = QUICK.get(script, []) if args.quick else ARGS.get(script, [])
        python = INTERPRETERS.get(script, sys.executable)
        if not os.path.exists(python):
            print(f'{{"bench": "{script}", "skipped": "{python} not found (make hermes-venv)"}}')
            continue
        proc = subprocess.run([python, path, *extra], check=False, text=True, capture_output=True)
        for line in proc.stdout.splitlines():
            if line.startswith("{"):
                print(line, flush=True)
        if proc.returncode != 0:
            failed += 1
            print(f'{{"bench": "{script}", "error": "exit {proc.returncode}"}}', flush=True)
            sys.stderr.write(proc.stderr[-2000:])
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
