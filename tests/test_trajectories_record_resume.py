"""``trajectories compress --db``: a record whose recording fails mid-batch is recorded
by the next run (session 33 left it: the resume skipped every record OUT.jsonl held,
recorded or not). A recording cut between the import of the original and its
compaction is finished on the imported original, not imported a second time."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from ctxledger import trajectories
from ctxledger.cli.main import cli
from ctxledger.demo.synth import SessionSynth
from ctxledger.errors import StoreError
from ctxledger.importers.export import export_messages
from ctxledger.ledger.facade import Ledger
from ctxledger.trajectories import record

KEYS = ("t1", "t2", "t3")


def _batch(
    tmp_path: Path, seed: int = 8, name: str = "", turns: int = 6
) -> tuple[Path, Path, Path]:
    synth = SessionSynth(seed)
    lines = []
    for key in KEYS:
        msgs = [{"role": "system", "content": synth.system_prompt()}]
        for turn in synth.turns(turns):
            msgs += turn
        rec = json.loads(export_messages(None, msgs, "sharegpt"))
        rec["id"] = key
        lines.append(json.dumps(rec))
    src = tmp_path / f"{name}in.jsonl"
    src.write_text("\n".join(lines) + "\n")
    return src, tmp_path / f"{name}out.jsonl", tmp_path / "l.db"


def _args(src: Path, dst: Path) -> list[str]:
    return ["trajectories", "compress", str(src), str(dst), "--target", "4000", "--json"]


def _run(src: Path, dst: Path, db: Path) -> Result:
    return CliRunner().invoke(cli, ["--db", str(db), *_args(src, dst)])


def _sources(db: Path) -> list[str]:
    with Ledger.open(db) as ledger:
        return sorted(str(info.source) for info in ledger.sessions())


def _fail_at_t2(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    real = getattr(record, name)

    def failing(ledger: Ledger, key: str, *args: Any) -> Any:
        if key == "id:t2" or args[-1] == "trajectory:id:t2":
            raise StoreError("injected: the disk is full")
        return real(ledger, key, *args)

    monkeypatch.setattr(record, name, failing)


@pytest.mark.parametrize(
    ("where", "cut"),
    [("_import_original", False), ("_continuation", True)],
    ids=["before-the-import", "between-import-and-compaction"],
)
def test_a_record_that_failed_to_record_is_recorded_by_the_resume(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str, cut: bool
) -> None:
    src, dst, db = _batch(tmp_path)
    with monkeypatch.context() as patch:
        _fail_at_t2(patch, where)
        first = _run(src, dst, db)
    assert first.exit_code == 1 and "injected: the disk is full" in first.output, first.output
    assert "run the same command again to record" in first.output
    assert len(dst.read_text().splitlines()) == 3  # OUT holds every record
    originals = ["sharegpt:id:t1", *(["sharegpt:id:t2"] if cut else [])]
    assert _sources(db) == sorted([*originals, "trajectory:id:t1"])

    again = _run(src, dst, db)
    assert again.exit_code == 0, again.output
    report = json.loads(again.output)
    assert report["resumed"] == 3 and len(report["recorded_sessions"]) == 2
    # each record once: its imported original (t2's reused when it was cut) and continuation
    assert _sources(db) == sorted(
        f"{kind}:id:{k}" for k in KEYS for kind in ("sharegpt", "trajectory")
    )
    with Ledger.open(db) as ledger:
        assert all(
            ledger.chains.state.sessions[s].parent_session_id for s in report["recorded_sessions"]
        )

    done = json.loads(_run(src, dst, db).output)
    assert done["resumed"] == 3 and done["recorded_sessions"] == []


def test_a_record_of_a_key_another_batch_recorded_is_recorded_by_the_resume(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """(The resume skips a key only when a continuation of this very record is there.)"""
    a_src, a_dst, db = _batch(tmp_path, 8, "a-")
    assert _run(a_src, a_dst, db).exit_code == 0
    b_src, b_dst, _ = _batch(tmp_path, 9, "b-")  # the same ids, other turns
    with monkeypatch.context() as patch:
        _fail_at_t2(patch, "_import_original")
        assert _run(b_src, b_dst, db).exit_code == 1
    again = json.loads(_run(b_src, b_dst, db).output)
    assert len(again["recorded_sessions"]) == 2  # batch B's t2 and t3 (t1: recorded)
    assert _sources(db) == sorted(
        f"{kind}:id:{k}" for k in KEYS for kind in ("sharegpt", "trajectory") for _ in "ab"
    )
    assert json.loads(_run(b_src, b_dst, db).output)["recorded_sessions"] == []


def test_a_db_that_is_no_ledger_is_refused_before_out_is_written(tmp_path: Path) -> None:
    src, dst, db = _batch(tmp_path)
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE notes (body)")
    conn.commit()
    conn.close()
    result = _run(src, dst, db)
    assert result.exit_code == 2, result.output
    assert "is not a ctxledger ledger" in result.output and "note:" not in result.output
    assert not dst.exists()


def test_a_resume_keeps_no_body_of_the_originals_it_compares(tmp_path: Path) -> None:
    # review 2: each skipped key's original was read through api_messages, its bodies
    # kept on the projection: a resume's memory grew with the batch
    src, dst, db = _batch(tmp_path)
    assert _run(src, dst, db).exit_code == 0
    with Ledger.open(db) as ledger:
        assert record.record_batch(ledger, src, dst, skip_keys=record.written_keys(dst)) == []
        messages = ledger.transcript.state.messages.values()
        assert [m.seq for m in messages if m.origin == "appended" and m.body is not None] == []


def test_a_stale_ledger_is_refreshed_before_it_records(tmp_path: Path) -> None:
    # review 2: opened before the compress, the fold missed what another run recorded
    src, dst, db = _batch(tmp_path)
    with Ledger.open(db) as stale:
        assert _run(src, dst, db).exit_code == 0  # the other run records the batch
        assert record.record_batch(stale, src, dst, skip_keys=record.written_keys(dst)) == []
    assert len(_sources(db)) == 2 * len(KEYS)


def test_out_written_from_other_records_of_the_same_ids_is_not_recorded(tmp_path: Path) -> None:
    # review 2: IN regenerated (the same ids, other turns) after OUT was written: OUT's
    # summaries are of the old turns, and were recorded over the new originals
    src, dst, db = _batch(tmp_path)
    assert _run(src, dst, db).exit_code == 0
    before = _sources(db)
    regenerated, _, _ = _batch(tmp_path, 20, "new-", turns=3)
    src.write_text(regenerated.read_text())
    again = _run(src, dst, db)
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout)["recorded_sessions"] == []
    assert again.stderr.count(record.SKIPPED) == len(KEYS)
    assert json.loads(again.stdout)["not_recorded"] == [f"id:{k}" for k in KEYS]
    assert _sources(db) == before


def _spans(dst: Path) -> dict[str, tuple[int, int]]:
    metrics = [json.loads(line) for line in record.metrics_path_for(dst).read_text().splitlines()]
    return {m["key"]: (m["turns_compressed_start"], m["turns_compressed_end"]) for m in metrics}


def test_a_turn_changed_inside_the_compressed_span_is_not_recorded(tmp_path: Path) -> None:
    # review 3: only OUT's head and tail were checked against IN: a turn changed in the
    # middle (a secret redacted, IN rewritten) got OUT's old summary recorded over it
    src, dst, db = _batch(tmp_path)
    assert _run(src, dst, db).exit_code == 0
    before = _sources(db)
    start, end = _spans(dst)["id:t2"]
    records = [json.loads(line) for line in src.read_text().splitlines()]
    turn = records[1]["conversations"][(start + end) // 2]
    turn["value"] = "REDACTED " + turn["value"]
    src.write_text("".join(json.dumps(r) + "\n" for r in records))
    again = _run(src, dst, db)
    assert again.exit_code == 0, again.output
    assert again.stderr == f"warning: id:t2: {record.SKIPPED}\n"
    assert json.loads(again.stdout)["not_recorded"] == ["id:t2"]
    assert _sources(db) == before
    text = CliRunner().invoke(cli, ["--db", str(db), *_args(src, dst)[:-1]])
    assert "not recorded (IN changed after OUT was written): id:t2" in text.stdout


def test_metrics_without_a_digest_fall_back_to_the_turns_check(tmp_path: Path) -> None:
    # metrics files written before the digest: the same IN records nothing again and
    # warns of nothing; a record whose turns no longer match is still refused
    src, dst, db = _batch(tmp_path)
    assert _run(src, dst, db).exit_code == 0
    path = record.metrics_path_for(dst)
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert all(m["input_digest"] for m in lines)
    path.write_text("".join(json.dumps({**m, "input_digest": None}) + "\n" for m in lines))
    with Ledger.open(tmp_path / "other.db") as other:
        assert len(record.record_batch(other, src, dst, warn=pytest.fail)) == len(KEYS)
    regenerated, _, _ = _batch(tmp_path, 20, "new-", turns=3)
    with Ledger.open(tmp_path / "third.db") as third, pytest.warns(UserWarning, match="IN changed"):
        assert record.record_batch(third, regenerated, dst) == []


def test_a_new_db_path_gone_bad_during_the_compress_gets_the_note(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # review 3: the late open of a new --db path was outside the note's try
    src, dst, db = _batch(tmp_path)
    real = trajectories.compress_file

    async def compress_then_spoil(*args: Any, **kwargs: Any) -> Any:
        report = await real(*args, **kwargs)
        db.write_text("not a ledger\n")
        return report

    monkeypatch.setattr(trajectories, "compress_file", compress_then_spoil)
    result = _run(src, dst, db)
    assert result.exit_code != 0 and dst.stat().st_size > 0
    assert "note: " in result.stderr and "run the same command again" in result.stderr


def test_a_failed_compress_leaves_no_new_ledger(tmp_path: Path) -> None:
    src, dst, db = _batch(tmp_path)
    lines = src.read_text().splitlines()
    src.write_text("\n".join([lines[0], "{not json", *lines[1:]]) + "\n")
    result = _run(src, dst, db)
    assert result.exit_code == 2, result.output
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(db.name)) == []


def test_the_note_of_a_failed_recording_shows_a_bidi_out_path_escaped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # review s34 #3: OUT's path went to the terminal raw; a U+202E in it reversed the line
    src, _, db = _batch(tmp_path)
    dst = tmp_path / "out\u202eRED.jsonl"
    _fail_at_t2(monkeypatch, "_import_original")
    result = _run(src, dst, db)
    assert result.exit_code == 1, result.output
    note = next(line for line in result.output.splitlines() if "holds every record" in line)
    assert "\u202e" not in note and "RED.jsonl" in note
