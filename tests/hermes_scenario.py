"""Drive a real Hermes Agent (hermes-agent from PyPI) with the ctxledger context engine.

Run by ``tests/test_integration_hermes.py`` with the python of ``.venv-hermes`` (Hermes
pins its own openai and friends, so it lives apart from the project's ``.venv``):

    .venv-hermes/bin/python tests/hermes_scenario.py WORKDIR TURNS

It writes ``WORKDIR/home/config.yaml`` (plugin enabled, ``context.engine: ctxledger``,
a 64K window), serves a fake OpenAI-compatible upstream on 127.0.0.1 (an ASGI app under
uvicorn in a thread: streamed chat completions with usage), runs ``TURNS`` user turns
through ``AIAgent.run_conversation`` and writes ``WORKDIR/result.json``: what the
upstream was sent and what the engine saw (Hermes prints to stdout itself). Nothing here talks to the internet.
"""

from __future__ import annotations

import copy
import json
import os
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any

from helpers.asgi import request_body, respond, serve_lifespan
from helpers.chat_stream import chat_chunks, sse_events

CONFIG = """\
model:
  context_length: 64000
auxiliary:
  compression:
    context_length: 64000
plugins:
  enabled: [ctxledger]
context:
  engine: ctxledger
agent:
  environment_probe: false
"""

#: every chat request the upstream received (the parsed JSON body)
REQUESTS: list[dict[str, Any]] = []


def _rough_tokens(body: dict[str, Any]) -> int:
    """The prompt size a provider would report: ~4 characters a token of what was sent."""
    return (
        len(json.dumps(body.get("messages", []))) // 4 + len(json.dumps(body.get("tools", []))) // 4
    )


def _call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    call = {
        "id": f"call_{len(REQUESTS)}",
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }
    return {"content": None, "tool_calls": [call]}


def _compacted_hit(message: dict[str, Any]) -> str | None:
    """The compaction id of the first compacted hit of a recall answer, if any."""
    try:
        answer = json.loads(str(message.get("content") or ""))
    except ValueError:
        return None
    hits = answer.get("hits") if isinstance(answer, dict) else None
    return next((h["compacted_by"] for h in hits or () if h.get("compacted_by")), None)


def _reply(body: dict[str, Any]) -> dict[str, Any]:
    """The scripted assistant turn: a recall call after each user ask; when recall finds a
    compacted message, an expand_compaction call for it; then a final answer."""
    messages = body.get("messages") or []
    last = messages[-1] if messages else {}
    n = sum(1 for m in messages if m.get("role") == "user")
    tools = {t.get("function", {}).get("name") for t in body.get("tools") or []}
    if (
        last.get("role") == "user"
        and "recall" in tools
        and str(last.get("content", "")).startswith("Turn")
    ):
        return _call("recall", {"query": "part 1 of the alpha module", "limit": 50})
    compaction = _compacted_hit(last) if last.get("role") == "tool" else None
    if compaction and "expand_compaction" in tools:
        return _call("expand_compaction", {"compaction_id": compaction, "max_chars": 200})
    return {"content": f"Done with step {n}: the alpha module is reviewed."}


def one_reply(body: dict[str, Any]) -> dict[str, Any]:
    """An answer with no tool call (for ``_reply``: a turn is one model call)."""
    n = sum(1 for m in body.get("messages") or [] if m.get("role") == "user")
    return {"content": f"Done with step {n}: part {n} is reviewed."}


def _chunks(body: dict[str, Any]) -> list[dict[str, Any]]:
    prompt = _rough_tokens(body)
    usage = {"prompt_tokens": prompt, "completion_tokens": 20, "total_tokens": prompt + 20}
    model = body.get("model", "fake-model")
    return chat_chunks(_reply(body), chunk_id=f"chatcmpl-{len(REQUESTS)}", model=model, usage=usage)


def hermes_home(workdir: Path, config: str = CONFIG) -> Path:
    """The Hermes home of a scenario under `workdir`, holding `config` as its
    config.yaml, named in ``HERMES_HOME`` for the Hermes this process runs."""
    home = workdir / "home"
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.yaml").write_text(config)
    os.environ["HERMES_HOME"] = str(home)
    return home


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """A fake OpenAI-compatible upstream: /models and streamed /chat/completions."""
    if scope["type"] == "lifespan":
        await serve_lifespan(receive, send)
        return
    body = await request_body(receive)
    path = scope["path"]
    if path.endswith("/models"):
        payload = {
            "object": "list",
            "data": [{"id": "fake-model", "object": "model", "context_length": 64000}],
        }
        await respond(send, 200, "application/json", json.dumps(payload).encode())
        return
    if not path.endswith("/chat/completions"):
        await respond(send, 404, "application/json", b'{"error": {"message": "not found"}}')
        return
    request = json.loads(body or b"{}")
    REQUESTS.append(copy.deepcopy(request))
    if not request.get("stream"):
        chunks = _chunks(request)
        msg = {
            "role": "assistant",
            **{k: v for k, v in chunks[0]["choices"][0]["delta"].items() if k != "role"},
        }
        for call in msg.get("tool_calls") or []:
            call.pop("index", None)
        payload = {
            "id": chunks[0]["id"],
            "object": "chat.completion",
            "created": 1_700_000_000,
            "model": request.get("model"),
            "usage": chunks[-1]["usage"],
            "choices": [
                {
                    "index": 0,
                    "message": msg,
                    "finish_reason": chunks[1]["choices"][0]["finish_reason"],
                }
            ],
        }
        await respond(send, 200, "application/json", json.dumps(payload).encode())
        return
    await respond(send, 200, "text/event-stream", b"".join(sse_events(_chunks(request))))


def fake_agent(base_url: str, **extra: Any) -> Any:
    """Hermes's own agent on the fake upstream at `base_url`, ctxledger as its context
    engine, no memory or context files (`extra`: a session id, a session store …)."""
    from run_agent import AIAgent

    return AIAgent(
        base_url=base_url,
        api_key="sk-fake",
        model="fake-model",
        provider="custom",
        quiet_mode=True,
        skip_memory=True,
        skip_context_files=True,
        enabled_toolsets=["context_engine"],
        **extra,
    )


def serve() -> str:
    import uvicorn

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    )
    threading.Thread(target=server.run, daemon=True).start()
    deadline = time.monotonic() + 20
    while not server.started:
        if time.monotonic() > deadline:
            raise RuntimeError("the fake upstream did not start")
        time.sleep(0.05)
    return f"http://127.0.0.1:{port}/v1"


def tui_compress(agent: Any, history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Hermes's TUI's ``/compress`` on `agent` (its ``_compress_session_history``, which
    calls ``_compress_context`` with ``force=False``), its session `history`: the list
    the TUI's session holds after it."""
    from tui_gateway import server

    session = {"agent": agent, "history": list(history), "history_lock": threading.Lock()}
    session["history_version"] = 0
    server._compress_session_history(session)
    return list(session["history"])


def compress_inside_a_running_loop(engine: Any, history: list[dict[str, Any]]) -> dict[str, Any]:
    """A gateway calls the synchronous ``compress`` from a thread whose asyncio loop runs:
    a per-agent copy, bound to a new conversation, compacts the same history there."""
    import asyncio

    engine.on_session_start("gateway-session", platform="telegram")
    big = [{"role": "user", "content": "alpha " * engine.threshold_tokens}]
    preflight = [
        engine.should_compress_preflight(history[:2]),
        engine.should_compress_preflight(big),
    ]

    async def inside() -> list[dict[str, Any]]:
        return engine.compress(copy.deepcopy(history), focus_topic="alpha module", force=True)

    compressed = asyncio.run(inside())
    bad = [{"role": "robot", "content": "?"}]
    refused = engine.compress(bad) is bad and engine._last_compress_aborted
    out = {
        "preflight_small_big": preflight,
        "refused_bad_input": refused,
        "error": engine._last_summary_error,
        "before": len(history),
        "after": len(compressed),
        "root": engine._root,
        "compression_count": engine.compression_count,
    }
    # a re-used tool-call id (tau-bench logs have them): repaired as by every entry point
    call = {"id": "call_0", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
    reused = [{"role": "user", "content": "list it twice"}]
    for _ in range(2):
        reused += [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "call_0", "content": "a.py"},
        ]
    kept = engine.compress([*reused, {"role": "assistant", "content": "twice"}])
    out["reused_ids_aborted"] = engine._last_compress_aborted
    ids: list[str] = []
    for m in kept:
        ids += [c["id"] for c in m.get("tool_calls") or ()]
        ids += [m["tool_call_id"]] if m["role"] == "tool" else []
    out["reused_ids_kept"] = ids
    return out


def summary_failures(workdir: Path, history: list[dict[str, Any]]) -> dict[str, Any]:
    """Hermes's own ``/compress`` report (``summarize_manual_compression``, which reads
    the engine's ``_last_compress_aborted``, ``_last_summary_fallback_used``,
    ``_last_summary_error``, ``_last_summary_dropped_count``) with ctxledger as its
    engine, when the summary fails and the compaction is abandoned or falls back."""
    from agent.manual_compression_feedback import summarize_manual_compression
    from helpers.failing import SecretSummarizer

    from ctxledger.integrations.hermes import CtxLedgerEngine

    out: dict[str, Any] = {}
    for name, failure_class in (("aborted", "auth"), ("fallback", "server")):
        engine = CtxLedgerEngine(db_path=workdir / f"{name}.ledger.db")
        engine.update_model("fake-model", 64_000)
        engine.on_session_start(f"{name}-session", platform="cli")

        def fail(svc: Any, failure_class: str = failure_class) -> None:
            # fails the first summary only: the next /compress summarizes
            svc.summarizer = svc.engine.summarizer = SecretSummarizer(failure_class)

        engine._shared.run(fail)
        compressed = engine.compress(copy.deepcopy(history), force=True)
        report = summarize_manual_compression(
            history, compressed, 1_000, 500, compression_state=engine
        )
        out[name] = {
            "aborted": engine._last_compress_aborted,
            "fallback": engine._last_summary_fallback_used,
            "error": engine._last_summary_error,
            "dropped": getattr(engine, "_last_summary_dropped_count", None),
            "report": report,
            "counts": [len(history), len(compressed)],
        }
        # a second /compress whose summary works: nothing of the failure is left
        more = [{"role": "user", "content": "And now?"}, {"role": "assistant", "content": "Done."}]
        engine.compress([*compressed, *more], force=True)
        out[name]["next"] = [
            engine._last_compress_aborted,
            engine._last_summary_fallback_used,
            engine._last_summary_error,
            engine._last_summary_dropped_count,
        ]
    out["raised"] = _a_compaction_that_raises(workdir, history)
    return out


class _Refusing:
    """A summarizer whose error is no summarizer failure: the plugin's own catch."""

    kind, model = "refusing", None

    async def summarize(self, request: Any) -> Any:
        from helpers.failing import ERROR

        from ctxledger.errors import InvalidInput

        raise InvalidInput(ERROR)


def _a_compaction_that_raises(workdir: Path, history: list[dict[str, Any]]) -> dict[str, Any]:
    """What the plugin keeps of an error it catches (its reason on one line, redacted)."""
    from ctxledger.integrations.hermes import CtxLedgerEngine

    engine = CtxLedgerEngine(db_path=workdir / "raised.ledger.db")
    engine.update_model("fake-model", 64_000)
    engine.on_session_start("raised-session", platform="cli")

    def refuse(svc: Any) -> None:
        svc.summarizer = svc.engine.summarizer = _Refusing()

    engine._shared.run(refuse)
    kept = engine.compress(copy.deepcopy(history), force=True)
    return {
        "aborted": engine._last_compress_aborted,
        "error": engine._last_summary_error,
        "counts": [len(history), len(kept)],
    }


def host_odd_values(engine: Any) -> dict[str, Any]:
    """What the host may hand over that is no number: a model Hermes knows no window of
    (0, None), usage figures that are NaN or infinity: each raised into the host's loop.
    A window under 1,024 set a threshold every compress then failed on; a negative or
    oversized figure was queued and failed the next compress; text or a bool was taken
    as a number ("12" as 12, True as 1)."""
    out: dict[str, Any] = {"raised": []}
    for window in (0, None, -5, 10**30, 512, 1023):
        try:
            engine.update_model("unknown-model", window)
            out.setdefault("thresholds", []).append(engine.threshold_tokens)
        except Exception as exc:  # the host would have crashed here
            out["raised"].append(f"update_model({window!r}): {exc!r}")
    out["compress_at_any_size"] = engine.should_compress(10**9)
    engine.update_model("fake-model", 64_000)
    pending = len(engine._pending)
    for usage in (
        {"prompt_tokens": float("nan")},
        {"prompt_tokens": 5, "completion_tokens": float("inf")},
        {"prompt_tokens": -5, "completion_tokens": 3},
        {"prompt_tokens": 10**13, "completion_tokens": 3},
        {"prompt_tokens": "12", "completion_tokens": 3},
        {"prompt_tokens": True, "completion_tokens": 3},
        {"prompt_tokens": 40, "completion_tokens": 2.7},
    ):
        try:
            engine.update_from_response(usage)
        except Exception as exc:
            out["raised"].append(f"update_from_response({usage!r}): {exc!r}")
    out["reports_kept"] = len(engine._pending) - pending
    # a blank CTXLEDGER_DB raised InvalidInput out of on_session_start (every other
    # hook logs a warning and carries on)
    from ctxledger.integrations.hermes import CtxLedgerEngine

    os.environ["CTXLEDGER_DB"] = "  "
    try:
        CtxLedgerEngine().on_session_start("blank-db", hermes_home=os.environ["HERMES_HOME"])
    except Exception as exc:
        out["raised"].append(f"on_session_start with a blank CTXLEDGER_DB: {exc!r}")
    finally:
        os.environ.pop("CTXLEDGER_DB")
    return out


def _entry_points() -> dict[str, str]:
    """The ``hermes_agent.plugins`` entry points installed in this venv (name -> module)."""
    from importlib.metadata import entry_points

    return {ep.name: ep.value for ep in entry_points(group="hermes_agent.plugins")}


def _conversation(agent: Any, turns: int) -> tuple[list[dict[str, Any]], list[str], list[int]]:
    """`turns` turns of ~6K tokens each through Hermes's own loop: the history, each
    turn's final reply, and how many upstream requests came before each turn that
    compacted."""
    engine = agent.context_compressor
    filler = " ".join(f"alpha{i} beta gamma delta" for i in range(1500))
    history: list[dict[str, Any]] = []
    finals: list[str] = []
    compress_at: list[int] = []
    for turn in range(turns):
        before = len(REQUESTS)
        count = engine.compression_count
        result = agent.run_conversation(
            f"Turn {turn}: review part {turn} of the alpha module.\n{filler}",
            conversation_history=history or None,
        )
        history = result["messages"]
        finals.append(str(result.get("final_response")))
        if engine.compression_count > count:
            compress_at.append(before)
    return history, finals, compress_at


def main() -> None:
    workdir, turns = Path(sys.argv[1]), int(sys.argv[2])
    home = hermes_home(workdir)
    os.environ.pop("CTXLEDGER_DB", None)
    base_url = serve()

    agent = fake_agent(base_url)
    engine = agent.context_compressor
    history, finals, compress_at = _conversation(agent, turns)
    agent.shutdown_memory_provider() if hasattr(agent, "shutdown_memory_provider") else None
    engine.on_session_end(agent.session_id, history)
    copied = copy.deepcopy(engine)
    in_loop = compress_inside_a_running_loop(copied, history)
    odd = host_odd_values(copy.deepcopy(engine))
    failures = summary_failures(workdir, history)
    (workdir / "result.json").write_text(
        json.dumps(
            {
                "engine": type(engine).__module__ + "." + type(engine).__name__,
                "entry_points": _entry_points(),
                "status": engine.get_status(),
                "engine_name": engine.name,
                "threshold_tokens": engine.threshold_tokens,
                "context_length": engine.context_length,
                "compression_count": engine.compression_count,
                "copy_shares_ledger": copied._shared is engine._shared
                and copied._known is not engine._known,
                "in_loop": in_loop,
                "host_odd_values": odd,
                "summary_failures": failures,
                "ledger_root": engine._root,
                "db": str(home / "ctxledger.ledger.db"),
                "finals": finals,
                "compress_at": compress_at,
                "requests": REQUESTS,
                "history": history,
                "tools": sorted(t["function"]["name"] for t in agent.tools or []),
            }
        )
    )


if __name__ == "__main__":
    main()
