"""Server benchmarks: what ``ctxledger serve`` adds to a turn.

Prints one JSON object per line: {"bench", "value", "unit", "baseline", "ratio", ...}.

* ``proxy_turn_p50`` / ``_p99``: one chat-completions turn through the proxy (find the
  session, append the new user message, preflight, send the view upstream, record the
  reply and usage) on a session of ``--messages`` messages (200 by default, growing
  by two per sample); the baseline is the same request sent by the same client
  straight to the same fake upstream. ``overhead_ms`` = value - baseline.
  ``cpu_ms`` is the same turn's CPU time (the machine may be shared; wall-clock
  figures then include waiting for a core, CPU figures do not).
* ``state_append_p50``: ``POST /v1/sessions/{id}/messages`` with one message; the
  baseline is ``await ContextService.append`` in-process on the same ledger.
* ``history_resend_p50``: CPU time of matching a resent history of ``--messages``
  messages, a third of them tool calls with 1.8 KB arguments, against the recorded one
  (``HistoryIndex.common_prefix``) when the client sends the calls back re-encoded and
  the texts trimmed, as Hermes Agent does; the baseline is the same history sent back
  as equal dicts.

Both run in-process over ``httpx.ASGITransport`` (the HTTP stack without a socket), so
the figures are the server's own cost; ``--tcp`` runs the same through uvicorn on
127.0.0.1 instead (socket and HTTP parsing included on both sides of the ratio).

Run: ``python bench/server_bench.py [--messages 200] [--samples 200] [--durability full|normal] [--tcp]``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import anyio
import httpx

if __package__ in (None, ""):  # run as a script: make the checkout importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from ctxledger import CompressionConfig, ContextService
from ctxledger.server import create_app
from ctxledger.server.history import HistoryIndex

Result = dict[str, Any]
REPLY = json.dumps(
    {
        "id": "chatcmpl-bench",
        "object": "chat.completion",
        "created": 0,
        "model": "gpt-4.1",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "ok, done."},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 4000, "completion_tokens": 4, "total_tokens": 4004},
    }
).encode()


async def fake_upstream(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """The cheapest possible model: reads the body, answers a fixed completion."""
    if scope["type"] != "http":
        return
    more = True
    while more:
        more = (await receive()).get("more_body", False)
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", b"application/json")],
        }
    )
    await send({"type": "http.response.body", "body": REPLY})


def _result(bench: str, value: float, baseline: float, unit: str, **extra: Any) -> Result:
    return {
        "bench": bench,
        "value": round(value, 4),
        "unit": unit,
        "baseline": round(baseline, 4),
        "ratio": round(value / baseline, 2) if baseline else None,
        **extra,
    }


def _q(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def _time(fn: Callable[[], Awaitable[object]]) -> tuple[float, float]:
    """(wall ms, CPU ms of this thread): in-process, client, server and upstream all run on
    this thread, so the CPU figure is their own cost even on a machine shared with others."""
    start, cpu = time.perf_counter(), time.thread_time()
    await fn()
    return (time.perf_counter() - start) * 1000, (time.thread_time() - cpu) * 1000


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def _uvicorn(app: Any, lifespan: str = "off") -> Any:
    import uvicorn

    port = _free_port()
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan=lifespan)
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)


@contextlib.asynccontextmanager
async def _clients(
    app: Any, tcp: bool
) -> AsyncIterator[tuple[httpx.AsyncClient, httpx.AsyncClient]]:
    """(client of the server, client of the upstream)."""
    if not tcp:
        async with (
            httpx.AsyncClient(
                transport=httpx.ASGITransport(app=app), base_url="http://proxy"
            ) as server,
            httpx.AsyncClient(
                transport=httpx.ASGITransport(app=fake_upstream), base_url="http://up"
            ) as up,
        ):
            yield server, up
        return
    # the app's lifespan closes its upstream client on the server thread's own loop
    with _uvicorn(app, "on") as server_url, _uvicorn(fake_upstream) as up_url:
        async with (
            httpx.AsyncClient(base_url=server_url) as server,
            httpx.AsyncClient(base_url=up_url) as up,
        ):
            yield server, up


def _history(n: int) -> list[dict[str, Any]]:
    msgs: list[dict[str, Any]] = [{"role": "system", "content": "You are a coding agent."}]
    for i in range(n // 2):
        msgs.append(
            {
                "role": "user",
                "content": f"step {i}: run the tests of module_{i} and fix what fails " * 3,
            }
        )
        msgs.append(
            {
                "role": "assistant",
                "content": f"module_{i}: 42 passed, 0 failed. Nothing to fix. " * 3,
            }
        )
    return msgs


async def bench_proxy(
    tmp: str, n_messages: int, samples: int, durability: str, tcp: bool
) -> list[Result]:
    svc = ContextService.open(
        os.path.join(tmp, "proxy.db"),
        config=CompressionConfig(context_length=1_000_000),
        durability=durability,
    )
    with _uvicorn(fake_upstream) if tcp else contextlib.nullcontext("http://up") as up_url:
        transport = None if tcp else httpx.ASGITransport(app=fake_upstream)
        app = create_app(svc, upstream=f"{up_url}/v1", transport=transport)
        history = _history(n_messages)
        headers = {"X-Ctxledger-Session": "bench", "Authorization": "Bearer sk-bench"}
        proxied: list[tuple[float, float]] = []
        direct: list[tuple[float, float]] = []
        async with _clients(app, tcp) as (server, up):
            await server.post(
                "/v1/chat/completions",
                json={"model": "gpt-4.1", "messages": history},
                headers=headers,
            )
            history.append({"role": "assistant", "content": "ok, done."})
            for i in range(samples + 20):
                history.append({"role": "user", "content": f"next step {i}: continue"})
                body = {"model": "gpt-4.1", "messages": history}
                d = await _time(
                    lambda b=body: up.post("/v1/chat/completions", json=b, headers=headers)
                )  # type: ignore[misc]
                p = await _time(
                    lambda b=body: server.post("/v1/chat/completions", json=b, headers=headers)
                )  # type: ignore[misc]
                history.append({"role": "assistant", "content": "ok, done."})
                if i >= 20:  # warm-up
                    direct.append(d)
                    proxied.append(p)
        live = len(svc.ledger.transcript.session(svc.tip("bench")).live)
        if not tcp:
            await app.state.ctx.aclose()
        await svc.aclose()
    extra = {"messages_from": n_messages, "messages_to": live, "durability": durability, "tcp": tcp}
    return _proxy_results(proxied, direct, tcp, extra)


def _proxy_results(
    proxied: list[tuple[float, float]],
    direct: list[tuple[float, float]],
    tcp: bool,
    extra: dict[str, Any],
) -> list[Result]:
    out = []
    for name, q in (("p50", 0.5), ("p99", 0.99)):
        value, base = _q([w for w, _ in proxied], q), _q([w for w, _ in direct], q)
        cpu, cpu_base = _q([c for _, c in proxied], q), _q([c for _, c in direct], q)
        cpu_fields = (
            {}
            if tcp  # the server runs on other threads: this thread's CPU says nothing about it
            else {
                "cpu_ms": round(cpu, 3),
                "cpu_baseline_ms": round(cpu_base, 3),
                "cpu_overhead_ms": round(cpu - cpu_base, 3),
            }
        )
        out.append(
            _result(
                f"proxy_turn_{name}",
                value,
                base,
                "ms",
                overhead_ms=round(value - base, 3),
                **cpu_fields,
                **extra,
            )
        )
    return out


async def bench_append(tmp: str, samples: int, durability: str, tcp: bool) -> list[Result]:
    svc = ContextService.open(os.path.join(tmp, "state.db"), durability=durability)
    app = create_app(svc)
    sid = await svc.start_session(model="gpt-4.1", context_length=1_000_000)
    msg = {"role": "user", "content": "run the tests again please"}
    over_http: list[tuple[float, float]] = []
    in_process: list[tuple[float, float]] = []
    async with _clients(app, tcp) as (server, _):
        for i in range(samples + 20):
            h = await _time(
                lambda: server.post(f"/v1/sessions/{sid}/messages", json={"messages": [msg]})
            )
            d = await _time(lambda: svc.append(sid, [msg]))
            if i >= 20:
                over_http.append(h)
                in_process.append(d)
    if not tcp:
        await app.state.ctx.aclose()
    await svc.aclose()
    value, base = (
        statistics.median(w for w, _ in over_http),
        statistics.median(w for w, _ in in_process),
    )
    cpu, cpu_base = (
        statistics.median(c for _, c in over_http),
        statistics.median(c for _, c in in_process),
    )
    return [
        _result(
            "state_append_p50",
            value,
            base,
            "ms",
            overhead_ms=round(value - base, 3),
            **(
                {}
                if tcp
                else {
                    "cpu_ms": round(cpu, 3),
                    "cpu_baseline_ms": round(cpu_base, 3),
                    "cpu_overhead_ms": round(cpu - cpu_base, 3),
                }
            ),
            durability=durability,
            tcp=tcp,
        )
    ]


def _tool_history(n: int, hermes: bool) -> list[dict[str, Any]]:
    """`n` messages of asks, calls and results; `hermes`: as Hermes sends them back."""
    out: list[dict[str, Any]] = []
    for i in range(n // 3):
        args = {"path": f"f{i}.py", "content": "x = 1\n" * 300, "mode": "w"}
        text = (
            json.dumps(args, separators=(",", ":"), sort_keys=True) if hermes else json.dumps(args)
        )
        call = {"id": f"c{i}", "type": "function", "function": {"name": "write", "arguments": text}}
        said = f"Writing f{i}.py." if hermes else f"Writing f{i}.py.\n"
        out.append({"role": "user", "content": f"step {i}"})
        out.append({"role": "assistant", "content": said, "tool_calls": [call]})
        out.append({"role": "tool", "tool_call_id": f"c{i}", "content": "ok"})
    return out


def bench_history(n_messages: int, samples: int) -> list[Result]:
    recorded = _tool_history(n_messages, hermes=False)
    cpu: dict[bool, list[float]] = {False: [], True: []}
    for _ in range(max(9, samples // 20)):
        for hermes in (False, True):
            client = json.loads(json.dumps(_tool_history(n_messages, hermes)))  # new strings
            start = time.thread_time()
            common = HistoryIndex.common_prefix(recorded, client)
            cpu[hermes].append((time.thread_time() - start) * 1000)
            assert common == len(recorded)
    value, base = statistics.median(cpu[True]), statistics.median(cpu[False])
    return [_result("history_resend_p50", value, base, "ms", messages=len(recorded), cpu=True)]


async def main_async(n_messages: int, samples: int, durability: str, tcp: bool) -> list[Result]:
    with tempfile.TemporaryDirectory() as tmp:
        return [
            *await bench_proxy(tmp, n_messages, samples, durability, tcp),
            *await bench_append(tmp, samples, durability, tcp),
            *bench_history(n_messages, samples),
        ]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--messages", type=int, default=200)
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--durability", choices=("full", "normal"), default="full")
    parser.add_argument(
        "--tcp", action="store_true", help="through uvicorn on 127.0.0.1 instead of in-process"
    )
    args = parser.parse_args(argv)
    for result in anyio.run(main_async, args.messages, args.samples, args.durability, args.tcp):
        print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
