"""A `--db` that names a directory or a file that is no database changes nothing.

Found in session 28: opening ``--db /tmp`` cut the directory's mode to 0700 (the
"make an old ledger private" step ran on whatever the path named, as its owner), and
``--db notes.txt`` made the text file 0600, then failed as a "damaged" ledger. Both
are now refused before anything on disk is touched: a directory as bad input (exit
2), a file that is no SQLite database as the integrity error it may also be (exit 1:
it may be a ledger whose first page is damaged).
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from click.testing import CliRunner

from ctxledger import Ledger
from ctxledger.cli.main import cli
from ctxledger.errors import IntegrityError, InvalidInput
from tests.test_read_only_ledger import place, unprivileged

__all__ = ["place"]  # (the fixture, used here)


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def _listing(path: Path) -> list[str]:
    return sorted(os.listdir(path))


@pytest.mark.parametrize(
    "command", [["sessions"], ["verify"], ["import", "-", "--format", "openai"]]
)
def test_a_directory_is_refused_and_keeps_its_mode(tmp_path: Path, command: list[str]) -> None:
    target = tmp_path / "shared"
    target.mkdir()
    os.chmod(target, 0o1777)
    before = _listing(tmp_path)
    result = CliRunner().invoke(
        cli, ["--db", str(target), *command], input=json.dumps([{"role": "user", "content": "hi"}])
    )
    assert result.exit_code == 2, result.output
    assert "directory" in result.output or "no ledger file" in result.output
    assert _mode(target) == 0o1777
    assert _listing(tmp_path) == before and _listing(target) == []


def test_a_file_that_is_no_database_is_refused_untouched(tmp_path: Path) -> None:
    notes = tmp_path / "alt.toml"
    notes.write_text("threshold = 0.5\n")
    os.chmod(notes, 0o644)
    before = _listing(tmp_path)
    result = CliRunner().invoke(cli, ["--db", str(notes), "sessions"])
    assert result.exit_code == 1, result.output
    assert "not an SQLite database" in result.output and "check the path" in result.output
    assert _mode(notes) == 0o644 and notes.read_text() == "threshold = 0.5\n"
    assert _listing(tmp_path) == before
    with pytest.raises(IntegrityError, match="not an SQLite database"):
        Ledger.open(str(notes))
    assert _mode(notes) == 0o644 and _listing(tmp_path) == before


def test_an_existing_ledger_others_could_read_is_still_made_private(tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    Ledger.open(str(path)).close()
    os.chmod(path, 0o644)
    Ledger.open(str(path)).close()
    assert _mode(path) == 0o600


def test_an_empty_file_becomes_a_ledger(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    path.touch()
    ledger = Ledger.open(str(path))
    assert ledger.start_session(model="m", context_length=8_192)
    ledger.close()


@pytest.mark.parametrize(
    ("target", "said"),
    [
        (5, "a ledger is a file path or a postgresql:// URL, got int"),
        ("l\x00.db", "holds a NUL character"),
        ("l\ud800.db", "holds a lone surrogate"),  # (was a UnicodeEncodeError)
    ],
)
def test_a_target_no_file_can_have_is_invalid_input(
    tmp_path: Path, target: object, said: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A number was a TypeError, a NUL in the path a ValueError ('embedded null byte')."""
    from ctxledger.errors import InvalidInput

    monkeypatch.chdir(tmp_path)
    with pytest.raises(InvalidInput, match=said):
        Ledger.open(target)  # type: ignore[arg-type]
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("bad", ["\ud800", "\x00"])
def test_a_url_no_server_can_have_is_called_a_url_without_its_password(bad: str) -> None:
    """A lone surrogate or NUL in a URL was reported as 'the ledger path …', password
    and all."""
    from ctxledger.errors import InvalidInput

    with pytest.raises(InvalidInput) as caught:
        Ledger.open(f"postgresql://u:hunter2@h{bad}/db")
    assert str(caught.value).startswith("the ledger URL 'postgresql://h"), caught.value
    assert "which no URL can" in str(caught.value) and "hunter2" not in str(caught.value)


def test_a_ledger_whose_file_name_is_not_utf8_opens_again(tmp_path: Path) -> None:
    """A name holding byte 0xff (text: a lone surrogate) was created, then refused on
    every later open: the foreign-database check quoted the name as UTF-8
    (UnicodeEncodeError). A bytes path is taken as the same file."""
    name = os.fsdecode(os.fsencode(tmp_path) + b"/l\xff.db")
    for _ in range(2):
        with Ledger.open(name) as ledger:
            ledger.start_session(model="m", context_length=9000)
    with Ledger.open(os.fsencode(name)) as ledger:  # type: ignore[arg-type]
        assert ledger.store.last_seq() == 2
    shown = CliRunner().invoke(cli, ["--db", name, "sessions", "--json"])
    assert shown.exit_code == 0 and len(json.loads(shown.output)) == 2


@pytest.mark.parametrize("damage", ["truncated", "overwritten"])
def test_a_damaged_ledger_is_one_error_line_that_says_what_to_do(
    tmp_path: Path, damage: str
) -> None:
    """A ledger cut in half, or with garbage over its middle pages: every command is one
    `error:` line (exit 1) naming the file and the way out; it said "run verify()", a
    library call, which for a file that does not open fails the same way."""
    db = tmp_path / "l.db"
    with Ledger.open(db) as ledger:
        sid = ledger.start_session(model="m", context_length=9000)
        ledger.append_messages(
            sid, [{"role": "user", "content": f"m{i} " * 400} for i in range(60)]
        )
    size = db.stat().st_size
    with db.open("r+b") as fh:
        if damage == "truncated":
            fh.truncate(size // 2)
        else:
            fh.seek(size // 2)
            fh.write(bytes(range(256)) * 32)
    for args in (["sessions"], ["verify"], ["show", sid], ["import", "-"]):
        message = '[{"role": "user", "content": "hi"}]'
        result = CliRunner().invoke(cli, ["--db", str(db), *args], input=message)
        assert result.exit_code == 1, (args, result.output)
        (line,) = result.output.splitlines()
        assert line.startswith("error: could not ") and str(db) in line
        assert "restore it from a backup (`ctxledger verify`" in line


def test_a_sqlite_uri_is_refused_and_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`file:/x/u.db?mode=ro` was taken as a relative path: the open failed but left the
    folders ./file:/x/ and a lock file behind."""
    from ctxledger.errors import InvalidInput

    monkeypatch.chdir(tmp_path)
    with pytest.raises(InvalidInput, match="is a SQLite URI, not a ledger path"):
        Ledger.open(f"file:{tmp_path}/u.db?mode=ro")
    message = '[{"role": "user", "content": "hi"}]'
    result = CliRunner().invoke(cli, ["--db", "file:u.db", "import", "-"], input=message)
    assert result.exit_code == 2 and "SQLite URI" in result.output
    assert os.listdir(tmp_path) == []


def test_a_ledger_path_under_the_home_folder_is_expanded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`CTXLEDGER_DB="~/x.db"` (a .env file, a quoted --db) made a folder named ~ in the
    working directory."""
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(work)
    with Ledger.open("~/x.db") as ledger:
        ledger.start_session(model="m", context_length=9000)
    assert (home / "x.db").is_file() and os.listdir(work) == []
    monkeypatch.setenv("CTXLEDGER_DB", "~/x.db")
    shown = CliRunner().invoke(cli, ["sessions", "--json"])
    assert shown.exit_code == 0 and len(json.loads(shown.output)) == 1
    # review of session 29: verify and upgrade checked the expanded path but opened
    # "~/x.db" under the working directory: "ok: 0 events" for a file never looked at
    for args in (["verify", "--json"], ["upgrade"], ["--db", "~/x.db", "verify", "--json"]):
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 0, (args, result.output)
        if "verify" in args:
            assert json.loads(result.output)["events_checked"] > 0, result.output
    assert os.listdir(work) == []


@pytest.mark.parametrize("given", ["l.db", None, 5])
def test_a_path_given_where_an_opened_store_or_ledger_goes_is_named(
    tmp_path: Path, given: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A library user's mistake (session 37's fuzzing): ``Ledger("l.db")`` was an
    AttributeError from deep in the fold ('str' object has no attribute
    'load_checkpoint'), ``ContextService("l.db")`` one on ``.config``. Both now say
    what they take and which call opens a path; nothing is created."""
    from ctxledger import ContextService
    from ctxledger.errors import InvalidInput

    monkeypatch.chdir(tmp_path)
    with pytest.raises(InvalidInput, match=r"opened event store, got .*Ledger\.open\(path\)"):
        Ledger(given)  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match=r"takes a Ledger, got .*ContextService\.open\(path\)"):
        ContextService(given)  # type: ignore[arg-type]
    assert os.listdir(tmp_path) == []


def test_an_existing_open_of_a_missing_file_is_refused_and_creates_nothing(
    tmp_path: Path,
) -> None:
    """(Review 2, G4: ``Ledger.open(path, existing=True)`` created the missing file; only
    a URL was checked.) A missing file is refused as the read commands refuse it, and
    neither it nor its folder is made; an existing ledger still opens."""
    missing = tmp_path / "nowhere" / "ledger.db"
    with pytest.raises(InvalidInput, match="no ledger file at"):
        Ledger.open(missing, existing=True)
    assert not missing.parent.exists()
    Ledger.open(tmp_path / "made.db").close()
    Ledger.open(tmp_path / "made.db", existing=True).close()


def test_an_existing_open_of_an_empty_or_foreign_file_is_refused_and_changes_nothing(
    tmp_path: Path,
) -> None:
    """(Session 38: ``Ledger.open(empty_file, existing=True)`` wrote a ledger's schema into
    it.) `existing` says a ledger is there: an empty file opened for writing, a text file
    and another program's SQLite database are each one clear error, the file's bytes
    unchanged and nothing beside it; so is a SQLite database holding no table (a PRAGMA
    alone writes its first page: review 1). Read-only, an empty file still reads as an
    empty ledger (session 32: the read commands), and the read commands leave it as it was."""
    import contextlib
    import sqlite3

    empty, text, foreign = tmp_path / "empty.db", tmp_path / "notes.db", tmp_path / "app.db"
    empty.write_bytes(b"")
    text.write_text("not a ledger\n")
    # SQLite databases holding no table: a first page written by a PRAGMA alone (WAL
    # mode: the read that looks leaves no -wal/-shm), and one marked as another program's
    bare = {name: tmp_path / f"{name}.db" for name in ("wal", "paged", "marked")}
    setup = ("PRAGMA journal_mode=WAL", "PRAGMA page_size=8192; VACUUM", "PRAGMA user_version=3")
    for path, script in zip([foreign, *bare.values()], ["CREATE TABLE t (x)", *setup], strict=True):
        with contextlib.closing(sqlite3.connect(path)) as conn:
            conn.executescript(script)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    no_table = "is a SQLite database holding no table, not a ledger.*nothing was written"
    cases = [
        (empty, InvalidInput, "is an empty file, not a ledger.*nothing was written"),
        (text, IntegrityError, "is not an SQLite database"),
        (foreign, InvalidInput, "is not a ctxledger ledger"),
        (bare["wal"], InvalidInput, no_table),
        (bare["paged"], InvalidInput, no_table),
        (bare["marked"], InvalidInput, "another program's: application id 0, user version 3"),
    ]
    for path, error, says in cases:
        with pytest.raises(error, match=says):
            Ledger.open(path, existing=True)
    with Ledger.open(empty, existing=True, read_only=True) as ledger:
        assert ledger.sessions() == []
    for args in (["sessions", "--json"], ["verify"], ["show", "x"], ["pin", "x", "1"]):
        CliRunner().invoke(cli, ["--db", str(empty), *args])
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


def _demo_ledger(folder: Path) -> Path:
    db = folder / "l.db"
    with Ledger.open(db) as ledger:
        sid = ledger.start_session(model="m", context_length=9000)
        ledger.append_messages(sid, [{"role": "user", "content": "hi"}])
    return db


def _tree(folder: Path) -> dict[str, bytes | None]:
    return {
        str(p.relative_to(folder)): (p.read_bytes() if p.is_file() else None)
        for p in sorted(folder.rglob("*"))
    }


@pytest.mark.parametrize(
    ("name", "said"),
    [
        ("dir", "is a directory, not a ledger file: give a file's path (such as "),
        ("/dev/null", "is a character device, not a ledger file"),
        ("l.db-wal", "is SQLite's write-ahead log of the ledger "),
        ("l.db-shm", "is SQLite's shared-memory index of the ledger "),
        ("l.db-journal", "is SQLite's rollback journal of the ledger "),
        ("l.db.lock", "is the write-lock file of the ledger "),
        ("l.db.head", "is the sealed head anchor of the ledger "),
        ("l.db.leases", "is the folder of lease files of the ledger "),
        ("l.db.leases/x", "is a lease file of the ledger "),
        ("l.db/", "ends with '/', a folder's name: give a file's path"),
        ("ftp://h/l", "unknown ledger URL scheme 'ftp'"),
        ("", "the ledger path is empty"),
    ],
)
@pytest.mark.parametrize(
    "command", [["sessions"], ["verify"], ["show", "x"], ["import", "-", "--format", "openai"]]
)
def test_every_wrong_db_is_one_clear_line_and_changes_nothing(
    tmp_path: Path, name: str, said: str, command: list[str]
) -> None:
    """Session 41: `--db /tmp` said "no ledger file" (it is a directory), and `--db
    L.db.lock` made the ledger's lock file a ledger of its own (`import`, `demo`) or read
    it as an empty one (`sessions`: "no sessions"). Each wrong --db is refused before
    anything is made, by a command that reads and by one that writes."""
    (tmp_path / "dir").mkdir()
    _demo_ledger(tmp_path)
    before = _tree(tmp_path)
    db = name if name in ("/dev/null", "ftp://h/l", "") else f"{tmp_path}/{name}"
    message = json.dumps([{"role": "user", "content": "hi"}])
    result = CliRunner().invoke(cli, ["--db", db, *command], input=message)
    assert result.exit_code == 2, result.output
    (line,) = result.output.splitlines()
    assert line.startswith("error: ") and said in line, line
    if "of the ledger" in said:
        assert f"give the ledger's own path ({tmp_path / 'l.db'})" in line
    assert _tree(tmp_path) == before


@pytest.mark.parametrize("name", ["l.db-wal", "l.db.lock", "l.db.head", "l.db.leases/x"])
def test_the_library_opens_no_ledger_in_a_side_file_s_name(tmp_path: Path, name: str) -> None:
    _demo_ledger(tmp_path)
    before = _tree(tmp_path)
    with pytest.raises(InvalidInput, match=r"of the ledger .*give the ledger's own path"):
        Ledger.open(tmp_path / name)
    assert _tree(tmp_path) == before


def test_a_side_file_name_is_a_ledger_of_its_own_when_no_ledger_owns_it(tmp_path: Path) -> None:
    """Only the name of a side file of a ledger that exists is refused: `notes.head`
    with no `notes` beside it is a name like any other."""
    with Ledger.open(tmp_path / "notes.head") as ledger:
        ledger.start_session(model="m", context_length=9000)


@pytest.mark.parametrize(
    ("base", "copy"),
    [
        ("text", "notes.head"),  # the file the name points at is no database
        ("ledger", "proj-journal"),  # the named file is a database itself
        ("text", "run.leases/l.db"),
    ],
)
def test_a_ledger_in_a_side_file_s_name_opens_when_it_is_one(
    tmp_path: Path, base: str, copy: str
) -> None:
    """Review of session 41: a name was a side file whenever some regular file had the
    name minus the suffix, so a real ledger copied to `notes.head` beside a text file
    `notes` was refused by every command and by Ledger.open. Now the base must be a
    SQLite file and the named one must not be."""
    (tmp_path / "src").mkdir()
    ledger_file = _demo_ledger(tmp_path / "src")
    target = tmp_path / copy
    owner = tmp_path / copy.split("/")[0].removesuffix(".head").removesuffix("-journal")
    owner = owner.with_suffix("") if owner.name.endswith(".leases") else owner
    target.parent.mkdir(exist_ok=True)
    if base == "text":
        owner.write_text("my notes\n")
    else:
        owner.write_bytes(ledger_file.read_bytes())
    target.write_bytes(ledger_file.read_bytes())
    for args in (["sessions", "--json"], ["verify"]):
        result = CliRunner().invoke(cli, ["--db", str(target), *args])
        assert result.exit_code == 0, result.output
    assert (
        len(json.loads(CliRunner().invoke(cli, ["--db", str(target), "sessions", "--json"]).output))
        == 1
    )
    with Ledger.open(target) as ledger:
        assert len(ledger.sessions()) == 1


def _sessions_unprivileged(db: Path) -> list[object]:
    """`ctxledger --db DB sessions` run as an unprivileged user: [exit code, output]."""

    def run() -> list[object]:
        result = CliRunner().invoke(cli, ["--db", str(db), "sessions"])
        return [result.exit_code, result.output]

    return unprivileged(run)  # type: ignore[no-any-return]


def test_a_ledger_this_user_cannot_read_says_so(place: Path) -> None:
    """It said "could not open the ledger read-only …: unable to open database file"."""
    db = _demo_ledger(place)
    os.chmod(db, 0o000)

    code, output = _sessions_unprivileged(db)
    assert code == 1, output
    assert f"the ledger path {db} cannot be read by this user (the file is uid" in str(output)
    assert "mode 0000" in str(output)


def test_migrate_to_is_checked_as_a_ledger_path_named_to(tmp_path: Path) -> None:
    """Review of session 41: `migrate --to L.db.head` was refused as "the ledger path";
    `--to` is a ledger target: refused as `--db` is, named `--to`, and a new one's
    missing folders are made (README, "The ledger path")."""
    db = _demo_ledger(tmp_path)
    (tmp_path / "l.db.head").write_text("not an anchor\n")
    before = _tree(tmp_path)
    args = ["migrate", "--from", str(db), "--to", str(tmp_path / "l.db.head")]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2, result.output
    assert result.output.startswith(f"error: --to {tmp_path / 'l.db.head'} is the sealed head")
    assert _tree(tmp_path) == before
    deep = tmp_path / "new" / "a" / "m.db"
    result = CliRunner().invoke(cli, ["migrate", "--from", str(db), "--to", str(deep)])
    assert result.exit_code == 0, result.output
    with Ledger.open(deep, existing=True) as ledger:
        assert len(ledger.sessions()) == 1


def test_a_user_s_own_unreadable_ledger_says_chmod(place: Path) -> None:
    """Review of session 41: a user's own mode-0200 ledger was told "run as its owner"."""
    db = _demo_ledger(place)
    os.chmod(db, 0o200)
    if os.geteuid() == 0:
        os.chown(db, 65534, 65534)

    code, output = _sessions_unprivileged(db)
    assert code == 1, output
    assert f"cannot be read by this user, its owner (mode 0200): chmod u+r {db}" in str(output)


def test_a_ledger_in_a_folder_this_user_cannot_search_is_exit_1(place: Path) -> None:
    """Review of session 41: a folder on the way this user may not search was exit 2
    (stat_of's name error) where the README says rights problems are exit 1."""
    (place / "shut").mkdir()
    db = _demo_ledger(place / "shut")
    os.chmod(place / "shut", 0o000)

    message = json.dumps([{"role": "user", "content": "hi"}])
    commands = (["sessions"], ["import", "-", "--format", "openai"])

    def run() -> list[object]:
        results = [CliRunner().invoke(cli, ["--db", str(db), *a], input=message) for a in commands]
        return [[r.exit_code for r in results], [r.output for r in results]]

    try:
        codes, outputs = unprivileged(run)  # type: ignore[misc]
    finally:
        os.chmod(place / "shut", 0o700)
    assert codes == [1, 1], outputs
    for output in outputs:  # type: ignore[attr-defined]
        assert f"the ledger path {db} cannot be reached by this user (Permission denied)" in output
