"""Lost tool calls (session 46's review): a call re-used every turn and never answered.

Each turn is a user message and an assistant call with the same id (``call_0``) that
never gets a result: every re-use loses the previous call, so the ledger's record of
lost calls grows by one a turn. Session 46's first version rebuilt that record on
every re-use (and put the original in it again each time): 8,000 turns took ~9 s to
repair and ~9 s to fold. The baseline is the same number of turns with each call
answered (a user message, the call, its result: one message more a turn, no call lost).

Prints one JSON object per operation: ``repair_call_ids`` on the whole list, ``fold``
of the repaired list into a ``CallLedger``, and ``append``: one more turn repaired
against the folded ledger (an append through the proxy or an import). Each carries
the best wall time of ``--runs`` (``value``, ``baseline``, ``ratio``) and the CPU time
beside it (``cpu_ms``, ``baseline_cpu_ms``, ``cpu_ratio``). Expected: ratio <= 2
(the lost shape has one message a turn fewer; the quadratic version measured 64
on the repair, 265 on the fold and 240 on an append, one run each, load ~4.5).

    python bench/lost_calls_bench.py [--turns 8000] [--runs 5]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from typing import Any

if __package__ in (None, ""):  # run as a script: make the checkout importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from ctxledger.messages import CallLedger, repair_call_ids

Msg = dict[str, Any]
CALL = {"id": "call_0", "type": "function", "function": {"name": "f", "arguments": "{}"}}


def turn(answered: bool) -> list[Msg]:
    out: list[Msg] = [
        {"role": "user", "content": "again"},
        {"role": "assistant", "content": "trying", "tool_calls": [CALL]},
    ]
    if answered:
        out.append({"role": "tool", "tool_call_id": "call_0", "content": "done"})
    return out


def _fresh(i: int, j: int) -> str:
    return f"new_{i}_{j}"


def _best(fn: Callable[[], object], runs: int) -> tuple[float, float]:
    """Best wall and CPU seconds of `runs` calls."""
    wall, cpu = 1e9, 1e9
    for _ in range(runs):
        w0, c0 = time.perf_counter(), time.process_time()
        fn()
        wall = min(wall, time.perf_counter() - w0)
        cpu = min(cpu, time.process_time() - c0)
    return wall, cpu


def measure(turns: int, answered: bool, runs: int) -> dict[str, tuple[float, float]]:
    messages = [m for _ in range(turns) for m in turn(answered)]
    fixed, repairs = repair_call_ids(messages, None, _fresh)
    renames = {r.replacement: r.original for r in repairs if r.call_index is not None}
    ledger = CallLedger()
    ledger.fold(fixed, renames)

    def fold() -> None:
        CallLedger().fold(fixed, renames)

    def append() -> None:
        for _ in range(20):
            repair_call_ids(turn(answered), ledger, _fresh)

    return {
        "repair_call_ids": _best(lambda: repair_call_ids(messages, None, _fresh), runs),
        "fold": _best(fold, runs),
        "append": _best(append, runs),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--turns", type=int, default=8000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args(argv)
    lost = measure(args.turns, False, args.runs)
    plain = measure(args.turns, True, args.runs)
    for op, (wall, cpu) in lost.items():
        base_wall, base_cpu = plain[op]
        scale = 1000 / 20 if op == "append" else 1000  # (an append: one of 20 in a run)
        row = {
            "bench": f"lost_calls_{op}",
            "what": f"{op}: a call re-used every turn, never answered ({args.turns:,} turns)",
            "value": round(wall * scale, 3),
            "unit": "ms",
            "baseline": round(base_wall * scale, 3),
            "baseline_is": "the same turns with each call answered",
            "ratio": round(wall / base_wall, 3),
            "cpu_ms": round(cpu * scale, 3),
            "baseline_cpu_ms": round(base_cpu * scale, 3),
            "cpu_ratio": round(cpu / base_cpu, 3),
            "turns": args.turns,
            "runs": args.runs,
        }
        print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
