"""A real Hermes Agent whose provider reports no usage (session 38, review 1): after a
compaction Hermes waits for the provider's count of the compacted request before it
trusts its estimate again, and a response without usage ends that wait
(``update_from_response({})``). The engine kept waiting, so Hermes compacted once and
never again: its requests grew past the window.

Run by ``tests/test_integration_hermes_nousage.py`` with the python of ``.venv-hermes``:

    .venv-hermes/bin/python tests/hermes_nousage.py WORKDIR [builtin]

``WORKDIR/nousage.json`` holds Hermes's compaction count after each turn, the rough
size of every request and the window. ``builtin``: Hermes's own compressor.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import hermes_scenario
from hermes_scenario import CONFIG, REQUESTS, fake_agent, one_reply, serve

TURNS = 8
SIZE = 1_400  # an ask of ~9,000 tokens: a compaction at turn 6, another at 7
_chunks = hermes_scenario._chunks


def _without_usage(body: dict[str, Any]) -> list[dict[str, Any]]:
    chunks = _chunks(body)
    return [*chunks[:-1], {**chunks[-1], "usage": None}]


def main() -> None:
    workdir = Path(sys.argv[1])
    home = workdir / "home"
    home.mkdir(parents=True, exist_ok=True)
    config = CONFIG
    if sys.argv[2:] == ["builtin"]:  # Hermes's own compressor, for comparison
        config = config.replace("context:\n  engine: ctxledger\n", "")
    (home / "config.yaml").write_text(config)
    os.environ["HERMES_HOME"] = str(home)
    hermes_scenario._reply = one_reply
    hermes_scenario._chunks = _without_usage
    agent = fake_agent(serve())
    engine = agent.context_compressor
    filler = " ".join(f"alpha{i} beta gamma delta" for i in range(SIZE))
    history: list[dict[str, Any]] = []
    counts: list[int] = []
    for turn in range(TURNS):
        result = agent.run_conversation(
            f"Turn {turn}: review part {turn} of the alpha module.\n{filler}",
            conversation_history=history or None,
        )
        history = result["messages"]
        counts.append(engine.compression_count)
    sizes = [hermes_scenario._rough_tokens(r) for r in REQUESTS]
    out = {"counts": counts, "sizes": sizes, "window": engine.context_length}
    (workdir / "nousage.json").write_text(json.dumps(out | {"threshold": engine.threshold_tokens}))


if __name__ == "__main__":
    main()
