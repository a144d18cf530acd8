"""``ctxledger serve`` for real: uvicorn on 127.0.0.1 with a random port, driven over TCP.

The fake upstream runs under uvicorn too (in a thread), so the proxy streams through
real sockets end to end.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest
from helpers.fake_upstream import FakeUpstream
from helpers.http_writers import run_writers, written
from helpers.uvicorn_thread import free_port, serving

CLI = [str(Path(sys.executable).parent / "ctxledger")]
TOKEN = "smoke-test-token-0123456789abcdef"


@pytest.fixture
def upstream() -> Iterator[tuple[FakeUpstream, int]]:
    fake = FakeUpstream()
    with serving(fake) as port:
        yield fake, port


def _wait_healthy(base: str, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(
                f"server exited early: {proc.stderr.read().decode() if proc.stderr else ''}"
            )
        try:
            if httpx.get(base + "/healthz", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            time.sleep(0.1)
    raise AssertionError("server did not become healthy")


@contextlib.contextmanager
def _served(tmp_path: Path, *args: str) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """``ctxledger serve --db tmp/served.db --port P ARGS`` (the --db of the serve command)."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    db = str(tmp_path / "served.db")
    proc = subprocess.Popen(
        [*CLI, "serve", "--db", db, "--port", str(port), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        _wait_healthy(base, proc)
        yield base, proc
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _live_feed_follows_appends(http: httpx.Client) -> str:
    """Open the global feed, then start a session and append: the events arrive live."""
    with http.stream("GET", "/v1/events", params={"after": 0}) as feed:
        lines = feed.iter_lines()
        sid: str = http.post(
            "/v1/sessions", json={"model": "gpt-4.1", "system_prompt": "Be brief."}
        ).json()["session_id"]
        http.post(
            f"/v1/sessions/{sid}/messages",
            json={"messages": [{"role": "user", "content": "hello"}]},
        )
        kinds = []
        for line in lines:
            if line.startswith("event: "):
                kinds.append(line[7:])
            if "MessageAppended" in kinds:
                break
        assert kinds[0] == "SessionStarted"
    return sid


def _proxied_stream_over_tcp(base: str, fake: FakeUpstream) -> None:
    client = openai.OpenAI(base_url=base + "/v1", api_key="sk-real-client", max_retries=0)
    stream = client.chat.completions.create(
        model="gpt-4.1",
        stream=True,
        stream_options={"include_usage": True},
        messages=[
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "hi over tcp"},
        ],
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "answer 1" and chunks[-1].usage is not None
    assert fake.requests[-1].headers["authorization"] == "Bearer sk-real-client"


def test_serve_runs_under_uvicorn_state_api_events_and_proxy(
    tmp_path: Path, upstream: tuple[FakeUpstream, int]
) -> None:
    fake, upstream_port = upstream
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    args = ("--token-file", str(token_file), "--upstream", f"http://127.0.0.1:{upstream_port}/v1")
    args += ("--log-level", "warning", "--graceful-timeout", "20")
    with _served(tmp_path, *args) as (base, proc):
        assert httpx.post(base + "/v1/sessions", json={"model": "m"}).status_code == 401
        auth = {"Authorization": f"Bearer {TOKEN}"}
        with httpx.Client(base_url=base, headers=auth, timeout=10) as http:
            sid = _live_feed_follows_appends(http)
            _proxied_stream_over_tcp(base, fake)
            rows = http.get("/v1/sessions").json()["sessions"]
            proxied = next(r for r in rows if r["session_id"].startswith("px-"))
            assert proxied["messages"] == 2  # the question and the recorded answer
            # graceful shutdown with an event feed open: the feed ends cleanly (a cut connection
            # would raise here), then the process exits (uvicorn re-raises the signal it handled)
            with http.stream("GET", f"/v1/sessions/{sid}/events") as feed:
                lines = feed.iter_lines()
                first_event = next(line for line in lines if line.startswith("event: "))
                assert first_event == "event: SessionStarted"
                proc.send_signal(signal.SIGTERM)
                rest = list(lines)  # ends without an error once the server stops
                assert all(
                    not line or line.startswith(("id:", "event:", "data:", ":")) for line in rest
                )
            assert proc.wait(timeout=60) in (0, -signal.SIGTERM)
        with httpx.Client(timeout=5) as check, pytest.raises(httpx.ConnectError):
            check.get(base + "/healthz")
    from ctxledger import Ledger

    with Ledger.open(tmp_path / "served.db") as ledger:
        assert ledger.verify().ok and len(ledger.sessions()) == 2


def test_serve_refuses_a_public_host_without_a_token(tmp_path: Path) -> None:
    out = subprocess.run(
        [*CLI, "--db", str(tmp_path / "x.db"), "serve", "--host", "0.0.0.0"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2
    assert out.stderr.startswith("error: refusing to listen on '0.0.0.0' without a token")
    # the advice survives the CLI's redaction of error messages (it read "[REDACTED] --token-file")
    assert "--token-file FILE" in out.stderr and "REDACTED" not in out.stderr


def test_serve_rejects_a_short_token(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("short")
    out = subprocess.run(
        [*CLI, "--db", str(tmp_path / "x.db"), "serve", "--token-file", str(token_file)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2 and "at least 16 characters" in out.stderr
    assert json.dumps(out.stderr).count("\\n") == 1  # one line


def test_serve_on_a_taken_port_is_one_error_line_and_exit_1(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        out = subprocess.run(
            [*CLI, "--db", str(tmp_path / "x.db"), "serve", "--port", str(port)],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert out.returncode == 1, out.stderr  # uvicorn's own failure was exit 3 with its log
    assert out.stderr == f"error: cannot listen on 127.0.0.1:{port}: Address already in use\n"


def test_two_workers_share_one_ledger_file(tmp_path: Path) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    db = tmp_path / "shared.db"
    proc = subprocess.Popen(
        [
            *CLI,
            "--db",
            str(db),
            "serve",
            "--port",
            str(port),
            "--workers",
            "2",
            "--log-level",
            "warning",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        _wait_healthy(base, proc)
        sid = httpx.post(base + "/v1/sessions", json={"model": "gpt-4.1"}).json()["session_id"]
        failures = run_writers(base, sid)
        assert failures == []
        view = httpx.get(base + f"/v1/sessions/{sid}/api-messages").json()
        assert sorted(m["content"] for m in view["messages"]) == written()
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    from ctxledger import Ledger

    with Ledger.open(db) as ledger:
        assert ledger.verify().ok
        assert len(ledger.transcript.session(sid).live) == 60


def test_a_client_that_leaves_mid_stream_gets_nothing_recorded_and_retries_cleanly(
    tmp_path: Path, upstream: tuple[FakeUpstream, int]
) -> None:
    fake, upstream_port = upstream
    fake.event_delay = 0.3  # a slow model: the client is gone long before the answer ends
    args = ("--upstream", f"http://127.0.0.1:{upstream_port}/v1", "--log-level", "warning")
    with _served(tmp_path, *args) as (base, _proc):
        msgs = [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "a long answer please"},
        ]
        body = {"model": "gpt-4.1", "stream": True, "messages": msgs}
        headers = {"X-Ctxledger-Session": "leaver"}
        with httpx.Client(timeout=30) as http:
            with http.stream(
                "POST", base + "/v1/chat/completions", json=body, headers=headers
            ) as resp:
                first = next(resp.iter_bytes())
                assert first.startswith(b"data: ")
            # the connection is closed: the proxy stops, records no reply, frees the session
            fake.event_delay = 0.0
            res = http.post(
                base + "/v1/chat/completions", json={**body, "stream": False}, headers=headers
            )
            assert res.status_code == 200
            view = http.get(base + "/v1/sessions/leaver/api-messages").json()["messages"]
            usage = http.get(base + "/v1/sessions/leaver/usage").json()
    assert [m["role"] for m in view] == ["system", "user", "assistant"]  # one question, one answer
    assert view[-1]["content"] == res.json()["choices"][0]["message"]["content"]
    assert usage["chain"]["agent_calls"] == 1  # only the completed turn's usage


def test_a_client_that_has_seen_the_end_of_a_stream_finds_its_reply_recorded(
    tmp_path: Path, upstream: tuple[FakeUpstream, int]
) -> None:
    """The openai SDK stops reading at ``data: [DONE]`` and closes the connection before the
    body's last chunk; the proxy records the reply before it sends the end marker, so the
    reply is in the ledger the moment the client has the whole answer (this race made the
    first smoke test flaky: the reply was recorded after the body ended, or not at all)."""
    fake, upstream_port = upstream
    fake.event_delay = 0.2  # the upstream keeps its body open a while after [DONE]
    args = ("--upstream", f"http://127.0.0.1:{upstream_port}/v1", "--log-level", "warning")
    with _served(tmp_path, *args) as (base, _proc):
        client = openai.OpenAI(
            base_url=base + "/v1",
            api_key="sk-real-client",
            max_retries=0,
            default_headers={"X-Ctxledger-Session": "ender"},
        )
        stream = client.chat.completions.create(
            model="gpt-4.1",
            stream=True,
            stream_options={"include_usage": True},
            messages=[{"role": "user", "content": "the end, please"}],
        )
        text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
        view = httpx.get(base + "/v1/sessions/ender/api-messages", timeout=30).json()
        usage = httpx.get(base + "/v1/sessions/ender/usage", timeout=30).json()
    assert [(m["role"], m["content"]) for m in view["messages"]] == [
        ("user", "the end, please"),
        ("assistant", text),
    ]
    assert usage["chain"]["agent_calls"] == 1


def test_a_client_that_leaves_while_waiting_for_its_turn_is_forgotten(
    tmp_path: Path, upstream: tuple[FakeUpstream, int]
) -> None:
    """A second request of a session waits for the first one's turn; its client gives up
    (read timeout) and hangs up: the wait is abandoned, it never reaches the model."""
    fake, upstream_port = upstream
    calls = threading.Semaphore(0)
    fake.on_request = lambda seen: calls.release()
    fake.event_delay = 0.3  # the first turn streams slowly: the second waits behind it
    args = ("--upstream", f"http://127.0.0.1:{upstream_port}/v1", "--log-level", "warning")
    question = [{"role": "user", "content": "first question"}]
    headers = {"X-Ctxledger-Session": "patient"}
    with _served(tmp_path, *args) as (base, _proc):
        url = base + "/v1/chat/completions"

        def first() -> None:
            body = {"model": "gpt-4.1", "stream": True, "messages": question}
            with httpx.stream("POST", url, json=body, headers=headers, timeout=60) as resp:
                resp.read()

        turn = threading.Thread(target=first)
        turn.start()
        assert calls.acquire(timeout=60)  # the first request holds the session's turn
        with pytest.raises(httpx.ReadTimeout):  # the impatient duplicate hangs up
            httpx.post(
                url,
                json={"model": "gpt-4.1", "messages": question},
                headers=headers,
                timeout=httpx.Timeout(30, read=0.5),
            )
        turn.join(60)
        fake.event_delay = 0.0
        with httpx.Client(timeout=30) as http:
            view = http.get(base + "/v1/sessions/patient/api-messages").json()["messages"]
            nxt = [*question, view[-1], {"role": "user", "content": "second question"}]
            res = http.post(url, json={"model": "gpt-4.1", "messages": nxt}, headers=headers)
            assert res.status_code == 200
    # the next turn waited behind any request still queued: the one that left never ran
    assert [seen.messages[-1]["content"] for seen in fake.requests] == [
        "first question",
        "second question",
    ]


def test_shutdown_finishes_an_in_flight_turn_and_records_it(
    tmp_path: Path, upstream: tuple[FakeUpstream, int]
) -> None:
    fake, upstream_port = upstream
    fake.event_delay = 0.2  # the answer takes a while: SIGTERM arrives in the middle of it
    args = ("--upstream", f"http://127.0.0.1:{upstream_port}/v1", "--log-level", "warning")
    with _served(tmp_path, *args) as (base, proc):
        msgs = [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "answer slowly"},
        ]
        body = {
            "model": "gpt-4.1",
            "stream": True,
            "stream_options": {"include_usage": True},
            "messages": msgs,
        }
        headers = {"X-Ctxledger-Session": "draining"}
        with (
            httpx.Client(timeout=30) as http,
            http.stream("POST", base + "/v1/chat/completions", json=body, headers=headers) as resp,
        ):
            chunks = resp.iter_bytes()
            received = next(chunks)
            proc.send_signal(signal.SIGTERM)  # graceful: the turn in flight finishes
            received += b"".join(chunks)
        assert received.rstrip().endswith(b"data: [DONE]")
        assert proc.wait(timeout=60) in (0, -signal.SIGTERM)
    from ctxledger import Ledger

    with Ledger.open(tmp_path / "served.db") as ledger:
        live = ledger.transcript.live_messages("draining")
        assert [(m["role"], m["content"]) for m in live] == [
            ("user", "answer slowly"),
            ("assistant", "answer 1"),
        ]
        assert ledger.usage("draining").agent_calls == 1  # the usage chunk was recorded too
        assert ledger.verify().ok
