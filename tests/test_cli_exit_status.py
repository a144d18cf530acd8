"""The exit statuses README's "Exit status" table documents are the ones the CLI returns,
and a pipe cut (the reader left: ``ctxledger show S | head -1``) is told from a failure."""

from __future__ import annotations

import importlib
import os
import re
import select
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import readme
from helpers.ctrl_c import interrupt, unread
from helpers.ledger_helpers import compact_now, deterministic_ledger, session_with_turns

from ctxledger.cli.interrupt import INTERRUPTED
from ctxledger.cli.main import PIPE_CUT, cli

cli_main = importlib.import_module("ctxledger.cli.main")  # (the package's `main` is the function)

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def ledger_db(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    """A ledger with a compacted chain: (file, the tip, the compaction id)."""
    db = tmp_path_factory.mktemp("status") / "l.db"
    ledger = deterministic_ledger(db)
    sid = session_with_turns(ledger, 12, seed=4)
    outcome = compact_now(ledger, sid)
    tip, compaction = outcome.new_session_id, outcome.compaction_id
    assert tip is not None and compaction is not None
    # more than a pipe holds (64 KiB): `show --json` writes it in one write, cut part-way
    ledger.append_messages(tip, [{"role": "user", "content": "lorem ipsum " * 40_000}])
    ledger.close()
    return db, tip, compaction


def _status(db: Path, *args: str) -> int:
    return CliRunner().invoke(cli, ["--db", str(db), *args]).exit_code


def _tampered(db: Path, tmp: Path) -> Path:
    copy = tmp / "tampered.db"
    with sqlite3.connect(db) as source, sqlite3.connect(copy) as target:
        source.backup(target)
        row = target.execute("SELECT seq, payload FROM events ORDER BY seq LIMIT 1 OFFSET 3")
        seq, payload = row.fetchone()
        target.execute("UPDATE events SET payload = ? WHERE seq = ?", (payload + b" ", seq))
    source.close()
    target.close()
    return copy


#: a case of each status the table documents: what it runs, given (db, tip, compaction, tmp)
_Case = Callable[[Path, str, str, Path], int]
CASES: dict[int, list[_Case]] = {
    0: [
        lambda db, tip, c, tmp: _status(db, "sessions"),
        lambda db, tip, c, tmp: _status(db, "verify"),
        lambda db, tip, c, tmp: _status(db, "recall", tip, "zqxjvw"),  # no match
        lambda db, tip, c, tmp: _status(db, "diff", c),
        lambda db, tip, c, tmp: _status(db, "compress", tip, "--dry-run"),
    ],
    1: [
        lambda db, tip, c, tmp: _status(_tampered(db, tmp), "verify"),  # FAILED
    ],
    2: [
        lambda db, tip, c, tmp: _status(db, "show", "ses_nope"),
        lambda db, tip, c, tmp: _status(db, "sessions", "--nope"),
        lambda db, tip, c, tmp: _status(tmp / "missing.db", "sessions"),
        lambda db, tip, c, tmp: _status(db, "diff", tip),
        lambda db, tip, c, tmp: _status(tmp / "new.db", "import", str(tmp)),  # a directory
        lambda db, tip, c, tmp: _status(db, "verify", "--expect-head", "zz"),
        lambda db, tip, c, tmp: CliRunner().invoke(cli, []).exit_code,  # its help, then 2
    ],
    INTERRUPTED: [lambda db, tip, c, tmp: _ctrl_c_of_import(db, tmp)],
    PIPE_CUT: [lambda db, tip, c, tmp: _cut(db, "show", tip, "--json").returncode],
}


def _ctrl_c_of_import(db: Path, tmp: Path) -> int:
    """Ctrl-C on a terminal while `import -` waits for the rest of its input (see
    ``tests/test_cli_ctrl_c.py`` for the other commands)."""
    fifo = tmp / "in.fifo"
    os.mkfifo(fifo)
    writer = os.open(fifo, os.O_RDWR)
    try:
        os.write(writer, b'[{"role": "user", "content": "hi"}')
        run = interrupt(
            ["--db", str(db), "import", "-", "--format", "openai"],
            cwd=str(tmp),
            env=_env(),
            ready=lambda _shown: unread(writer) == 0,
            stdin_file=str(fifo),
        )
    finally:
        os.close(writer)
    assert run.status is not None, run
    return run.status


def test_the_readme_table_documents_each_status_the_cases_run() -> None:
    section = readme.text().split("#### Exit status", 1)[1].split("\n#### ", 1)[0]
    documented = [int(s) for s in re.findall(r"^\| (\d+) \|", section, re.M)]
    assert documented == sorted(CASES), documented


@pytest.mark.parametrize(
    ("status", "case"), [(s, i) for s, cases in CASES.items() for i in range(len(cases))]
)
def test_each_documented_status_is_returned(
    status: int, case: int, ledger_db: tuple[Path, str, str], tmp_path: Path
) -> None:
    db, tip, compaction = ledger_db
    assert CASES[status][case](db, tip, compaction, tmp_path) == status


def _env() -> dict[str, str]:
    path = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    return {**os.environ, "PYTHONPATH": path, "NO_COLOR": "1"}


def _cut(db: Path, *args: str, read: int = 0) -> subprocess.CompletedProcess[bytes]:
    """`ctxledger ARGS` whose stdout reader leaves after `read` bytes (0: before it starts),
    its stderr captured."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "ctxledger", "--db", str(db), *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env(),
    )  # fmt: skip
    assert proc.stdout is not None and proc.stderr is not None
    if read:
        proc.stdout.read(read)
    proc.stdout.close()
    err = proc.stderr.read()
    return subprocess.CompletedProcess(proc.args, proc.wait(timeout=120), b"", err)


@pytest.mark.parametrize(
    ("args", "read"),
    [
        (("show", "{tip}"), 0),  # rich's console: it exited 1 after pointing stdout at /dev/null
        (("export", "{tip}", "--format", "openai"), 0),  # click.echo: click exited 1
        (("show", "{tip}", "--json"), 1),  # one large write cut part-way: it exited 0
        (("replay", "{tip}", "--verify"), 0),
    ],
)
def test_a_pipe_cut_exits_141_saying_nothing(
    args: tuple[str, ...], read: int, ledger_db: tuple[Path, str, str]
) -> None:
    """Session 39: a cut pipe exited 1, the status of drift or a bad log (or 0, when one
    large write was cut part-way: Python returns the short count without an error)."""
    db, tip, _ = ledger_db
    done = _cut(db, *(a.format(tip=tip) for a in args), read=read)
    assert (done.returncode, done.stderr) == (PIPE_CUT, b"")


def test_a_whole_read_or_a_sigpipe_elsewhere_keeps_the_status(
    ledger_db: tuple[Path, str, str],
) -> None:
    """A reader that read everything is no cut, and neither is a SIGPIPE while stdout and
    stderr are still read (``serve`` writing to a client that hung up): the command's
    own status stands."""
    db, tip, _ = ledger_db
    whole = subprocess.run(
        [sys.executable, "-m", "ctxledger", "--db", str(db), "show", tip, "--json"],
        capture_output=True, env=_env(), timeout=120,
    )  # fmt: skip
    assert whole.returncode == 0 and len(whole.stdout) > 400_000
    code = (
        "import importlib, os, signal, sys\n"
        "m = importlib.import_module('ctxledger.cli.main')\n"
        "def fake(**kw):\n"
        "    os.kill(os.getpid(), signal.SIGPIPE)\n"
        "    sys.exit(int(sys.argv[1]))\n"
        "m.cli = fake\n"
        "m.main()\n"
    )
    for status in (0, 2):
        done = subprocess.run(
            [sys.executable, "-c", code, str(status)], capture_output=True, env=_env(), timeout=120
        )
        assert (done.returncode, done.stderr) == (status, b"")


def test_a_cut_while_click_prints_a_usage_error_exits_141(
    ledger_db: tuple[Path, str, str],
) -> None:
    """Review 1 of session 40: click's print of a usage error, cut, raised a
    BrokenPipeError from inside its own error handler (no SystemExit): it exited 1."""
    db, _, _ = ledger_db
    read, write = os.pipe()
    os.close(read)  # the reader left before a byte was written
    try:
        done = subprocess.run(
            [sys.executable, "-m", "ctxledger", "--db", str(db), "sessions", "--nope"],
            stdout=write, stderr=write, env=_env(), timeout=120,
        )  # fmt: skip
    finally:
        os.close(write)
    assert done.returncode == PIPE_CUT


def _exiting(status: int) -> Callable[..., None]:
    def command(**_kw: object) -> None:
        sys.exit(status)

    return command


def test_no_poll_and_no_sigpipe_is_no_crash(monkeypatch: pytest.MonkeyPatch) -> None:
    """Review 1 of session 40: where `select.poll` is missing (Windows, which has no
    SIGPIPE either) every command crashed on its way out with an AttributeError."""
    monkeypatch.delattr(select, "poll")
    monkeypatch.delattr(signal, "SIGPIPE")
    monkeypatch.setattr(cli_main, "cli", _exiting(0))
    with pytest.raises(SystemExit) as done:
        cli_main.main()
    assert done.value.code == 0


def test_a_sigpipe_handled_during_the_poll_still_counts(monkeypatch: pytest.MonkeyPatch) -> None:
    """The reader's check runs before the flag is read: a SIGPIPE handler still pending
    when the command ends runs on entering a function, here the check's."""

    def reader_left() -> bool:
        signal.raise_signal(signal.SIGPIPE)  # (its handler runs now, as a pending one would)
        return True

    monkeypatch.setattr(cli_main, "cli", _exiting(0))
    monkeypatch.setattr(cli_main, "_reader_left", reader_left)
    monkeypatch.setattr(cli_main, "_silence", lambda: None)
    with pytest.raises(SystemExit) as done:
        cli_main.main()
    assert done.value.code == PIPE_CUT


def test_a_pipe_flagged_pollhup_is_a_reader_that_left(monkeypatch: pytest.MonkeyPatch) -> None:
    """Review 1 of session 40: BSD kernels flag a widowed pipe's write end POLLHUP, not
    POLLERR as Linux does; a cut there kept click's status."""

    class Poller:
        def register(self, fd: int, mask: int) -> None:
            pass

        def poll(self, timeout: int) -> list[tuple[int, int]]:
            return [(1, select.POLLOUT | select.POLLHUP), (2, select.POLLOUT)]

    monkeypatch.setattr(select, "poll", Poller)
    assert cli_main._reader_left()


def test_sigpipes_set_a_flag_and_add_nothing() -> None:
    """Review 1 of session 40: each SIGPIPE added an item to a list for the process's
    life (`serve` gets one per write to each client that hung up)."""
    with cli_main._pipe_watch() as cut:
        for _ in range(3):
            signal.raise_signal(signal.SIGPIPE)
        assert cut == [signal.SIGPIPE]
