"""The store benchmarks of issue 14 keep running and keep their JSON-lines shape.

Tiny sizes: these check that ``bench/layout_bench.py``, the raw floor of
``bench/contention_bench.py`` and the CPU figures of ``bench/store_bench.py`` work and
measure the same rows, never how fast anything is (speed lives in ``bench/``)."""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"
sys.path.insert(0, str(BENCH))

import contention_bench  # noqa: E402
import layout_bench  # noqa: E402
import store_bench  # noqa: E402


def test_layout_bench_reports_each_layout_against_the_raw_table(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert layout_bench.main(["--events", "2000", "--rounds", "1", "current", "segment"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [row["bench"] for row in lines] == ["layout_insert:current", "layout_insert:segment"]
    for row in lines:
        assert {"bench", "value", "unit", "baseline", "ratio"} <= row.keys()
        assert row["value"] > 0 and row["baseline"] > 0
        assert row["ratio"] == pytest.approx(
            row["raw_cpu_us_per_event"] / row["cpu_us_per_event"], rel=0.01
        )


@pytest.mark.parametrize("layout", sorted(layout_bench._TABLES))
def test_every_table_layout_takes_the_rows_it_is_given(tmp_path: Path, layout: str) -> None:
    rows = layout_bench.Rows(1000)
    conn = sqlite3.connect(tmp_path / "l.db", isolation_level=None)
    txn = layout_bench._layout(layout, conn, rows)
    conn.execute("BEGIN")
    txn(0)
    conn.execute("COMMIT")
    assert conn.execute("SELECT count(*), max(seq) FROM events").fetchone() == (1000, 1000)
    # the stream/version columns are dense per stream, as the store writes them
    versions = conn.execute("SELECT min(version), max(version) FROM events").fetchone()
    assert versions == (1, 1000)
    conn.close()


def test_the_segment_layout_keeps_every_payload_and_id() -> None:
    rows = layout_bench.Rows(2000)
    conn = sqlite3.connect(":memory:", isolation_level=None)
    txn = layout_bench._layout("segment", conn, rows)
    txn(0)
    txn(1000)
    lengths, payloads = conn.execute(
        "SELECT lengths, payloads FROM segments WHERE first_seq = 1001"
    ).fetchone()
    assert payloads == b"".join(rows.payloads[1000:2000])
    assert len(lengths) == 4 * 1000
    assert conn.execute("SELECT count(*) FROM event_ids").fetchone() == (2000,)


def test_the_contention_floor_commits_every_row_under_the_lock() -> None:
    result = contention_bench.run(2, 5, "raw")
    assert set(result) == {"p50_ms", "p99_ms", "max_ms", "appends_per_s", "cpu_ms_per_append"}
    assert result["appends_per_s"] > 0 and result["cpu_ms_per_append"] > 0


def test_the_contention_bench_reports_the_stores_cpu_per_append() -> None:
    result = contention_bench.run(2, 5, "fair")
    assert result["cpu_ms_per_append"] > 0 and result["appends_per_s"] > 0


def test_batched_append_reports_cpu_per_event_beside_the_wall_ratio(tmp_path: Path) -> None:
    row = store_bench.bench_batched_append(events=2000, batch=1000, rounds=1, workdir=str(tmp_path))
    assert {"bench", "value", "unit", "baseline", "ratio"} <= row.keys()
    assert row["cpu_us_per_event"]["ours"] > 0 and row["cpu_us_per_event"]["raw"] > 0
    assert row["cpu_ratio"] == pytest.approx(
        row["cpu_us_per_event"]["raw"] / row["cpu_us_per_event"]["ours"], rel=0.02
    )


def test_the_compaction_floor_writes_exactly_the_rows_compact_appended(tmp_path: Path) -> None:
    import hermes_bench
    from planner_bench import synthetic_session

    template = str(tmp_path / "template.db")
    sid = hermes_bench._build_ledger(template, synthetic_session(600))
    rows = hermes_bench._compaction_rows(template, str(tmp_path / "rows.db"), sid)
    assert rows and "SessionSwitched" in {r[3] for r in rows}
    floor = hermes_bench._floor_once(template, str(tmp_path / "floor.db"), rows)
    assert all(part >= 0 for part in floor) and floor[0] > 0 and floor[2] > 0
    written = sqlite3.connect(tmp_path / "floor.db").execute(
        "SELECT event_id, stream_id, version, kind, schema, payload, hash, message_id, tokens"
        f" FROM events ORDER BY seq DESC LIMIT {len(rows)}"
    )
    assert sorted(written.fetchall()) == sorted(rows)
    row = hermes_bench._floor_row([floor, floor], ([100.0, 100.0], [90.0, 90.0]), 2)
    assert {"bench", "value", "unit", "baseline", "ratio", "live_ratio", "fsync_ms"} <= row.keys()
    assert "goal" not in row and row["ratio"] == pytest.approx(row["value"] / 100.0, rel=0.01)
    import readme_table

    line = readme_table.table([json.dumps(row)], "today").splitlines()[-1]
    assert line.startswith("| the floor of that compaction") and "— (reported)" in line


def test_the_pg_writers_floor_reports_the_locked_ceiling_beside_the_floor_table(
    pg_server: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    import pg_bench
    import psycopg

    pg_bench.bench_writers(pg_server.url, 0.3, rounds=1, counts=(2,), floor=True)
    row = json.loads(capsys.readouterr().out.splitlines()[-1])
    for side in ("raw_ledger_table", "raw_locked_table"):
        assert row[side]["appends_per_s"] > 0 and row[side]["client_cpu_ms"] > 0
    assert row["raw_locked_vs_sqlite"] == pytest.approx(
        row["raw_locked_table"]["appends_per_s"] / row["sqlite"]["appends_per_s"], rel=0.01
    )
    with psycopg.connect(pg_server.url) as conn:  # every timed append is a committed row
        stored = conn.execute("SELECT count(*), count(DISTINCT seq) FROM raw_locked").fetchone()
    assert stored == (row["raw_locked_table"]["appends"],) * 2


def test_layout_bench_work_rows_add_an_appends_minimal_work(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert layout_bench.main(["--events", "2000", "--rounds", "1", "--work", "heads"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [row["bench"] for row in lines] == ["layout_insert:heads", "layout_insert:heads+work"]
    assert "minimal work" in lines[1]["unit"] and "minimal work" not in lines[0]["unit"]
    # the same raw baseline on both rows: the ratio compares one measured floor
    assert lines[0]["baseline"] == lines[1]["baseline"]


def test_the_work_done_encodes_the_bytes_the_rows_hold() -> None:
    rows = layout_bench.Rows(2000)
    encoded: list[bytes] = []
    encoder = layout_bench.msgspec.json.Encoder()

    def encode(event: object) -> bytes:
        encoded.append(encoder.encode(event))
        return encoded[-1]

    done: list[int] = []
    worked = layout_bench.with_work(done.append, rows, encode)
    worked(1000)
    assert done == [1000]  # the inserts still run after the work
    # the work encodes the append's own events into the bytes its rows hold
    assert encoded == rows.payloads[1000:2000]


def test_a_cut_segment_layout_keeps_every_payload_in_rows_of_at_most_n() -> None:
    rows = layout_bench.Rows(1000)
    conn = sqlite3.connect(":memory:", isolation_level=None)
    layout_bench._layout("segment64", conn, rows)(0)
    found = conn.execute(
        "SELECT first_seq, length(lengths) / 4 FROM segments ORDER BY 1"
    ).fetchall()
    assert [seq for seq, _ in found] == list(range(1, 1001, 64))
    assert max(n for _, n in found) == 64 and sum(n for _, n in found) == 1000
    joined = b"".join(p for (p,) in conn.execute("SELECT payloads FROM segments ORDER BY 1"))
    assert joined == b"".join(rows.payloads)


def test_the_readme_table_shows_the_layout_floors_under_the_batched_append() -> None:
    import readme_table

    batched = {"bench": "append_batched", "value": 1.0, "unit": "events/s", "baseline": 2.0,
               "ratio": 0.5}  # fmt: skip
    floor = {"bench": "layout_insert:segment64+work", "value": 1, "unit": "u", "baseline": 2,
             "ratio": 0.9, "cpu_us_per_event": 6.1, "raw_cpu_us_per_event": 5.5}  # fmt: skip
    other = {"bench": "append_durable_single", "value": 1.0, "unit": "events/s", "baseline": 2.0,
             "ratio": 0.5}  # fmt: skip
    lines = readme_table.table([json.dumps(r) for r in (batched, other, floor)], "today")
    body = [line for line in lines.splitlines() if line.startswith("| ") and "---" not in line]
    assert body[1].startswith("| batched append")
    assert body[2] == (
        "| floor of a batched append (CPU), one row per ≤ 64 events of an append (not built): "
        "the rows + encoding and hashing | 6.1 µs/event | 5.5 µs/event | 0.9 | — (reported) | — |"
    )
    assert body[3].startswith("| single durable append")
