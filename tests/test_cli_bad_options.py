"""Option values that make no sense are usage errors: exit 2, the option named, nothing written.

A zero or negative context window, a timeout of ``nan``, ``inf`` or less than a second's
fraction above 0, and an empty ``--db`` were accepted silently (the empty ``--db`` fell
back to the default ledger). Each command shares one option type per kind of value
(``ctxledger.cli.app``), so each is checked one way everywhere.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from helpers.fifo import fifo_with_writer

from ctxledger.cli.main import cli


@pytest.fixture
def files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory with one chat (a.jsonl) and one trajectory (t.jsonl); the
    default ledger ($CTXLEDGER_DB) points inside it, so a fallback to it would show."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CTXLEDGER_DB", str(tmp_path / "default.db"))
    chat = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]}
    (tmp_path / "a.jsonl").write_text(json.dumps(chat) + "\n")
    turns = [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "yo"}]
    (tmp_path / "t.jsonl").write_text(json.dumps({"conversations": turns}) + "\n")
    return tmp_path


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def assert_refused(result: Result, option: str, where: Path) -> None:
    assert result.exit_code == 2, result.output
    assert result.output.startswith(f"error: Invalid value for '{option}'"), result.output
    assert "Traceback" not in result.output
    assert sorted(p.name for p in where.iterdir()) == ["a.jsonl", "t.jsonl"], "something written"


@pytest.mark.parametrize("value", ["0", "-5", "1023"])
def test_import_refuses_a_context_length_below_1024(files: Path, value: str) -> None:
    result = run("--db", "l.db", "import", "--context-length", value, "a.jsonl")
    assert_refused(result, "--context-length", files)


@pytest.mark.parametrize("value", ["0", "-1"])
def test_demo_refuses_a_bad_context_length(files: Path, value: str) -> None:
    assert_refused(
        run("--db", "l.db", "demo", "--context-length", value), "--context-length", files
    )


@pytest.mark.parametrize("value", ["nan", "NaN", "inf", "-inf", "1e400", "-1", "0", "abc"])
def test_a_timeout_must_be_a_finite_positive_number(files: Path, value: str) -> None:
    result = run(
        "--db", "l.db", "trajectories", "compress", "--timeout", value, "t.jsonl", "o.jsonl"
    )
    assert_refused(result, "--timeout", files)


@pytest.mark.parametrize("value", ["nan", "inf", "0", "-2"])
def test_serve_refuses_a_bad_stall_timeout(files: Path, value: str) -> None:
    assert_refused(run("--db", "l.db", "serve", "--stall-timeout", value), "--stall-timeout", files)


@pytest.mark.parametrize("db", ["", " ", "\t"])
@pytest.mark.parametrize("command", [["sessions"], ["import", "a.jsonl"]])
def test_an_empty_db_is_refused_not_the_default_ledger(
    files: Path, db: str, command: list[str]
) -> None:
    assert_refused(run("--db", db, *command), "--db", files)


def test_serve_and_migrate_refuse_an_empty_ledger(files: Path) -> None:
    assert_refused(run("serve", "--db", ""), "--db", files)
    assert_refused(run("migrate", "--from", "", "--to", "m.db"), "--from", files)
    assert_refused(run("migrate", "--from", "a.jsonl", "--to", ""), "--to", files)


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (["demo", "--turns", "0"], "--turns"),
        (["recall", "s", "q", "--limit", "0"], "--limit"),
        (["migrate", "--from", "a.jsonl", "--to", "m.db", "--batch", "0"], "--batch"),
        (["trajectories", "compress", "--retries", "-1", "t.jsonl", "o.jsonl"], "--retries"),
        (["trajectories", "compress", "--target", "0", "t.jsonl", "o.jsonl"], "--target"),
        (["trajectories", "compress", "--concurrency", "0", "t.jsonl", "o.jsonl"], "--concurrency"),
    ],
)
def test_counts_out_of_range_name_their_option(files: Path, args: list[str], option: str) -> None:
    assert_refused(run("--db", "l.db", *args), option, files)


def test_good_values_still_work(files: Path) -> None:
    result = run("--db", "l.db", "import", "--context-length", "2048", "a.jsonl")
    assert result.exit_code == 0, result.output
    result = run("trajectories", "compress", "--timeout", "1.5", "t.jsonl", "o.jsonl")
    assert result.exit_code == 0, result.output
    assert (files / "o.jsonl").exists()


@pytest.mark.parametrize("value", ["257", "1000000000"])
def test_serve_refuses_more_workers_than_any_host_has_use_for(files: Path, value: str) -> None:
    # --workers 10**9 forked worker processes until the machine gave out
    result = run("serve", "--db", "l.db", "--workers", value)
    assert_refused(result, "--workers", files)
    assert "1<=x<=256" in result.output


def test_serve_refuses_a_window_past_the_library_s_range(
    files: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 10**30 was served, and every session the proxy started then failed
    import ctxledger.cli.serve as serve_module

    def never(*args: object) -> None:
        raise AssertionError("the server was started")

    monkeypatch.setattr(serve_module, "_run", never)
    result = CliRunner().invoke(
        cli, ["serve", "--db", "l.db", "--port", "0", "--context-length", str(10**30)]
    )
    assert result.exit_code == 2, result.output
    assert result.output.startswith("error: --context-length is out of range: "), result.output
    assert sorted(p.name for p in files.iterdir()) == ["a.jsonl", "t.jsonl"]


@pytest.mark.parametrize(
    ("upstream", "says"),
    [
        ("http://", "must be an http(s) URL with a host"),
        ("http://[::1", "is not a URL: Invalid IPv6 URL"),
        ("http://x:99999", "is not a URL: Port out of range"),
        ("http://a b", "holds blanks or control characters"),
    ],
)
def test_serve_refuses_an_upstream_it_could_never_call(
    files: Path, monkeypatch: pytest.MonkeyPatch, upstream: str, says: str
) -> None:
    # each was served, and every proxied request then failed
    import ctxledger.cli.serve as serve_module

    monkeypatch.setattr(serve_module, "_run", _never_started)
    result = CliRunner().invoke(cli, ["serve", "--db", "l.db", "--upstream", upstream])
    assert result.exit_code == 2, result.output
    assert result.output.startswith("error: --upstream") and says in result.output
    assert sorted(p.name for p in files.iterdir()) == ["a.jsonl", "t.jsonl"]


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (b"\xff\xfe" + b"t\x00" * 20, "one word of at least 16 characters, printable ASCII"),
        (b"x" * 5000, "holds more than 4,096 bytes"),
        (b"caf\xc3\xa9-token-0123456789", "printable ASCII"),
    ],
    ids=["utf16", "huge", "not-ascii"],
)
def test_serve_refuses_a_token_file_no_header_can_carry(
    files: Path, monkeypatch: pytest.MonkeyPatch, content: bytes, says: str
) -> None:
    # bytes that are not UTF-8 were a UnicodeDecodeError traceback, /dev/zero was read
    # until memory ran out, a non-ASCII token could never be sent in a header
    import ctxledger.cli.serve as serve_module

    monkeypatch.setattr(serve_module, "_run", _never_started)
    (files / "tok").write_bytes(content)
    result = CliRunner().invoke(cli, ["serve", "--db", "l.db", "--token-file", "tok"])
    assert result.exit_code == 2, result.output
    assert says in result.output and "Traceback" not in result.output


def _never_started(*args: object) -> None:
    raise AssertionError("the server was started")


def test_trajectories_compress_refuses_a_device(files: Path) -> None:
    # /dev/zero was read as one endless line until memory ran out
    result = run("trajectories", "compress", "/dev/zero", "o.jsonl")
    assert result.exit_code == 2, result.output
    assert result.output.strip() == "error: /dev/zero: not a regular file (a character device)"
    assert sorted(p.name for p in files.iterdir()) == ["a.jsonl", "t.jsonl"]


def test_trajectories_compress_reads_a_pipe_and_writes_to_dev_null(files: Path) -> None:
    """`trajectories compress <(…) out.jsonl` (a FIFO) and an output of /dev/null were
    refused by the round that refused /dev/zero (review R4); a FIFO is read (opened
    non-blocking, then read to its end) and /dev/null is written to, not read back."""
    with fifo_with_writer(files / "in.fifo", (files / "t.jsonl").read_bytes()):
        result = run("trajectories", "compress", "in.fifo", "o.jsonl")
    assert result.exit_code == 0, result.output
    assert len((files / "o.jsonl").read_text().splitlines()) == 1
    from ctxledger.trajectories.batch import resume_state

    assert resume_state(Path(os.devnull), files / "never.metrics.jsonl") == []


def test_serve_reads_a_token_file_by_the_one_file_rule(
    files: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The token file follows the rule of every input file (review I4): a device is
    refused naming what it is, a pipe is read."""
    import ctxledger.cli.serve as serve_module

    monkeypatch.setattr(serve_module, "_run", _never_started)
    result = CliRunner().invoke(cli, ["serve", "--db", "l.db", "--token-file", "/dev/zero"])
    assert result.exit_code == 2, result.output
    assert "not a regular file (a character device)" in result.output
    from ctxledger.server.auth import read_token_file

    with fifo_with_writer(files / "tok", b"0123456789abcdef-token\n") as fifo:
        assert read_token_file(fifo) == "0123456789abcdef-token"


def test_trajectories_to_dev_null_writes_no_side_files_and_cannot_be_recorded(
    files: Path,
) -> None:
    # session 31: side files are not derived from a FIFO or /dev/null output (they went
    # into /dev); with an explicit --db the output would be read back to record it:
    # refused before any work, no ledger made
    result = run(
        "--db", "l.db", "trajectories", "compress", "t.jsonl", "/dev/null", "--no-progress"
    )
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "/dev/null is a FIFO or /dev/null: it cannot be read back" in result.output
    assert not (files / "l.db").exists() and not (files / "default.db").exists()
    result = run(
        "trajectories",
        "compress",
        "t.jsonl",
        "/dev/null",
        "--no-progress",
        "--summarizer",
        "offline",
    )
    assert result.exit_code == 0, result.output
    assert "no metrics file or report was written beside it" in result.output


@pytest.mark.parametrize("value", ["10001", str(10**30)])
def test_demo_refuses_more_turns_than_its_maximum(files: Path, value: str) -> None:
    # session 31: `demo --turns 10**30` ran until interrupted, writing all the while
    result = run("--db", "l.db", "demo", "--turns", value)
    assert_refused(result, "--turns", files)
    assert "1<=x<=10000" in result.output


@pytest.mark.parametrize("value", ["nan", "inf", "0", "-2"])
def test_serve_refuses_a_bad_turn_timeout(files: Path, value: str) -> None:
    assert_refused(run("--db", "l.db", "serve", "--turn-timeout", value), "--turn-timeout", files)
