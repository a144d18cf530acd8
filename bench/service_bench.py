"""Service benchmarks: the per-turn cost of ``ContextService`` on a long session.

Prints one JSON object per line: {"bench", "value", "unit", "baseline", "ratio", ...}.

* ``api_messages_p50`` / ``_p99``: ``ContextService.api_messages`` right after one
  append to a session of ``--messages`` live messages (10,000 by default), with
  prompt-cache markers (a Claude model) and without; the baseline is a plain
  ``list(...)`` copy of that many message dicts, the floor for returning a fresh list.
  ``rebuild_p50`` is what the first version paid: the view rebuilt from ids.
  ``list_copy_after_append_p50`` is a bare ``list()`` copy of the view right after an
  append (baseline: the warm copy): the message dicts are out of the CPU cache then, so
  even the copy alone costs several warm copies; ``api_messages_vs_copy_after_append``
  compares the call with that copy (a second baseline beside the issue's warm one).
* ``turn_ms``: one agent turn through the service (append the user message, report
  usage, append the reply) against the same session; the baseline is the same three
  writes straight through the synchronous ``Ledger`` (no triggers, guards or budget).

Run: ``python bench/service_bench.py [--messages 10000] [--samples 400]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import anyio

if __package__ in (None, ""):  # run as a script: make the checkout importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from ctxledger.compressor.config import CompressionConfig
from ctxledger.demo.synth import SessionSynth
from ctxledger.ledger.facade import Ledger
from ctxledger.runtime.service import ContextService

Result = dict[str, Any]


def _result(bench: str, value: float, baseline: float, unit: str, **extra: Any) -> Result:
    return {
        "bench": bench,
        "value": round(value, 4),
        "unit": unit,
        "baseline": round(baseline, 4),
        "ratio": round(value / baseline, 2) if baseline else None,
        **extra,
    }


def _quantile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _time_ms(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000


async def _build(svc: ContextService, n_messages: int) -> str:
    """A session of at least `n_messages` live messages (no compaction: a huge window)."""
    synth = SessionSynth(7, big_outputs=False)
    sid = await svc.start_session(
        model="claude-sonnet-4-5",
        context_length=10_000_000,
        system_prompt=synth.system_prompt(),
        tools=synth.tools(),
    )
    batch: list[dict[str, Any]] = []
    for message in synth.messages(n_messages):
        batch.append(message)
        if len(batch) >= 200 and message["role"] == "assistant" and not message.get("tool_calls"):
            await svc.append(sid, batch)
            batch = []
    if batch:
        await svc.append(sid, batch)
    return sid


async def _api_messages(svc: ContextService, sid: str, samples: int) -> list[Result]:
    marked: list[float] = []
    plain: list[float] = []
    rebuild: list[float] = []
    after_append: list[float] = []
    transcript = svc.ledger.transcript
    for i in range(samples):
        await svc.append(sid, [{"role": "user", "content": f"one more question, number {i}"}])
        # the first read after an append is the one that matters (an agent reads once per call)
        markers = None if i % 2 else False
        (marked if i % 2 else plain).append(
            _time_ms(lambda m=markers: svc.api_messages(sid, cache=m))
        )
        live_ids = transcript.session(sid).live
        rebuild.append(_time_ms(lambda ids=live_ids: [transcript.stored(m).message for m in ids]))
        # a second baseline (reported beside, never instead of, the warm copy): a bare
        # list() copy of the same view read right after the same kind of append
        await svc.append(sid, [{"role": "assistant", "content": f"answer number {i}"}])
        view = transcript.api_view(sid)
        after_append.append(_time_ms(lambda v=view: list(v)))
    live = transcript.api_messages(sid)
    baseline = [_time_ms(lambda: list(live)) for _ in range(samples)]
    base50 = statistics.median(baseline)
    cold50 = statistics.median(after_append)
    n = len(live)
    return [
        _result("api_messages_p50", statistics.median(plain), base50, "ms", messages=n),
        _result(
            "api_messages_p99", _quantile(plain, 0.99), _quantile(baseline, 0.99), "ms", messages=n
        ),
        _result(
            "api_messages_cache_markers_p50", statistics.median(marked), base50, "ms", messages=n
        ),
        _result(
            "api_messages_cache_markers_p99",
            _quantile(marked, 0.99),
            _quantile(baseline, 0.99),
            "ms",
            messages=n,
        ),
        _result("rebuild_from_ids_p50", statistics.median(rebuild), base50, "ms", messages=n),
        _result("list_copy_after_append_p50", cold50, base50, "ms", messages=n),
        _result("api_messages_vs_copy_after_append_p50", statistics.median(plain), cold50, "ms"),
    ]


async def _turns(svc: ContextService, sid: str, samples: int) -> list[Result]:
    usage = {
        "prompt_tokens": 1_000,
        "completion_tokens": 20,
        "prompt_tokens_details": {"cached_tokens": 800},
    }
    per_turn: list[float] = []
    for i in range(samples):
        start = time.perf_counter()
        await svc.append(
            sid, [{"role": "user", "content": f"turn {i}: please run the tests again"}]
        )
        await svc.report_usage(sid, usage)
        await svc.append(sid, [{"role": "assistant", "content": f"turn {i}: all tests pass"}])
        per_turn.append((time.perf_counter() - start) * 1000)
    raw: list[float] = []
    ledger = svc.ledger
    for i in range(samples):
        start = time.perf_counter()
        ledger.append_messages(sid, [{"role": "user", "content": f"raw {i}"}])
        ledger.report_usage(sid, usage)
        ledger.append_messages(sid, [{"role": "assistant", "content": f"raw reply {i}"}])
        raw.append((time.perf_counter() - start) * 1000)
    p50 = statistics.median(per_turn)
    return [
        _result(
            "turn_ms_p50",
            p50,
            statistics.median(raw),
            "ms",
            turns_per_s=round(1000 / p50, 1),
            messages=len(ledger.transcript.session(sid).live),
            durability=ledger.store.durability,
        ),  # type: ignore[attr-defined]
    ]


async def main_async(n_messages: int, samples: int, durability: str) -> list[Result]:
    with tempfile.TemporaryDirectory() as tmp:
        config = CompressionConfig()
        ledger = Ledger.open(os.path.join(tmp, "bench.db"), config=config, durability=durability)
        svc = ContextService(ledger, config=config)
        start = time.perf_counter()
        sid = await _build(svc, n_messages)
        build_s = time.perf_counter() - start
        results = await _api_messages(svc, sid, samples)
        results += await _turns(svc, sid, samples)
        results.append(_result("build_session_s", build_s, 0, "s", messages=n_messages))
        await svc.aclose()
        return results


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument("--samples", type=int, default=400)
    parser.add_argument("--durability", choices=("full", "normal"), default="full")
    args = parser.parse_args(argv)
    for result in anyio.run(main_async, args.messages, args.samples, args.durability):
        print(json.dumps(result))


if __name__ == "__main__":
    main()
