"""The two chain formats across stores, and migrate copying rows as stored.

SQLite writes linked rows (issue 14), PostgreSQL per-event rows; ``ctxledger migrate``
copies each row in its own format and with its stored bytes, so a copy is hash-for-hash
the source either way (also for events whose class gained a field since they were
written: the committed pre-issue-14 ledger holds some), and each store extends a log
holding the other's rows. The head anchor and ``verify --expect-head`` compare chain
values (the link of a linked row), so they keep working on mixed logs and across a
migration."""

from __future__ import annotations

import hashlib
import itertools
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest
from helpers.pg_server import PgServer

from ctxledger import Ledger
from ctxledger.errors import InvalidInput
from ctxledger.events import Event
from ctxledger.eventstore import (
    AppendRequest,
    ChainFormat,
    EventStore,
    SQLiteEventStore,
    StoredRow,
    chain_hash,
    chain_tip,
    split_linked,
)
from ctxledger.eventstore.postgres import PostgresEventStore
from ctxledger.eventstore.transfer import copy_ledger
from ctxledger.ledger.anchor import read_anchor, verify_file
from ctxledger.testing.eventstore import message, started

FIXTURE = Path(__file__).parent / "golden" / "ledger_per_event_chain.db"


@pytest.fixture
def url(pg_server: PgServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("CTXLEDGER_INDEX_DIR", str(tmp_path / "indexes"))
    schema = "c_" + hashlib.sha256(str(tmp_path).encode()).hexdigest()[:20]
    return f"{pg_server.url}?schema={schema}"


def _rows(store: EventStore) -> list[tuple[int, str, int, str]]:
    return [(r.seq, r.stream, r.version, r.hash) for r in store.read_all()]


_ids = itertools.count()


def _started(session: str) -> Event:
    # ids of their own: the committed fixture used testing.eventstore's numbering too
    return msgspec.structs.replace(started(session), event_id=f"evt_mig_{next(_ids)}")


def _message(session: str, text: str) -> Event:
    return message(session, text, event_id=f"evt_mig_{next(_ids)}")


def _extend(store: EventStore, tag: str, chain: ChainFormat | None = None) -> None:
    """51 events in appends of every shape: one event, a multi-stream transaction, a blob,
    one append of 40 events (over PostgreSQL's one-call limit and the copy's batches)."""
    a, b = f"ses_{tag}a", f"ses_{tag}b"

    def append(stream: str, events: list[Event], expected: int) -> None:
        store.append_many([AppendRequest(stream, events, expected, chain)])

    append(a, [_started(a), _message(a, "one")], 0)
    store.append_many(
        [
            AppendRequest(a, [_message(a, f"a{n}") for n in range(3)], 2, chain),
            AppendRequest(b, [_started(b), *[_message(b, f"b{n}") for n in range(4)]], 0, chain),
        ]
    )
    append(a, [_message(a, "x" * 70_000)], 5)
    append(b, [_message(b, f"big {n}") for n in range(40)], 5)


def test_a_mixed_ledger_migrates_to_postgres_and_back_hash_for_hash(
    url: str, tmp_path: Path
) -> None:
    source = tmp_path / "mixed.db"
    shutil.copyfile(FIXTURE, source)  # written by main before issue 14, with older event shapes
    back = tmp_path / "back.db"
    with SQLiteEventStore(source) as src:
        _extend(src, "o", "per_event")  # more per-event rows
        _extend(src, "s")  # linked rows after them
        want = _rows(src)
        head = src.verify().head_hash
        assert head == chain_tip(want[-1][3])
    with SQLiteEventStore(source) as src, PostgresEventStore(url) as pg:
        report = copy_ledger(src, pg, batch_events=7)  # linked appends longer than a batch
        assert _rows(pg) == want and report.head_hash == head == pg.verify().head_hash
        _extend(pg, "p")  # per-event rows after linked ones: one call and the client path
        checked = pg.verify()
        assert checked.ok and checked.events_checked == len(want) + 51
        assert all(split_linked(h) is None for *_, h in _rows(pg)[len(want) :])
        with SQLiteEventStore(back) as copy:
            copy_ledger(pg, copy, batch_events=5)
            assert _rows(copy) == _rows(pg)
            _extend(copy, "q")  # linked rows after per-event ones
            assert copy.verify().ok and split_linked(_rows(copy)[-1][3]) is not None
    mark = f"{len(want)}:{head}"  # kept before the copies: it names the same event in both
    assert verify_file(back, expect_head=mark).ok
    with PostgresEventStore(url) as pg:
        assert verify_file(url, expect_head=mark).ok and pg.last_seq() == len(want) + 51


def test_a_store_writes_the_chain_format_a_request_names(tmp_path: Path) -> None:
    with SQLiteEventStore(tmp_path / "a.db") as store:
        events: list[Event] = [started("ses_a"), message("ses_a")]
        store.append_many([AppendRequest("ses_a", events, 0, "per_event")])
        store.append_many([AppendRequest("ses_a", [message("ses_a")], 2)])
        with pytest.raises(InvalidInput, match="2 payloads for 1 events"):
            store.append_many(
                [AppendRequest("ses_a", [message("ses_a")], 3, None, [(1, b"{}")] * 2)]
            )
        with pytest.raises(InvalidInput, match="chain must be one of"):
            store.append_many([AppendRequest("ses_a", [message("ses_a")], 3, "sha1")])  # type: ignore[arg-type]
        rows = list(store.read_all())
        assert [split_linked(r.hash) is None for r in rows] == [True, True, False]
        first = rows[0]
        raw = sqlite3.connect(tmp_path / "a.db")
        payload = raw.execute("SELECT payload FROM events WHERE seq = 1").fetchone()[0]
        raw.close()
        kind, schema = type(first.event).__name__, first.event.SCHEMA
        assert first.hash == chain_hash(
            "0" * 64, 1, "ses_a", 1, first.event.event_id, kind, schema, payload
        )
        assert store.verify().ok and store.last_seq() == 3


def test_the_head_anchor_and_expect_head_work_on_a_mixed_log(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    shutil.copyfile(FIXTURE, path)
    assert verify_file(path).ok  # seals the anchor on a per-event row
    sealed = read_anchor(path)
    assert sealed is not None and len(sealed.hash) == 64
    with Ledger.open(path) as ledger:
        tip = ledger.tip(ledger.store.streams()[0][0])
        ledger.append_messages(tip, [{"role": "user", "content": "new"}])
        ledger.append_messages(
            tip, [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]
        )
    moved = read_anchor(path)  # the closing writer advanced it to the linked head
    assert moved is not None and moved.seq == 77
    report = verify_file(path)
    assert report.ok and report.head_seq == 77 and report.head_hash == moved.hash
    for expected in (moved.hash, f"77:{moved.hash}", f"74:{sealed.hash}"):
        assert verify_file(path, expect_head=expected).ok, expected
    assert not verify_file(path, expect_head="77:" + "0" * 64).ok
    # seq 76 is inside the last append: its row holds only a crc32 locator, never a seal
    with SQLiteEventStore(path) as store:
        locator = next(iter(store.read_all(76, 76))).hash
    assert len(locator) < 64
    with pytest.raises(InvalidInput, match="inside an append"):
        verify_file(path, expect_head=f"76:{locator}")
    raw = sqlite3.connect(path, isolation_level=None)
    raw.execute("DELETE FROM events WHERE seq >= 76")  # the newest append, whole
    raw.close()
    cut = verify_file(path)
    assert not cut.ok and cut.first_bad_seq == 76 and "deleted" in (cut.problem or "")


class _NoStoredRows(SQLiteEventStore):
    def read_stored(self, from_seq: int = 1, batch_size: int = 2000) -> Iterator[StoredRow]:
        return EventStore.read_stored(self, from_seq, batch_size)


def test_a_source_without_stored_rows_is_copied_by_re_encoding(tmp_path: Path) -> None:
    with _NoStoredRows(tmp_path / "src.db") as src, SQLiteEventStore(tmp_path / "dst.db") as dst:
        _extend(src, "n")
        report = copy_ledger(src, dst, batch_events=4)
        assert _rows(dst) == _rows(src) and report.head_hash == src.verify().head_hash
