"""The one validation policy's cost per append (issue 16).

Prints one JSON object per line: {"bench", "value", "unit", "baseline", "ratio", ...}.

* ``check_messages_p50``: ``Ledger.check_messages`` (re-used tool-call ids repaired,
  then validated) on one generated turn appended to a session of ``--turns`` turns; the
  baseline is ``validate_messages`` alone against the same session's call ledger (what
  an append paid before the policy). Samples are interleaved so load drift hits both.
* ``check_messages_reused_p50``: the same on a batch whose call ids all re-use earlier
  ones (every call and result repaired); same baseline batch, so the ratio is the price
  of repairing instead of refusing.

Run: ``python bench/policy_bench.py [--turns 400] [--samples 3000]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from typing import Any

if __package__ in (None, ""):  # run as a script: make the checkout importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from ctxledger.compressor.config import CompressionConfig
from ctxledger.demo.synth import SessionSynth
from ctxledger.ledger.facade import Ledger
from ctxledger.messages import validate_messages

WINDOW = 100_000_000  # no compaction: the session only grows


def _reused(batch: list[dict[str, Any]], ids: list[str]) -> list[dict[str, Any]]:
    """`batch` with its call ids replaced, in order, by ids the session already issued."""
    mapping: dict[str, str] = {}
    out = []
    for m in batch:
        if m.get("tool_calls"):
            calls = []
            for c in m["tool_calls"]:
                mapping[c["id"]] = ids[len(mapping) % len(ids)]
                calls.append({**c, "id": mapping[c["id"]]})
            m = {**m, "tool_calls": calls}
        elif m.get("role") == "tool":
            m = {**m, "tool_call_id": mapping[m["tool_call_id"]]}
        out.append(m)
    return out


def _pair(
    ledger: Ledger, sid: str, batch: list[Any], baseline: list[Any], samples: int
) -> tuple[float, float]:
    """Medians (µs) of the policy on `batch` and of validation alone on `baseline`."""
    policy, plain = [], []
    for _ in range(samples):
        t0 = time.perf_counter()
        ledger.check_messages(sid, batch)
        t1 = time.perf_counter()
        validate_messages(baseline, ledger.call_ledger(sid))
        t2 = time.perf_counter()
        policy.append((t1 - t0) * 1e6)
        plain.append((t2 - t1) * 1e6)
    return statistics.median(policy), statistics.median(plain)


def run(turns: int, samples: int) -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory() as tmp:
        ledger = Ledger.open(os.path.join(tmp, "b.db"), config=CompressionConfig())
        sid = ledger.start_session(model="m", context_length=WINDOW, system_prompt="s")
        generated = list(SessionSynth(3, big_outputs=False).turns(turns + 1))
        for turn in generated[:-1]:
            ledger.append_messages(sid, turn)
        batch = generated[-1]
        live = len(ledger.transcript.session(sid).live)
        policy, plain = _pair(ledger, sid, batch, batch, samples)
        issued = sorted(ledger.call_ledger(sid).issued)
        reused_policy, _ = _pair(ledger, sid, _reused(batch, issued), batch, samples)
        ledger.close()
    common = {"unit": "us", "baseline": round(plain, 1), "batch": len(batch), "live": live}
    return [
        {"bench": "check_messages_p50", "value": round(policy, 1), **common,
         "ratio": round(policy / plain, 2)},
        {"bench": "check_messages_reused_p50", "value": round(reused_policy, 1), **common,
         "ratio": round(reused_policy / plain, 2)},
    ]  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--turns", type=int, default=400)
    parser.add_argument("--samples", type=int, default=3000)
    args = parser.parse_args(argv)
    for result in run(args.turns, args.samples):
        print(json.dumps(result))


if __name__ == "__main__":
    main()
