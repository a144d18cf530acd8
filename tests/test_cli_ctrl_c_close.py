"""Ctrl-C while a ledger closes (session 42, review of the Ctrl-C work).

Two quick Ctrl-Cs could leave an empty ``.head`` (the lock target of a first seal) and
``verify`` then said FAILED on an untampered ledger; a Ctrl-C during a successful
command's close printed ``Aborted!`` and exited 1; the first interrupt left SIGINT
ignored in a host that runs the command in its own process."""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ctxledger import Ledger
from ctxledger.cli import interrupt, ledger_commands
from ctxledger.cli.main import cli
from ctxledger.ledger import anchor
from ctxledger.ledger.facade import Ledger as FacadeLedger

_MESSAGES = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]


def _ledger(path: Path) -> Path:
    with Ledger.open(path) as ledger:
        sid = ledger.start_session(model="m", context_length=9000)
        ledger.append_messages(sid, _MESSAGES)
    return path


@pytest.mark.parametrize("where", ["_written_beside", "link"])
def test_a_first_seal_cut_short_leaves_no_empty_anchor(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    db = _ledger(tmp_path / "l.db")
    head = Path(str(db) + ".head")
    head.unlink()  # (as if this were its first seal)

    def cut(*_args: Any, **_kwargs: Any) -> None:
        raise KeyboardInterrupt

    if where == "link":
        monkeypatch.setattr(anchor.os, "link", cut)
    else:
        monkeypatch.setattr(anchor, "_written_beside", cut)
    with contextlib.suppress(KeyboardInterrupt), Ledger.open(db) as ledger:
        ledger.seal_head()
    monkeypatch.undo()
    assert not head.exists() or head.stat().st_size > 0  # (never an empty one)
    assert [p for p in os.listdir(tmp_path) if p.endswith(".tmp")] == []
    result = CliRunner().invoke(cli, ["--db", str(db), "verify"])
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize("where", ["_written_beside", "link"])
def test_a_key_file_made_and_cut_short_is_never_empty(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """The sealing key was made with ``O_EXCL`` and then written: a cut between left an
    empty key file, refused at every close after (session 43, review LOW)."""
    key = tmp_path / "keys" / "anchor.key"
    monkeypatch.setenv("CTXLEDGER_ANCHOR_KEY_FILE", str(key))

    def cut(*_args: Any, **_kwargs: Any) -> None:
        raise KeyboardInterrupt

    with monkeypatch.context() as cutting:
        cutting.setattr(anchor.os if where == "link" else anchor, where, cut)
        with pytest.raises(KeyboardInterrupt):
            anchor._key()
    assert os.listdir(key.parent) == []  # (no key, no temporary: not an empty one)
    made = anchor._key()
    assert len(made) > 0 and key.read_bytes() == made
    assert (key.stat().st_mode & 0o777) == 0o600


@contextlib.contextmanager
def _host_handling_sigint() -> Iterator[Any]:
    """The host (this test) handles SIGINT as Python does by default, whatever the runner
    left: a runner started in the background by a shell without job control has SIGINT
    ignored, and the tests below could then not fail (an unshielded close saw no Ctrl-C,
    and SIG_IGN was already the handler "restored" or "ignoring" a second Ctrl-C). The
    runner's handler is back after."""
    runner_s = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, runner_s)


def test_the_interrupt_handler_ignores_a_second_ctrl_c() -> None:
    with _host_handling_sigint():
        with pytest.raises(KeyboardInterrupt):
            interrupt._raise_interrupt(signal.SIGINT, None)
        assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN


def test_ctrl_c_during_a_successful_command_s_close_is_dropped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = _ledger(tmp_path / "l.db")
    close = FacadeLedger.close

    def close_with_ctrl_c(self: FacadeLedger) -> None:
        os.kill(os.getpid(), signal.SIGINT)  # (Ctrl-C as the close begins)
        close(self)

    monkeypatch.setattr(FacadeLedger, "close", close_with_ctrl_c)
    with _host_handling_sigint() as before:
        result = CliRunner().invoke(cli, ["--db", str(db), "sessions"])
        assert result.exit_code == 0, result.output
        assert "Aborted" not in result.output
        assert signal.getsignal(signal.SIGINT) is before  # (the host's handler is back)


def test_an_interrupted_command_gives_the_host_its_handler_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = _ledger(tmp_path / "l.db")

    def ctrl_c(*_args: Any, **_kwargs: Any) -> None:
        interrupt._raise_interrupt(signal.SIGINT, None)  # (as the handler does)

    monkeypatch.setattr(ledger_commands, "emit_json", ctrl_c)
    with _host_handling_sigint() as before:
        result = CliRunner().invoke(cli, ["--db", str(db), "sessions", "--json"])
        assert result.exit_code == interrupt.INTERRUPTED, result.output
        assert signal.getsignal(signal.SIGINT) is before
