"""The ``ctxledger`` command: outputs, JSON shapes, exit codes, --help everywhere."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from helpers.failing import SECRET, SecretSummarizer
from helpers.ledger_helpers import chain_events, conversation_file

from ctxledger.analysis.compactions import chain_compactions
from ctxledger.cli import compress as compress_cli
from ctxledger.cli.main import cli
from ctxledger.demo.synth import SessionSynth
from ctxledger.errors import InvalidInput
from ctxledger.events import CompressionSkipped
from ctxledger.ledger.facade import Ledger


def run(db: Path, *args: str, input: str | None = None) -> click.testing.Result:
    return CliRunner().invoke(cli, ["--db", str(db), *args], input=input, catch_exceptions=False)


def shown_messages(db: Path, ref: str) -> list[dict[str, object]]:
    """The messages of `show REF --json` (each entry also has its index, id and tokens)."""
    return [entry["message"] for entry in json.loads(run(db, "show", ref, "--json").output)]


@pytest.mark.parametrize("module", ["ctxledger", "ctxledger.cli.main"])
def test_python_dash_m_is_the_command(module: str, tmp_path: Path) -> None:
    """`python -m ctxledger` and `python -m ctxledger.cli.main` run the command. There was no
    `ctxledger/__main__.py` (so the first was an error), and `cli/main.py` defined `main`
    without calling it (so the second printed nothing and exited 0, whatever it was asked)."""
    root = str(Path(__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, "-m", module, "--db", str(tmp_path / "none.db"), "sessions"],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2, done
    # (the second also gets runpy's warning that `ctxledger.cli` had imported the module)
    assert done.stderr.splitlines()[-1].startswith("error: no ledger file at "), done.stderr
    assert not (tmp_path / "none.db").exists()


def commands() -> list[str]:
    return sorted(cli.commands)


@pytest.mark.parametrize("name", commands())
def test_every_command_has_help_and_is_documented(name: str) -> None:
    result = CliRunner().invoke(cli, [name, "--help"])
    assert result.exit_code == 0, result.output
    assert "Usage:" in result.output
    readme = (Path(__file__).parent.parent / "README.md").read_text()
    assert f"ctxledger {name}" in readme or f"`{name}`" in readme, (
        f"README does not document `{name}`"
    )


@pytest.fixture
def imported(tmp_path: Path) -> tuple[Path, str]:
    path = conversation_file(tmp_path / "conv.jsonl")
    db = tmp_path / "l.db"
    result = run(db, "import", str(path), "--context-length", "16000", "--model", "gpt-test")
    assert result.exit_code == 0, result.output
    return db, result.output.strip().splitlines()[-1]


def test_import_prints_the_session_id_last_and_show_round_trips(
    imported: tuple[Path, str], tmp_path: Path
) -> None:
    db, sid = imported
    shown = shown_messages(db, sid)
    original = [json.loads(line) for line in (tmp_path / "conv.jsonl").read_text().splitlines()]
    assert shown == original


def test_import_model_fills_in_only_when_the_file_has_none(tmp_path: Path) -> None:
    db = tmp_path / "l.db"
    hi = [{"role": "user", "content": "hi"}]
    named, bare = tmp_path / "named.json", tmp_path / "bare.json"
    named.write_text(json.dumps({"model": "file-model", "messages": hi}))
    bare.write_text(json.dumps(hi))
    for path in (named, bare):
        result = run(db, "import", str(path), "--model", "flag-model", "--context-length", "9000")
        assert result.exit_code == 0, result.output
    models = [row["model"] for row in json.loads(run(db, "sessions", "--json").output)]
    assert sorted(models) == ["file-model", "flag-model"]


@pytest.mark.parametrize("model", ["", "  "])
def test_import_with_an_empty_model_is_refused_not_defaulted(tmp_path: Path, model: str) -> None:
    """`--model ""` recorded the default model without a word (" " recorded a blank)."""
    src = tmp_path / "bare.json"
    src.write_text(json.dumps([{"role": "user", "content": "hi"}]))
    result = run(tmp_path / "l.db", "import", str(src), "--model", model)
    assert result.exit_code == 2
    assert f"the model to record must be a non-empty string, got {model!r}" in result.output


def test_import_from_stdin(tmp_path: Path) -> None:
    db = tmp_path / "l.db"
    result = run(
        db, "import", "-", "--context-length", "9000", input='[{"role": "user", "content": "hi"}]'
    )
    assert result.exit_code == 0
    sid = result.output.strip().splitlines()[-1]
    assert shown_messages(db, sid) == [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ('[{"role": "user", "content": 5}]', "error: stdin:1: content must be a string"),
        ('{"role": "user", "content": "a"}\n{"role": "wizard"}\n', "error: stdin:2: unknown role"),
    ],
)
def test_a_bad_import_from_stdin_names_stdin_and_the_line(
    tmp_path: Path, text: str, said: str
) -> None:
    """An error at a line of stdin said ``1: content must be ...``, naming nothing."""
    db = tmp_path / "l.db"
    result = run(db, "import", "-", input=text)
    assert result.exit_code == 2 and result.output.startswith(said), result.output
    assert not db.exists()  # nothing was created, so nothing was appended


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        ("{not json", "bad.json:1:"),
        ('[{"role": "wizard", "content": "x"}]', "unknown role"),
        ('[{"role": "tool", "tool_call_id": "x", "content": "r"}]', "no earlier assistant"),
    ],
)
def test_bad_import_is_one_line_error_exit_2_and_imports_nothing(
    tmp_path: Path, content: str, fragment: str
) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    db = tmp_path / "l.db"
    result = CliRunner().invoke(
        cli, ["--db", str(db), "import", str(path), "--context-length", "9000"]
    )
    assert result.exit_code == 2
    assert fragment in result.output
    assert result.output.count("error:") == 1
    # a file that does not parse fails before the ledger is opened: no ledger file at all
    assert not db.exists() or json.loads(run(db, "sessions", "--json").output) == []


def test_malformed_jsonl_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"role": "user", "content": "a"}\n{"role": "user", "content": \n')
    result = CliRunner().invoke(
        cli,
        [
            "--db",
            str(tmp_path / "l.db"),
            "import",
            str(path),
            "--format",
            "openai",
            "--context-length",
            "9000",
        ],
    )
    assert result.exit_code == 2 and "bad.jsonl:2:" in result.output


def test_unknown_session_is_exit_2(tmp_path: Path) -> None:
    Ledger.open(tmp_path / "l.db").close()
    result = CliRunner().invoke(cli, ["--db", str(tmp_path / "l.db"), "show", "ses_nope"])
    assert result.exit_code == 2 and "no session 'ses_nope'" in result.output


def test_compress_dry_run_json_plan_appends_nothing(imported: tuple[Path, str]) -> None:
    db, sid = imported
    before = json.loads(run(db, "verify", "--json").output)["events_checked"]
    out = json.loads(run(db, "compress", sid, "--dry-run", "--json").output)
    assert out["action"] == "dry_run"
    plan = out["plan"]
    for key in (
        "compress_start",
        "compress_end",
        "prunes",
        "summary_role",
        "merged_into_tail",
        "summary_budget_tokens",
        "head_ids",
        "middle_ids",
        "tail_ids",
    ):
        assert key in plan
    assert plan["compress_start"] >= 1  # the system message is index 0
    assert json.loads(run(db, "verify", "--json").output)["events_checked"] == before


def test_a_skipped_compress_prints_its_lines_as_lines(tmp_path: Path) -> None:
    db = tmp_path / "l.db"
    with Ledger.open(db) as ledger:
        sid = ledger.start_session(model="m", context_length=16_000)
        ledger.append_messages(sid, [{"role": "user", "content": "hi"}])
    result = run(db, "compress", sid)
    lines = result.output.splitlines()
    assert lines[0].startswith("not compressed: "), result.output
    assert lines[1] == "No changes from compression: 1 messages"
    assert lines[2].startswith("Tokens: ") and lines[2].endswith(", unchanged")


@pytest.mark.parametrize("failing", [False, True])
def test_a_fallback_compress_says_so_with_its_reason(
    imported: tuple[Path, str], monkeypatch: pytest.MonkeyPatch, failing: bool
) -> None:
    """No summarizer configured, or one failing with a server error whose body spans
    lines and quotes a key: the fallback summary is used, and the CLI names it in the
    feedback's headline with its note, the reason on one line and redacted (it printed a
    plain "Compressed: …" and the unredacted failure; then only the body's last line;
    reviews of session 32). Neither the text nor --json shows the key."""
    db, sid = imported
    for name in [k for k in os.environ if k.startswith("CTXLEDGER_SUMMARY_")]:
        monkeypatch.delenv(name)
    if failing:
        failing_summarizer = SecretSummarizer("server", fails=2)
        monkeypatch.setattr(compress_cli, "make_summarizer", lambda *_: failing_summarizer)
        copy = db.with_name("copy.db")
        shutil.copyfile(db, copy)
        as_json = json.loads(run(copy, "compress", sid, "--json").output)
        assert as_json["fallback"] and "HTTP 401" in as_json["failure"], as_json
        assert SECRET not in json.dumps(as_json)
    result = run(db, "compress", sid, "--summarizer", "llm")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert any(line.startswith("Compressed with fallback: ") for line in lines), result.output
    (note,) = [line for line in lines if line.startswith("The summarizer failed; a fallback")]
    assert not any(line.startswith("Compressed: ") for line in lines)
    if failing:
        assert note.endswith('[REDACTED]"}') and "Reason: HTTP 401 from the" in note, note
        assert SECRET not in result.output
        with Ledger.open(db) as ledger:
            tip = ledger.tip(sid)
        shown = run(db, "show", tip, "--json").output
        assert "[REDACTED]" in shown and SECRET not in shown


def test_an_aborted_compress_says_what_it_kept_and_never_shows_the_key(
    imported: tuple[Path, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An aborting summarizer failure (auth): "aborted: N messages preserved", the reason
    redacted, exit 1; any other error quoting a key is redacted too (the CLI printed
    the raw exception: the key on stderr; review of session 32)."""
    db, sid = imported
    monkeypatch.setattr(compress_cli, "make_summarizer", lambda *_: SecretSummarizer("auth"))
    result = run(db, "compress", sid)
    assert result.exit_code == 1, result.output
    with Ledger.open(db) as ledger:
        kept = len(ledger.api_messages(sid)) - 1  # the system prompt is not counted
    assert f"Compression aborted: {kept} messages preserved" in result.output.splitlines()
    assert "no messages were removed. Reason: HTTP 401 from the" in result.output
    assert SECRET not in result.output and "[REDACTED]" in result.output

    def refused(*_: object) -> None:
        raise InvalidInput(f"the summary endpoint refused key {SECRET}")

    monkeypatch.setattr(compress_cli, "make_summarizer", refused)
    result = run(db, "compress", sid)
    assert result.exit_code == 2 and SECRET not in result.output, result.output
    assert "error: the summary endpoint refused key [REDACTED]" in result.output


def test_an_aborted_compress_json_says_so_on_stdout(
    imported: tuple[Path, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`compress --json` on an aborting failure printed nothing on stdout (exit 1, the
    feedback on stderr): it prints the aborted outcome, with the failure as recorded in
    the one CompressionSkipped appended (review of session 32)."""
    db, sid = imported
    monkeypatch.setattr(compress_cli, "make_summarizer", lambda *_: SecretSummarizer("auth"))
    with Ledger.open(db) as ledger:
        before = len(ledger.api_messages(sid))
    result = run(db, "compress", sid, "--json")
    assert result.exit_code == 1, result.output
    out = json.loads(result.stdout)
    with Ledger.open(db) as ledger:
        (skipped,) = chain_events(ledger, sid, CompressionSkipped)
    assert out == {
        "session_id": sid,
        "action": "aborted",
        "failure": skipped.details["error"],
        "failure_class": "auth",
        "messages_before": before,
    }
    assert SECRET not in result.output and "[REDACTED]" in out["failure"]
    assert "Compression aborted:" in result.stderr


def test_a_dry_run_json_counts_what_the_plan_would_remove(imported: tuple[Path, str]) -> None:
    """`--dry-run --json` said removed: 0 while its plan summarized 100 messages."""
    db, sid = imported
    result = run(db, "compress", sid, "--dry-run", "--json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    plan = out["plan"]
    assert out["removed"] == len(plan["middle_ids"]) > 0
    assert out["removed"] == plan["compress_end"] - plan["compress_start"]


def test_the_dry_run_says_its_count_includes_the_system_prompt(imported: tuple[Path, str]) -> None:
    """The headline counts without the system prompt, the plan's indexes with it: the
    dry-run line says which it counts (it said "of 133" where the headline says 132;
    review of session 32)."""
    db, sid = imported
    with Ledger.open(db) as ledger:
        total = len(ledger.api_messages(sid))
    result = run(db, "compress", sid, "--dry-run")
    assert result.exit_code == 0, result.output
    assert f") of {total} including the system prompt; summary as " in result.output


def test_compress_then_chain_usage_replay_verify(imported: tuple[Path, str]) -> None:
    db, sid = imported
    result = run(db, "compress", sid, "--focus", "tests")
    assert result.exit_code == 0, result.output
    assert "Compressed:" in result.output and "rough estimate" not in result.output
    with Ledger.open(db) as ledger:  # the exact counts --dry-run reports, as recorded
        switch = chain_compactions(ledger, sid)[0].switch
        after = len(ledger.api_messages(ledger.tip(sid)))
    # the service's headline: the system prompt is no message (review of session 32: the
    # CLI counted it, one more than the feedback on each side)
    with Ledger.open(db) as ledger:
        before = len(ledger.api_messages(sid))
    assert f"Compressed: {before - 1} → {after - 1} messages" in result.output.splitlines()
    # its own line (it was printed after a "\n" the console shows as text)
    assert (
        f"Tokens: {switch.tokens_before:,} → {switch.tokens_after:,}" in result.output.splitlines()
    )
    chain = json.loads(run(db, "chain", sid, "--json").output)
    assert chain["compression_count"] == 1 and chain["tip"] != sid
    assert json.loads(run(db, "usage", chain["tip"], "--json").output)["chain"]["agent_calls"] == 0
    replay = run(db, "replay", sid, "--verify", "--json")
    assert replay.exit_code == 0, replay.output
    assert json.loads(replay.output)["rebuild"]["equal"] is True
    sessions = json.loads(run(db, "sessions", "--json").output)
    assert [s["kind"] for s in sessions] == ["root", "continuation"]
    assert run(db, "verify").exit_code == 0


def test_show_at_a_past_sequence(imported: tuple[Path, str]) -> None:
    db, sid = imported
    assert json.loads(run(db, "show", f"{sid}@3", "--json").output) == json.loads(
        run(db, "show", sid, "--at", "3", "--json").output
    )
    bad = CliRunner().invoke(cli, ["--db", str(db), "show", f"{sid}@x"])
    assert bad.exit_code == 2 and "sequence number" in bad.output


def test_show_of_an_ended_session_says_whose_view_is_live(imported: tuple[Path, str]) -> None:
    """Session 40's sweep: `show ROOT` after a compaction printed the root's 332 messages
    with no word that it had ended: read as what the model gets, the continuation's."""
    db, sid = imported
    tip = json.loads(run(db, "compress", sid, "--json").stdout)["new_session_id"]
    said = f"note: {sid} ended (compression): this is its last view; the conversation's live view is {tip}'s\n"
    ended = run(db, "show", sid)
    assert ended.exit_code == 0 and ended.stderr == said, ended.stderr
    assert run(db, "show", sid, "--json").stderr == ""  # (a script reads the data as before)
    assert run(db, "show", tip).stderr == "" and run(db, "show", f"{sid}@3").stderr == ""
    # the live session is the one a write to the ended session is told of (s41: the
    # chain's tip was named though it had ended too)
    with Ledger.open(str(db)) as ledger:
        ledger.end_session(tip, "closed")
        assert "start a new session" in ledger.chains.ended_note(sid)
    said = f"note: {sid} ended (compression): this is its last view\n"
    assert run(db, "show", sid).stderr == said


def test_no_output_file_is_the_ledger_or_one_of_its_files(imported: tuple[Path, str]) -> None:
    """Session 40: `export S --out ledger.db` wrote the JSON over the ledger it had just
    read, and `--db ledger.db trajectories compress IN ledger.db` wrote its records over
    it: the ledger was gone. Its side files, a link to it and a hard link are refused too."""
    db, sid = imported
    before = db.read_bytes()
    (db.parent / "soft.db").symlink_to(db)
    os.link(db, db.parent / "hard.db")
    named = [db, db.parent / "x" / ".." / db.name, Path(f"{db}-wal"), Path(f"{db}.head")]
    named += [Path(f"{db}.leases") / "k", db.parent / "soft.db", db.parent / "hard.db"]
    for out in named:
        refused = run(db, "export", sid, "--out", str(out))
        assert refused.exit_code == 2, (out, refused.output)
        assert "is the ledger or one of its files: give another file" in refused.stderr
    records = db.parent / "in.jsonl"
    turns = [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "hello"}]
    records.write_text(json.dumps({"id": "r", "conversations": turns}) + "\n")
    batch = run(db, "trajectories", "compress", str(records), str(db))
    assert batch.exit_code == 2 and "OUT " in batch.stderr, batch.output
    assert db.read_bytes() == before and run(db, "verify").exit_code == 0
    assert run(db, "export", sid, "--out", str(db.parent / "fine.json")).exit_code == 0


def test_every_file_the_ledger_keeps_beside_itself_is_refused(imported: tuple[Path, str]) -> None:
    """s40 final review LOW-5: the CLI restated the side files' names; it now takes them
    from ``eventstore.files``, where the stores and the anchor name them. Each file the
    ledger has made beside itself (a lease and a verify make theirs) is refused."""
    db, sid = imported
    with Ledger.open(db) as ledger, ledger.store.lease("k"):
        assert run(db, "verify").exit_code == 0
        made = [p for p in db.parent.rglob("*") if p.is_file() and str(p).startswith(str(db))]
        assert {Path(f"{db}.head"), Path(f"{db}.lock")} <= set(made), made
        for out in made:
            refused = run(db, "export", sid, "--out", str(out))
            assert refused.exit_code == 2 and "one of its files" in refused.stderr, out


def test_the_ledger_s_files_are_refused_through_a_link_to_it(
    imported: tuple[Path, str],
) -> None:
    """Review 1 of session 40: with a symlinked --db the side files kept beside the
    link's name (`.head`, `.lock`, `.leases/`) were written over (`verify` then FAILED
    on the anchor), and so was a hard link to a side file."""
    db, sid = imported
    link = db.parent / "link.db"
    link.symlink_to(db)
    head = Path(f"{db}.head")
    assert head.exists()
    os.link(head, db.parent / "hard.head")
    named = [Path(f"{link}.head"), Path(f"{link}.lock"), Path(f"{link}.leases") / "k"]
    named += [db.parent / "hard.head", Path(f"{db}.lock")]
    for out in named:
        refused = run(link, "export", sid, "--out", str(out))
        assert refused.exit_code == 2, (out, refused.output)
        assert "is the ledger or one of its files" in refused.stderr
    assert run(link, "verify").exit_code == 0


def test_replay_out_is_never_a_ledger_file_and_export_out_dash_is_stdout(
    imported: tuple[Path, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Review 1 of session 40: `replay S --out L.db-journal` made a what-if ledger in
    the name of the ledger's side file, and `export S --out -` wrote a file named "-"
    where the help says stdout."""
    db, sid = imported
    journal = Path(f"{db}-journal")
    refused = run(db, "replay", sid, "--out", str(journal))
    assert refused.exit_code == 2 and "is the ledger or one of its files" in refused.stderr
    assert not journal.exists()
    monkeypatch.chdir(db.parent)
    dashed = run(db, "export", sid, "--out", "-")
    assert dashed.exit_code == 0 and not (db.parent / "-").exists()
    assert dashed.stdout == run(db, "export", sid).stdout and dashed.stderr == ""


@pytest.mark.parametrize("how", ["env", "default"])
def test_trajectories_out_is_never_the_ledger_however_it_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """Review 1 of session 40: OUT was checked against the ledger only with an explicit
    --db; the ledger $CTXLEDGER_DB or the default names was written over with JSONL."""
    if how == "env":
        db = tmp_path / "env.db"
        monkeypatch.setenv("CTXLEDGER_DB", str(db))
    else:
        monkeypatch.delenv("CTXLEDGER_DB", raising=False)
        monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
        db = tmp_path / "data" / "ctxledger" / "ctxledger.db"
    runner = CliRunner()
    assert runner.invoke(cli, ["demo", "--turns", "2"]).exit_code == 0
    before = db.read_bytes()
    records = tmp_path / "in.jsonl"
    turns = [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "hello"}]
    records.write_text(json.dumps({"id": "r", "conversations": turns}) + "\n")
    batch = runner.invoke(cli, ["trajectories", "compress", str(records), str(db)])
    assert batch.exit_code == 2 and "is the ledger or one of its files" in batch.stderr
    assert db.read_bytes() == before


@pytest.mark.parametrize("fmt", ["openai", "anthropic", "sharegpt"])
def test_export_then_import_gives_the_same_messages(
    imported: tuple[Path, str], tmp_path: Path, fmt: str
) -> None:
    db, sid = imported
    out = tmp_path / f"x.{fmt}.json"
    assert run(db, "export", sid, "--format", fmt, "--out", str(out)).exit_code == 0
    again = (
        run(db, "import", str(out), "--format", fmt, "--context-length", "16000")
        .output.strip()
        .splitlines()[-1]
    )
    original = shown_messages(db, sid)
    copy = shown_messages(db, again)

    def strip(ms: list[dict[str, object]]) -> list[dict[str, object]]:
        keep = ("role", "content", "tool_call_id")
        return [{k: v for k, v in m.items() if k in keep} for m in ms]

    assert strip(copy) == strip(original)


def _trajectories_in(path: Path, ids: list[int] | list[str]) -> None:
    """A ShareGPT trajectories file at `path`: one generated 6-turn record per id."""
    from ctxledger.importers.export import export_messages

    synth = SessionSynth(8)
    lines = []
    for k in ids:
        msgs = [{"role": "system", "content": synth.system_prompt()}]
        for turn in synth.turns(6):
            msgs += turn
        record = json.loads(export_messages(None, msgs, "sharegpt"))
        record["id"] = k
        lines.append(json.dumps(record))
    path.write_text("\n".join(lines) + "\n")


def test_trajectories_compress_records_compactions_with_explicit_db(tmp_path: Path) -> None:
    src, dst, db = tmp_path / "in.jsonl", tmp_path / "out.jsonl", tmp_path / "l.db"
    _trajectories_in(src, list(range(3)))
    result = run(db, "trajectories", "compress", str(src), str(dst), "--target", "4000", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["compressed"] == 3 and len(report["recorded_sessions"]) == 3
    for line in dst.read_text().splitlines():
        assert any(
            t["value"].startswith("[CONTEXT SUMMARY]") for t in json.loads(line)["conversations"]
        )
    chain = json.loads(run(db, "chain", report["recorded_sessions"][0], "--json").output)
    assert chain["compression_count"] == 1
    # resumable: a second run does no work and records nothing new
    again = json.loads(
        run(db, "trajectories", "compress", str(src), str(dst), "--target", "4000", "--json").output
    )
    assert again["resumed"] == 3 and again["recorded_sessions"] == []


def test_trajectories_compress_records_a_record_whose_id_no_title_may_hold(
    tmp_path: Path,
) -> None:
    """Session 33 checks titles: a record id with a newline (the title was its key) failed
    the recording in the middle of the batch (exit 2) and a resume never recorded the
    records after it. Its title is now a key made for it."""
    from ctxledger.ledger.facade import Ledger

    src, dst, db = tmp_path / "in.jsonl", tmp_path / "out.jsonl", tmp_path / "l.db"
    _trajectories_in(src, ["t1", "t2\nevil\u202e", "t3"])
    result = run(db, "trajectories", "compress", str(src), str(dst), "--target", "4000", "--json")
    assert result.exit_code == 0, result.output
    assert len(json.loads(result.output)["recorded_sessions"]) == 3
    with Ledger.open(db) as ledger:
        titles = sorted(str(i.title) for i in ledger.chains.state.sessions.values() if i.title)
    assert titles[:2] == ["id:t1", "id:t2-evil-.h" + titles[1][-32:]], titles
    assert titles[2] == "id:t3"


def test_recorded_trajectory_compactions_count_the_system_message_like_the_engine(
    tmp_path: Path,
) -> None:
    from ctxledger.events import SessionSwitched
    from ctxledger.importers.export import export_messages
    from ctxledger.ledger.facade import Ledger

    synth = SessionSynth(8)
    msgs = [{"role": "system", "content": synth.system_prompt()}]
    for turn in synth.turns(6):
        msgs += turn
    record = json.loads(export_messages(None, msgs, "sharegpt"))
    record["id"] = 0
    src, dst, db = tmp_path / "in.jsonl", tmp_path / "out.jsonl", tmp_path / "l.db"
    src.write_text(json.dumps(record) + "\n")
    report = json.loads(
        run(db, "trajectories", "compress", str(src), str(dst), "--target", "4000", "--json").output
    )
    continuation = report["recorded_sessions"][0]
    with Ledger.open(db) as ledger:
        parent = ledger.chains.lineage(continuation).parent_session_id or ""
        switch = next(
            r.event
            for r in ledger.store.read_stream(parent)
            if isinstance(r.event, SessionSwitched)
        )
        assert switch.messages_before == len(ledger.api_messages(parent)) == len(msgs)
        assert switch.messages_after == len(ledger.api_messages(continuation))
        assert ledger.api_messages(continuation)[0]["role"] == "system"


def test_show_strips_the_reference(imported: tuple[Path, str]) -> None:
    db, sid = imported
    assert json.loads(run(db, "show", f"  {sid} ", "--json").output) == json.loads(
        run(db, "show", sid, "--json").output
    )
    assert json.loads(run(db, "chain", f" {sid}\t", "--json").output)["session_id"] == sid


def _tool_loop_ledger(tmp_path: Path) -> tuple[Path, str]:
    """An imported 16K ledger: one user ask, then 40 tool calls with long results."""
    calls = [
        [
            {"role": "assistant", "content": f"step {i}", "tool_calls": [
                {"id": f"c{i}", "type": "function",
                 "function": {"name": "bash", "arguments": json.dumps({"cmd": f"ls d{i}"})}}]},
            {"role": "tool", "tool_call_id": f"c{i}", "content": f"file_{i}.py " * 120},
        ]
        for i in range(40)
    ]  # fmt: skip
    messages = [{"role": "system", "content": "agent"}, {"role": "user", "content": "fix it"}]
    messages += [m for pair in calls for m in pair]
    path = tmp_path / "loop.json"
    path.write_text(json.dumps(messages))
    db = tmp_path / "l.db"
    return db, run(db, "import", str(path), "--context-length", "16000").output.split()[-1]


def test_a_compaction_that_leaves_the_view_over_the_window_says_so(
    tmp_path: Path, imported: tuple[Path, str]
) -> None:
    """Session 40's sweep: a first message of 50,000 characters (kept verbatim: the head)
    left the continuation at 20,318 tokens of a 16,000-token window, and `compress`
    printed "Tokens: 40,354 → 20,318" and nothing else, as if it were done."""
    words = " ".join(f"w{i % 997}" for i in range(12_000))
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": words}]
    for i in range(30):
        messages += [
            {"role": "user", "content": f"turn {i} " + "ask " * 150},
            {"role": "assistant", "content": f"reply {i} " + "answer " * 150},
        ]
    path = tmp_path / "long-head.json"
    path.write_text(json.dumps(messages))
    db = tmp_path / "l.db"
    sid = run(db, "import", str(path), "--context-length", "16000").stdout.split()[0]
    over = "tokens, more than the session's 16,000-token window: no model call can take it"
    dry = run(db, "compress", sid, "--dry-run")
    assert dry.exit_code == 0 and "warning:" not in dry.stdout
    assert dry.stderr.startswith("warning: the continuation would hold ") and over in dry.stderr
    done = run(db, "compress", sid, "--json")
    tokens = json.loads(done.stdout)["tokens_after"]
    assert tokens > 16_000
    assert done.stderr == f"warning: the continuation holds {tokens:,} {over} as it is\n"
    normal_db, normal = imported  # (a compaction that fits: no warning)
    assert run(normal_db, "compress", normal).stderr == ""


def test_the_dry_run_names_the_messages_of_its_range_it_keeps(tmp_path: Path) -> None:
    """`summarize messages [a, b)` kept quiet about the messages of that range the
    compaction keeps: the latest user ask of a long tool loop (carried, after the
    summary) and a pinned message (before it). The compaction then made one message more
    than the range implied; the plan's notes and pins are printed under the line now.
    (Review 1: the pinned line first said "after the summary"; the compaction is run
    here for real and the pins' place checked.)"""
    db, sid = _tool_loop_ledger(tmp_path)
    assert run(db, "pin", sid, "40").exit_code == 0  # a step in the middle, with its result
    result = run(db, "compress", sid, "--dry-run")
    assert result.exit_code == 0, result.output
    plan = json.loads(run(db, "compress", sid, "--dry-run", "--json").output)["plan"]
    assert plan["carried"] == [1] and plan["pinned"] == [40, 41]
    assert plan["compress_start"] <= 1 < 41 < plan["compress_end"]
    lines = result.output.splitlines()
    assert "  pinned, kept verbatim before the summary: messages [40, 41]" in lines
    assert f"  note: {plan['notes'][-1]}" in lines and "[1]" in plan["notes"][-1]
    rows = json.loads(run(db, "show", sid, "--json").output)
    ids = {k: rows[k]["message_id"] for k in (1, 40, 41)}
    done = json.loads(run(db, "compress", sid, "--json").output)
    after = json.loads(run(db, "show", done["new_session_id"], "--json").output)
    place = {r["message_id"]: r["index"] for r in after}
    summary = [  # (the system prompt's note names the summary too)
        r["index"] for r in after[1:] if "handoff summary" in str(r["message"]["content"])
    ]
    assert len(summary) == 1
    assert place[ids[40]] < place[ids[41]] < summary[0] < place[ids[1]]


def test_a_carried_note_says_the_summary_is_merged_into_its_message(tmp_path: Path) -> None:
    """A summary merged into the carried user ask goes into that message, after its
    text; the planner's note (stored in the plan as written) says "after the summary",
    so the dry run's line says where it really goes (review 1)."""
    db, sid = _tool_loop_ledger(tmp_path)
    result = run(db, "compress", sid, "--dry-run")
    plan = json.loads(run(db, "compress", sid, "--dry-run", "--json").output)["plan"]
    assert plan["merged_into_tail"] and plan["merge_index"] == 1 and plan["carried"] == [1]
    notes = [ln for ln in result.output.splitlines() if ln.startswith("  note: messages [1]")]
    assert notes == [
        "  note: messages [1] (the latest user ask / visible reply) are kept verbatim "
        "(the summary is merged into message 1, after its text)"
    ]
    assert "after the summary" not in result.output
    assert any(n.endswith("kept verbatim after the summary") for n in plan["notes"])
    done = json.loads(run(db, "compress", sid, "--json").output)
    first = json.loads(run(db, "show", done["new_session_id"], "--json").output)[1]
    assert first["message"]["content"].startswith("fix it")
    assert "handoff summary" in first["message"]["content"]
