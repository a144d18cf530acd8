"""Pathological inputs (issue 14): one huge string must not cost more than its length.

A 200-message coding session, and the same session holding one 20 KB non-JSON tool
argument (a single 20,000-character word: the shape that was quadratic); and the same
session holding one 10 MB user message, or one 1 MB user message of RST titles
underlined ever shorter (session 34's review: quadratic in the fence reader). Each
figure is the time of the operation on the session with the odd message, beside the
same operation on the plain session (the baseline), in this process (no CLI
start-up). Goal: ratio <= 2.

Each line also carries the CPU time (``cpu_ms``, ``baseline_cpu_ms``, ``cpu_ratio``:
the machine is shared, wall time is noisy). The what-if is measured twice: ``whatif``
is the best of repeated runs in one process (its fact and token caches warm, as in a
server), ``whatif_cold`` clears the process caches before each run (as a fresh
``ctxledger replay`` process finds them).

    python bench/pathological_bench.py [--runs 3] [--big-mb 10]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

if __package__ in (None, ""):  # run as a script: make the checkout importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import anyio

from ctxledger import CompressionConfig, Ledger, OfflineSummarizer, compact
from ctxledger.analysis.audit import audit_chain
from ctxledger.analysis.whatif import whatif
from ctxledger.clock import SequentialIds, StepClock

WINDOW = 16_000
_WORDS = [
    "alpha",
    "beta",
    "gamma",
    "delta",
    "file",
    "test",
    "error",
    "path",
    "token",
    "src/app.py",
    "retry",
]


def session(odd: str | None, big_chars: int) -> list[dict[str, Any]]:
    """200 messages: an ask, then tool loops; `odd` adds a 20 KB argument or a big user message."""
    rng = random.Random(3)
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "fix it " + " ".join(rng.choices(_WORDS, k=50))}
    ]
    call = 0
    while len(messages) < 199:
        call += 1
        args = json.dumps({"command": f"ls -la src/m{call}"})
        if odd == "argument" and call == 5:
            args = "a" * 20_000
        messages.append(
            {
                "role": "assistant",
                "content": " ".join(rng.choices(_WORDS, k=20)),
                "tool_calls": [
                    {"id": f"call_{call}", "type": "function",
                     "function": {"name": "bash", "arguments": args}}
                ],
            }
        )  # fmt: skip
        messages.append(
            {
                "role": "tool",
                "tool_call_id": f"call_{call}",
                "content": " ".join(rng.choices(_WORDS, k=rng.randint(10, 400))),
            }
        )
    if odd in ("user", "underlines", "fence_runs"):
        if odd == "underlines":
            big = underlines(1_000)
        elif odd == "fence_runs":
            big = fence_runs(1_000_000)
        else:
            big = (" ".join(rng.choices(_WORDS, k=big_chars // 4)) + " é")[-big_chars:]
        messages[101:101] = [
            {"role": "user", "content": big},
            {"role": "assistant", "content": "noted"},
        ]
    return messages


def underlines(titles: int) -> str:
    """RST titles each underlined with ``~`` and shorter than the one before (session
    34's review: 1 MB for 1,000; each underline, read as a fence first, read on to the
    text's end)."""
    return "".join(
        f"\n{'T' * size}\n{'~' * size}\nYou must keep the tests green.\n"
        for size in range(titles, 0, -1)
    )


def fence_runs(chars: int) -> str:
    """A fence of a run of backticks half `chars` long, then a run one shorter, which
    closes nothing (session 34's review 2: the block pattern matched the opening run
    again at each position of the second run; 1 MB took 32 s)."""
    size = chars // 2
    return f"You must keep the tests green.\n{'`' * (size + 1)}\n{'`' * size}\n"


def _ledger(tmp: str, name: str, messages: list[dict[str, Any]]) -> tuple[Ledger, str]:
    config = CompressionConfig(context_length=WINDOW)
    ledger = Ledger.open(
        os.path.join(tmp, name), clock=StepClock(), ids=SequentialIds(), config=config,
        durability="normal",
    )  # fmt: skip
    sid = ledger.start_session(model="m", context_length=WINDOW, system_prompt="You code.")
    ledger.append_messages(sid, messages)
    return ledger, sid


def _seconds(fn: Callable[[], object], runs: int, out: dict[str, float], op: str) -> None:
    """Best wall and CPU seconds of `runs` calls into ``out[op]`` / ``out[op + "_cpu"]``."""
    for _ in range(runs):
        start, cpu = time.perf_counter(), time.process_time()
        fn()
        wall, cpu = time.perf_counter() - start, time.process_time() - cpu
        out[op] = min(out.get(op, 1e9), wall)
        out[op + "_cpu"] = min(out.get(op + "_cpu", 1e9), cpu)


def _cold() -> None:
    """Forget what a process remembers of texts (facts, prepared haystacks, token counts)."""
    from ctxledger import tokens
    from ctxledger.analysis import factviews
    from ctxledger.compressor import factmatch

    factviews.FACTS.clear()
    digests = getattr(factviews, "_DIGESTS", None)  # long contents' fact-cache digests
    if digests is not None:
        digests.clear()
    long_haystacks = getattr(factmatch, "LONG_HAYSTACKS", None)  # absent before issue 14's
    if long_haystacks is not None:
        long_haystacks.clear()
    tokens._count_long.cache_clear()


def _whatif_cold(ledger: Ledger, sid: str) -> None:
    _cold()
    whatif(ledger, sid, summarizer=OfflineSummarizer())


def measure(odd: str | None, runs: int, big_chars: int) -> dict[str, float]:
    """Seconds of compress (fresh ledger each run), audit and what-if on one session."""
    out: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        messages = session(odd, big_chars)
        n = 0

        def compress_once() -> None:
            nonlocal n
            n += 1
            ledger, sid = _ledger(tmp, f"c{n}.db", messages)
            _seconds(
                lambda: anyio.run(compact, ledger, sid, OfflineSummarizer()), 1, out, "compress"
            )
            ledger.close()

        for _ in range(runs):
            compress_once()
        ledger, sid = _ledger(tmp, "a.db", messages)
        anyio.run(compact, ledger, sid, OfflineSummarizer())
        _seconds(lambda: audit_chain(ledger, sid), runs, out, "audit")
        _seconds(lambda: _whatif_cold(ledger, sid), runs, out, "whatif_cold")
        _seconds(lambda: whatif(ledger, sid, summarizer=OfflineSummarizer()), runs, out, "whatif")
        ledger.close()
    return out


#: how an operation is named in the ``what`` of its line
_OPS = {"whatif_cold": "whatif in a fresh process (caches cleared)"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--big-mb", type=float, default=10.0)
    args = parser.parse_args(argv)
    big_chars = int(args.big_mb * 1_000_000)
    plain = measure(None, args.runs, big_chars)
    cases = (("argument", "20 KB non-JSON tool argument", ("compress", "audit", "whatif")),
             ("user", f"{args.big_mb:g} MB user message", ("whatif", "whatif_cold")),
             ("underlines", "1 MB user message of ever shorter RST titles", ("whatif_cold",)),
             ("fence_runs", "1 MB user message of two runs of backticks", ("whatif_cold",)))  # fmt: skip
    for odd, label, ops in cases:
        timed = measure(odd, args.runs, big_chars)
        for op in ops:
            print(
                json.dumps(
                    {
                        "bench": f"pathological_{odd}_{op}",
                        "what": f"{_OPS.get(op, op)} of a 200-message session holding one {label}",
                        "value": round(timed[op] * 1000, 1),
                        "unit": "ms",
                        "baseline": round(plain[op] * 1000, 1),
                        "baseline_is": "the same session without that message",
                        "ratio": round(timed[op] / plain[op], 3),
                        "cpu_ms": round(timed[op + "_cpu"] * 1000, 1),
                        "baseline_cpu_ms": round(plain[op + "_cpu"] * 1000, 1),
                        "cpu_ratio": round(timed[op + "_cpu"] / plain[op + "_cpu"], 3),
                        "load_average": round(os.getloadavg()[0], 2),
                        "goal": "ratio <= 2",
                    }
                ),
                flush=True,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
