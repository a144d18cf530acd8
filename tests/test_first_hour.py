"""A new user's first hour with the CLI: settings that apply, ids to pin, honest undo and
compress, a summarizer that cannot hold the terminal, spinners that stay out of stdout."""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from click.testing import CliRunner, Result
from helpers.ledger_helpers import compact_now, deterministic_ledger, session_with_turns
from helpers.serve_env import SERVE_ENV_KEYS
from rich.console import Console

from ctxledger import CompressionConfig, ContextService, Ledger, LLMSummarizer
from ctxledger.analysis.undo import undo
from ctxledger.cli import progress
from ctxledger.cli.compress import make_summarizer
from ctxledger.cli.main import cli
from ctxledger.compressor.settings import resolve_config
from ctxledger.demo.synth import SessionSynth
from ctxledger.errors import InvalidInput, UnknownMessage
from ctxledger.events import NoticeIssued
from ctxledger.ledger.refs import short_ids


def run(db: Path, *args: str, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(cli, ["--db", str(db), *args], env=env)


@pytest.fixture
def session(tmp_path: Path) -> tuple[Path, str]:
    """A 16K-window session of 14 generated turns (about 16K tokens), ledger closed."""
    db = tmp_path / "l.db"
    with deterministic_ledger(db) as ledger:
        sid = session_with_turns(ledger, 14)
    return db, sid


# --- settings reach the commands -------------------------------------------------------------


def test_environment_settings_apply_to_compress_without_a_config_flag(
    session: tuple[Path, str],
) -> None:
    db, sid = session
    plain = json.loads(run(db, "compress", sid, "--dry-run", "--json").stdout)["plan"]
    env = {"CTXLEDGER_PROTECT_FIRST_N": "1", "CTXLEDGER_ESTIMATOR": "rough"}
    moved = run(db, "compress", sid, "--dry-run", "--json", env=env)
    assert moved.exit_code == 0, moved.output
    plan = json.loads(moved.stdout)["plan"]
    assert (plain["compress_start"], plan["compress_start"]) == (4, 2)  # system + protected head
    # a flag beats the environment
    flagged = run(db, "compress", sid, "--dry-run", "--json", "--estimator", "exact", env=env)
    assert json.loads(flagged.stdout)["plan"]["tokens_before"] == plain["tokens_before"]
    assert plan["tokens_before"] != plain["tokens_before"]


def test_a_config_file_in_the_working_directory_applies_to_every_command(
    session: tuple[Path, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db, sid = session
    monkeypatch.chdir(tmp_path)
    (tmp_path / "ctxledger.toml").write_text("protect_first_n = 1\n")
    plan = json.loads(run(db, "compress", sid, "--dry-run", "--json").stdout)["plan"]
    assert plan["compress_start"] == 2


def test_compress_says_so_when_the_config_names_another_window(
    session: tuple[Path, str], tmp_path: Path
) -> None:
    db, sid = session
    other = tmp_path / "small.toml"
    other.write_text("context_length = 8000\nthreshold_floor_tokens = 0\n")
    result = run(db, "compress", sid, "--config", str(other), "--dry-run", "--json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    (note,) = out["notes"]
    assert "context_length = 8,000" in note and "16,000-token window" in note
    assert "the plan uses the session's window" in note
    assert result.stderr.startswith("note: ")
    # the plan was made against the session's own window: its summary budget is 5 % of 16,000
    assert out["plan"]["summary_budget_tokens"] <= 800
    same = tmp_path / "same.toml"
    same.write_text("context_length = 16000\n")
    quiet = run(db, "compress", sid, "--config", str(same), "--dry-run", "--json")
    assert json.loads(quiet.stdout)["notes"] == [] and quiet.stderr == ""


# --- show prints ids, pin takes them (or an index) --------------------------------------


def test_show_prints_short_ids_and_json_full_ids(session: tuple[Path, str]) -> None:
    db, sid = session
    entries = json.loads(run(db, "show", sid, "--json").stdout)
    assert entries[0]["index"] == 0 and entries[0]["message_id"] is None  # the system prompt
    with Ledger.open(db) as ledger:
        live = ledger.transcript.session(sid).live
    assert [e["message_id"] for e in entries[1:]] == live
    assert all(set(e) == {"index", "message_id", "tokens", "pinned", "message"} for e in entries)
    text = run(db, "show", sid).stdout
    for index, short in [(1, short_ids(live)[0]), (5, short_ids(live)[4])]:
        assert f"{index:>4} " in text and f"id {short}" in text


def test_short_ids_are_unique_suffixes() -> None:
    assert short_ids(["msg_a00000012", "msg_b00000012", "msg_a00000013"]) == [
        "a00000012",
        "b00000012",
        "a00000013",
    ]
    assert short_ids(["msg_00000001", "msg_00000002"]) == ["00000001", "00000002"]
    assert short_ids(["ab", "cd"]) == ["ab", "cd"]


@pytest.mark.parametrize("how", ["index", "short", "full"])
def test_pin_takes_an_index_a_short_id_or_a_full_id(session: tuple[Path, str], how: str) -> None:
    db, sid = session
    entries = json.loads(run(db, "show", sid, "--json").stdout)
    target = entries[3]
    with Ledger.open(db) as ledger:
        short = short_ids(ledger.transcript.session(sid).live)[2]
    ref = {"index": "3", "short": short, "full": target["message_id"]}[how]
    out = run(db, "pin", sid, ref, "--json")
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout)["message_id"] == target["message_id"]
    assert json.loads(run(db, "show", sid, "--json").stdout)[3]["pinned"] is True
    assert "[pinned]" in run(db, "show", sid).stdout


def test_pin_rejects_the_system_prompt_and_out_of_range_indexes(
    session: tuple[Path, str],
) -> None:
    db, sid = session
    with Ledger.open(db) as ledger:
        with pytest.raises(InvalidInput, match="system prompt"):
            ledger.resolve_message(sid, 0)
        with pytest.raises(UnknownMessage, match="no message at index 999"):
            ledger.resolve_message(sid, "999")
        last = ledger.transcript.session(sid).live[-1]
        assert ledger.resolve_message(sid, len(ledger.transcript.session(sid).live)) == last
    before = run(db, "verify", "--json").stdout
    bad = run(db, "pin", sid, "0")
    assert bad.exit_code == 2 and bad.stderr.startswith("error: ") and "system prompt" in bad.stderr
    assert run(db, "verify", "--json").stdout == before


def test_sessions_on_an_empty_ledger_says_which_ledger_and_how_to_fill_it(tmp_path: Path) -> None:
    db = tmp_path / "new.db"
    missing = run(db, "sessions")  # a read creates no ledger: a mistyped --db is not a new one
    assert missing.exit_code == 2 and not db.exists()
    assert f"no ledger file at {db}" in missing.output and "ctxledger import FILE" in missing.output
    Ledger.open(db).close()
    out = run(db, "sessions")
    assert out.exit_code == 0
    assert f"no sessions in {db}" in out.stderr and "ctxledger import FILE" in out.stderr
    as_json = run(db, "sessions", "--json")
    assert json.loads(as_json.stdout) == [] and as_json.stderr == ""  # JSON stays data only


def test_demo_ends_with_commands_that_work_on_its_ledger(tmp_path: Path) -> None:
    """`make demo` is a new user's first command: it ends by saying what to run next."""
    db = tmp_path / "demo.db"
    out = run(db, "demo", "--turns", "12")
    assert out.exit_code == 0, out.output
    lines = out.stdout.splitlines()
    steps = lines[lines.index("explore it:") + 1 :]
    assert len(steps) == 5
    for step in steps:
        args = step.split("#")[0].split()
        assert args[0] == "ctxledger"
        ran = CliRunner().invoke(cli, args[1:])
        assert ran.exit_code == 0, (step, ran.output)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["pin", "SID", "-1"], "No such option '-1'. (see `ctxledger pin --help`)"),
        (["compress"], "Missing argument 'SESSION'. (see `ctxledger compress --help`)"),
        (["config", "--context-length", "1000"], "1000 is not in the range x>=1024"),
        (["nope"], "No such command 'nope'. (see `ctxledger --help`)"),
        (["--bogus", "sessions"], "No such option '--bogus'"),
        (["trajectories", "compress"], "(see `ctxledger trajectories compress --help`)"),
    ],
)
def test_a_mistyped_command_is_one_error_line_and_exit_2(
    tmp_path: Path, args: list[str], message: str
) -> None:
    """The README's rule (bad input: exit 2, one `error:` line) holds for click's usage
    errors too, not only for the ledger's own checks."""
    out = CliRunner().invoke(cli, ["--db", str(tmp_path / "l.db"), *args], prog_name="ctxledger")
    assert out.exit_code == 2 and out.stdout == ""
    assert out.stderr.startswith("error: ") and out.stderr.count("\n") == 1
    assert message in out.stderr


# --- undo warns when the restored view must be compacted again ---------------------------


def _undo_over_the_window(ledger: Ledger) -> tuple[str, str]:
    sid = session_with_turns(ledger, 14)
    outcome = compact_now(ledger, sid)
    tip = ledger.tip(sid)
    for msgs in list(SessionSynth(9, big_outputs=False).turns(30))[1:5]:
        ledger.append_messages(tip, msgs)
    assert outcome.compaction_id is not None
    return sid, outcome.compaction_id


def test_undo_past_the_window_warns_and_records_the_notice() -> None:
    ledger = deterministic_ledger()
    _, cid = _undo_over_the_window(ledger)
    result = undo(ledger, cid)
    assert result.tokens_after > result.context_length == 16_000
    (warning,) = result.warnings
    assert (
        "more than the 16,000-token window" in warning and "next turn compacts it again" in warning
    )
    notices = [
        r.event
        for r in ledger.store.read_stream(result.new_session_id)
        if isinstance(r.event, NoticeIssued)
    ]
    assert [n.text for n in notices] == [warning]


def test_undo_under_the_threshold_says_nothing() -> None:
    ledger = deterministic_ledger(config=CompressionConfig(context_length=200_000))
    sid = session_with_turns(ledger, 6)
    outcome = compact_now(ledger, sid)
    assert outcome.compaction_id is not None
    assert undo(ledger, outcome.compaction_id).warnings == []


def test_cli_undo_prints_the_warning_on_stderr(tmp_path: Path) -> None:
    db = tmp_path / "u.db"
    with deterministic_ledger(db) as ledger:
        _, cid = _undo_over_the_window(ledger)
    out = run(db, "undo", cid)
    assert out.exit_code == 0, out.output
    assert "warning: the restored view holds" in out.stderr
    assert "warning" not in out.stdout


def _one_ask_session(ledger: Ledger) -> str:
    """A mini-swe-agent shaped session: one user ask, then only tool calls and results."""
    sid = ledger.start_session(model="m", system_prompt="You run shell commands.")
    ledger.append_messages(sid, [{"role": "user", "content": "Fix the failing resolver test."}])
    for i in range(40):
        call = {"id": f"c{i}", "type": "function", "function": {"name": "bash", "arguments": "{}"}}
        ledger.append_messages(
            sid,
            [
                {"role": "assistant", "content": f"step {i}", "tool_calls": [call]},
                {"role": "tool", "tool_call_id": f"c{i}", "content": f"line {i} " * 120},
            ],
        )
    return sid


def test_undo_of_a_compaction_that_merged_a_pinned_ask_restores_the_pin(tmp_path: Path) -> None:
    # pin the ask by index, compact (the summary is merged into the ask, whose pin the
    # continuation cannot keep), undo: the pin comes back with the restored view; undo
    # used to fail with "not in the live view" because the check ran before the switch
    db = tmp_path / "a.db"
    with deterministic_ledger(db) as ledger:
        sid = _one_ask_session(ledger)
    pinned = run(db, "pin", sid, "1")
    # the pin says what the compaction will do: not "verbatim", the summary goes into it
    assert pinned.exit_code == 0 and "merges the handoff summary into it" in pinned.stdout
    out = run(db, "compress", sid, "--json")
    compressed = json.loads(out.stdout)
    assert compressed["plan"]["merged_into_tail"], out.output
    undone = run(db, "undo", compressed["compaction_id"], "--json")
    assert undone.exit_code == 0, undone.output
    new_sid = json.loads(undone.stdout)["new_session_id"]
    rows = json.loads(run(db, "show", new_sid, "--json").stdout)
    assert [r["index"] for r in rows if r["pinned"]] == [1]
    verified = run(db, "replay", sid, "--verify")
    assert verified.exit_code == 0, verified.output


def test_serve_resolves_settings_like_every_entry_point(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`ctxledger serve` hands its options to the uvicorn factory through CTXLEDGER_SERVE_*;
    the factory finds ./ctxledger.toml and applies CTXLEDGER_<KEY> as the CLI does."""
    from ctxledger.server.app import app_from_env

    monkeypatch.chdir(tmp_path)
    (tmp_path / "ctxledger.toml").write_text("threshold = 0.6\ncontext_length = 40000\n")
    monkeypatch.setenv("CTXLEDGER_PROTECT_LAST_N", "9")
    monkeypatch.setenv("CTXLEDGER_SERVE_DB", str(tmp_path / "serve.db"))
    app = app_from_env()
    state = app.state.ctx
    try:
        config = state.service.config
        assert (config.threshold, config.protect_last_n, config.context_length) == (0.6, 9, 40_000)
        assert state.context_length == 40_000  # the window of sessions the proxy starts
        assert state.stall_timeout == 60  # the default when serve is given no --stall-timeout
    finally:
        anyio.run(state.aclose)
        anyio.run(state.service.aclose)
    monkeypatch.setenv("CTXLEDGER_SERVE_STALL_TIMEOUT", "2.5")  # serve --stall-timeout 2.5
    state = app_from_env().state.ctx
    try:
        assert state.stall_timeout == 2.5
    finally:
        anyio.run(state.aclose)
        anyio.run(state.service.aclose)


# --- a hanging summarizer, spinners ---------------------------------------------------------


@pytest.fixture
def hanging_endpoint() -> Iterator[str]:
    """An HTTP endpoint on 127.0.0.1 that accepts connections and never answers."""
    server = socket.create_server(("127.0.0.1", 0), backlog=8)
    try:
        yield f"http://127.0.0.1:{server.getsockname()[1]}/v1"
    finally:
        server.close()


def test_summary_timeout_comes_from_the_config() -> None:
    summarizer = make_summarizer("llm", CompressionConfig(summary_timeout=7.5))
    assert summarizer.timeout == 7.5  # type: ignore[attr-defined]


def test_a_library_summarizer_takes_the_timeout_from_the_config_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "ctxledger.toml").write_text('summary_timeout = 2.5\nsummary_model = "small"\n')

    async def main() -> LLMSummarizer:
        async with ContextService.open(tmp_path / "l.db") as svc:
            return LLMSummarizer.from_config(svc.config, env={})

    summarizer = anyio.run(main)
    assert (summarizer.timeout, summarizer.model) == (2.5, "small")
    monkeypatch.setenv("CTXLEDGER_SUMMARY_TIMEOUT", "4")
    assert LLMSummarizer.from_config(resolve_config().config, env={}).timeout == 4.0


def test_a_hanging_model_gives_up_after_summary_timeout(
    session: tuple[Path, str], hanging_endpoint: str
) -> None:
    db, sid = session
    env = {
        "CTXLEDGER_SUMMARY_BASE_URL": hanging_endpoint,
        "CTXLEDGER_SUMMARY_MODEL": "m",
        "CTXLEDGER_SUMMARY_TIMEOUT": "0.3",
    }
    result = run(db, "compress", sid, "--summarizer", "llm", "--json", env=env)
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert (out["action"], out["fallback"], out["failure_class"]) == ("compressed", True, "timeout")
    assert "timed out" in out["failure"]


def _terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        progress, "err_console", lambda: Console(stderr=True, force_terminal=True, width=120)
    )


def test_spinner_goes_to_stderr_never_into_json(
    session: tuple[Path, str], hanging_endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _terminal(monkeypatch)
    db, sid = session
    env = {
        "CTXLEDGER_SUMMARY_BASE_URL": hanging_endpoint,
        "CTXLEDGER_SUMMARY_MODEL": "m",
        "CTXLEDGER_SUMMARY_TIMEOUT": "0.3",
    }
    result = run(db, "compress", sid, "--summarizer", "llm", "--json", env=env)
    assert f"compacting {sid} (llm summarizer, timeout 0.3 s)" in result.stderr
    json.loads(result.stdout)  # nothing but the JSON document
    replay = run(db, "replay", sid, "--verify", "--json")
    assert "re-planning the recorded compactions" in replay.stderr
    assert json.loads(replay.stdout)["rebuild"]["equal"] is True


@pytest.mark.parametrize("where", ["global", "command"])
def test_quiet_turns_the_spinner_off(
    session: tuple[Path, str], monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    _terminal(monkeypatch)
    db, sid = session
    args = ["--quiet", "audit", sid] if where == "global" else ["audit", sid, "--quiet"]
    assert "auditing" in run(db, "audit", sid).stderr
    quiet = run(db, *args)
    assert quiet.exit_code == 0, quiet.output
    assert quiet.stderr == ""


def test_no_spinner_when_stderr_is_not_a_terminal(session: tuple[Path, str]) -> None:
    db, sid = session
    assert run(db, "audit", sid).stderr == ""


def test_spinner_shows_a_ref_as_typed(
    session: tuple[Path, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _terminal(monkeypatch)
    db, _ = session
    result = run(db, "audit", "{ref}[bold]x")
    assert result.exit_code == 2, result.output
    assert "auditing the compactions of {ref}[bold]x" in result.stderr
    assert "error: no session or compaction '{ref}[bold]x'" in result.stderr


def test_serve_hands_its_stall_timeout_to_the_factory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`serve --stall-timeout S` reaches every worker's app (through CTXLEDGER_SERVE_*)."""
    from click.testing import CliRunner

    from ctxledger.cli import serve as serve_module
    from ctxledger.cli.main import cli as main_cli

    for key in SERVE_ENV_KEYS:  # what serve exports is undone after the test
        monkeypatch.delenv("CTXLEDGER_SERVE_" + key.upper(), raising=False)
    monkeypatch.setattr(serve_module, "_run", lambda *args: None)
    db = str(tmp_path / "s.db")
    result = CliRunner().invoke(main_cli, ["serve", "--db", db, "--stall-timeout", "2.5"])
    assert result.exit_code == 0, result.output
    assert os.environ["CTXLEDGER_SERVE_STALL_TIMEOUT"] == "2.5"
