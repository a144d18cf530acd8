"""A ledger this process cannot write (an archive, read-only media, another user's
file) reads as any other, writing nothing; a write is refused in one line.

The non-root condition is real: as root (CI) each command runs in a forked child that
has dropped to an unprivileged uid (the code is already imported, so it needs no
access to the interpreter's folders); run by another user the modes bind as they are.
Every read command's output equals its output on the same ledger while writable, and
the folder (names, modes, bytes) is the same after it.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import select
import shutil
import signal
import sqlite3
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from test_head_columns import GOLDEN

import ctxledger
from ctxledger.cli.main import cli
from ctxledger.errors import InvalidConfig, StoreError
from ctxledger.eventstore import SQLiteEventStore, readonly
from ctxledger.ledger.facade import Ledger

NOBODY = 65534
Snapshot = dict[str, tuple[int, int, str]]


def snapshot(folder: Path) -> Snapshot:
    """Every name in `folder` with its mode, size and sha256."""
    out: Snapshot = {}
    for path in sorted(folder.iterdir()):
        st = path.lstat()
        digest = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else ""
        out[path.name] = (stat.S_IMODE(st.st_mode), st.st_size, digest)
    return out


def run(db: Path, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["--db", str(db), *args])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result.exit_code, result.output


def unprivileged(fn: Callable[[], object]) -> object:
    """`fn()` with no root rights: in a forked child at uid/gid 65534 when root, else here."""
    if os.geteuid() != 0:
        return fn()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover (the child)
        os.close(read)
        try:
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
        except OSError as exc:  # (a user namespace mapping only uid 0: `unshare -r`)
            out = json.dumps({"no_drop": repr(exc)})
        else:
            try:
                out = json.dumps({"ok": fn()})
            except BaseException as exc:
                out = json.dumps({"error": repr(exc)})
        os.write(write, out.encode())
        os._exit(0)
    os.close(write)
    data, deadline = b"", time.monotonic() + 120
    try:  # (a child stuck on a lock some thread held at the fork is killed, not waited for)
        while select.select([read], [], [], max(0.0, deadline - time.monotonic()))[0]:
            chunk = os.read(read, 1 << 16)
            if not chunk:
                break
            data += chunk
    finally:
        os.close(read)
        if os.waitpid(pid, os.WNOHANG) == (0, 0):
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
    assert data, "the unprivileged child gave no answer within 120 s"
    answer = json.loads(data)
    if "no_drop" in answer:
        pytest.skip(f"root here cannot drop to uid {NOBODY}: {answer['no_drop']}")
    assert "ok" in answer, answer
    return answer["ok"]


def nothing_writable(monkeypatch: pytest.MonkeyPatch) -> None:
    """This process may write nothing (as for another user's file on a 0555 folder;
    root's os.access says yes to everything): read-only opens choose immutable."""
    monkeypatch.setattr(readonly, "_writable", lambda path, mode=os.W_OK: False)


def give_to_nobody(path: Path) -> None:
    try:
        os.chown(path, NOBODY, NOBODY)
    except OSError as exc:  # (uid 65534 is not mapped in this user namespace)
        pytest.skip(f"root here cannot give files to uid {NOBODY}: {exc!r}")


@pytest.fixture
def place(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A folder an unprivileged child can walk into (pytest's tmp_path is root's 0700),
    with HOME and the data/config dirs inside it."""
    base = Path(tempfile.mkdtemp(prefix="ctxledger-ro-"))
    base.chmod(0o755)
    for name in ("home", "data", "config"):
        (base / name).mkdir(mode=0o777)
        (base / name).chmod(0o777)
    monkeypatch.setenv("HOME", str(base / "home"))
    monkeypatch.setenv("XDG_DATA_HOME", str(base / "data"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(base / "config"))
    monkeypatch.delenv("CTXLEDGER_DB", raising=False)
    monkeypatch.delenv("CTXLEDGER_CONFIG", raising=False)
    monkeypatch.chdir(base / "home")
    monkeypatch.setenv("CTXLEDGER_ANCHOR_KEY_FILE", str(base / "anchor.key"))
    try:
        yield base
    finally:
        for path in (base, *base.rglob("*")):
            if path.is_dir():
                path.chmod(0o755)
        shutil.rmtree(base)


def read_commands(sid: str) -> list[list[str]]:
    return [
        ["sessions"],
        ["show", sid],
        ["usage", sid],
        ["chain", sid],
        ["verify"],
        ["replay", sid],
        ["replay", sid, "--verify"],
        ["replay", sid, "--summarizer", "offline"],
        ["audit", sid],
        ["trace", sid, "src/app.py"],
        ["diff", sid, sid],
        ["diff", sid, sid, "--b-db", "{db}"],
        ["recall", sid, "tests"],
        ["export", sid],
    ]


@pytest.mark.parametrize(
    ("modes", "own"),
    [((0o644, 0o755), False), ((0o444, 0o555), False), ((0o444, 0o755), True)],
    ids=["others", "0444-0555", "own-0444"],
)
def test_read_commands_read_a_ledger_this_user_cannot_write_and_write_nothing(
    place: Path, modes: tuple[int, int], own: bool
) -> None:
    """`own`: the reader's own 0444 file in its own writable folder (an open for writing
    made it 0400 and put a lock file, -wal and -shm beside it). The user config folder
    cannot be entered (a HOME of another user: its config file check was a traceback)."""
    folder = place / "archive"
    folder.mkdir()
    db = folder / "l.db"
    assert run(db, "demo", "--turns", "6", "--context-length", "4096")[0] == 0
    sid = json.loads(run(db, "sessions", "--json")[1])[-1]["session_id"]
    commands = [[arg.format(db=db) for arg in args] for args in read_commands(sid)]
    # on the writable ledger first: the outputs to expect (and every import is warm)
    expected = [list(run(db, *args)) for args in commands]
    writes = [["import", str(place / "nothing.json")], ["compress", sid], ["upgrade"]]
    (place / "nothing.json").write_text('[{"role": "user", "content": "hi"}]')
    shutil.copytree(folder, place / "warm")  # (every import the writes make, made here)
    for args in writes:
        run(place / "warm" / "l.db", *args)
    if os.geteuid() != 0 and not own:  # (no other user's file can be made: the modes bind)
        modes = (0o444, 0o555)
    for path in folder.iterdir():
        path.chmod(modes[1] if path.is_dir() else modes[0])  # (l.db.leases/ is a folder)
    folder.chmod(modes[1])
    if own and os.geteuid() == 0:
        for path in (folder, *folder.iterdir()):
            give_to_nobody(path)
    (place / "config").chmod(0o000)
    (place / "anchor.key").chmod(0o644)  # made private by the first writer: the child reads it
    before = snapshot(folder)

    got = unprivileged(lambda: [list(run(db, *args)) for args in commands])

    assert got == expected
    assert _without_own_side_files(snapshot(folder), own) == before
    refused = unprivileged(lambda: [list(run(db, *args)) for args in writes])
    for code, out in refused:  # type: ignore[attr-defined]
        assert code == 1 and out.startswith("error: ") and out.count("\n") == 1, out
    assert _without_own_side_files(snapshot(folder), own) == before


def _without_own_side_files(after: Snapshot, own: bool) -> Snapshot:
    """The folder less the empty -wal and the -shm ``mode=ro`` leaves beside the reader's
    own 0444 file (it may not remove them; ``immutable`` there gave false "changed"
    errors under a writer, session 35 review 2). Another user's file: nothing left."""
    if own:
        assert after.pop("l.db-wal")[1] == 0  # (nothing written: an empty log)
        after.pop("l.db-shm")
    return after


def test_a_read_only_store_writes_nothing_and_refuses_appends_even_for_root(
    tmp_path: Path,
) -> None:
    db = tmp_path / "l.db"
    with Ledger.open(str(db)) as ledger:
        sid = ledger.start_session(model="m", context_length=8_192)
        ledger.append_messages(sid, [{"role": "user", "content": "hello"}])
    before = snapshot(tmp_path)
    with Ledger.open(str(db), read_only=True) as ledger:
        assert [m["content"] for m in ledger.api_messages(sid)] == ["hello"]
        assert ledger.store.verify().ok
        last = ledger.store.last_seq()
        with pytest.raises(StoreError, match=r"is open read-only.*nothing was written"):
            ledger.append_messages(sid, [{"role": "user", "content": "more"}])
        with pytest.raises(StoreError, match="is open read-only"):
            ledger.store.put_blob(b"x")
        assert ledger.store.last_seq() == last
    # (mode=ro in a writable folder made an empty -wal and a -shm; its close removed them)
    assert snapshot(tmp_path) == before


def test_a_read_only_open_reads_what_a_live_writer_has_not_yet_merged(tmp_path: Path) -> None:
    """A writer holding the ledger open keeps its events in the -wal: read through -shm."""
    db = tmp_path / "l.db"
    with Ledger.open(str(db)) as writer:
        sid = writer.start_session(model="m", context_length=8_192)
        writer.append_messages(sid, [{"role": "user", "content": "unmerged"}])
        assert (tmp_path / "l.db-shm").exists()
        with Ledger.open(str(db), read_only=True) as reader:
            assert [m["content"] for m in reader.api_messages(sid)] == ["unmerged"]


def test_an_unmerged_log_with_no_shm_is_refused_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "l.db"
    with Ledger.open(str(db)) as ledger:
        ledger.start_session(model="m", context_length=8_192)
    (tmp_path / "l.db-wal").write_bytes(b"\x00" * 64)  # frames the main file lacks
    nothing_writable(monkeypatch)
    with pytest.raises(StoreError, match=r"write-ahead log .* not yet merged"):
        SQLiteEventStore(str(db), read_only=True)


def test_an_empty_file_given_to_read_commands_stays_empty(tmp_path: Path) -> None:
    db = tmp_path / "empty.db"
    db.touch()
    before = snapshot(tmp_path)
    assert run(db, "sessions", "--json") == (0, "[]\n")
    # (the head line said "seq None hash None", a head to keep for --expect-head)
    assert run(db, "verify") == (
        0,
        "ok: 0 events and 0 blobs verify\nhead: none (the log is empty)\n",
    )
    code, out = run(db, "show", "nope")
    assert code == 2 and out.startswith("error: "), out
    assert snapshot(tmp_path) == before


def test_an_older_ledger_opened_read_only_reads_as_its_upgraded_copy(tmp_path: Path) -> None:
    """Session 39 reversed the refusal of session 35: a read-only open reads a ledger an
    older ctxledger wrote as it is (0002's head columns read NULL, as rows written before
    them), so a read of an archived or another user's old ledger works; nothing written."""
    (tmp_path / "old").mkdir()
    db, upgraded_db = tmp_path / "old" / "l.db", tmp_path / "upgraded.db"
    shutil.copyfile(GOLDEN, db)
    shutil.copyfile(GOLDEN, upgraded_db)
    before, mtime = snapshot(db.parent), db.stat().st_mtime_ns
    with Ledger.open(str(db), read_only=True) as old, Ledger.open(str(upgraded_db)) as upgraded:
        assert old.verify() == upgraded.verify() and old.verify().events_checked > 0
        sids = [line.session_id for line in old.sessions()]
        assert sids and sids == [line.session_id for line in upgraded.sessions()]
        for sid in sids:
            assert old.api_messages(sid) == upgraded.api_messages(sid)
            assert old.usage(sid) == upgraded.usage(sid)
        with pytest.raises(StoreError, match="read-only"):
            old.start_session(model="m", context_length=8_192)
    assert snapshot(db.parent) == before and db.stat().st_mtime_ns == mtime


WRITER = """
import sqlite3, sys
from ctxledger.ledger.facade import Ledger
with Ledger.open(sys.argv[1]) as ledger:
    sid = ledger.start_session(model="m", context_length=1_000_000)
    for i in range(30):
        ledger.append_messages(sid, [{"role": "user", "content": f"{i}-{j}"} for j in range(100)])
conn = sqlite3.connect(sys.argv[1])
conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
conn.close()
"""


def write_elsewhere(db: Path) -> None:
    """~3,000 events appended and checkpointed into `db` by another process."""
    root = str(Path(ctxledger.__file__).resolve().parent.parent)
    env = {**os.environ, "PYTHONPATH": root}
    subprocess.run([sys.executable, "-c", WRITER, str(db)], check=True, env=env, timeout=120)


def one_session(db: Path, content: str = "hello") -> str:
    with Ledger.open(str(db)) as ledger:
        sid = ledger.start_session(model="m", context_length=8_192)
        ledger.append_messages(sid, [{"role": "user", "content": content}])
    return sid


def test_a_read_only_open_of_a_file_someone_may_write_follows_a_writer(tmp_path: Path) -> None:
    """Library path on a writable file: mode=ro, never immutable (which kept a stale,
    torn view after another process appended and checkpointed)."""
    db = tmp_path / "l.db"
    one_session(db)
    with Ledger.open(str(db), read_only=True) as reader:
        before = reader.store.last_seq()
        write_elsewhere(db)
        assert reader.store.verify().ok
        assert reader.store.last_seq() > before + 2_000


def test_a_lock_free_read_of_a_file_that_changed_says_run_it_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nothing writable here (immutable): a writer elsewhere changes the file during
    the read; verify says so instead of a stale "ok" or "restore from a backup"."""
    db = tmp_path / "l.db"
    one_session(db)
    nothing_writable(monkeypatch)
    changed = r"changed while it was read read-only; run the command again"
    with Ledger.open(str(db), read_only=True) as reader:
        reader.store.verify()
        write_elsewhere(db)
        with pytest.raises(StoreError, match=changed):
            reader.store.verify()
        malformed = sqlite3.DatabaseError("database disk image is malformed")
        assert re.search(changed, str(reader.store._translate(malformed, "read")))


def test_a_read_command_whose_ledger_changed_during_a_lock_free_read_exits_1(
    place: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = place / "l.db"
    one_session(db)
    nothing_writable(monkeypatch)
    monkeypatch.setattr(readonly.Unchanged, "changed", lambda self: True)
    code, out = run(db, "sessions")
    assert code == 1
    assert out.splitlines()[-1] == (
        f"error: the ledger {db} changed while it was read read-only; run the command again"
    )


def test_a_read_only_open_through_a_symlink_reads_the_writers_unmerged_events(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SQLite keeps -wal/-shm beside the real file: looked for there, not beside the link."""
    (tmp_path / "real").mkdir()
    real, link = tmp_path / "real" / "l.db", tmp_path / "link.db"
    link.symlink_to(real)
    with Ledger.open(str(real)) as writer:
        sid = writer.start_session(model="m", context_length=8_192)
        writer.append_messages(sid, [{"role": "user", "content": "unmerged"}])
        nothing_writable(monkeypatch)
        with Ledger.open(str(link), read_only=True) as reader:
            assert [m["content"] for m in reader.api_messages(sid)] == ["unmerged"]


def test_a_read_only_open_of_a_missing_file_is_refused_and_creates_nothing(
    tmp_path: Path,
) -> None:
    with pytest.raises(StoreError, match=r"no ledger file at .*typo\.db"):
        Ledger.open(str(tmp_path / "no" / "typo.db"), read_only=True)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("side", ["-wal", "-shm", ".lock"])
def test_a_side_file_this_user_cannot_write_makes_the_ledger_unwritable(
    place: Path, side: str
) -> None:
    folder = place / "mine"
    folder.mkdir()
    db = folder / "l.db"
    db.write_bytes(b"")
    (folder / ("l.db" + side)).write_bytes(b"")
    (folder / ("l.db" + side)).chmod(0o444)
    if os.geteuid() == 0:
        for path in (folder, db):
            give_to_nobody(path)
    assert unprivileged(lambda: readonly.is_writable(str(db))) is False
    (folder / ("l.db" + side)).unlink()
    assert unprivileged(lambda: readonly.is_writable(str(db))) is True


def test_a_read_only_open_of_a_postgresql_url_is_refused_before_connecting() -> None:
    """It ran the migrations and took appends: read-only opens are SQLite only."""
    with pytest.raises(InvalidConfig, match=r"read-only opens are SQLite only"):
        Ledger.open("postgresql://nobody@127.0.0.1:1/none", read_only=True)


def test_a_read_only_verify_without_a_key_of_this_user_warns_and_makes_none(
    place: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another user's ledger (its anchor sealed under their key): the chain is checked,
    the anchor is not (a warning, not FAILED), and no key file is made in HOME."""
    folder = place / "theirs"
    folder.mkdir()
    db = folder / "l.db"
    one_session(db)
    assert (folder / "l.db.head").exists()
    nothing_writable(monkeypatch)
    mine = place / "home" / "anchor.key"
    monkeypatch.setenv("CTXLEDGER_ANCHOR_KEY_FILE", str(mine))
    code, out = run(db, "verify")
    assert code == 0, out
    assert out.splitlines()[0].startswith("ok: ")
    assert out.splitlines()[-1] == (
        "warning: anchor not checked: no key readable by this user (the hash chain was checked)"
    )
    assert not mine.exists()
    (place / "anchor.key").chmod(0o600)  # theirs, private: unreadable to the child
    monkeypatch.setenv("CTXLEDGER_ANCHOR_KEY_FILE", str(place / "anchor.key"))
    for path in folder.iterdir():
        path.chmod(0o755 if path.is_dir() else 0o644)
    code, out = unprivileged(lambda: run(db, "verify"))  # type: ignore[misc]
    assert code == 0 and "warning: anchor not checked" in out, out


def test_migrate_copies_from_a_ledger_this_user_cannot_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "archive").mkdir()
    source, dest = tmp_path / "archive" / "l.db", tmp_path / "copy.db"
    one_session(source)
    archive = str(tmp_path / "archive")
    writable = readonly._writable
    monkeypatch.setattr(
        readonly,
        "_writable",
        lambda path, mode=os.W_OK: not path.startswith(archive) and writable(path, mode),
    )
    before = snapshot(tmp_path / "archive")
    code, out = run(dest, "migrate", "--from", str(source), "--to", str(dest))
    assert code == 0 and out.startswith("copied "), out
    assert snapshot(tmp_path / "archive") == before


def test_a_read_command_whose_writable_open_finds_the_disk_full_reads_read_only(
    place: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = place / "l.db"
    sid = one_session(db)

    def full(path: str) -> None:
        raise OSError(errno.ENOSPC, "No space left on device", path)

    monkeypatch.setattr("ctxledger.eventstore.files.create_private_file", full)
    code, out = run(db, "show", sid)
    assert code == 0 and "hello" in out, out
    code, out = run(db, "compress", sid)  # a writing command still says why
    assert code == 1 and "No space left on device" in out, out


def test_a_leftover_rollback_journal_beside_an_immutable_ledger_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "l.db"
    one_session(db)
    (tmp_path / "l.db-journal").write_bytes(b"\x00" * 512)  # pages to roll back
    nothing_writable(monkeypatch)
    with pytest.raises(StoreError, match=r"rollback journal .*l\.db-journal"):
        SQLiteEventStore(str(db), read_only=True)


def test_reading_another_users_ledger_in_a_shared_folder_leaves_nothing_beside_it(
    place: Path,
) -> None:
    """A sticky world-writable folder (/tmp): mode=ro made a -wal and -shm owned by the
    reader there, so the owner's next write failed and the owner could not delete them."""
    if os.geteuid() != 0:
        pytest.skip("needs two users: the owner (root here) and the reader (uid 65534)")
    folder = place / "shared"
    folder.mkdir()
    folder.chmod(0o1777)
    db = folder / "l.db"
    sid = one_session(db)
    db.chmod(0o644)
    (folder / "l.db.head").chmod(0o644)
    (place / "anchor.key").chmod(0o644)
    before = snapshot(folder)
    got = unprivileged(lambda: [list(run(db, *args)) for args in (["sessions"], ["verify"])])
    assert [code for code, _ in got] == [0, 0], got  # type: ignore[attr-defined]
    assert sid[:8] in got[0][1]  # type: ignore[index]
    assert snapshot(folder) == before
    with Ledger.open(str(db)) as ledger:  # the owner writes on
        ledger.append_messages(sid, [{"role": "user", "content": "more"}])


def test_the_readers_own_ledger_in_a_folder_it_cannot_write_reads(place: Path) -> None:
    """mode=ro on a file this user may write needs a -shm in the folder: refused there,
    it was "attempt to write a readonly database" for every read command."""
    folder = place / "root-owned"
    folder.mkdir()
    db = folder / "l.db"
    sid = one_session(db)
    for path in folder.iterdir():
        path.chmod(0o755 if path.is_dir() else 0o644)
        if os.geteuid() == 0:
            give_to_nobody(path)
    (place / "anchor.key").chmod(0o644)
    if os.geteuid() != 0:
        folder.chmod(0o555)
    before = snapshot(folder)
    got = unprivileged(
        lambda: [list(run(db, *args)) for args in (["sessions"], ["verify"], ["show", sid])]
    )
    assert [code for code, _ in got] == [0, 0, 0], got  # type: ignore[attr-defined]
    assert "hello" in got[2][1]  # type: ignore[index]
    assert snapshot(folder) == before


HOLDER = """
import sys
from ctxledger.ledger.facade import Ledger
with Ledger.open(sys.argv[1]) as ledger:
    sid = ledger.start_session(model="m", context_length=8_192)
    ledger.append_messages(sid, [{"role": "user", "content": "unmerged"}])
    print(sid, flush=True)
    sys.stdin.read()
"""


def test_another_users_live_writer_is_read_through_its_shm_in_a_folder_we_cannot_write(
    place: Path,
) -> None:
    """A -wal and a -shm this user can read but not write: mode=ro reads the writer's
    unmerged events (immutable would not see them) and makes nothing."""
    folder = place / "live"
    folder.mkdir()
    db = folder / "l.db"
    root = str(Path(ctxledger.__file__).resolve().parent.parent)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(db)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": root},
    )
    try:
        assert holder.stdout is not None
        sid = holder.stdout.readline().strip()
        for path in folder.iterdir():
            path.chmod(0o755 if path.is_dir() else 0o644)
        folder.chmod(0o555)
        assert (folder / "l.db-shm").exists() and (folder / "l.db-wal").stat().st_size > 0
        before = snapshot(folder)

        def read() -> list[str]:
            with Ledger.open(str(db), read_only=True) as reader:
                return [m["content"] for m in reader.api_messages(sid)]

        assert unprivileged(read) == ["unmerged"]
        assert snapshot(folder) == before
    finally:
        folder.chmod(0o755)
        holder.communicate("", timeout=60)
