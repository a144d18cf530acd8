"""Choosing a store from a path or URL, every CLI command on a PostgreSQL ledger, and
``ctxledger migrate`` both ways (on the private server of the ``pg_server`` fixture)."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import anyio
import click
import httpx
import pytest
from click.testing import CliRunner
from helpers.http_writers import run_writers, written
from helpers.pg_server import PgServer
from helpers.uvicorn_thread import free_port
from test_reads_leave_the_folder import closed_inside_a_close, recall_under_a_close

from ctxledger import ContextService, Ledger
from ctxledger.cli.main import cli
from ctxledger.demo.synth import SessionSynth
from ctxledger.errors import IntegrityError, InvalidEvent, InvalidInput, StoreError
from ctxledger.eventstore import SQLiteEventStore, chain_tip, open_store
from ctxledger.eventstore.postgres import ConnectionLost, PostgresEventStore
from ctxledger.eventstore.transfer import copy_ledger
from ctxledger.testing.eventstore import message


@pytest.fixture
def url(pg_server: PgServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("CTXLEDGER_INDEX_DIR", str(tmp_path / "indexes"))
    schema = "l_" + hashlib.sha256(str(tmp_path).encode()).hexdigest()[:20]
    return f"{pg_server.url}?schema={schema}"


def run(db: str | Path, *args: str) -> click.testing.Result:
    return CliRunner().invoke(cli, ["--db", str(db), *args], catch_exceptions=False)


def ok(db: str | Path, *args: str) -> str:
    result = run(db, *args)
    assert result.exit_code == 0, (args, result.output)
    return result.output


# --- open_store -----------------------------------------------------------------------------


def test_a_path_opens_sqlite_and_a_postgres_url_opens_postgres(url: str, tmp_path: Path) -> None:
    with open_store(tmp_path / "a.db") as store:
        assert isinstance(store, SQLiteEventStore)
    with open_store(str(tmp_path / "b.db")) as store:
        assert isinstance(store, SQLiteEventStore)
    with open_store(url) as store:
        assert isinstance(store, PostgresEventStore)
    with open_store(url.replace("postgresql://", "postgres://", 1)) as store:
        assert isinstance(store, PostgresEventStore)


@pytest.mark.parametrize(
    ("target", "fragment"),
    [
        ("mysql://u:hunter2@db/ledger", "unknown ledger URL scheme 'mysql'"),
        ("mysql://db/ledger?password=hunter2", "unknown ledger URL scheme 'mysql'"),
        ("sqlite:///tmp/x.db", "unknown ledger URL scheme 'sqlite'"),
        ("postgresql:/host/db", "whose '//' was lost"),
    ],
)
def test_a_url_is_never_taken_for_a_path(
    target: str, fragment: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InvalidInput, match=fragment) as caught:
        open_store(target)
    assert "hunter2" not in str(caught.value)
    result = CliRunner().invoke(cli, ["--db", target, "sessions"])
    assert result.exit_code == 2 and fragment in result.output
    assert list(tmp_path.iterdir()) == []  # no directory named after the scheme


def test_ctxledger_db_may_be_a_url(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CTXLEDGER_DB", url)
    result = CliRunner().invoke(cli, ["import", "-"], input='[{"role": "user", "content": "hi"}]')
    assert result.exit_code == 0, result.output
    with PostgresEventStore(url) as store:
        assert store.last_seq() > 0


def test_ledger_and_service_open_a_url(url: str) -> None:
    with Ledger.open(url) as ledger:
        sid = ledger.start_session(model="m", context_length=8000)
        ledger.append_messages(sid, [{"role": "user", "content": "hello"}])

    async def main() -> list[dict[str, object]]:
        async with ContextService.open(url) as svc:
            await svc.append(sid, [{"role": "assistant", "content": "hi there"}])
            return svc.api_messages(sid)

    assert [m["content"] for m in anyio.run(main)] == ["hello", "hi there"]


def test_a_ledger_append_to_a_server_gone_says_to_re_send(
    own_server: PgServer, tmp_path: Path
) -> None:
    """Session 36: the refresh after the cut-off append failed too, and its "could not read
    the log" was raised instead of the append's error, the one that says to re-send."""
    store = PostgresEventStore(own_server.url, connect_timeout=1, index_dir=tmp_path)
    ledger = Ledger(store)
    try:
        sid = ledger.start_session(model="m", context_length=8000)
        ledger.append_messages(sid, [{"role": "user", "content": "one"}])
        own_server.kill()
        with pytest.raises(ConnectionLost, match="could not append") as caught:
            ledger.append_messages(sid, [{"role": "user", "content": "two"}])
        assert "re-send the same events" in str(caught.value)
    finally:
        store.close()


# --- the CLI on PostgreSQL -----------------------------------------------------------------


def conversation(tmp_path: Path) -> Path:
    synth = SessionSynth(5, big_outputs=False)
    messages = [{"role": "system", "content": synth.system_prompt()}]
    for turn in synth.turns(14):
        messages += turn
    path = tmp_path / "conv.jsonl"
    path.write_text("\n".join(json.dumps(m) for m in messages) + "\n")
    return path


def test_every_cli_command_works_on_a_postgres_ledger(url: str, tmp_path: Path) -> None:
    covered: set[str] = set()

    def cmd(*args: str) -> str:
        covered.add(args[0])
        return ok(url, *args)

    sid = cmd("import", str(conversation(tmp_path)), "--context-length", "16000")
    sid = sid.strip().splitlines()[-1]
    assert json.loads(cmd("sessions", "--json"))[0]["session_id"] == sid
    shown = json.loads(cmd("show", sid, "--json"))
    assert json.loads(cmd("show", f"{sid}@3", "--json")) == shown[:2]
    cmd("export", sid, "--format", "openai", "--out", str(tmp_path / "x.json"))
    assert "Compressed:" in cmd("compress", sid, "--focus", "tests")
    chain = json.loads(cmd("chain", sid, "--json"))
    tip, compaction = chain["tip"], chain["chain"][1]["compaction_id"]
    assert json.loads(cmd("usage", tip, "--json"))["chain"]["agent_calls"] == 0
    assert json.loads(cmd("replay", sid, "--verify", "--json"))["rebuild"]["equal"] is True
    cmd("diff", compaction, "--json")
    cmd("audit", compaction, "--json")
    cmd("trace", sid, "pytest", "--json")
    hits = json.loads(cmd("recall", tip, "pytest", "--json"))["hits"]
    assert hits and os.listdir(tmp_path / "indexes")  # the FTS5 index is a local side file
    assert json.loads(cmd("expand", compaction, "--json"))
    cmd("pin", tip, next(h["message_id"] for h in hits if h["live"]))
    cmd("undo", compaction)
    assert json.loads(cmd("verify", "--json"))["ok"] is True
    traj = tmp_path / "in.jsonl"
    traj.write_text(json.dumps({"id": 1, "conversations": [
        {"from": "human", "value": "hi"}, {"from": "gpt", "value": "hello"}]}) + "\n")  # fmt: skip
    cmd("trajectories", "compress", str(traj), str(tmp_path / "out.jsonl"), "--json")
    assert json.loads(cmd("demo", "--turns", "6", "--json"))["log_verified"] is True
    assert json.loads(cmd("config", "--json"))["settings"]  # reads no ledger, works anyway
    copy = tmp_path / "copy.db"
    moved = CliRunner().invoke(cli, ["migrate", "--from", url, "--to", str(copy)])
    assert moved.exit_code == 0 and "every hash matches" in moved.output, moved.output
    covered.add("migrate")
    assert json.loads(cmd("upgrade", "--json")) == {
        "message_heads_filled": 0,
        "derived_values_stored": 0,
        "derived_values_replaced": 0,
        "unreadable_contents_skipped": 0,
    }
    covered.add("serve")  # test_serve_workers_share_a_postgres_ledger_and_the_feed_follows_it
    assert covered == set(cli.commands), set(cli.commands) - covered


# --- migrate ---------------------------------------------------------------------------------


def _ledger_with_blobs(path: Path) -> Path:
    """Two interleaved sessions, one large content (a blob) and a compaction."""
    with Ledger.open(path) as ledger:
        a = ledger.start_session(model="m", context_length=8000)
        b = ledger.start_session(model="m", context_length=8000)
        for n in range(5):
            ledger.append_messages(a, [{"role": "user", "content": f"a {n} " * 10}])
            ledger.append_messages(b, [{"role": "user", "content": f"b {n} " * 10}])
        ledger.append_messages(a, [{"role": "assistant", "content": "x" * 100_000}])
    return path


def test_migrate_sqlite_to_postgres_and_back_keeps_every_hash(url: str, tmp_path: Path) -> None:
    source = _ledger_with_blobs(tmp_path / "src.db")
    report = json.loads(
        CliRunner().invoke(cli, ["migrate", "--from", str(source), "--to", url, "--json"]).output
    )
    back = tmp_path / "back.db"
    again = CliRunner().invoke(cli, ["migrate", "--from", url, "--to", str(back)])
    assert again.exit_code == 0 and "every hash matches" in again.output
    with SQLiteEventStore(source) as a, PostgresEventStore(url) as b, SQLiteEventStore(back) as c:
        want = [(r.seq, r.stream, r.version, r.event, r.hash) for r in a.read_all()]
        assert want == [(r.seq, r.stream, r.version, r.event, r.hash) for r in b.read_all()]
        assert want == [(r.seq, r.stream, r.version, r.event, r.hash) for r in c.read_all()]
        assert report["events"] == len(want) and report["head_hash"] == chain_tip(want[-1][4])
        assert report["head_hash"] == a.verify().head_hash == b.verify().head_hash
        assert report["blobs"] == 1 and b.verify().ok
    with Ledger.open(url) as ledger:  # the copy is a working ledger
        assert len(ledger.sessions()) == 2


def test_migrate_refuses_a_non_empty_destination_and_a_bad_source(url: str, tmp_path: Path) -> None:
    source = _ledger_with_blobs(tmp_path / "src.db")
    with PostgresEventStore(url) as dest:
        dest.append("ses_x", [message("ses_x")], 0)
    result = CliRunner().invoke(cli, ["migrate", "--from", str(source), "--to", url])
    assert result.exit_code == 2 and "empty ledger" in result.output
    missing = CliRunner().invoke(cli, ["migrate", "--from", str(tmp_path / "no.db"), "--to", url])
    assert missing.exit_code == 2 and "no such ledger file" in missing.output
    import sqlite3

    with sqlite3.connect(source) as conn:
        conn.execute("UPDATE events SET hash = ? WHERE seq = 3", ("x" * 64,))
    with SQLiteEventStore(source) as bad, SQLiteEventStore(tmp_path / "out.db") as out:
        with pytest.raises(IntegrityError, match="does not verify"):
            copy_ledger(bad, out)
        assert out.last_seq() == 0


# --- ctxledger serve on PostgreSQL --------------------------------------------------------------


def test_serve_workers_share_a_postgres_ledger_and_the_feed_follows_it(url: str) -> None:
    """``ctxledger --db postgresql://… serve --workers 2``: four clients append to one session
    through both workers; the event feed (follow(), woken by NOTIFY) delivers every append."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    cli_path = str(Path(sys.executable).parent / "ctxledger")
    proc = subprocess.Popen(
        [cli_path, "--db", url, "serve", "--port", str(port), "--workers", "2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
            try:
                if httpx.get(base + "/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "the server did not become healthy"
            time.sleep(0.1)
        sid = httpx.post(base + "/v1/sessions", json={"model": "gpt-4.1"}).json()["session_id"]
        fed: list[str] = []

        def feed() -> None:
            with httpx.stream("GET", base + "/v1/events", params={"after": 0}, timeout=60) as resp:
                for line in resp.iter_lines():
                    if line.startswith("event: "):
                        fed.append(line[7:])
                        if fed.count("MessageAppended") == 60:
                            return

        follower = threading.Thread(target=feed)
        follower.start()
        failures = run_writers(base, sid)
        follower.join(60)
        assert failures == [] and fed.count("MessageAppended") == 60
        assert fed[0] == "SessionStarted"
        view = httpx.get(base + f"/v1/sessions/{sid}/api-messages").json()
        assert sorted(m["content"] for m in view["messages"]) == written()
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    with Ledger.open(url) as ledger:
        assert ledger.verify().ok
        assert len(ledger.transcript.session(sid).live) == 60


def test_the_framework_adapters_take_a_url_and_never_make_a_directory_of_it(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ctxledger.integrations.common import ledger_target
    from ctxledger.integrations.openai_agents import CtxLedgerSession

    monkeypatch.chdir(tmp_path)
    assert ledger_target(url) == url and list(tmp_path.iterdir()) == []
    assert ledger_target(tmp_path / "a" / "l.db") == tmp_path / "a" / "l.db"
    # a file's directory is made by the store when it opens, owner-only (session 36:
    # it was made here, 0755, and a failure of it crashed Hermes's turn)
    assert not (tmp_path / "a").exists()
    Ledger.open(ledger_target(tmp_path / "a" / "l.db")).close()
    assert (tmp_path / "a").is_dir() and stat.S_IMODE((tmp_path / "a").stat().st_mode) == 0o700
    session = CtxLedgerSession.open("user-42", url, model="m", context_length=16_000)

    async def main() -> list[object]:
        await session.add_items([{"role": "user", "content": "hello from an agent"}])
        return await session.get_items()

    items = anyio.run(main)
    session.service.ledger.close()
    assert [i["content"] for i in items] == ["hello from an agent"]  # type: ignore[index]
    with Ledger.open(url) as ledger:
        assert [s.session_id for s in ledger.sessions()] == ["user-42"]


def test_a_compaction_on_postgres_reads_its_events_back_without_a_look_at_the_log_end(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # review (session 26): the own fold needs a store that says what it wrote (SQLite's);
    # PostgreSQL's ledger read its last seq before every compaction's append for nothing
    from ctxledger import OfflineSummarizer, compact
    from ctxledger.compressor.config import CompressionConfig

    with Ledger.open(url, config=CompressionConfig(context_length=4000)) as ledger:
        sid = ledger.start_session(model="m", context_length=4000)
        for i in range(12):
            ledger.append_messages(
                sid, [{"role": "user", "content": f"turn {i} " + "words " * 60},
                      {"role": "assistant", "content": f"answer {i}"}],
            )  # fmt: skip
        looks: list[int] = []
        real = ledger.store.last_seq
        monkeypatch.setattr(ledger.store, "last_seq", lambda: looks.append(1) or real())
        outcome = anyio.run(compact, ledger, sid, OfflineSummarizer())
        assert outcome.action == "compressed" and looks == []
        new = outcome.new_session_id
        assert new is not None
        with Ledger.open(url) as fresh:  # what it folded is what the log holds
            assert fresh.api_messages(new) == ledger.api_messages(new)


def test_recall_on_a_branch_leaves_out_what_it_dropped_on_postgres(url: str) -> None:
    """pop_item after a compaction (the popped item lies below the summary's seq)."""
    from ctxledger.analysis.recall import recall
    from ctxledger.compressor.summarizers.offline import OfflineSummarizer
    from ctxledger.ledger.compaction import compact

    ledger = Ledger.open(url)
    try:
        root = ledger.start_session(model="m", context_length=16_000)
        for i in range(10):
            asked = {"role": "user", "content": f"where is walrus{i}"}
            ledger.append_messages(
                root, [asked, {"role": "assistant", "content": f"walrus{i} is in crate{i}"}]
            )
        tip = anyio.run(lambda: compact(ledger, root, OfflineSummarizer())).new_session_id or ""
        view = [dict(m) for m in ledger.transcript.api_messages(tip)]
        assert view[-1]["content"] == "walrus9 is in crate9"
        branch = ledger.start_session(
            model="m", context_length=16_000, parent_session_id=tip, reason="branch"
        )
        ledger.append_messages(branch, view[:-1])
        assert recall(ledger, branch, "crate9").hits == []  # before: the parent's original
        assert len(recall(ledger, branch, "crate8").hits) == 2
    finally:
        ledger.close()


def test_closing_a_postgres_store_under_a_running_recall_gives_store_error(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As on SQLite (test_reads_leave_the_folder): the recall's index closes once the
    recall inside it let go, and the recall says StoreError."""
    ledger = Ledger.open(url)
    sid = ledger.start_session(model="m", context_length=8192)
    ledger.append_messages(sid, [{"role": "user", "content": "a fact"}])
    raised = recall_under_a_close(ledger, sid, monkeypatch)
    assert [type(e) for e in raised] == [StoreError], raised


def test_a_close_inside_a_close_returns_on_postgres(url: str) -> None:
    """As on SQLite: a close made by the closing thread itself (a closer that closes its
    ledger, a signal handler) returns, where a plain closing lock hung for good."""
    ledger = Ledger.open(url)
    assert closed_inside_a_close(ledger)
    with pytest.raises(StoreError, match="closed"):
        list(ledger.store.read_all())


_NO_STREAM = (
    "the session 'S' has events but no stream of that name (its streams row renamed or "
    "removed?); run verify() on the log"
)


def _renamed_streams_row(ledger: Ledger) -> None:
    """Session S in `ledger`, its streams row then renamed T (a later open is refused)."""
    ledger.start_session(model="m", context_length=8192, session_id="S")
    ledger.append_messages("S", [{"role": "user", "content": "hi"}])
    store = ledger.store
    assert isinstance(store, PostgresEventStore)
    store._run("rename", lambda conn: conn.execute("UPDATE streams SET stream = 'T'"))


@pytest.mark.parametrize(
    "command",
    [["audit"], ["replay", "--verify"], ["replay", "--summarizer", "offline", "--config"]],
)
def test_a_session_whose_streams_row_was_renamed_is_named_not_read_as_empty(
    url: str, command: list[str], tmp_path: Path
) -> None:
    """(Session 36: ``read_stream('S')`` found no stream and ``audit S`` printed an empty
    audit; ``replay S --config`` reads the session through ``history``.)"""
    with Ledger.open(url) as ledger:
        _renamed_streams_row(ledger)
    if command[-1] == "--config":
        (tmp_path / "other.toml").write_text("threshold = 0.6\n")
        command = [*command, str(tmp_path / "other.toml")]
    result = run(url, command[0], "S", *command[1:])
    said = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert result.exit_code == 2 and said == [f"error: {_NO_STREAM}"], result.output


def test_a_renamed_streams_row_is_named_by_the_runtime_state(url: str) -> None:
    """The engine's runtime state (``status``, the pressure checks) reads the chain's
    sessions with ``read_session``: not a fresh state from nothing read. (Session 37: a
    ledger opened after the rename is refused at open, as on SQLite; the row is renamed
    here under a ledger already open, which the runtime state still reads.)"""
    with Ledger.open(url) as ledger:
        _renamed_streams_row(ledger)
        with pytest.raises(InvalidEvent) as refused:
            ContextService(ledger).status("S")
    assert str(refused.value) == _NO_STREAM
