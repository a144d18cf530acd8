"""Hermes's own conversation loop against a scripted local upstream (the ``loop`` op of
``tests/hermes_oracle.py``, run under ``.venv-hermes``'s python).

One input is one turn of a fresh ``AIAgent`` (built-in compressor, its summary call
answered with a fixed body) over ``history``: the upstream answers each chat request
with the next scripted response, a ``todo`` tool call or a final answer, with a
usage block whose prompt count is a share of Hermes's threshold, or none. Every
compaction Hermes asks for is recorded with the figure it passed and the place in the
loop that asked (``preflight`` at the turn's start, ``pre_api`` before a call,
``post_response`` after a response's tools ran). Nothing leaves 127.0.0.1.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import sys
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

#: the scripted responses of the running input, and the chat requests answered so far
SCRIPT: list[dict[str, Any]] = []
ANSWERED: list[dict[str, Any]] = []
THRESHOLD = [0]


def _response(n: int, step: dict[str, Any]) -> tuple[dict[str, Any], str, dict[str, int] | None]:
    if step["tool"]:
        arguments = json.dumps({"todos": [{"id": str(n), "content": "check", "status": "pending"}]})
        call = {"id": f"call_{n}", "type": "function"}
        call["function"] = {"name": "todo", "arguments": arguments}  # type: ignore[assignment]
        message: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": [call]}
        finish = "tool_calls"
    else:
        message, finish = {"role": "assistant", "content": f"Done {n}."}, "stop"
    share = step["prompt"]
    if share is None:
        return message, finish, None
    prompt = int(share * THRESHOLD[0])
    return (
        message,
        finish,
        {"prompt_tokens": prompt, "completion_tokens": 20, "total_tokens": prompt + 20},
    )


def _body(request: dict[str, Any]) -> tuple[bytes, str]:
    ANSWERED.append(request)
    n = len(ANSWERED)
    message, finish, usage = _response(n, SCRIPT[min(n, len(SCRIPT)) - 1])
    base = {"id": f"chatcmpl-{n}", "created": 1_700_000_000, "model": "local-model"}
    if not request.get("stream"):
        payload = {**base, "object": "chat.completion"}
        payload["choices"] = [{"index": 0, "message": message, "finish_reason": finish}]
        if usage:
            payload["usage"] = usage
        return json.dumps(payload).encode(), "application/json"
    delta = dict(message)
    if "tool_calls" in delta:
        delta["tool_calls"] = [{"index": i, **c} for i, c in enumerate(delta["tool_calls"])]
    chunk = {**base, "object": "chat.completion.chunk"}
    chunks = [
        {**chunk, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
        {**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]},
    ]
    if usage:
        chunks.append({**chunk, "choices": [], "usage": usage})
    data = b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks)
    return data + b"data: [DONE]\n\n", "text/event-stream"


class _Upstream(BaseHTTPRequestHandler):
    def log_message(self, *_: Any) -> None:
        return None

    def _send(self, status: int, data: bytes, ctype: str) -> None:
        self.send_response(status)
        self.send_header("content-type", ctype)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        models = {"object": "list", "data": [{"id": "local-model", "object": "model"}]}
        self._send(200, json.dumps(models).encode(), "application/json")

    def do_POST(self) -> None:
        request = json.loads(self.rfile.read(int(self.headers["content-length"])) or b"{}")
        if not self.path.endswith("/chat/completions") or "messages" not in request:
            self._send(404, b'{"error": {"message": "not found"}}', "application/json")
            return
        self._send(200, *_body(request))


_STATE: dict[str, Any] = {}


def _start() -> str:
    """The upstream and a HERMES_HOME of its own (config: the window), once per process."""
    if "url" not in _STATE:
        server = ThreadingHTTPServer(("127.0.0.1", 0), _Upstream)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        home = tempfile.mkdtemp(prefix="hermes-loop-")
        atexit.register(shutil.rmtree, home, True)  # (one a process: it was left behind)
        with open(os.path.join(home, "config.yaml"), "w") as f:
            f.write("model:\n  context_length: 200000\n")
        os.environ["HERMES_HOME"] = home
        _STATE["url"] = f"http://127.0.0.1:{server.server_address[1]}/v1"
    return str(_STATE["url"])


#: first line of the post-response check in each loop file (found in its source once)
_POST_LINE: dict[str, int] = {}


def _post_response_line(filename: str) -> int:
    """Where the post-response check starts: the line that tests the kept count before
    estimating (the pre-API check comes earlier in the loop body, and has no such test)."""
    if filename not in _POST_LINE:
        with open(filename, encoding="utf-8") as f:
            found = [n for n, text in enumerate(f, 1) if ".last_prompt_tokens > 0" in text]
        if len(found) != 1:
            raise RuntimeError(f"cannot tell the loop's checks apart in {filename}: {found}")
        _POST_LINE[filename] = found[0]
    return _POST_LINE[filename]


def _site(frame: Any) -> str:
    filename = frame.f_code.co_filename
    name = os.path.basename(filename)
    if name == "turn_context.py":
        return "preflight"
    if name == "conversation_loop.py":
        post = frame.f_lineno >= _post_response_line(filename)
        return "post_response" if post else "pre_api"
    return f"{name}:{frame.f_lineno}"


def loop(item: dict[str, Any]) -> dict[str, Any]:
    """``{"history": [...], "user": str, "steps": [{"tool": bool, "prompt": share|None}],
    "system": str}`` (optional) -> the compactions Hermes asked for and every size it judged
    (``should_compress``'s argument), with the responses answered by then and the
    place; its threshold, the system prompt and tools it sent, and the messages of its
    first request (``sent``), and whether its preflight's cheap gate let the estimate run."""
    url = _start()
    from agent.model_metadata import estimate_request_tokens_rough
    from run_agent import AIAgent

    agent = AIAgent(
        base_url=url,
        api_key="sk-oracle",
        model="local-model",
        provider="custom",
        quiet_mode=True,
        skip_memory=True,
        skip_context_files=True,
        enabled_toolsets=["todo"],
        tool_delay=0.0,
        max_iterations=12,
    )
    if item.get("system"):  # instead of the prompt Hermes would build for itself
        agent._cached_system_prompt = item["system"]
    compressor = agent.context_compressor
    compressor._generate_summary = lambda *_, **__: compressor._with_summary_prefix("## Goal\nx")
    THRESHOLD[0] = compressor.threshold_tokens
    SCRIPT[:] = item["steps"]
    ANSWERED.clear()
    asked: list[dict[str, Any]] = []
    compress = agent._compress_context

    def recording(messages: Any, system_message: Any, **kwargs: Any) -> Any:
        site = _site(sys._getframe(1))
        entry = {"responses": len(ANSWERED), "tokens": kwargs.get("approx_tokens"), "site": site}
        asked.append(entry)
        rows = len(messages)
        out = compress(messages, system_message, **kwargs)
        # what the turn's preflight re-estimates after the pass (rows before and after too)
        entry["rows"] = [rows, len(out[0])]
        entry["after"] = estimate_request_tokens_rough(
            out[0], system_prompt=out[1] or "", tools=agent.tools or None
        )
        return out

    agent._compress_context = recording  # type: ignore[method-assign]
    judged: list[dict[str, Any]] = []
    should_compress = compressor.should_compress

    def judging(prompt_tokens: Any = None) -> Any:
        site = _site(sys._getframe(1))
        judged.append({"responses": len(ANSWERED), "tokens": prompt_tokens, "site": site})
        return should_compress(prompt_tokens)

    compressor.should_compress = judging  # type: ignore[method-assign]
    from agent.turn_context import _should_run_preflight_estimate

    # whether the turn's cheap gate lets its preflight estimate run at all
    gate = _should_run_preflight_estimate(
        [*item["history"], {"role": "user", "content": item["user"]}],
        compressor.protect_first_n,
        compressor.protect_last_n,
        compressor.threshold_tokens,
    )
    result = agent.run_conversation(
        item["user"], conversation_history=[dict(m) for m in item["history"]]
    )
    first = ANSWERED[0]["messages"] if ANSWERED else []
    return {
        "threshold": THRESHOLD[0],
        "asked": asked,
        "judged": judged,
        "responses": len(ANSWERED),
        "system": first[0]["content"] if first and first[0]["role"] == "system" else "",
        "tools": agent.tools or [],
        "messages": json.loads(json.dumps(result.get("messages") or [], default=str)),
        "sent": json.loads(json.dumps(first, default=str)),
        "preflight_gate": gate,
    }
