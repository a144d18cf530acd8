"""A command that fails removes the ``.lock`` its open made beside a ledger (session 42).

Before, a refused repeat ``import`` or a refused ``show`` made the ``.lock`` of a ledger
that had none, and left it. A ledger a failed command made on a new path stays (session
43: nothing can prove no other process opened it meanwhile). See
``ctxledger/eventstore/leftovers.py`` for what is removed and what is kept.
"""

from __future__ import annotations

import json
import sqlite3
import stat
from pathlib import Path

from click.testing import CliRunner

from ctxledger import Ledger
from ctxledger.cli.main import cli
from ctxledger.unicodecheck import not_unicode

_MESSAGES = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]


def _tree(folder: Path) -> dict[str, tuple[int, bytes | None]]:
    """Every name under `folder`, with its mode and (a file's) bytes."""
    return {
        str(p.relative_to(folder)): (
            stat.S_IMODE(p.lstat().st_mode),
            p.read_bytes() if p.is_file() else None,
        )
        for p in sorted(folder.rglob("*"))
    }


def _run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.output


def _conversation(folder: Path) -> Path:
    path = folder / "in.json"
    path.write_text(json.dumps(_MESSAGES))
    return path


def _ledger_without_lock(folder: Path) -> Path:
    db = folder / "l.db"
    with Ledger.open(db) as ledger:
        sid = ledger.start_session(model="m", context_length=9000)
        ledger.append_messages(sid, _MESSAGES)
    (folder / "l.db.lock").unlink()
    return db


def test_an_import_refused_after_the_open_keeps_the_new_ledger(tmp_path: Path) -> None:
    """A ledger made on a new path stays when the command fails (as before session 42):
    another process may have opened it meanwhile, and no check can prove it did not."""
    source = _conversation(tmp_path)
    db = tmp_path / "new" / "l.db"
    code, out = _run("--db", str(db), "import", "--model", " ", str(source))
    assert code == 2 and "the model to record must be a non-empty string" in out, out
    with Ledger.open(db, read_only=True, existing=True) as ledger:
        assert ledger.store.last_seq() == 0


def test_a_refused_repeat_or_read_makes_no_lock_beside_a_ledger(tmp_path: Path) -> None:
    db = _ledger_without_lock(tmp_path)
    source = _conversation(tmp_path)
    assert _run("--db", str(db), "import", str(source))[0] == 0
    (tmp_path / "l.db.lock").unlink()
    before = _tree(tmp_path)
    code, out = _run("--db", str(db), "import", str(source))
    assert code == 2 and "was imported before" in out, out
    for command in (["show", "nope"], ["recall", "nope", "x"], ["pin", "nope", "0"]):
        code, out = _run("--db", str(db), *command)
        assert code == 2 and "no session 'nope'" in out, (command, out)
    assert _tree(tmp_path) == before


def test_a_failed_migrate_makes_no_lock_beside_its_source(tmp_path: Path) -> None:
    """The copy's source fails to verify: the source (only read) gets no .lock; the new
    --to stays, as any ledger a failed command made."""
    source = _ledger_without_lock(tmp_path)
    with sqlite3.connect(source) as conn:  # (an event's bytes edited: its hash fails)
        conn.execute("UPDATE events SET payload = CAST('{}' AS BLOB) WHERE seq = 2")
    conn.close()
    before = _tree(tmp_path)
    code, out = _run("migrate", "--from", str(source), "--to", str(tmp_path / "new.db"))
    assert code == 1 and out.startswith("error: "), out
    after = _tree(tmp_path)
    assert {k: v for k, v in after.items() if not k.startswith("new.db")} == before


def test_bytes_that_are_not_utf8_are_named_as_bytes(tmp_path: Path) -> None:
    """``recall S $'caf\\xe9'`` was told of "half of an escaped emoji pair" (session 41)."""
    db = _ledger_without_lock(tmp_path)
    for command in ("recall", "trace"):
        code, out = _run("--db", str(db), command, "s", "caf\udce9\udcff")
        assert code == 2, out
        assert "holds bytes that are not UTF-8 (0xe9 0xff)" in out, out
        assert "emoji" not in out
    try:
        "a\ud83db".encode()
    except UnicodeEncodeError as exc:  # a lone surrogate JSON can spell: still the pair
        assert not_unicode("the query", exc) == (
            "the query holds text that is not valid Unicode ('\\ud83d', half of an escaped "
            "emoji pair)"
        )
