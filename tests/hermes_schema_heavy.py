"""A real Hermes Agent whose requests carry a large incompressible part (a long system
prompt standing in for a schema-heavy tool set) that its rough estimate counts at ~4
characters a token while the provider counts fewer (session 38, Hermes's #36718).

Run by ``tests/test_integration_hermes_schema_heavy.py`` with the python of
``.venv-hermes``:

    .venv-hermes/bin/python tests/hermes_schema_heavy.py WORKDIR

The fake upstream of ``hermes_scenario.py`` answers each ask in one reply and reports
60 % of its rough count as the prompt's tokens. ``WORKDIR/heavy.json`` holds Hermes's
compaction count after each turn, the prompt counts reported and the ledger.

Then (review 1; in this process, which saves a Hermes start-up) a second agent, its
usual 64K window and no persona, on a provider that reports no usage: after a
compaction Hermes waits for the compacted request's count, and a response without
usage (``update_from_response({})``) ends the wait. The engine kept waiting: one
compaction, then requests past the window. ``heavy.json``'s ``no_usage`` holds its
compaction counts, the rough size of its requests and its threshold.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import hermes_scenario
from hermes_scenario import CONFIG, REQUESTS, fake_agent, one_reply, serve

TURNS = 12
HUGE = 10  # the turn whose ask is long
_count = hermes_scenario._rough_tokens
_chunks = hermes_scenario._chunks


def _provider_count(body: dict[str, Any]) -> int:
    return _count(body) * 3 // 5


def _without_usage(body: dict[str, Any]) -> list[dict[str, Any]]:
    chunks = _chunks(body)
    return [*chunks[:-1], {**chunks[-1], "usage": None}]


def _no_usage(home: Path, url: str) -> dict[str, Any]:
    """Eight turns of ~9,000 tokens each: compactions at turns 6 and 7."""
    (home / "config.yaml").write_text(CONFIG)
    hermes_scenario._rough_tokens, hermes_scenario._chunks = _count, _without_usage
    first = len(REQUESTS)
    agent = fake_agent(url)
    engine = agent.context_compressor
    filler = " ".join(f"alpha{i} beta gamma delta" for i in range(1_400))
    history: list[dict[str, Any]] = []
    counts: list[int] = []
    for turn in range(8):
        result = agent.run_conversation(
            f"Turn {turn}: review part {turn} of the beta module.\n{filler}",
            conversation_history=history or None,
        )
        history = result["messages"]
        counts.append(engine.compression_count)
    sizes = [_count(r) for r in REQUESTS[first:]]
    return {"counts": counts, "sizes": sizes, "threshold": engine.threshold_tokens}


def main() -> None:
    workdir = Path(sys.argv[1])
    config = CONFIG.replace("64000", "200000") + "context_file_max_chars: 400000\n"
    if sys.argv[2:] == ["builtin"]:  # Hermes's own compressor, for comparison
        config = config.replace("context:\n  engine: ctxledger\n", "")
    home = hermes_scenario.hermes_home(workdir, config)
    # a long persona: its system prompt, counted by every estimate of Hermes's
    rules = " ".join(f"rule{i}: keep the alpha module tidy." for i in range(6_900))
    (home / "SOUL.md").write_text(f"You are a careful reviewer.\n{rules}\n")
    hermes_scenario._reply = one_reply
    hermes_scenario._rough_tokens = _provider_count
    url = serve()
    agent = fake_agent(url, load_soul_identity=True)
    engine = agent.context_compressor
    history: list[dict[str, Any]] = []
    counts: list[int] = []
    for turn in range(TURNS):
        size = 7_000 if turn == HUGE else 500  # one ask pasting a long log
        filler = " ".join(f"alpha{i} beta gamma" for i in range(size))
        result = agent.run_conversation(
            f"Turn {turn}: review part {turn} of the alpha module.\n{filler}",
            conversation_history=history or None,
        )
        history = result["messages"]
        counts.append(engine.compression_count)
    engine.on_session_end(agent.session_id, history)
    out = {"db": str(home / "ctxledger.ledger.db"), "root": getattr(engine, "_root", None)}
    out["counts"] = counts
    out["prompts"] = [_provider_count(r) for r in REQUESTS]
    out["threshold"] = engine.threshold_tokens
    out["no_usage"] = _no_usage(home, url)
    (workdir / "heavy.json").write_text(json.dumps(out))


if __name__ == "__main__":
    main()
