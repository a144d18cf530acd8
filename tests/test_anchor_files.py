"""Session 31: the head anchor's key file ($CTXLEDGER_ANCHOR_KEY_FILE) and the anchor
file beside a ledger (``<ledger>.head``) that are not regular files.

Both were read whole by name: a key file that is /dev/zero was read until memory ran
out, a FIFO (key or anchor) waited forever, at the close of every writer and in
``verify``. Now each must be a regular file (a key of 1 byte to 64 KiB, an anchor of at
most 4 KiB): ``verify`` names the one that is not, in one line, and a writer's close
seals nothing (as for an unwritable folder) instead of hanging, with a warning naming
the key file; what it appended is kept.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from ctxledger import Ledger
from ctxledger.cli.main import cli
from ctxledger.ledger import anchor
from ctxledger.ledger.anchor import anchor_path


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


@pytest.fixture
def ledger(tmp_path: Path) -> Path:
    chat = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]}
    (tmp_path / "a.jsonl").write_text(json.dumps(chat) + "\n")
    db = tmp_path / "l.db"
    result = CliRunner().invoke(
        cli, ["--db", str(db), "import", "--again", str(tmp_path / "a.jsonl")]
    )
    assert result.exit_code == 0, result.output
    assert anchor_path(db).exists()
    return db


@pytest.mark.parametrize("kind", ["fifo", "directory", "empty", "large"])
def test_a_key_file_that_is_no_key_is_named_by_verify(
    ledger: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    kind: str,
) -> None:
    key = tmp_path / "keys" / "k"
    key.parent.mkdir()
    if kind == "fifo":
        os.mkfifo(key)  # no writer: a read waited forever
    elif kind == "directory":
        key.mkdir()
    else:
        key.write_bytes(b"" if kind == "empty" else b"k" * 70_000)
    monkeypatch.setenv("CTXLEDGER_ANCHOR_KEY_FILE", str(key))
    before = _files(tmp_path)
    result = CliRunner().invoke(cli, ["--db", str(ledger), "verify"])
    assert result.exit_code == 2, result.output
    assert result.output.startswith(
        f"error: the anchor key file ($CTXLEDGER_ANCHOR_KEY_FILE) {key} is "
    )
    assert len(result.output.strip().splitlines()) == 1
    assert _files(tmp_path) == before
    # a writer's close seals nothing with such a key (best effort), and keeps its append
    result = CliRunner().invoke(
        cli, ["--db", str(ledger), "import", "--again", str(tmp_path / "a.jsonl")]
    )
    assert result.exit_code == 0, result.output
    assert anchor_path(ledger).read_bytes() == before["l.db.head"]
    # review of session 31: it did so silently (only a later verify said why)
    warned = [r.getMessage() for r in caplog.records if r.name == "ctxledger"]
    assert len(warned) == 1
    assert warned[0].startswith(
        f"the head anchor was not sealed: the anchor key file ($CTXLEDGER_ANCHOR_KEY_FILE) {key} is "
    )


def test_a_key_of_the_users_own_longer_than_4_kib_seals(
    ledger: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # review of session 31: a 4 KiB cap on the key stopped an honest key's sealing
    key = tmp_path / "own.key"
    key.write_bytes(b"k" * 5000)
    monkeypatch.setenv("CTXLEDGER_ANCHOR_KEY_FILE", str(key))
    before = anchor_path(ledger).read_bytes()
    result = CliRunner().invoke(
        cli, ["--db", str(ledger), "import", "--again", str(tmp_path / "a.jsonl")]
    )
    assert result.exit_code == 0, result.output
    assert anchor_path(ledger).read_bytes() != before
    result = CliRunner().invoke(cli, ["--db", str(ledger), "verify"])
    assert result.exit_code == 0, result.output


def test_an_anchor_that_is_a_fifo_is_reported_not_waited_on(ledger: Path) -> None:
    head = anchor_path(ledger)
    shutil.move(head, str(head) + ".saved")
    os.mkfifo(head)
    result = CliRunner().invoke(cli, ["--db", str(ledger), "verify"])
    assert result.exit_code == 1, result.output
    assert (
        f"the head anchor {head} is not a regular file (a FIFO): it cannot be read" in result.output
    )
    assert "Traceback" not in result.output
    result = CliRunner().invoke(
        cli, ["--db", str(ledger), "import", "--again", str(ledger.parent / "a.jsonl")]
    )
    assert result.exit_code == 0, result.output  # the close seals nothing
    sessions = CliRunner().invoke(cli, ["--db", str(ledger), "sessions", "--json"])
    assert len(json.loads(sessions.output)) == 2


def test_an_advance_replaces_the_anchor_whole(ledger: Path, tmp_path: Path) -> None:
    # review of session 31: the anchor was truncated, then written, in place; a verify
    # reading it meanwhile (it takes no lock), or after a crash, found it empty
    head = anchor_path(ledger)
    before = head.read_bytes()
    with open(head, "rb") as reader:  # (opened as verify opens it, before the advance)
        result = CliRunner().invoke(
            cli, ["--db", str(ledger), "import", "--again", str(tmp_path / "a.jsonl")]
        )
        assert result.exit_code == 0, result.output
        assert reader.read() == before  # what it had opened is whole, not emptied
    assert head.read_bytes() != before
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("l.db.head")) == [
        "l.db.head"
    ]  # (no temporary file left)


def test_a_symlinked_anchor_stays_a_link(ledger: Path, tmp_path: Path) -> None:
    head = anchor_path(ledger)
    real = tmp_path / "real.head"
    shutil.move(head, real)
    head.symlink_to(real)
    before = real.read_bytes()
    result = CliRunner().invoke(
        cli, ["--db", str(ledger), "import", "--again", str(tmp_path / "a.jsonl")]
    )
    assert result.exit_code == 0, result.output
    assert head.is_symlink() and real.read_bytes() != before
    result = CliRunner().invoke(cli, ["--db", str(ledger), "verify"])
    assert result.exit_code == 0, result.output


def test_an_advance_keeps_the_anchors_mode(ledger: Path, tmp_path: Path) -> None:
    # final review of session 31: the replacing file was 0600 whatever the anchor was
    head = anchor_path(ledger)
    head.chmod(0o644)
    before = head.read_bytes()
    result = CliRunner().invoke(
        cli, ["--db", str(ledger), "import", "--again", str(tmp_path / "a.jsonl")]
    )
    assert result.exit_code == 0, result.output
    assert head.read_bytes() != before
    assert head.stat().st_mode & 0o777 == 0o644


def test_a_test_run_removes_its_sealing_key_s_directory(tmp_path: Path) -> None:
    """The suite keeps its sealing key in a temporary directory (``tests/conftest.py``),
    removed when the run ends (one was left behind per run; review of session 32)."""
    env = {k: v for k, v in os.environ.items() if k != "CTXLEDGER_ANCHOR_KEY_FILE"}
    env["TMPDIR"] = str(tmp_path)
    here = Path(__file__)
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k", "none", here.name],
        cwd=here.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 5, run.stdout + run.stderr  # 5: no test selected
    assert not list(tmp_path.glob("ctxledger-test-key-*"))


@pytest.mark.parametrize(
    "refusal", [errno.EPERM, errno.EOPNOTSUPP, errno.EXDEV], ids=["EPERM", "EOPNOTSUPP", "EXDEV"]
)
def test_a_file_system_without_hard_links_still_seals(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, refusal: int
) -> None:
    """vfat, SMB, some FUSE mounts: ``link`` fails. The key and the first ``.head`` are
    then made in place, as before session 43 (the link alone stopped sealing there)."""
    key = tmp_path / "keys" / "anchor.key"
    monkeypatch.setenv("CTXLEDGER_ANCHOR_KEY_FILE", str(key))

    def no_link(*_args: object, **_kwargs: object) -> None:
        raise OSError(refusal, os.strerror(refusal))

    monkeypatch.setattr(anchor.os, "link", no_link)
    db = tmp_path / "l.db"
    with Ledger.open(db) as ledger:
        sid = ledger.start_session(model="m", context_length=9000)
        ledger.append_messages(sid, [{"role": "user", "content": "hi"}])
    assert len(key.read_bytes()) > 0 and (key.stat().st_mode & 0o777) == 0o600
    assert anchor.read_anchor(db) is not None
    assert (anchor_path(db).stat().st_mode & 0o777) == 0o600
    assert [p for p in os.listdir(tmp_path) if p.endswith(".tmp")] == []
    assert os.listdir(key.parent) == ["anchor.key"]
    result = CliRunner().invoke(cli, ["--db", str(db), "verify"])
    assert result.exit_code == 0, result.output


def test_a_link_refused_for_another_reason_is_not_made_in_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refused(*_args: object, **_kwargs: object) -> None:
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(anchor.os, "link", refused)
    with pytest.raises(PermissionError):
        anchor._create(tmp_path / "x", b"body")
    assert os.listdir(tmp_path) == []
