"""Diff: message-level differences between views, section-level between summaries."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxledger.analysis.compactions import CompactionRecord, chain_compactions
from ctxledger.analysis.diff import (
    DiffReport,
    SummaryDiff,
    diff,
    parse_ref,
    session_view,
    transcript_at,
)
from ctxledger.cli.main import cli
from ctxledger.errors import InvalidInput, UnknownSession
from ctxledger.ledger.facade import Ledger

#: the module's recorded chain (the ``chain`` fixture in conftest.py)
CHAIN_SEED = 5


def refs(ledger: Ledger, tip: str) -> list[str]:
    """Sessions, SESSION@SEQ points and compaction ids of the chain."""
    out = list(ledger.chains.chain(tip))
    out += [r.compaction_id for r in chain_compactions(ledger, tip)]
    root = out[0]
    out += [f"{root}@{seq}" for seq in (3, 10, 25, 40)]
    return out


def encoded(changes: list[msgspec.Struct]) -> list[bytes]:
    return sorted(msgspec.json.encode(c) for c in changes)


def test_one_compaction_diff_shows_what_it_summarized_and_added(chain: tuple[Ledger, str]) -> None:
    ledger, tip = chain
    record = chain_compactions(ledger, tip)[0]
    report = diff(ledger, record.compaction_id)
    assert isinstance(report, DiffReport)
    summarized = [c.message_id for c in report.changes if c.kind == "summarized"]
    assert summarized == record.summary.input_message_ids
    summary_id = next(e.message_id for e in record.switch.layout if e.origin == "summary")
    assert {c.summary_id for c in report.changes if c.kind == "summarized"} == {summary_id}
    assert [c.message_id for c in report.changes if c.kind == "added"] == [summary_id]
    assert report.token_delta == report.b.tokens - report.a.tokens
    assert sum(c.token_delta for c in report.changes) == report.token_delta


@settings(max_examples=15)
@given(data=st.data())
def test_diff_of_a_view_with_itself_is_empty(
    chain: tuple[Ledger, str], data: st.DataObject
) -> None:
    ledger, tip = chain
    ref = data.draw(st.sampled_from(refs(ledger, tip)))
    report = diff(ledger, ref, ref)
    assert report.changes == []


@settings(max_examples=25)
@given(data=st.data())
def test_diff_a_b_and_diff_b_a_are_inverses(chain: tuple[Ledger, str], data: st.DataObject) -> None:
    ledger, tip = chain
    a = data.draw(st.sampled_from(refs(ledger, tip)))
    b = data.draw(st.sampled_from(refs(ledger, tip)))
    forward, backward = diff(ledger, a, b), diff(ledger, b, a)
    assert type(forward) is type(backward)
    assert encoded([c.inverse() for c in forward.changes]) == encoded(backward.changes)
    assert forward.token_delta == -backward.token_delta


def test_two_compactions_compare_their_summaries_by_section(chain: tuple[Ledger, str]) -> None:
    ledger, tip = chain
    first, second = chain_compactions(ledger, tip)[:2]
    report = diff(ledger, first.compaction_id, second.compaction_id)
    assert isinstance(report, SummaryDiff)
    assert report.changes and {c.kind for c in report.changes} <= {"added", "removed"}
    sections = {c.section for c in report.changes}
    assert sections <= {
        "preamble",
        "active_task",
        "goal",
        "constraints",
        "completed",
        "active_state",
        "in_progress",
        "blocked",
        "decisions",
        "resolved",
        "pending",
        "files",
        "remaining",
        "critical",
    }
    for change in report.changes:
        text = (second if change.kind == "added" else first).summary.text
        assert change.line in text


def test_a_later_point_shows_appended_messages_as_added(chain: tuple[Ledger, str]) -> None:
    ledger, tip = chain
    root = ledger.chains.chain(tip)[0]
    report = diff(ledger, f"{root}@5", f"{root}@20")
    assert isinstance(report, DiffReport)
    assert report.changes and {c.kind for c in report.changes} == {"added"}


@pytest.mark.parametrize(
    ("ref", "error", "match"),
    [
        ("ses_root@x", InvalidInput, "sequence number"),
        ("@5", InvalidInput, "name the session"),
        ("ses_root@0", InvalidInput, "start at 1"),
        ("ses_root@999999", InvalidInput, "past the end"),
        ("ses_nope", UnknownSession, "no session"),
        ("", InvalidInput, "reference is required"),
    ],
)
def test_bad_references_are_clear_errors_and_append_nothing(
    chain: tuple[Ledger, str], ref: str, error: type[Exception], match: str
) -> None:
    ledger, tip = chain
    before = ledger.store.last_seq()
    with pytest.raises(error, match=match):
        diff(ledger, ref, tip)
    assert ledger.store.last_seq() == before


def test_a_session_that_had_not_started_yet_is_named(chain: tuple[Ledger, str]) -> None:
    ledger, tip = chain
    with pytest.raises(UnknownSession, match="had not started at seq 3"):
        diff(ledger, f"{tip}@3", tip)


def test_one_reference_must_be_a_compaction(chain: tuple[Ledger, str]) -> None:
    ledger, tip = chain
    with pytest.raises(InvalidInput, match="two references"):
        diff(ledger, tip)


def test_one_reference_to_nothing_is_named_as_such(chain: tuple[Ledger, str]) -> None:
    """Session 36's CLI sweep: ``diff ses_nope`` said "give two references", as if the
    reference were fine and only a second one missing."""
    ledger, _ = chain
    before = ledger.store.last_seq()
    with pytest.raises(UnknownSession, match="no session or compaction 'ses_nope'"):
        diff(ledger, "ses_nope")
    assert ledger.store.last_seq() == before


def test_parse_ref() -> None:
    assert parse_ref("ses_a@12") == ("ses_a", 12)
    assert parse_ref(" ses_a ") == ("ses_a", None)


@pytest.mark.parametrize("seq", ["1_0", "+1", "1 0", "\u0661", "\u00b2", "9" * 5000])
def test_the_seq_of_a_reference_is_ascii_digits(seq: str) -> None:
    """Session 37: ``int()`` took "1_0", "+1" and "١" as sequence numbers. Spaces and
    tabs around the digits are allowed (the one rule, ``ascii_int``); inside, not."""
    with pytest.raises(InvalidInput, match="the part after @ must be an event sequence number"):
        parse_ref(f"ses_a@{seq}")


def test_a_session_id_holding_an_at_sign_is_named_whole(tmp_path: Path) -> None:
    """A client may choose an id holding "@" (the proxy's header, the state API): ``show
    me@host`` was refused ("the part after @ must be …") and ``show v@2`` showed the
    session ``v…`` (a prefix) at seq 2. A whole id is that session; ``ID@SEQ`` still works."""
    db = str(tmp_path / "l.db")
    with Ledger.open(db) as ledger:
        for sid in ("me@host", "v@2"):
            ledger.start_session(model="m", context_length=8192, session_id=sid)
            ledger.append_messages(sid, [{"role": "user", "content": f"hello from {sid}"}])
    runner = CliRunner()
    for ref, said in [("me@host", "me@host"), ("v@2", "v@2"), ("me@host@2", "me@host")]:
        for command in ("show", "export"):
            shown = runner.invoke(cli, ["--db", db, command, ref])
            assert shown.exit_code == 0 and f"hello from {said}" in shown.output, shown.output
    both = runner.invoke(cli, ["--db", db, "diff", "me@host", "v@2", "--json"])
    assert both.exit_code == 0, both.output
    assert (
        json.loads(both.output)["a"]["session_id"],
        json.loads(both.output)["b"]["session_id"],
    ) == ("me@host", "v@2")


def test_a_prefix_of_an_id_holding_an_at_sign_is_refused_naming_the_id(tmp_path: Path) -> None:
    """Session 38: ``show me@h`` (a prefix of ``me@host``) was read as SESSION@SEQ and
    refused with "the part after @ must be …" alone; the error now names the ids it
    starts. What resolves is unchanged (a prefix is never taken as a whole id)."""
    db = str(tmp_path / "l.db")
    with Ledger.open(db) as ledger:
        for sid in ("me@host", "me@hub", "you@0x"):
            ledger.start_session(model="m", context_length=8192, session_id=sid)
    runner = CliRunner()
    for ref, names in [("me@h", "sessions 'me@host', 'me@hub'"), ("you@0", "session 'you@0x'")]:
        for command in (["show", ref], ["export", ref], ["diff", ref, "me@host"]):
            out = runner.invoke(cli, ["--db", db, *command])
            assert out.exit_code == 2, out.output
            assert f"it is also the start of {names}: a ref holding @" in out.output
    with pytest.raises(InvalidInput, match=r"^'me@h': the part after @ must be .* number$"):
        parse_ref("me@h", ["you@0x"])  # starting no id: the message as before


def test_a_ref_that_is_a_whole_id_and_session_at_seq_is_refused_naming_both(
    tmp_path: Path,
) -> None:
    """Sessions ``v`` and ``v@2`` both exist: ``v@2`` is session ``v@2`` and session ``v``
    at seq 2. Either silent reading is wrong for someone, so it is refused, naming how to
    write each one; the spellings it names work."""
    db = str(tmp_path / "l.db")
    with Ledger.open(db) as ledger:
        for sid in ("v", "v@2"):
            ledger.start_session(model="m", context_length=8192, session_id=sid)
            ledger.append_messages(sid, [{"role": "user", "content": f"hello from {sid}"}])
        last = ledger.store.last_seq()
        with pytest.raises(InvalidInput, match="ambiguous"):
            diff(ledger, "v@2", "v")
    runner = CliRunner()
    for args in (["show", "v@2"], ["export", "v@2"], ["diff", "v@2", "v"]):
        refused = runner.invoke(cli, ["--db", db, *args])
        assert refused.exit_code == 2, refused.output
        assert f"write 'v@2@{last}' for session 'v@2'" in refused.output
        assert "or 'v@02' for session 'v' at seq 2" in refused.output
    for args, said in [
        (["show", f"v@2@{last}"], "v@2"),
        (["show", "v@02"], "v"),
        (["show", "v", "--at", "2"], "v"),
        (["export", "v@02"], "v"),
    ]:
        shown = runner.invoke(cli, ["--db", db, *args])
        assert shown.exit_code == 0 and f"hello from {said}" in shown.output, shown.output
        assert "hello from v@2" not in shown.output or said == "v@2"


def test_cli_diff_json_and_colored_terminal_output(
    chain: tuple[Ledger, str], tmp_path: Path
) -> None:
    ledger, tip = chain
    db = ledger.store.path
    record = chain_compactions(ledger, tip)[0]
    runner = CliRunner()
    same = runner.invoke(cli, ["--db", db, "diff", tip, tip, "--json"])
    assert same.exit_code == 0 and json.loads(same.output)["changes"] == []
    one = json.loads(
        runner.invoke(cli, ["--db", db, "diff", record.compaction_id, "--json"]).output
    )
    assert one["counts"]["summarized"] == len(record.summary.input_message_ids)
    text = runner.invoke(cli, ["--db", db, "diff", record.compaction_id], color=True)
    assert text.exit_code == 0 and "summarized" in text.output and "tokens" in text.output
    bad = runner.invoke(cli, ["--db", db, "diff", "ses_root@nope", tip])
    assert bad.exit_code == 2 and "error:" in bad.output


def test_cli_diff_of_one_session_names_the_what_if_options(chain: tuple[Ledger, str]) -> None:
    """Session 39's sweep: ``diff SESSION`` alone said "give two references to compare,
    or one compaction id", the library's words (``GET /v1/diff`` has no what-if); the
    CLI's ``--config``/``--loop``/``--summarizer`` (a chain vs its what-if) went unnamed.
    And ``diff A B --loop L`` blamed ``--config``, which was not given."""
    ledger, tip = chain
    db = ledger.store.path
    runner = CliRunner()
    alone = runner.invoke(cli, ["--db", db, "diff", tip])
    assert alone.exit_code == 2, alone.output
    (line,) = alone.output.splitlines()
    assert line.startswith("error: give two references to compare, one compaction id")
    for option in ("--config FILE", "--loop LOOP", "--summarizer KIND", "what-if replay"):
        assert option in line, line
    with pytest.raises(InvalidInput, match=r"^give two references to compare, or one compaction"):
        diff(ledger, tip)  # (the library's words stay: the HTTP API offers no what-if)
    both = runner.invoke(cli, ["--db", db, "diff", tip, tip, "--loop", "hermes"])
    assert both.exit_code == 2
    assert both.output.startswith("error: --loop compares A with its own what-if"), both.output
    two = runner.invoke(cli, ["--db", db, "diff", tip, "--summarizer", "offline", "--b-db", db])
    assert two.output.startswith("error: --summarizer compares A"), two.output


def test_cli_diff_against_a_what_if_with_the_recorded_config_is_empty(
    chain: tuple[Ledger, str], tmp_path: Path
) -> None:
    ledger, tip = chain
    db = ledger.store.path
    toml = tmp_path / "same.toml"
    toml.write_text("context_length = 16000\nthreshold_floor_tokens = 0\n")
    out = CliRunner().invoke(cli, ["--db", db, "diff", tip, "--config", str(toml), "--json"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.output)["changes"] == []
    other = tmp_path / "other.toml"
    other.write_text("context_length = 16000\nthreshold_floor_tokens = 0\ntarget_ratio = 0.5\n")
    changed = json.loads(
        CliRunner().invoke(cli, ["--db", db, "diff", tip, "--config", str(other), "--json"]).output
    )
    assert changed["changes"]


def test_a_diff_reads_each_chain_once_however_many_summaries_it_nests(
    chain: tuple[Ledger, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The tip's summary covers the earlier summaries too: their records come from one read."""
    import ctxledger.analysis.compactions as audit_module

    ledger, tip = chain
    records = chain_compactions(ledger, tip)
    assert len(records) >= 2
    reads: list[str] = []
    real = audit_module.chain_compactions

    def counting(ledger_: Ledger, session_id: str) -> list[CompactionRecord]:
        reads.append(session_id)
        return real(ledger_, session_id)

    monkeypatch.setattr(audit_module, "chain_compactions", counting)
    report = diff(ledger, records[0].session_id, tip)
    assert isinstance(report, DiffReport) and report.counts.get("summarized")
    assert len(reads) == 1
    # every message the first compaction summarized is covered through the later summaries
    summarized = {c.message_id for c in report.changes if c.kind == "summarized"}
    assert (
        set(records[0].summary.input_message_ids) - set(ledger.transcript.session(tip).live)
        <= summarized
    )


def test_transcript_at_checks_the_range_and_the_session(chain: tuple[Ledger, str]) -> None:
    ledger, tip = chain
    root = ledger.chains.root(tip)
    assert transcript_at(ledger, root, None) is ledger.transcript
    assert (
        transcript_at(ledger, root, 3).session(root).live
        == ledger.projector_at(3).transcript.session(root).live
    )
    with pytest.raises(InvalidInput, match="start at 1"):
        transcript_at(ledger, root, 0)
    with pytest.raises(InvalidInput, match="past the end"):
        transcript_at(ledger, root, ledger.store.last_seq() + 1)
    started = ledger.chains.lineage(tip).started_seq
    with pytest.raises(
        UnknownSession, match=f"had not started at seq 3: it starts at seq {started}"
    ):
        transcript_at(ledger, tip, 3)


@pytest.mark.parametrize("command", ["show", "export", "diff"])
@pytest.mark.parametrize(
    ("point", "match"),
    [
        ("ROOT@0", "start at 1"),
        ("ROOT@999999", "past the end"),
        ("TIP@3", "had not started at seq 3"),
        ("ROOT@x", "sequence number"),
        ("@3", "name the session"),
    ],
)
def test_show_export_and_diff_check_session_at_seq_alike(
    chain: tuple[Ledger, str], command: str, point: str, match: str
) -> None:
    ledger, tip = chain
    ref = point.replace("ROOT", ledger.chains.root(tip)).replace("TIP", tip)
    argv = [command, ref] + ([tip] if command == "diff" else [])
    out = CliRunner().invoke(cli, ["--db", ledger.store.path, *argv])
    assert out.exit_code == 2 and out.output.startswith("error:") and match in out.output, (
        out.output
    )


def test_show_and_export_at_a_seq_match_the_diff_side(chain: tuple[Ledger, str]) -> None:
    ledger, tip = chain
    root = ledger.chains.root(tip)
    runner = CliRunner()
    shown = [
        entry["message"]
        for entry in json.loads(
            runner.invoke(cli, ["--db", ledger.store.path, "show", f" {root}@25 ", "--json"]).output
        )
    ]
    view = session_view(ledger, root, 25)
    assert shown == [e.message for e in view.entries]
    exported = json.loads(
        runner.invoke(cli, ["--db", ledger.store.path, "export", f"{root}@25"]).output
    )
    assert exported["messages"] == shown
    both = runner.invoke(cli, ["--db", ledger.store.path, "show", f"{root}@25", "--at", "26"])
    assert both.exit_code == 2 and "give the sequence number once" in both.output
