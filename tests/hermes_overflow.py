"""A real Hermes Agent whose provider refuses one request with a context-length error
while Hermes measured it under its threshold (session 38).

Run by ``tests/test_integration_hermes_overflow.py`` with the python of ``.venv-hermes``:

    .venv-hermes/bin/python tests/hermes_overflow.py WORKDIR

The fake upstream of ``hermes_scenario.py`` (a recall call a turn: the ledger chain
starts at turn 1, with the window Hermes has) refuses the first request of turn 5 once
(HTTP 400, ``context_length_exceeded``, stating a window of 60,000 tokens where Hermes
has 64,000: Hermes takes it with ``update_model`` before it compacts). Hermes's
recovery compacts
(``compress(force=False)`` with no yes from its check) and sends the request again.
``WORKDIR/overflow.json`` holds every chat request, which one was refused, Hermes's
compaction count and the ledger.

Then (review 1) a second agent with ``compression.enabled: false`` goes on with the
conversation: its first request is refused, Hermes gives the turn up ("Run /compress"),
and the TUI's ``/compress`` (``_compress_context``, ``force=False``) follows: no answer
to the refusal. ``WORKDIR/overflow.json`` adds what that turn said and the ledger root.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import hermes_scenario
from helpers.asgi import request_body, respond
from hermes_scenario import CONFIG, REQUESTS, fake_agent, serve

REFUSED: list[int] = []  # the index in REQUESTS of each refused request
REFUSE: list[bool] = []  # refuse the next chat request
TURNS = 5
ERROR = {
    "error": {
        "message": "This model's maximum context length is 60000 tokens. However, your "
        "messages resulted in 71234 tokens. Please reduce the length of the messages.",
        "type": "invalid_request_error",
        "code": "context_length_exceeded",
    }
}
_serve_turn = hermes_scenario.app


async def _app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http" or not scope["path"].endswith("/chat/completions") or not REFUSE:
        await _serve_turn(scope, receive, send)
        return
    body = await request_body(receive)
    REFUSE.clear()
    REFUSED.append(len(REQUESTS))
    REQUESTS.append(json.loads(body or b"{}"))
    await respond(send, 400, "application/json", json.dumps(ERROR).encode())


def _compression_off(home: Path, url: str, history: list[dict[str, Any]]) -> dict[str, Any]:
    """A second agent, compression off: its request refused, then the TUI's /compress."""
    (home / "config.yaml").write_text(CONFIG + "compression:\n  enabled: false\n")
    agent = fake_agent(url)
    REFUSE.append(True)
    result = agent.run_conversation("Turn 6: and part 6?", conversation_history=history)
    agent._compress_context(result["messages"], None, approx_tokens=30_000)  # the TUI's
    engine = agent.context_compressor
    engine.on_session_end(agent.session_id, result["messages"])
    return {"said": result.get("error"), "root": engine._root, "left": engine._shared.refused}


def main() -> None:
    workdir = Path(sys.argv[1])
    home = hermes_scenario.hermes_home(workdir)
    hermes_scenario.app = _app
    url = serve()
    agent = fake_agent(url)
    engine = agent.context_compressor
    filler = " ".join(f"alpha{i} beta gamma delta" for i in range(600))
    history: list[dict[str, Any]] = []
    counts: list[int] = []
    for turn in range(TURNS):
        if turn == TURNS - 1:  # the first request of the last turn is refused
            REFUSE.append(True)
        result = agent.run_conversation(
            f"Turn {turn}: review part {turn} of the alpha module.\n{filler}",
            conversation_history=history or None,
        )
        history = result["messages"]
        counts.append(engine.compression_count)
    engine.on_session_end(agent.session_id, history)
    out = {"db": str(home / "ctxledger.ledger.db"), "root": engine._root, "counts": counts}
    out |= {"requests": REQUESTS, "refused": REFUSED[:], "threshold": engine.threshold_tokens}
    out["off"] = _compression_off(home, url, history)
    (workdir / "overflow.json").write_text(json.dumps(out))


if __name__ == "__main__":
    main()
