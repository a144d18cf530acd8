"""``ctxledger verify`` checks the log without folding it and names what was tampered with.

Tampering is done the way a user with the sqlite3 shell would: flip a byte inside a
stored payload, delete a row a later compaction carries, ``UPDATE … replace(…)``,
delete the newest events (caught by the sealed head anchor, or by ``--expect-head``
when the anchor is gone too). Every trial must exit 1 with ``FAILED at seq N`` naming
the event, never exit 2 with a decode error from folding the log.
"""

from __future__ import annotations

import json
import random
import shutil
import sqlite3
from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from helpers.ledger_helpers import recorded_chain

from ctxledger import Ledger
from ctxledger.cli.main import cli
from ctxledger.ledger.anchor import anchor_path, read_anchor

TRIALS = 8


def run(db: Path, *args: str) -> click.testing.Result:
    return CliRunner().invoke(cli, ["--db", str(db), "verify", *args])


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("tamper") / "pristine.db"
    ledger, _tip = recorded_chain(path, seed=11, turns=14)
    ledger.close()  # seals the head anchor
    assert read_anchor(path) is not None
    return path


@pytest.fixture
def db(pristine: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "l.db"
    shutil.copy(pristine, copy)
    shutil.copy(anchor_path(pristine), anchor_path(copy))
    return copy


def sql(db: Path, statement: str, *params: object) -> list[tuple[object, ...]]:
    with sqlite3.connect(db) as conn:
        rows = conn.execute(statement, params).fetchall()
    conn.close()
    return rows


def last_seq(db: Path) -> int:
    return int(sql(db, "SELECT max(seq) FROM events")[0][0])  # type: ignore[call-overload]


def assert_failed_at(result: click.testing.Result, seq: int) -> None:
    assert result.exit_code == 1, result.output
    assert f"FAILED at seq {seq}" in result.output, result.output


def test_an_untouched_ledger_verifies_and_prints_its_head(db: Path) -> None:
    result = run(db)
    assert result.exit_code == 0, result.output
    report = json.loads(run(db, "--json").output)
    assert report["ok"] and report["head_seq"] == last_seq(db)
    assert f"head: seq {report['head_seq']} hash {report['head_hash']}" in result.output


@pytest.mark.parametrize("trial", range(TRIALS))
def test_a_flipped_byte_inside_a_payload_is_named(db: Path, trial: int) -> None:
    rng = random.Random(trial)
    seq = rng.randint(1, last_seq(db))
    (payload,) = sql(db, "SELECT payload FROM events WHERE seq = ?", seq)[0]
    data = bytearray(payload)  # type: ignore[arg-type]
    data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
    sql(db, "UPDATE events SET payload = ? WHERE seq = ?", bytes(data), seq)
    assert_failed_at(run(db), seq)


@pytest.mark.parametrize("trial", range(TRIALS))
def test_a_deleted_row_is_named_even_when_a_later_compaction_carries_it(
    db: Path, trial: int
) -> None:
    rng = random.Random(100 + trial)
    messages = [
        int(s)  # type: ignore[call-overload]
        for (s,) in sql(db, "SELECT seq FROM events WHERE kind = 'MessageAppended'")
    ]
    seq = rng.choice(messages[:-3])
    sql(db, "DELETE FROM events WHERE seq = ?", seq)
    result = run(db)
    assert result.exit_code == 1, result.output
    assert f"seq {seq} is missing" in result.output, result.output


@pytest.mark.parametrize("trial", range(4))
def test_a_payload_rewritten_with_sql_replace_is_named(db: Path, trial: int) -> None:
    rows = sql(db, "SELECT seq FROM events WHERE instr(payload, 'user') > 0 ORDER BY seq")
    seq = int(rows[trial * 3][0])  # type: ignore[call-overload]
    sql(db, "UPDATE events SET payload = replace(payload, 'user', 'usr') WHERE seq = ?", seq)
    assert_failed_at(run(db), seq)


@pytest.mark.parametrize("deleted", [1, 2, 5])
def test_deleting_the_newest_events_is_caught_by_the_sealed_anchor(db: Path, deleted: int) -> None:
    last = last_seq(db)
    sql(db, "DELETE FROM events WHERE seq > ?", last - deleted)
    result = run(db)
    assert_failed_at(result, last - deleted + 1)
    assert "newest events were deleted" in result.output


def test_deleting_the_anchor_too_is_caught_by_expect_head(db: Path) -> None:
    head = json.loads(run(db, "--json").output)["head_hash"]
    last = last_seq(db)
    sql(db, "DELETE FROM events WHERE seq > ?", last - 2)
    anchor_path(db).unlink()
    plain = run(db, "--expect-head", head)
    assert plain.exit_code == 1 and f"expected {head}" in plain.output, plain.output
    assert_failed_at(run(db, "--expect-head", f"{last}:{head}"), last - 1)


def test_expect_head_with_a_seq_accepts_a_log_that_grew(db: Path) -> None:
    report = json.loads(run(db, "--json").output)
    mark = f"{report['head_seq']}:{report['head_hash']}"
    with Ledger.open(db) as grown:
        sid = grown.tip(next(iter(grown.transcript.state.sessions)))
        grown.append_messages(sid, [{"role": "user", "content": "one more"}])
    assert run(db, "--expect-head", mark).exit_code == 0
    assert run(db, "--expect-head", report["head_hash"]).exit_code == 1


def test_a_log_truncated_then_rewritten_differs_from_the_anchor(db: Path) -> None:
    last = last_seq(db)
    donor = db.with_name("donor.db")
    shutil.copy(db, donor)
    # the same seq now holds a different event: take the row of another seq, renumbered
    sql(db, "DELETE FROM events WHERE seq = ?", last)
    with sqlite3.connect(db) as conn:
        conn.execute(f"ATTACH DATABASE '{donor}' AS d")
        conn.execute(
            "INSERT INTO events SELECT ?, event_id || 'x', stream_id, version, kind, schema,"
            " payload, hash, message_id, tokens FROM d.events WHERE seq = ?",
            (last, last),
        )
    conn.close()
    result = run(db)
    assert result.exit_code == 1, result.output


def test_an_edited_anchor_is_reported(db: Path) -> None:
    anchor = json.loads(anchor_path(db).read_text())
    anchor["seq"] -= 3
    anchor_path(db).write_text(json.dumps(anchor))
    result = run(db)
    assert result.exit_code == 1 and "valid seal" in result.output, result.output


def test_verify_of_a_missing_file_creates_nothing(tmp_path: Path) -> None:
    result = run(tmp_path / "absent.db")
    assert result.exit_code == 2 and "no ledger file" in result.output
    assert not (tmp_path / "absent.db").exists()


@pytest.mark.parametrize(
    "bad", ["bogus", "abc123", "x:" + "0" * 64, "-1:" + "0" * 64, "1:nothex", "5:", "0" * 63]
)
def test_expect_head_that_is_no_head_is_bad_input_exit_2(db: Path, bad: str) -> None:
    result = run(db, "--expect-head", bad)
    assert result.exit_code == 2, result.output
    assert "--expect-head takes HASH or SEQ:HASH" in result.output
    assert "FAILED" not in result.output


def test_expect_head_in_capitals_is_the_same_hash(db: Path) -> None:
    head = json.loads(run(db, "--json").output)["head_hash"]
    assert run(db, "--expect-head", head.upper()).exit_code == 0
