"""Session 41 (helper cli6): a reference of the wrong kind is named as what it is, and
every file a command writes (OUT) is checked one way, before anything is read or made."""

from __future__ import annotations

import json
from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from helpers.ledger_helpers import conversation_file

from ctxledger.cli.app import _one_line
from ctxledger.cli.main import cli
from ctxledger.errors import InvalidInput, UnknownSession
from ctxledger.ledger.facade import Ledger


def run(db: Path, *args: str, input: str | None = None) -> click.testing.Result:
    return CliRunner().invoke(cli, ["--db", str(db), *args], input=input, catch_exceptions=False)


@pytest.fixture(scope="module")
def compacted(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str, str]:
    """(ledger, the root session, its compaction, the continuation) of one imported,
    compressed conversation."""
    folder = tmp_path_factory.mktemp("compacted")
    path = conversation_file(folder / "conv.jsonl")
    db = folder / "l.db"
    result = run(db, "import", str(path), "--context-length", "16000", "--model", "m")
    sid = result.output.strip().splitlines()[-1]
    assert run(db, "compress", sid).exit_code == 0
    with Ledger.open(db) as ledger:
        (cid,) = ledger.chains.state.compacted
        tip = ledger.tip(sid)
    return db, sid, cid, tip


@pytest.mark.parametrize("command", ["show", "usage", "chain", "export", "compress", "pin"])
@pytest.mark.parametrize("given", ["whole", "prefix"])
def test_a_compaction_id_given_for_a_session_is_named_as_one(
    compacted: tuple[Path, str, str, str], command: str, given: str
) -> None:
    """`show cmp_…` said "no session"; it now says the id is a compaction, which commands
    take it, and the session it started (whose view is the one it made)."""
    db, sid, cid, tip = compacted
    before = db.read_bytes()
    ref = cid if given == "whole" else cid[:-2]
    extra = ["1"] if command == "pin" else []
    result = run(db, command, ref, *extra)
    assert result.exit_code == 2, result.output
    (line,) = result.stderr.splitlines()
    assert line == (
        f"error: {cid} is a compaction (of session {sid} into {tip}), not a session: "
        f"`ctxledger expand {cid}` shows the messages it summarized, `ctxledger diff {cid}` "
        f"the view it replaced beside the one it made; `ctxledger show {tip}` shows the "
        "session it started"
    )
    assert result.stdout == "" and db.read_bytes() == before


def test_a_prefix_of_compaction_ids_only_says_so(compacted: tuple[Path, str, str, str]) -> None:
    db, _sid, cid, _tip = compacted
    with Ledger.open(db) as ledger:
        state = ledger.chains.state
        state.compacted[cid[:-1] + "~"] = state.compacted[cid]  # (a second, in memory)
        with pytest.raises(UnknownSession, match=r"it begins 2 compaction ids; `ctxledger"):
            ledger.resolve(cid[:4])
    missing = run(db, "show", "nothing-like-it")
    assert missing.exit_code == 2
    assert (
        missing.stderr == "error: no session 'nothing-like-it'; `ctxledger sessions` lists them\n"
    )


def _hermes_like_db(path: Path) -> None:
    import sqlite3

    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE t (x)")
    conn.close()


@pytest.mark.parametrize(
    ("stdin", "args", "said"),
    [
        (
            "hello",
            [],
            "error: stdin:1: cannot tell the format (not JSON: JSON is malformed: invalid "
            "character (byte 0)); pass --format, one of: openai, anthropic, hermes-db, "
            "claude-code, codex, sharegpt",
        ),
        (
            "[]",
            ["--format", "foo"],
            "error: unknown import format 'foo'; expected one of: openai, anthropic, "
            "hermes-db, claude-code, codex, sharegpt",
        ),
        ("[]", ["--format", "Hermes_DB"], "error: the Hermes_DB format is read from a file, not from text"),
        ("[]", ["--format", "hermes-db"], "error: the hermes-db format is read from a file, not from text"),
    ],
)  # fmt: skip
def test_import_names_formats_as_the_user_types_them(
    tmp_path: Path, stdin: str, args: list[str], said: str
) -> None:
    """The messages spelled `hermes_db`, `claude_code` (the registry's keys) where the
    help and the user write `hermes-db`, `claude-code`."""
    db = tmp_path / "l.db"
    result = run(db, "import", "-", *args, input=stdin)
    assert result.exit_code == 2 and result.stderr == said + "\n", result.stderr
    assert not db.exists()


@pytest.mark.parametrize("fmt", ["claude-code", " codex "])
def test_a_sqlite_file_imported_as_a_text_format_says_what_it_is(tmp_path: Path, fmt: str) -> None:
    """It said "not UTF-8 text (invalid start byte at byte 31)"."""
    source, db = tmp_path / "state.db", tmp_path / "l.db"
    _hermes_like_db(source)
    result = run(db, "import", str(source), "--format", fmt)
    assert result.exit_code == 2
    assert result.stderr == (
        f"error: {source}: a SQLite database, which the {fmt.strip()} format does not read "
        "(it reads text); a Hermes state.db is hermes-db, or give no format\n"
    )
    assert not db.exists()


def _writers(db: Path, sid: str, out: str) -> dict[str, list[str]]:
    """Every command that writes a file, writing `out`."""
    records = db.parent / "in.jsonl"
    if not records.exists():
        turns = [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "hello"}]
        records.write_text(json.dumps({"id": "r", "conversations": turns}) + "\n")
    return {
        "export": ["export", sid, "--out", out],
        "replay": ["replay", sid, "--summarizer", "offline", "--out", out],
        "trajectories": ["trajectories", "compress", str(records), out],
    }


def _files(folder: Path) -> dict[str, bytes | None]:
    return {
        str(p.relative_to(folder)): (p.read_bytes() if p.is_file() else None)
        for p in sorted(folder.rglob("*"))
    }


@pytest.mark.parametrize("command", ["export", "replay", "trajectories"])
@pytest.mark.parametrize(
    ("out", "said"),
    [
        ("nowhere/x.out", "the folder {folder}/nowhere does not exist (create it first; no folder is made"),
        ("in.jsonl/x.out", "{folder}/in.jsonl is a file, not a folder"),
        ("l.db", "is the ledger or one of its files: give another file"),
        ("l.db.head", "is the ledger or one of its files: give another file"),
        ("o.db.head", "is the sealed head anchor of the ledger {folder}/o.db: give another file"),
        ("o.db-wal", "is SQLite's write-ahead log of the ledger {folder}/o.db: give another file"),
        ("o.db", "is a SQLite database (a ledger is never replaced by an output)"),
        ("-", "-: this command writes a file, not stdout; give a name"),
    ],
)  # fmt: skip
def test_every_writing_command_checks_out_one_way(
    compacted: tuple[Path, str, str, str], command: str, out: str, said: str
) -> None:
    """`replay --out a/b/x.db` made the folders a/b, `export --out a/b/x.json` refused
    them: one check (cli/outpath.py) for every file a command writes, before it reads.
    `o.db` is ANOTHER ledger: `export --out o.db.head` wrote JSON over its head anchor."""
    db, sid, _cid, _tip = compacted
    folder = db.parent
    Ledger.open(folder / "o.db").close()
    _writers(db, sid, "x")
    before = _files(folder)
    named = out if out == "-" else f"{folder}/{out}"
    result = run(db, *_writers(db, sid, named)[command])
    if out == "-" and command == "export":  # (stdout: the JSON, no file)
        assert result.exit_code == 0, result.output
        assert json.loads(result.stdout)["messages"] and _files(folder) == before
        return
    assert result.exit_code == 2, result.output
    (line,) = result.stderr.splitlines()
    option = "OUT" if command == "trajectories" else "--out"
    assert line.startswith(f"error: {option} "), line
    assert said.format(folder=folder) in line, line
    assert result.stdout == "" and _files(folder) == before


def test_trajectories_never_writes_its_metrics_over_the_ledger(
    compacted: tuple[Path, str, str, str],
) -> None:
    """OUT `x.jsonl` writes `x.metrics.jsonl` and `x.report.json` beside it: a ledger of
    either name was written over."""
    db, sid, _cid, _tip = compacted
    other = db.parent / "run.report.json"
    Ledger.open(other).close()
    before = other.read_bytes()
    args = _writers(db, sid, str(db.parent / "run.jsonl"))["trajectories"]
    result = CliRunner().invoke(cli, ["--db", str(other), *args])
    assert result.exit_code == 2 and "is the ledger or one of its files" in result.stderr
    assert other.read_bytes() == before and not (db.parent / "run.jsonl").exists()


@pytest.mark.parametrize("written", ["run.metrics.jsonl", "run.report.json"])
def test_trajectories_never_writes_beside_out_over_its_input(tmp_path: Path, written: str) -> None:
    """Review of session 41: `trajectories compress run.metrics.jsonl run.jsonl` wrote
    its metrics over IN (the files beside OUT were checked against the ledger only)."""
    records = tmp_path / written
    turns = [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "hello"}]
    records.write_text(json.dumps({"id": "r", "conversations": turns}) + "\n")
    before = _files(tmp_path)
    out = tmp_path / "run.jsonl"
    result = run(tmp_path / "l.db", "trajectories", "compress", str(records), str(out))
    assert result.exit_code == 2, result.output
    assert result.stderr == (
        f"error: OUT {out}: the command writes {records} beside it, the file it reads: "
        "give another OUT\n"
    )
    assert _files(tmp_path) == before


def test_replay_out_refuses_a_file_that_exists_before_reading(
    compacted: tuple[Path, str, str, str],
) -> None:
    db, sid, _cid, _tip = compacted
    taken = db.parent / "taken.db"
    taken.write_text("mine")
    result = run(db, "replay", sid, "--summarizer", "offline", "--out", str(taken))
    assert result.exit_code == 2
    assert result.stderr == f"error: --out {taken} already exists: give a new file name\n"
    assert taken.read_text() == "mine"


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (["import", ""], "'FILE'"),
        (["export", "s", "--out", ""], "'--out'"),
        (["replay", "s", "--out", ""], "'--out'"),
        (["config", "--config", ""], "'--config'"),
        (["serve", "--token-file", ""], "'--token-file'"),
        (["trajectories", "compress", "", "x"], "'IN_PATH'"),
    ],
)
def test_an_empty_path_is_refused_as_empty(tmp_path: Path, args: list[str], option: str) -> None:
    """An empty path was the working directory: `export --out ''` said "cannot write .",
    `import ''` ".: not a regular file (a directory)"."""
    result = run(tmp_path / "l.db", *args)
    assert result.exit_code == 2
    assert result.stderr.startswith(
        f"error: Invalid value for {option}: the path is empty: give a file's path"
    ), result.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("head", ["", " ", "1_0:" + "a" * 64, "١:" + "a" * 64, "+1:" + "a" * 64])
def test_an_empty_or_non_ascii_expected_head_is_refused(
    compacted: tuple[Path, str, str, str], head: str
) -> None:
    """`verify --expect-head ""` checked nothing and exited 0 (a script's unset
    `$HEAD`); `1_0:HASH` and `١:HASH` (Arabic-Indic 1) were read as seq 10 and 1."""
    db, *_ = compacted
    result = run(db, "verify", "--expect-head", head)
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.startswith("error: --expect-head takes HASH or SEQ:HASH"), result.stderr


def test_a_file_whose_name_is_not_utf8_imports(tmp_path: Path) -> None:
    """`import` of `m<0xff>.json` failed: "SessionStarted has a field of the wrong type
    or value ('utf-8' codec can't encode character '\\udcff' …)": the session's source
    is named after its file. The byte is stored as `\\xff`."""
    import os

    name = os.fsdecode(os.fsencode(tmp_path) + b"/m\xff.json")
    Path(name).write_text(json.dumps([{"role": "user", "content": "hi"}]))
    db = tmp_path / "l.db"
    result = run(db, "import", name)
    assert result.exit_code == 0, result.output
    sid = result.stdout.strip()
    with Ledger.open(db) as ledger:
        (started,) = [r.event for r in ledger.store.read_stream(sid)][:1]
    assert started.source.startswith("openai:m\\xff.json"), started.source  # type: ignore[attr-defined]
    assert run(db, "verify").exit_code == 0


@pytest.mark.parametrize(
    "args",
    [
        ["show", "{big}"],
        ["pin", "{sid}", "{big}"],
        ["import", "-", "--format", "{big}"],
        ["{big}"],
        ["show", "{sid}", "--{big}"],
    ],
)
def test_an_error_quoting_a_huge_argument_is_cut_in_the_middle(
    compacted: tuple[Path, str, str, str], args: list[str]
) -> None:
    """Every "no session '…'" quoted a 100,000-character argument whole; the line now
    keeps its start (what failed) and its end (what to do), and says what was cut."""
    db, sid, _cid, _tip = compacted
    big = "a" * 100_000
    result = run(db, *(a.format(big=big, sid=sid) for a in args), input="[]")
    assert result.exit_code == 2
    (line,) = result.stderr.splitlines()
    assert line.startswith("error: ") and len(line) < 2_100, len(line)
    # the library quotes a session or message ref short itself (integers.shown, session
    # 41's hostile6); what it does not quote short, the CLI cuts in the middle
    assert "characters cut] …" in line or "(100,000 characters)" in line
    if args == ["show", "{big}"]:
        assert line.endswith("; `ctxledger sessions` lists them")


def test_a_cut_error_line_splits_no_escape() -> None:
    """Review of session 41: the line was cut after its control characters were escaped,
    so a cut could leave half of a `\\x1b`. Cut first, then escape. (The message is made
    here: since session 42 the library quotes a caller's value short itself, so no
    command's error reaches the cut with 5,000 ESC of an argument.)"""
    for size in range(5_000, 5_004):  # (every cut position modulo an escape's length)
        line = _one_line(InvalidInput("unknown import format " + "\x1b" * size))
        head, tail = line.split(" characters cut] …")
        for part in (head.rsplit("… [", 1)[0], tail):
            rest = part.replace("\\x1b", "")
            assert "\\" not in rest and "x1" not in rest and not rest.startswith(("1b", "b")), part


def test_replay_out_names_a_side_file_of_another_ledger_as_out(
    compacted: tuple[Path, str, str, str],
) -> None:
    """Review of session 41: `replay --out o.db-journal` was refused only when the scratch
    ledger was opened, and named "the ledger path", not --out."""
    db, sid, _cid, _tip = compacted
    other = db.parent / "o.db"
    Ledger.open(other).close()
    before = _files(db.parent)
    out = db.parent / "o.db-journal"
    result = run(db, "replay", sid, "--summarizer", "offline", "--out", str(out))
    assert result.exit_code == 2
    assert result.stderr == (
        f"error: --out {out} is SQLite's rollback journal of the ledger {other}: "
        "give another file\n"
    )
    assert _files(db.parent) == before
