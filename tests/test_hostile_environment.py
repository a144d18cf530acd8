"""Session 31: ledger paths and variables a system cannot use give one line, and write
nothing: a name over the file-name limit (an OSError traceback from the check that a
read-only command's ledger exists), a path of thousands of folders (a RecursionError
traceback from creating them), and a bad ``CTXLEDGER_MAX_JSON_DEPTH`` (named only at
the first message, after ``demo`` had started a session in the ledger)."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest
from click.testing import CliRunner, Result

from ctxledger.cli.main import cli
from ctxledger.compressor.summarizers.base import SummaryRequest, SummaryResult
from ctxledger.compressor.summarizers.offline import OfflineSummarizer
from ctxledger.errors import InvalidInput
from ctxledger.ledger.compaction import compact
from ctxledger.ledger.facade import Ledger


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    chat = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]}
    (tmp_path / "a.jsonl").write_text(json.dumps(chat) + "\n")
    result = CliRunner().invoke(cli, ["--db", "l.db", "import", "a.jsonl"])
    assert result.exit_code == 0, result.output
    return tmp_path


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


def _one_line_error(result: Result, exit_code: int) -> str:
    assert result.exit_code == exit_code, result.output
    assert "Traceback" not in result.output and len(result.output.strip().splitlines()) == 1
    assert result.output.startswith("error: ")
    return result.output


def test_a_ledger_name_over_the_limit(folder: Path) -> None:
    before = _files(folder)
    output = _one_line_error(CliRunner().invoke(cli, ["--db", "x" * 5000, "sessions"]), 2)
    assert "cannot be used: File name too long" in output
    # (session 41: a writing command checks the name as a reading one does, first: it
    # said "cannot create the ledger …", exit 1)
    output = _one_line_error(CliRunner().invoke(cli, ["--db", "x" * 5000, "import", "a.jsonl"]), 2)
    assert "cannot be used: File name too long" in output
    assert _files(folder) == before


def test_a_ledger_path_of_thousands_of_folders(folder: Path) -> None:
    deep = "d/" * 1500 + "l.db"  # (short enough for the name check: files.py's makedirs)
    output = _one_line_error(CliRunner().invoke(cli, ["--db", deep, "import", "a.jsonl"]), 1)
    assert "the path names too many folders" in output
    assert not (folder / "d").exists()


@pytest.mark.parametrize("value", ["abc", "0", "-3", "9" * 5000])
def test_a_bad_depth_limit_is_named_before_demo_writes(
    folder: Path, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("CTXLEDGER_MAX_JSON_DEPTH", value)
    before = _files(folder)
    output = _one_line_error(CliRunner().invoke(cli, ["--db", "l.db", "demo", "--turns", "1"]), 2)
    assert output.startswith("error: CTXLEDGER_MAX_JSON_DEPTH must be a positive integer")
    assert _files(folder) == before


@pytest.mark.parametrize("name", ["CTXLEDGER_MAX_JSON_DEPTH", "CTXLEDGER_MAX_INPUT_BYTES"])
def test_a_bad_limit_leaves_reading_commands_alone_and_refuses_writes(
    folder: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    # review of session 31: checked when any store opened, it broke `sessions` (exit 2)
    # while `verify` still ran; now it is checked where writing starts
    monkeypatch.setenv(name, "abc")
    before = _files(folder)
    for command in (["sessions"], ["verify"]):
        result = CliRunner().invoke(cli, ["--db", "l.db", *command])
        assert result.exit_code == 0, result.output
    output = _one_line_error(CliRunner().invoke(cli, ["--db", "l.db", "import", "a.jsonl"]), 2)
    assert output.startswith(f"error: {name} must be a positive integer")
    output = _one_line_error(CliRunner().invoke(cli, ["--db", "new.db", "import", "a.jsonl"]), 2)
    assert output.startswith(f"error: {name} must be a positive integer")
    assert _files(folder) == before  # (no new.db either)
    # the library: an append (a session's start) is refused before it writes
    from ctxledger import InvalidInput, Ledger

    with Ledger.open(folder / "l.db") as ledger, pytest.raises(InvalidInput, match=name):
        ledger.start_session(model="m", context_length=16_000)
    assert _files(folder) == before


class _CountingSummarizer:
    kind = "counting"

    def __init__(self) -> None:
        self.calls = 0

    async def summarize(self, request: SummaryRequest) -> SummaryResult:
        self.calls += 1
        return await OfflineSummarizer().summarize(request)


def test_a_bad_limit_stops_a_compaction_before_its_summarizer_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # final review of session 31: checked only at the append, a compaction paid its
    # summarizer (an LLM call) before the bad variable was named
    ledger = Ledger.open(tmp_path / "l.db")
    try:
        sid = ledger.start_session(model="m", context_length=16_000)
        for i in range(8):
            ledger.append_messages(
                sid,
                [
                    {"role": "user", "content": f"question {i} " + "q " * 300},
                    {"role": "assistant", "content": "answer " * 100},
                ],
            )
        summarizer = _CountingSummarizer()
        monkeypatch.setenv("CTXLEDGER_MAX_JSON_DEPTH", "abc")
        before = ledger.store.last_seq()
        with pytest.raises(InvalidInput, match="CTXLEDGER_MAX_JSON_DEPTH must be a positive"):
            anyio.run(lambda: compact(ledger, sid, summarizer))
        assert summarizer.calls == 0 and ledger.store.last_seq() == before
        monkeypatch.delenv("CTXLEDGER_MAX_JSON_DEPTH")
        anyio.run(lambda: compact(ledger, sid, summarizer))
        assert summarizer.calls == 1 and ledger.store.last_seq() > before
    finally:
        ledger.close()


@pytest.mark.parametrize("name", ["CTXLEDGER_MAX_JSON_DEPTH", "CTXLEDGER_MAX_INPUT_BYTES"])
@pytest.mark.parametrize("value", ["abc", "-1", "0", "1e3", "9" * 5000])
def test_serve_names_a_bad_limit_before_it_listens_or_opens_the_ledger(
    folder: Path, monkeypatch: pytest.MonkeyPatch, name: str, value: str
) -> None:
    listened: list[object] = []
    monkeypatch.setattr("ctxledger.cli.serve._run", lambda *args: listened.append(args))
    monkeypatch.setenv(name, value)
    before = _files(folder)
    for db in ("l.db", "new.db"):
        result = CliRunner().invoke(cli, ["--db", db, "serve", "--port", "0"])
        assert _one_line_error(result, 2).startswith(f"error: {name} must be a positive integer")
    assert listened == [] and _files(folder) == before


def test_a_real_serve_with_a_bad_limit_exits_at_once_listening_nowhere(folder: Path) -> None:
    import os
    import socket
    import subprocess
    import sys

    with socket.socket() as probe:  # a port free now
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    before = _files(folder)
    import ctxledger

    code = str(Path(ctxledger.__file__).resolve().parents[1])  # this tree, from any folder
    path = os.pathsep.join([code, os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "CTXLEDGER_MAX_INPUT_BYTES": "lots", "PYTHONPATH": path}
    # the console script's entry point (pyproject: ctxledger.cli.main:main), run by this
    # interpreter: no `ctxledger` script need sit beside it
    entry = "from ctxledger.cli.main import main; main()"
    command = [sys.executable, "-c", entry, "--db", "l.db", "serve"]
    with subprocess.Popen(
        [*command, "--port", str(port)], env=env, stderr=subprocess.PIPE, text=True
    ) as proc:
        try:
            _, err = proc.communicate(timeout=60)
        finally:
            proc.kill()  # (without the check it would be serving: never left running)
    assert proc.returncode == 2 and err.startswith("error: CTXLEDGER_MAX_INPUT_BYTES"), err
    assert err.count("\n") == 1
    with socket.socket() as client:
        assert client.connect_ex(("127.0.0.1", port)) != 0
    assert _files(folder) == before
