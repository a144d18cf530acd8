"""A real Hermes Agent whose provider refuses four requests of one turn for their size,
with a fallback activation between the third and the fourth (session 39).

Run by ``tests/test_integration_hermes_fallback.py`` with the python of ``.venv-hermes``:

    .venv-hermes/bin/python tests/hermes_fallback.py WORKDIR

Hermes 0.19.0 answers at most three size refusals of a turn by compacting
(``max_compression_attempts``), and zeroes that count when it activates a fallback
provider, but not when empty replies made it (review 1). The fake upstream answers the
turn's chat requests by a script: a refusal (HTTP 400, ``context_length_exceeded``,
stating 60,000 tokens), a ``recall`` call (new messages for the next compaction to
take), a 429 (Hermes activates its fallback model, on the same upstream), a final
answer; a second agent gets empty replies where the first got the 429. ctxledger's
tail is kept small (``CTXLEDGER_TARGET_RATIO``) so that each compaction makes progress,
as Hermes asks before it retries. ``WORKDIR/fallback.json`` holds, for each agent, the
requests' models and outcomes, Hermes's compaction count, whether the engine still
waits for a compaction for the last refusal; and the ledger.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import hermes_scenario
from helpers.asgi import request_body, respond
from helpers.chat_stream import sse_events
from hermes_overflow import ERROR  # (400, context_length_exceeded, stating 60,000)
from hermes_scenario import fake_agent, serve, tui_compress

#: what the upstream does with each chat request of the turn, in order
SCRIPT = ["refuse", "recall", "refuse", "recall", "refuse", "recall", "limit", "refuse", "answer"]
#: the second agent's: empty replies (as long as the primary model is asked) where the
#: first's had a 429, a fallback Hermes does not zero its compaction attempts for
EMPTY = [*SCRIPT[:6], "empty", "refuse", "answer"]
#: the third agent's: a long reply with its recall call (Hermes's check before the next
#: call compacts: its first attempt of the turn), then three refusals (its last given up)
PRE_API = ["grow", "recall", "refuse", "recall", "refuse", "recall", "refuse"]
GROWN = " ".join(f"omega{i} epsilon zeta" for i in range(7000))
PLAN: list[str] = []
DONE: list[tuple[str, str]] = []  # (the request's model, what was done)
LIMITED = {"error": {"message": "Rate limit reached", "type": "rate_limit_error"}}
_serve = hermes_scenario.app


async def _app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http" or not scope["path"].endswith("/chat/completions"):
        await _serve(scope, receive, send)
        return
    body = await request_body(receive)
    request = json.loads(body or b"{}")
    model = str(request.get("model"))
    if PLAN[:1] == ["empty"] and model == "fallback-model":
        PLAN.pop(0)
    step = (PLAN.pop(0) if PLAN[:1] != ["empty"] else "empty") if PLAN else "answer"
    DONE.append((model, step))
    if step in ("refuse", "limit"):
        status, error = (400, ERROR) if step == "refuse" else (429, LIMITED)
        await respond(send, status, "application/json", json.dumps(error).encode())
        return
    reply = (
        hermes_scenario._call("recall", {"query": "part 1", "limit": 5})
        if step in ("recall", "grow")
        else {"content": "" if step == "empty" else "Done: the alpha module is reviewed."}
    )
    if step == "grow":
        reply["content"] = GROWN
    saved = hermes_scenario._reply
    hermes_scenario._reply = lambda _: reply
    try:
        data = b"".join(sse_events(hermes_scenario._chunks(request)))
    finally:
        hermes_scenario._reply = saved
    await respond(send, 200, "text/event-stream", data)


class _Time:
    """``time`` for Hermes's loop, its pauses cut short (2 s between compaction retries)."""

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)

    @staticmethod
    def sleep(seconds: float) -> None:
        time.sleep(min(seconds, 0.01))


def _turn(url: str, script: list[str], session: str) -> dict[str, Any]:
    """One agent's turn under `script`: what was done, its count, what the ledger holds."""
    PLAN[:], DONE[:] = script, []
    fallback = {"provider": "custom", "model": "fallback-model", "base_url": url}
    agent = fake_agent(url, fallback_model=fallback | {"api_key": "sk-fake"}, session_id=session)
    filler = " ".join(f"alpha{i} beta gamma delta" for i in range(150))
    history: list[dict[str, Any]] = []
    for turn in range(12):
        history.append({"role": "user", "content": f"ask {turn}: part {turn}.\n{filler}"})
        history.append({"role": "assistant", "content": f"answer {turn}: done.\n{filler}"})
    result = agent.run_conversation("Turn 12: and the last part?", conversation_history=history)
    engine = agent.context_compressor
    pending = engine._hermes_session in engine._shared.refused  # (before the session's end)
    count = engine.compression_count
    if script is PRE_API:  # then the TUI's /compress (force=False): no answer to a refusal
        tui_compress(agent, result["messages"])
    engine.on_session_end(agent.session_id, result["messages"])
    out = {"root": engine._root, "done": list(DONE), "count": count}
    return out | {"error": result.get("error"), "pending": pending}


def main() -> None:
    workdir = Path(sys.argv[1])
    os.environ["CTXLEDGER_TARGET_RATIO"] = "0.1"  # a small tail: each compaction progresses
    home = hermes_scenario.hermes_home(workdir)
    from agent import conversation_loop

    conversation_loop.time = _Time()  # type: ignore[assignment]
    hermes_scenario.app = _app
    url = serve()
    out = {"db": str(home / "ctxledger.ledger.db"), "limit": _turn(url, SCRIPT, "limit")}
    out["empty"] = _turn(url, EMPTY, "empty")
    out["pre_api"] = _turn(url, PRE_API, "pre-api")
    (workdir / "fallback.json").write_text(json.dumps(out))


if __name__ == "__main__":
    main()
