"""A real Hermes Agent (its own context compressor) as a client of ``ctxledger serve``.

Run by ``tests/test_integration_hermes_proxy.py`` with the python of ``.venv-hermes``:

    .venv-hermes/bin/python tests/hermes_proxy_client.py WORKDIR

A fake OpenAI-compatible upstream and the proxy (``create_app``) are served by uvicorn
on 127.0.0.1 in threads of this process; Hermes's ``AIAgent`` points at the proxy. The
model answers the first ask with two parallel ``todo`` calls in one stream (its own
spacing in the arguments, text with a trailing newline), then a final answer; a second
ask follows on the returned history. Writes ``WORKDIR/result.json``: the paths the
upstream was asked for, the final answers and the ledger's path. (What the upstream is
sent is the ledger's view, not Hermes's copy: Hermes's own spelling is seen only by
the proxy's matching.) Nothing here talks to
the internet.
"""

from __future__ import annotations

import copy
import json
import os
import sys
from pathlib import Path
from typing import Any

from helpers.asgi import request_body, respond, serve_lifespan
from helpers.uvicorn_thread import serving
from hermes_scenario import hermes_home

CONFIG = "model:\n  context_length: 64000\nagent:\n  environment_probe: false\n"
CALLS = [
    ("call_1", '{ "todos": [ {"id": "1", "content": "read the spec", "status": "pending"} ] }'),
    ("call_2", '{"todos": [{"status": "pending", "id": "2", "content": "write the test"}],'
     ' "merge": true}'),
]  # fmt: skip
REPLIES: list[dict[str, Any]] = [
    {"content": "Planning it.\n", "tool_calls": CALLS},
    {"content": "Planned: two items.\n"},
    {"content": "Next: read the spec."},
]
SEEN: list[str] = []
REQUESTS: list[dict[str, Any]] = []


def _chunks(reply: dict[str, Any]) -> list[dict[str, Any]]:
    base = {"id": f"c{len(REQUESTS)}", "object": "chat.completion.chunk", "created": 1}
    base["model"] = "fake-model"
    out = [{**base, "choices": [{"index": 0, "delta": {"role": "assistant"}}]}]
    out[0]["choices"][0]["delta"]["content"] = reply["content"]
    for i, (call_id, args) in enumerate(reply.get("tool_calls", ())):
        head = {"index": i, "id": call_id, "type": "function"}
        head["function"] = {"name": "todo", "arguments": ""}
        for delta in ({"tool_calls": [head]}, {"tool_calls": [{"index": i, "function": {"arguments": args}}]}):  # fmt: skip
            out.append({**base, "choices": [{"index": 0, "delta": delta}]})
    finish = "tool_calls" if reply.get("tool_calls") else "stop"
    out.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
    usage = {"prompt_tokens": 900, "completion_tokens": 20, "total_tokens": 920}
    out.append({**base, "choices": [], "usage": usage})
    return out


async def upstream(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":
        await serve_lifespan(receive, send)
        return
    body = await request_body(receive)
    SEEN.append(scope["path"])
    if scope["path"].endswith("/models"):
        models = {"object": "list", "data": [{"id": "fake-model", "object": "model"}]}
        await respond(send, 200, "application/json", json.dumps(models).encode())
        return
    REQUESTS.append(copy.deepcopy(json.loads(body)))
    reply = REPLIES[len(REQUESTS) - 1] if len(REQUESTS) <= len(REPLIES) else {"content": "ok"}
    start = {"type": "http.response.start", "status": 200}  # (a stream: many body messages)
    await send({**start, "headers": [(b"content-type", b"text/event-stream")]})
    for chunk in _chunks(reply):
        data = f"data: {json.dumps(chunk)}\n\n".encode()
        await send({"type": "http.response.body", "body": data, "more_body": True})
    await send({"type": "http.response.body", "body": b"data: [DONE]\n\n"})


def main() -> None:
    workdir = Path(sys.argv[1])
    hermes_home(workdir, CONFIG)
    os.environ.pop("CTXLEDGER_DB", None)
    from ctxledger import ContextService
    from ctxledger.server import create_app

    db = workdir / "proxy.db"
    service = ContextService.open(db)
    with serving(upstream) as up:
        app = create_app(service, upstream=f"http://127.0.0.1:{up}/v1")
        with serving(app) as port:
            from run_agent import AIAgent

            agent = AIAgent(
                base_url=f"http://127.0.0.1:{port}/v1",
                api_key="sk-fake",
                model="fake-model",
                provider="custom",
                quiet_mode=True,
                skip_memory=True,
                skip_context_files=True,
                enabled_toolsets=["todo"],
            )
            first = agent.run_conversation("Plan the work.")
            second = agent.run_conversation("And next?", conversation_history=first["messages"])
    finals = [first.get("final_response"), second.get("final_response")]
    result = {"db": str(db), "paths": SEEN, "finals": finals}
    (workdir / "result.json").write_text(json.dumps(result))


if __name__ == "__main__":
    main()
