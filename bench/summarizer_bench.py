"""Offline summarizer benchmark: fact retention and time per middle on the real corpus.

For each transcript of ``/work/shared/corpus`` (or ``--corpus DIR``; skipped when
absent) the middle is ``messages[4:-8]`` and the budget ``clamp(0.2 × middle tokens,
2,000, 10,000)`` (HERMES_SPEC §1). Prints one JSON object per line::

    {"bench": "summarizer_retention", "file": ..., "messages": ..., "middle_tokens": ...,
     "budget": ..., "summary_tokens": ..., "facts": ..., "kept": ..., "retention": ...,
     "seconds": ..., "within_budget": true}

then one ``summarizer_retention_total`` line: facts kept / extracted over all files
(micro), the mean per-file retention (macro), the worst file, and total time.
``--budget-ratio`` changes the 0.2; ``--floor`` the 2,000 (e.g. to stress small budgets).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the checkout importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from ctxledger.compressor.facts import extract_facts, retention
from ctxledger.compressor.summarizers.base import SummaryRequest
from ctxledger.compressor.summarizers.offline import build_summary
from ctxledger.tokens import count_messages, count_text

DEFAULT_CORPUS = Path("/work/shared/corpus")
Result = dict[str, Any]


def bench_file(
    path: Path, ratio: float = 0.2, floor: int = 2_000, ceiling: int = 10_000
) -> Result | None:
    """Retention and time for one transcript; None when its middle is empty."""
    messages = json.loads(path.read_text("utf-8"))["messages"]
    middle = messages[4:-8]
    if not middle:
        return None
    tokens = sum(count_messages(middle))
    budget = int(min(ceiling, max(floor, ratio * tokens)))
    start = time.perf_counter()
    text = build_summary(SummaryRequest(turns=middle, budget_tokens=budget))
    seconds = time.perf_counter() - start
    facts = extract_facts(middle)
    kept, _ = retention(facts, text)
    summary_tokens = count_text(text)
    return {
        "bench": "summarizer_retention",
        "file": path.name,
        "messages": len(middle),
        "middle_tokens": tokens,
        "budget": budget,
        "summary_tokens": summary_tokens,
        "facts": len(facts),
        "kept": len(kept),
        "retention": round(len(kept) / len(facts), 4) if facts else 1.0,
        "seconds": round(seconds, 4),
        "within_budget": summary_tokens <= budget,
    }


def bench_corpus(corpus: Path, ratio: float = 0.2, floor: int = 2_000) -> list[Result]:
    results = [
        r for p in sorted(corpus.glob("*.json")) if (r := bench_file(p, ratio, floor)) is not None
    ]
    if not results:
        return []
    facts = sum(r["facts"] for r in results)
    kept = sum(r["kept"] for r in results)
    worst = min(results, key=lambda r: r["retention"])
    total = {
        "bench": "summarizer_retention_total",
        "files": len(results),
        "facts": facts,
        "kept": kept,
        "retention_micro": round(kept / facts, 4) if facts else 1.0,
        "retention_macro": round(sum(r["retention"] for r in results) / len(results), 4),
        "worst_file": worst["file"],
        "worst_retention": worst["retention"],
        "all_within_budget": all(r["within_budget"] for r in results),
        "seconds": round(sum(r["seconds"] for r in results), 3),
        "max_seconds": max(r["seconds"] for r in results),
    }
    return [*results, total]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--budget-ratio", type=float, default=0.2)
    parser.add_argument("--floor", type=int, default=2_000)
    args = parser.parse_args(argv)
    if not args.corpus.is_dir():
        print(
            json.dumps({"bench": "summarizer_retention", "skipped": f"no corpus at {args.corpus}"})
        )
        return 0
    for result in bench_corpus(args.corpus, args.budget_ratio, args.floor):
        print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
