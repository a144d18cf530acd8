"""Compaction planning speed: a generated 5,000-message session and the real corpus.

Prints one JSON object per line:
``{"bench", "mode", "messages", "median_ms", "p90_ms", "cpu_median_ms", "runs", "action", "prunes", ...}``.
Token counts are computed once, outside the timed region (the planner is given them,
as the engine gives it the counts stored at append time). Every run plans at a 32K
window, where the middle is almost the whole session, so phase 1 rewrites nearly every
tool result: the worst case for planning time. Reference (HERMES_SPEC §9): Hermes took
~46 ms to plan a 5,000-message session; the target here is <= 5 ms median.

Modes (``plan_synthetic_5000`` is the issue's row, the other two are its context):

* ``replan`` (``plan_synthetic_5000``): the session planned once, two messages
  appended, planned again through one ``PlanCache``, as ``prepare()`` re-plans a live
  session (after a no-progress skip, a conflict, a dry run); only the second plan is
  timed. Its ``baseline`` is the ``uncached`` median of the same run.
* ``uncached`` (``plan_synthetic_5000_uncached``): ``plan()`` with no cache, repeated
  on the same list (the one-liner memo warm): what this bench measured before.
* ``cold`` (``plan_synthetic_5000_cold``): no cache and the one-liner memo emptied
  before each run: a list never planned before in this process (a first compaction).
* ``draft`` (``plan_synthetic_5000_draft``): as ``cold``, but ``planner.draft``: the
  decision only (boundaries, estimate, action, prunes listed as (index, kind)); the
  replacement texts are built later by ``PlanDraft.complete()`` (the other rows'
  fields describe the complete plan).

    python bench/planner_bench.py [--runs 30] [--messages 5000] [--corpus DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the checkout importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from ctxledger.compressor import prune
from ctxledger.compressor.config import CompressionConfig
from ctxledger.compressor.plancache import PlanCache
from ctxledger.compressor.planner import draft, plan, rough_counts
from ctxledger.demo.synth import VOCABULARY

WINDOW = 32_000
DEFAULT_CORPUS = Path("/work/shared/corpus")

_WORDS = VOCABULARY
_COMMANDS = (
    "pytest -q tests/",
    "git status",
    "ls -la src",
    "grep -rn TODO src",
    "python -m build",
    "cat setup.cfg",
)


def _text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choices(_WORDS, k=words))


def _output(rng: random.Random) -> str:
    """A tool output whose size follows the corpus: mostly a few hundred chars, some KBs."""
    lines = max(1, int(rng.lognormvariate(2.3, 1.1)))
    body = "\n".join(_text(rng, rng.randint(4, 12)) for _ in range(lines))
    return f"<returncode>{rng.choice((0, 0, 0, 1))}</returncode>\n<output>\n{body}\n</output>"


def synthetic_session(n_messages: int, seed: int = 5) -> list[dict[str, Any]]:
    """A long agent session: a task, then tool loops with a new user ask now and then."""
    rng = random.Random(seed)
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent. " + _text(rng, 200)},
        {"role": "user", "content": "Fix the failing tests. " + _text(rng, 60)},
    ]
    call = 0
    while len(messages) < n_messages - 1:
        if rng.random() < 0.04:
            messages.append({"role": "assistant", "content": _text(rng, rng.randint(20, 120))})
            messages.append({"role": "user", "content": _text(rng, rng.randint(5, 40))})
            continue
        width = 1 if rng.random() < 0.85 else rng.randint(2, 3)
        calls = []
        for _ in range(width):
            call += 1
            name = rng.choice(("bash", "bash", "read_file", "search_files", "patch"))
            args = (
                {"command": rng.choice(_COMMANDS)}
                if name == "bash"
                else {"path": f"src/m{call % 40}.py"}
            )
            if name == "patch" and rng.random() < 0.3:
                args["new_string"] = _text(rng, 150)  # large arguments: exercises truncation
            calls.append(
                {
                    "id": f"call_{call}",
                    "type": "function",
                    "function": {"name": name, "arguments": json.dumps(args)},
                }
            )
        messages.append(
            {"role": "assistant", "content": _text(rng, rng.randint(5, 30)), "tool_calls": calls}
        )
        messages.extend(
            {"role": "tool", "tool_call_id": c["id"], "content": _output(rng)} for c in calls
        )
    return messages[:n_messages]


def _plan_once(
    messages: list[dict[str, Any]], counts: list[int], config: CompressionConfig, mode: str
) -> tuple[float, float]:
    """One plan in `mode`; returns its wall and CPU milliseconds."""
    cache = None
    if mode == "replan":
        cache = PlanCache()
        plan(messages[:-2], config, counts[:-2], context_length=WINDOW, cache=cache)
    elif mode in ("cold", "draft"):
        prune._describe_memo.cache_clear()
    decide = draft if mode == "draft" else plan
    start, start_cpu = time.perf_counter(), time.process_time()
    decide(messages, config, counts, context_length=WINDOW, cache=cache)
    cpu = (time.process_time() - start_cpu) * 1000
    return (time.perf_counter() - start) * 1000, cpu


def time_plan(
    messages: list[dict[str, Any]], runs: int, config: CompressionConfig, mode: str = "uncached"
) -> dict[str, Any]:
    counts = rough_counts(messages)
    result = plan(messages, config, counts, context_length=WINDOW)  # warm-up (caches, imports)
    samples, cpu = [], []
    for _ in range(runs):
        wall_ms, cpu_ms = _plan_once(messages, counts, config, mode)
        samples.append(wall_ms)
        cpu.append(cpu_ms)
    samples.sort()
    return {
        "mode": mode,
        "messages": len(messages),
        "median_ms": round(statistics.median(samples), 3),
        "p90_ms": round(samples[min(len(samples) - 1, int(len(samples) * 0.9))], 3),
        # CPU time of this process: what the wall clock shows on an idle machine
        "cpu_median_ms": round(statistics.median(cpu), 3),
        "runs": runs,
        "action": result.action,
        "skip_reason": result.skip_reason,
        "prunes": len(result.prunes),
        "tokens_before": result.tokens_before,
        "estimated_tokens_after": result.estimated_tokens_after,
    }


def _synthetic(n: int, runs: int, config: CompressionConfig) -> None:
    session = synthetic_session(n)
    uncached = time_plan(session, runs, config, "uncached")
    replan = time_plan(session, runs, config, "replan")
    base = uncached["cpu_median_ms"]
    replan.update(
        value=replan["cpu_median_ms"],
        unit="ms",
        baseline=base,
        ratio=round(replan["cpu_median_ms"] / base, 3) if base else None,
        goal="cpu_median_ms <= 5",
    )
    print(json.dumps({"bench": f"plan_synthetic_{n}", **replan}))
    print(json.dumps({"bench": f"plan_synthetic_{n}_uncached", **uncached}))
    cold = time_plan(session, max(3, runs // 5), config, "cold")
    print(json.dumps({"bench": f"plan_synthetic_{n}_cold", **cold}))
    first = time_plan(session, max(3, runs // 5), config, "draft")
    print(json.dumps({"bench": f"plan_synthetic_{n}_draft", **first}))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--messages", type=int, default=5000)
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    args = parser.parse_args(argv)
    config = CompressionConfig()
    _synthetic(args.messages, args.runs, config)
    session = synthetic_session(args.messages)
    # the same session with phase 1 switched off: boundaries, roles and orphans alone
    no_prune = config.replace(prune_min_chars=10**12, args_truncate_over=10**12)
    print(
        json.dumps(
            {
                "bench": f"plan_synthetic_{args.messages}_boundaries_only",
                **time_plan(session, args.runs, no_prune),
            }
        )
    )
    if not args.corpus.is_dir():
        print(json.dumps({"bench": "plan_corpus", "skipped": f"{args.corpus} not found"}))
        return 0
    for path in sorted(args.corpus.glob("*.json")):
        try:
            messages = json.loads(path.read_text("utf-8"))["messages"]
        except (OSError, ValueError, KeyError) as exc:
            print(json.dumps({"bench": f"plan_corpus:{path.name}", "skipped": repr(exc)}))
            continue
        print(
            json.dumps(
                {"bench": f"plan_corpus:{path.name}", **time_plan(messages, args.runs, config)}
            )
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
