"""Ctrl-C on the real command, on a terminal (session 42; ``tests/helpers/ctrl_c.py``).

Each case: exit status 130 (``serve``: 0, its normal stop), one plain ``interrupted``
line and no traceback, the ledger verifying with the events it held before, no file
left that was not there before, and no process of the command's session left running.
Before, click printed ``Aborted!`` and exited 1, and ``compress`` (under
``asyncio.Runner``, whose SIGINT handler only cancels the task at its next await)
went on to record its compaction and then said it was stopped.
"""

from __future__ import annotations

import fcntl
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from ctxledger import Ledger
from ctxledger.ledger.importing import import_sessions
from tests.helpers.ctrl_c import Interrupted, in_session, interrupt, unread
from tests.helpers.ledger_helpers import compact_now

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="pseudo-terminals")

_LINE = "interrupted (Ctrl-C): stopped; no append is left half-done"


def _messages(pairs: int) -> list[dict[str, str]]:
    out = []
    for i in range(pairs):
        out.append(
            {"role": "user", "content": f"question {i} on src/mod{i % 40}.py, value {i * 7}"}
        )
        out.append({"role": "assistant", "content": f"answer {i}: src/mod{i % 40}.py returns {i}"})
    return out


def _env() -> dict[str, str]:
    root = str(Path(__file__).resolve().parents[1])
    return {**os.environ, "PYTHONPATH": root, "COLUMNS": "100", "NO_COLOR": "1"}


def _events(db: Path) -> int:
    """The ledger verifies; its event count. Read-only: makes no ``.lock`` (a listing
    taken after it still sees one the command left)."""
    with Ledger.open(db, read_only=True, existing=True) as ledger:
        report = ledger.store.verify()
        assert report.ok, report
        return ledger.store.last_seq()


def _listing(folder: Path) -> list[str]:
    return sorted(os.listdir(folder))


def _check(run: Interrupted, status: int = 130) -> None:
    assert run.status == status, run
    assert "Traceback" not in run.output and "Aborted" not in run.output, run.output
    if status == 130:
        assert run.output.rstrip().endswith(_LINE), run.output
        assert run.output.count(_LINE) == 1
    assert in_session(run.pid) == []  # (nothing the command started runs on)


def _writer_inside(lock: Path) -> Callable[[str], bool]:
    """Whether a writer holds the ledger's write lock now (its append has begun)."""

    def ready(_shown: str) -> bool:
        try:
            fd = os.open(lock, os.O_RDWR)
        except OSError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return True
        finally:
            os.close(fd)
        return False

    return ready


def _ledger_with(db: Path, pairs: int) -> str:
    from ctxledger.importers.detect import load

    with Ledger.open(db) as ledger:
        (sid,) = import_sessions(ledger, load(None, "openai", text=json.dumps(_messages(pairs))))
    return sid


def test_ctrl_c_while_import_reads_stdin_leaves_nothing(tmp_path: Path) -> None:
    fifo = tmp_path / "in.fifo"
    os.mkfifo(fifo)
    writer = os.open(fifo, os.O_RDWR)  # (held open: the import waits for more)
    try:
        os.write(writer, json.dumps(_messages(3))[:-1].encode())
        before = _listing(tmp_path)
        run = interrupt(
            ["--db", "new/l.db", "import", "-", "--format", "openai"],
            cwd=str(tmp_path),
            env=_env(),
            ready=lambda _shown: unread(writer) == 0,  # (it is reading: waits for more)
            stdin_file=str(fifo),
        )
    finally:
        os.close(writer)
    _check(run)
    assert _listing(tmp_path) == before  # no ledger, no folder, no .lock


def test_ctrl_c_during_import_s_append_keeps_the_ledger_as_it_was(tmp_path: Path) -> None:
    db = tmp_path / "l.db"
    _ledger_with(db, 2)
    held = _events(db)
    source = tmp_path / "big.json"
    source.write_text(json.dumps(_messages(24000)))
    before = _listing(tmp_path)
    run = interrupt(
        ["--db", "l.db", "import", "big.json"],
        cwd=str(tmp_path),
        env=_env(),
        ready=_writer_inside(tmp_path / "l.db.lock"),
    )
    _check(run)
    assert _events(db) == held
    assert _listing(tmp_path) == before


def test_ctrl_c_of_compress_waiting_to_append_records_nothing(tmp_path: Path) -> None:
    """The test holds the write lock: compress has planned and summarized and waits to
    append when Ctrl-C comes (it recorded its compaction after it, before)."""
    db = tmp_path / "l.db"
    sid = _ledger_with(db, 60)
    held = _events(db)
    before = _listing(tmp_path)
    lock = os.open(tmp_path / "l.db.lock", os.O_RDWR)
    fcntl.flock(lock, fcntl.LOCK_EX)
    try:
        run = interrupt(
            ["--db", "l.db", "compress", sid],
            cwd=str(tmp_path),
            env=_env(),
            ready=lambda shown: "compacting" in shown,
        )
    finally:
        os.close(lock)
    _check(run)
    assert _events(db) == held
    assert _listing(tmp_path) == before


@pytest.fixture(scope="module")
def compacted(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A ledger of one session of 12,000 messages compacted once (its audit and its
    what-if take seconds: Ctrl-C comes while they run)."""
    folder = tmp_path_factory.mktemp("compacted")
    db = folder / "l.db"
    sid = _ledger_with(db, 6000)
    with Ledger.open(db) as ledger:
        compact_now(ledger, sid)
    os.unlink(folder / "l.db.lock")  # (a failed command must not make one)
    return db, sid


@pytest.mark.parametrize(
    ("args", "shown"),
    [
        (["audit", "{sid}"], "auditing"),
        (["replay", "{sid}", "--loop", "every-call"], "what-if"),
        (["replay", "{sid}", "--loop", "every-call", "--out", "o.db"], "what-if"),
    ],
    ids=["audit", "replay-whatif", "replay-whatif-out"],
)
def test_ctrl_c_of_a_long_read_leaves_nothing(
    compacted: tuple[Path, str], args: list[str], shown: str
) -> None:
    db, sid = compacted
    before = _listing(db.parent)  # (listed first: nothing of the test's own in it)
    held = _events(db)
    run = interrupt(
        ["--db", "l.db", *(a.format(sid=sid) for a in args)],
        cwd=str(db.parent),
        env=_env(),
        ready=lambda text: shown in text,
    )
    _check(run)
    assert _events(db) == held
    # no .lock beside the ledger, and no --out: a what-if cut short removes the OUT it
    # made (O_EXCL), whatever it holds (session 43: a partial one was kept)
    assert _listing(db.parent) == before


def test_ctrl_c_stops_serve_cleanly_with_status_0(tmp_path: Path) -> None:
    db = tmp_path / "l.db"
    _ledger_with(db, 2)
    held = _events(db)
    run = interrupt(
        ["--db", "l.db", "serve", "--port", "0"],
        cwd=str(tmp_path),
        env=_env(),
        ready=lambda shown: "startup complete" in shown,
    )
    _check(run, status=0)
    assert "Shutting down" in run.output and "interrupted" not in run.output, run.output
    assert _events(db) == held


def test_ctrl_c_of_demo_keeps_what_it_recorded_with_its_head_sealed(tmp_path: Path) -> None:
    """An interrupted demo's events are the log (kept), and its ledger is closed on the
    way out, so the head anchor is sealed (it was missing until the next open)."""
    run = interrupt(
        ["--db", "l.db", "demo", "--turns", "30"],
        cwd=str(tmp_path),
        env=_env(),
        ready=lambda shown: "session:" in shown,  # (its session is started: events exist)
    )
    _check(run)
    assert (tmp_path / "l.db.head").exists(), _listing(tmp_path)
    assert _events(tmp_path / "l.db") > 0
