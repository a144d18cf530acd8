"""``ctxledger migrate`` given odd ``--from`` / ``--to`` values: one plain error line, no
password shown, nothing made, the source untouched.

Session 44's fuzz round: URLs of other schemes, ports no server has (0, 99999, -1, text),
a broken IPv6 host, a NUL in the user, control characters, a URL pasted with a blank
before it; paths that are a directory, a FIFO, a device, a symlink loop, missing, empty,
``:memory:``, no database, a non-empty ledger, the same file. Found: ``--to`` given a
URL with a blank before it was taken for a path, and the copy went into folders named by
the URL, its password among them (``opening.target_text`` refuses it now, for ``--db``
too). Every other case was already refused plainly.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers.ledger_helpers import deterministic_ledger

from ctxledger.cli.main import cli
from ctxledger.integers import NOT_PRINTED_IN_LINE

SECRET = "s3cret"
URLS = [
    f" postgresql://u:{SECRET}@127.0.0.1:1/db",
    f"\tpostgres://u:{SECRET}@127.0.0.1:1/db\n",
    f"postgresql://u:{SECRET}@127.0.0.1:1/db",
    f"postgresql://u:{SECRET}@127.0.0.1:0/db",
    f"postgresql://u:{SECRET}@127.0.0.1:99999/db",
    f"postgresql://u:{SECRET}@127.0.0.1:-1/db",
    f"postgresql://u:{SECRET}@127.0.0.1:abc/db",
    f"postgresql://u:{SECRET}@[::1:bad/db",
    f"postgresql://u%00:{SECRET}@127.0.0.1:1/db",
    f"postgresql://u:{SECRET}@h\x1b[31m/db",
    f"postgresql://u:{SECRET}@127.0.0.1:1/db#\u202efrag",
    f"POSTGRESQL://u:{SECRET}@127.0.0.1:1/db",
    f"postgresql+psycopg://u:{SECRET}@127.0.0.1:1/db",
    f"mysql://u:{SECRET}@h/db",
    f"http://u:{SECRET}@h/x",
    "sqlite:///x.db",
    "file:///tmp/x.db",
]


def _source(place: Path) -> Path:
    db = place / "src.db"
    with deterministic_ledger(db) as ledger:
        sid = ledger.start_session(model="m", context_length=8_192)
        ledger.append_messages(sid, [{"role": "user", "content": "hi"}])
    return db


def _tree(place: Path) -> dict[str, str]:
    """Every entry under `place` (names and file digests; a FIFO by its kind)."""
    out = {}
    for path in sorted(place.rglob("*")):
        if path.is_symlink() or not path.is_file():
            out[str(path)] = "link" if path.is_symlink() else "dir" if path.is_dir() else "other"
        else:
            out[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def _refused(place: Path, source: str, dest: str) -> str:
    before = _tree(place)
    result = CliRunner().invoke(cli, ["migrate", "--from", source, "--to", dest])
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert result.exit_code in (1, 2), result.output
    lines = result.output.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output
    assert SECRET not in result.output and not NOT_PRINTED_IN_LINE.search(lines[0])
    assert len(lines[0]) < 1_200
    assert _tree(place) == before  # nothing made, the source untouched
    return lines[0]


@pytest.mark.parametrize("url", URLS, ids=range(len(URLS)))
@pytest.mark.parametrize("side", ["from", "to"])
def test_an_odd_url_is_one_plain_error_and_makes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, url: str, side: str
) -> None:
    monkeypatch.chdir(tmp_path)  # (a URL taken for a relative path would land here)
    source = str(_source(tmp_path))
    if side == "from":
        _refused(tmp_path, url, str(tmp_path / "out.db"))
    else:
        _refused(tmp_path, source, url)


def test_a_url_with_a_blank_before_it_is_named_as_a_url(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    line = _refused(tmp_path, str(_source(tmp_path)), f" postgresql://u:{SECRET}@h:1/db")
    assert line == (  # (refused as click reads --to: session 45 hostile10)
        "error: Invalid value for '--to': the ledger URL 'postgresql://h:1/db' has blank "
        "characters around it: give it without them (see `cli migrate --help`)"
    )
    result = CliRunner().invoke(cli, ["--db", f" postgresql://u:{SECRET}@h:1/db", "sessions"])
    assert result.exit_code == 2 and "has blank characters around it" in result.output
    assert not (tmp_path / " postgresql:").exists()


def _paths(place: Path) -> dict[str, str]:
    (place / "adir").mkdir()
    os.mkfifo(place / "fifo")
    (place / "junk.db").write_bytes(b"no database at all " * 100)
    os.symlink(place / "loop", place / "loop")
    return {
        "a directory": str(place / "adir"),
        "a directory with a slash": str(place / "adir") + "/",
        "a FIFO": str(place / "fifo"),
        "a device": "/dev/null",
        "a symlink loop": str(place / "loop"),
        "no database": str(place / "junk.db"),
        "empty": "",
    }


@pytest.mark.parametrize(
    "which",
    ["a directory", "a directory with a slash", "a FIFO", "a device", "a symlink loop",
     "no database", "empty"],
)  # fmt: skip
@pytest.mark.parametrize("side", ["from", "to"])
def test_a_path_no_ledger_can_be_at_is_one_plain_error(
    tmp_path: Path, which: str, side: str
) -> None:
    source = str(_source(tmp_path))
    path = _paths(tmp_path)[which]
    if side == "from":
        _refused(tmp_path, path, str(tmp_path / "out.db"))
    else:
        _refused(tmp_path, source, path)


@pytest.mark.parametrize("case", ["missing source", "to memory", "same file", "not empty"])
def test_other_refusals_are_plain(tmp_path: Path, case: str) -> None:
    source = _source(tmp_path)
    full = tmp_path / "full.db"
    for side in ("", ".head", ".lock"):  # (a ledger with its side files, as it is left)
        if Path(f"{source}{side}").exists():
            Path(f"{full}{side}").write_bytes(Path(f"{source}{side}").read_bytes())
    source_arg, dest = {
        "missing source": (str(tmp_path / "missing.db"), str(tmp_path / "out.db")),
        "to memory": (str(source), ":memory:"),
        "same file": (str(source), f"{tmp_path}/./src.db"),
        "not empty": (str(source), str(full)),
    }[case]
    _refused(tmp_path, source_arg, dest)
