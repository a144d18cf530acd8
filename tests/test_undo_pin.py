"""Undo a compaction (nothing deleted) and pin messages (never pruned or summarized)."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest
from click.testing import CliRunner
from helpers.ledger_helpers import deterministic_ledger, recorded_chain
from hypothesis import example, given, reject, settings
from hypothesis import strategies as st

from ctxledger.analysis.compactions import chain_compactions
from ctxledger.analysis.replay import rebuild_check, verify_compactions
from ctxledger.analysis.undo import undo
from ctxledger.cli.main import cli
from ctxledger.compressor.summarizers.offline import OfflineSummarizer
from ctxledger.errors import InvalidInput, UnknownCompaction
from ctxledger.events import MessageAppended
from ctxledger.ledger.compaction import compact, compaction_input, plan_compaction
from ctxledger.ledger.facade import Ledger


def generated(path: Path, seed: int = 4, turns: int = 12) -> tuple[Ledger, str]:
    return recorded_chain(path, seed, turns)


def test_undo_right_after_a_compaction_shows_the_pre_compaction_view(tmp_path: Path) -> None:
    ledger, tip = generated(tmp_path / "l.db")
    pre = ledger.api_messages(tip)
    pre_tokens = ledger.transcript.api_tokens(tip)
    outcome = anyio.run(lambda: compact(ledger, tip, OfflineSummarizer()))
    assert outcome.compaction_id is not None and ledger.api_messages(ledger.tip(tip)) != pre
    result = undo(ledger, outcome.compaction_id)
    assert ledger.tip(tip) == result.new_session_id and result.appended_after == 0
    assert ledger.api_messages(result.new_session_id) == pre
    assert ledger.transcript.api_tokens(result.new_session_id) == pre_tokens
    assert ledger.chains.kind(result.new_session_id) == "revert"


@settings(max_examples=5)
@given(seed=st.integers(0, 1000), which=st.integers(0, 10))
@example(seed=579, which=0)  # a chain of 10 turns with no compaction: nothing to undo
def test_undo_then_show_equals_the_pre_compaction_view_plus_what_came_after(
    tmp_path_factory: pytest.TempPathFactory, seed: int, which: int
) -> None:
    ledger, tip = generated(tmp_path_factory.mktemp("undo") / "l.db", seed, 10)
    records = chain_compactions(ledger, tip)
    if not records:  # (a few seeds compact nothing; the property is about an undo)
        ledger.close()
        reject()
    record = records[which % len(records)]
    chain = ledger.chains.chain(tip)
    # what the agent appended after the compaction, read straight from the log
    after = [
        rec.event.message_id
        for sid in chain[chain.index(record.new_session_id) :]
        for rec in ledger.store.read_stream(sid)
        if isinstance(rec.event, MessageAppended)
    ]
    expected = ledger.api_messages(record.session_id) + [
        ledger.transcript.stored(m).message for m in after
    ]
    before_events = list(ledger.store.read_all())
    result = undo(ledger, record.compaction_id)
    assert ledger.api_messages(result.new_session_id) == expected
    assert result.appended_after == len(after)
    # nothing was rewritten or deleted: the old events are all still there, unchanged
    assert list(ledger.store.read_all(1, before_events[-1].seq)) == before_events
    assert ledger.verify().ok and rebuild_check(ledger, result.new_session_id).equal
    ledger.close()


def test_undo_restores_the_compaction_count_so_the_head_is_protected_again(tmp_path: Path) -> None:
    ledger, tip = generated(tmp_path / "l.db")
    first = chain_compactions(ledger, tip)[0]
    assert ledger.chains.compression_count(tip) >= 2
    result = undo(ledger, first.compaction_id)
    assert ledger.chains.compression_count(result.new_session_id) == 0
    assert compaction_input(ledger, result.new_session_id).compaction_count == 0
    assert ledger.chains.root(result.new_session_id) == ledger.chains.chain(tip)[0]


def test_undo_twice_or_of_an_unknown_compaction_appends_nothing(tmp_path: Path) -> None:
    ledger, tip = generated(tmp_path / "l.db")
    last = chain_compactions(ledger, tip)[-1]
    undo(ledger, last.compaction_id)
    before = ledger.store.last_seq()
    with pytest.raises(InvalidInput, match="already undone"):
        undo(ledger, last.compaction_id)
    with pytest.raises(UnknownCompaction, match="no compaction"):
        undo(ledger, "cmp_unknown")
    assert ledger.store.last_seq() == before


def test_undo_of_a_newer_compaction_after_an_older_one_was_undone_appends_nothing(
    tmp_path: Path,
) -> None:
    ledger, tip = generated(tmp_path / "l.db")
    first, second = chain_compactions(ledger, tip)[:2]
    result = undo(ledger, first.compaction_id)
    assert ledger.chains.compression_count(result.new_session_id) == 0
    before = ledger.store.last_seq()
    with pytest.raises(InvalidInput, match="no longer in effect"):
        undo(ledger, second.compaction_id)  # would bring back what the first undo removed
    assert ledger.store.last_seq() == before
    assert ledger.chains.compression_count(ledger.tip(tip)) == 0
    db = ledger.store.path
    ledger.close()
    out = CliRunner().invoke(cli, ["--db", db, "undo", second.compaction_id])
    assert out.exit_code == 2 and "no longer in effect" in out.output, out.output
    with Ledger.open(db) as reopened:
        assert reopened.store.last_seq() == before


def test_replay_verify_after_undo_reports_no_drift(tmp_path: Path) -> None:
    ledger, tip = generated(tmp_path / "l.db")
    result = undo(ledger, chain_compactions(ledger, tip)[0].compaction_id)
    report = verify_compactions(ledger, result.new_session_id)
    assert report.compactions and not report.drifted


def _session(ledger: Ledger, turns: int = 10) -> str:
    sid = ledger.start_session(model="m", context_length=16_000, system_prompt="You fix bugs.")
    for i in range(turns):
        ledger.append_messages(
            sid,
            [
                {"role": "user", "content": f"Fix bug {i} in src/mod{i}/core.py please."},
                {
                    "role": "assistant",
                    "content": f"Fixed bug {i}. " + "Checked the rest of the file. " * 60,
                },
            ],
        )
    return sid


def test_a_pinned_message_is_kept_verbatim_and_the_plan_says_so() -> None:
    ledger = deterministic_ledger()
    sid = _session(ledger)
    target = ledger.transcript.session(sid).live[8]  # in the middle of what a compaction summarizes
    original = ledger.transcript.original(target)
    ledger.pin(sid, target)
    outcome = anyio.run(lambda: compact(ledger, sid, OfflineSummarizer()))
    assert outcome.action == "compressed" and outcome.new_session_id is not None
    index = 1 + 8  # the system message comes first in the planned list
    assert index in outcome.plan["pinned"]
    record = chain_compactions(ledger, sid)[0]
    assert target not in record.summary.input_message_ids
    assert original in ledger.api_messages(outcome.new_session_id)
    assert target in ledger.transcript.session(outcome.new_session_id).pinned


def test_cli_pin_and_undo(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    ledger = deterministic_ledger(db)
    sid = _session(ledger, 20)
    ledger.close()
    with Ledger.open(db) as plain:  # the CLI plans with the default config
        summarized = plan_compaction(plain, sid).plan.summarized_indices()
        target = plain.transcript.session(sid).live[summarized[2] - 1]
    runner = CliRunner()
    out = runner.invoke(cli, ["--db", str(db), "pin", sid, target, "--json"])
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    assert (
        data["pinned"]
        and data["plan_index"] in data["plan_pinned"]
        and "pinned" in data["next_compaction"]
    )
    compressed = json.loads(runner.invoke(cli, ["--db", str(db), "compress", sid, "--json"]).output)
    cid = compressed["compaction_id"]
    undone = runner.invoke(cli, ["--db", str(db), "undo", cid, "--json"])
    assert undone.exit_code == 0, undone.output
    assert json.loads(undone.output)["compaction_id"] == cid
    again = runner.invoke(cli, ["--db", str(db), "undo", cid])
    assert again.exit_code == 2 and "already undone" in again.output


def test_cli_pin_by_index_of_an_ended_session_counts_in_the_view_show_prints(
    tmp_path: Path,
) -> None:
    db = tmp_path / "c.db"
    ledger = deterministic_ledger(db)
    sid = _session(ledger, 20)
    ledger.close()
    runner = CliRunner()
    assert runner.invoke(cli, ["--db", str(db), "compress", sid]).exit_code == 0
    with Ledger.open(db) as done:
        tip = done.tip(sid)
        old, new = done.transcript.session(sid), done.transcript.session(tip)
        offset = int(old.system_prompt is not None)
        kept = [i for i, mid in enumerate(old.live) if mid in new.live]
        gone = [i for i, mid in enumerate(old.live) if mid not in new.live]
        # the same message sits at another index of the tip's view
        assert kept and gone and new.live.index(old.live[kept[-1]]) != kept[-1]
        target = old.live[kept[-1]]
        before = done.store.last_seq()
    out = runner.invoke(cli, ["--db", str(db), "pin", sid, str(kept[-1] + offset), "--json"])
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    assert data["message_id"] == target and data["session_id"] == tip
    with Ledger.open(db) as pinned:
        assert target in pinned.transcript.session(tip).pinned
        before = pinned.store.last_seq()
    out = runner.invoke(cli, ["--db", str(db), "pin", sid, str(gone[0] + offset)])
    assert out.exit_code == 2 and "no longer live at the chain's tip" in out.output, out.output
    assert tip in out.output
    with Ledger.open(db) as reopened:
        assert reopened.store.last_seq() == before


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (["pin", "SID", "msg_nope"], "not in the live view"),
        (["pin", "SID", " "], "message id is required"),
        # str.isdigit() holds for a superscript two, which int() refuses (a traceback),
        # and for Arabic-Indic digits, an index no `show` prints: both are ids here
        (["pin", "SID", "\u00b2"], "not in the live view"),
        (["pin", "SID", "1\u00b2"], "not in the live view"),
        (["pin", "SID", "\u0661"], "not in the live view"),
        (["pin", "SID", "LIVE", "--unpin"], "is not pinned"),
        (["pin", "ses_nope", "msg_x"], "no session"),
        (["undo", "cmp_nope"], "no compaction"),
    ],
)
def test_cli_bad_pin_and_undo_input_exits_2_and_appends_nothing(
    tmp_path: Path, args: list[str], match: str
) -> None:
    db = tmp_path / "c.db"
    ledger = deterministic_ledger(db)
    sid = _session(ledger, 3)
    live = ledger.transcript.session(sid).live[0]
    before = ledger.store.last_seq()
    ledger.close()
    argv = [a.replace("SID", sid).replace("LIVE", live) for a in args]
    out = CliRunner().invoke(cli, ["--db", str(db), *argv])
    assert out.exit_code == 2 and match in out.output
    with Ledger.open(db) as reopened:
        assert reopened.store.last_seq() == before


def test_cli_unpin_of_a_middle_message_says_the_next_compaction_summarizes_it(
    tmp_path: Path,
) -> None:
    db = tmp_path / "u.db"
    ledger = deterministic_ledger(db)
    sid = _session(ledger, 20)
    ledger.close()
    with Ledger.open(db) as plain:  # the CLI plans with the default config
        summarized = plan_compaction(plain, sid).plan.summarized_indices()
        target = plain.transcript.session(sid).live[summarized[2] - 1]
    runner = CliRunner()
    assert runner.invoke(cli, ["--db", str(db), "pin", sid, target]).exit_code == 0
    out = runner.invoke(cli, ["--db", str(db), "pin", sid, target, "--unpin", "--json"])
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    assert not data["pinned"] and data["plan_index"] not in data["plan_pinned"]
    assert data["next_compaction"] == "the next compaction would summarize it"
    text = runner.invoke(cli, ["--db", str(db), "pin", f" {sid} ", f" {target} "])
    assert text.exit_code == 0 and "pinned" in text.output
    again = runner.invoke(cli, ["--db", str(db), "pin", sid, target, "--unpin"])
    assert (
        again.exit_code == 0 and "unpinned" in again.output and "would summarize it" in again.output
    )


def test_cli_chain_counts_compactions_in_effect_like_the_compressor(tmp_path: Path) -> None:
    ledger, tip = generated(tmp_path / "l.db")
    records = chain_compactions(ledger, tip)
    assert len(records) >= 2
    db = ledger.store.path

    def count(ref: str) -> int:
        out = CliRunner().invoke(cli, ["--db", db, "chain", ref, "--json"])
        assert out.exit_code == 0, out.output
        return int(json.loads(out.output)["compression_count"])

    assert count(tip) == ledger.chains.compression_count(tip) == len(records)
    last = undo(ledger, records[-1].compaction_id)  # back to the view before the last compaction
    assert count(tip) == ledger.chains.compression_count(last.new_session_id) == len(records) - 1
    first = undo(
        ledger, records[0].compaction_id
    )  # back to the root's view: no compaction in effect
    assert count(tip) == ledger.chains.compression_count(first.new_session_id) == 0
    ledger.close()
