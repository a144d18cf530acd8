"""Hostile-input benchmark: odd messages must cost about what ordinary ones do.

A 200-message session is compacted (offline summarizer) and audited three ways: as
is (the baseline), with one 20 KB non-JSON tool argument, and with one 10 MB
single-word user message (issue 18's quadratic blow-ups: 14 s and minutes before).
Prints one JSON object per line::

    {"bench": "hostile_compact", "case": "10 MB word", "seconds": ...,
     "baseline_seconds": ..., "ratio": ...}

and the same for ``hostile_audit``.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from typing import Any

import anyio

if __package__ in (None, ""):  # run as a script: make the checkout importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from ctxledger import CompressionConfig, Ledger, audit_chain, compact
from ctxledger.compressor.summarizers.offline import OfflineSummarizer


def session(odd: str) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    for i in range(50):
        args = "x" * 20_000 if odd == "20 KB argument" and i == 10 else json.dumps({"q": i})
        call = {"id": f"c{i}", "type": "function", "function": {"name": "t", "arguments": args}}
        messages += [
            {"role": "user", "content": f"question {i} " * 20},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"c{i}", "content": f"output {i} " * 30},
            {"role": "assistant", "content": f"answer {i} " * 20},
        ]
    if odd == "10 MB word":
        messages[20] = {"role": "user", "content": "y" * 10_000_000}
    return messages


def run(odd: str) -> tuple[float, float]:
    with (
        tempfile.TemporaryDirectory() as tmp,
        Ledger.open(
            os.path.join(tmp, "h.db"), config=CompressionConfig(threshold_floor_tokens=0)
        ) as ledger,
    ):
        sid = ledger.start_session(model="m", context_length=10_000_000, system_prompt="s")
        ledger.append_messages(sid, session(odd))
        start = time.perf_counter()
        outcome = anyio.run(lambda: compact(ledger, sid, OfflineSummarizer()))
        compacted = time.perf_counter() - start
        assert outcome.new_session_id is not None
        start = time.perf_counter()
        audit_chain(ledger, outcome.new_session_id)
        return compacted, time.perf_counter() - start


def main() -> None:
    base_compact, base_audit = run("none")
    for case in ("20 KB argument", "10 MB word"):
        seconds = run(case)
        for name, value, base in zip(
            ("hostile_compact", "hostile_audit"), seconds, (base_compact, base_audit), strict=True
        ):
            line = {
                "bench": name,
                "case": case,
                "seconds": round(value, 4),
                "baseline_seconds": round(base, 4),
                "ratio": round(value / base, 2) if base else None,
            }
            print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
