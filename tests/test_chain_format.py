"""The linked chain format (one sha256 link per append, a crc digest per row) and the old one.

* A ledger written before the linked format (``tests/golden/ledger_per_event_chain.db``,
  one sha256 chain hash per event) opens, verifies, folds, replays without drift and
  takes new appends, after which the two formats verify as one chain.
* Property: whatever the appends (sizes, streams, multi-stream transactions), the log
  verifies; a payload byte flipped, a digest rewritten or a row's id changed is named
  at that row; a link rewritten is named at the first row of its append.
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxledger import Ledger
from ctxledger.analysis.replay import rebuild_check, verify_compactions
from ctxledger.events import Event
from ctxledger.eventstore import (
    AppendRequest,
    SQLiteEventStore,
    chain_tip,
    link_hash,
    row_digest,
    split_linked,
)
from ctxledger.testing.eventstore import message, started

FIXTURE = Path(__file__).parent / "golden" / "ledger_per_event_chain.db"


def _copy_fixture(tmp_path: Path) -> Path:
    target = tmp_path / "old.db"
    shutil.copyfile(FIXTURE, target)
    return target


def _raw(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(path, isolation_level=None)


def test_a_per_event_chain_ledger_opens_verifies_folds_and_replays(tmp_path: Path) -> None:
    path = _copy_fixture(tmp_path)
    with Ledger.open(path) as ledger:
        report = ledger.store.verify()
        assert report.ok and report.events_checked == 74 and report.blobs_checked == 1
        root = ledger.store.streams()[0][0]
        tip = ledger.tip(root)
        assert tip != root  # the fixture holds one compaction
        assert ledger.api_messages(tip)[-1] == {"role": "user", "content": "after the compaction"}
        assert any(
            "x" * 1000 in str(m.get("content")) for m in ledger.transcript.live_messages(root)
        )
        assert rebuild_check(ledger, tip).equal
        drift = verify_compactions(ledger, tip)
        assert len(drift.compactions) == 1 and not drift.drifted


def test_new_appends_after_old_rows_verify_as_one_chain(tmp_path: Path) -> None:
    path = _copy_fixture(tmp_path)
    with Ledger.open(path) as ledger:
        tip = ledger.tip(ledger.store.streams()[0][0])
        ledger.append_messages(tip, [{"role": "user", "content": "one"}])
        ledger.append_messages(
            tip, [{"role": "assistant", "content": "two"}, {"role": "user", "content": "three"}]
        )
        report = ledger.store.verify()
        assert report.ok and report.events_checked == 77
    hashes = [h for (h,) in _raw(path).execute("SELECT hash FROM events ORDER BY seq")]
    assert all(len(h) == 64 for h in hashes[:74])
    linked = [split_linked(h) for h in hashes[74:]]
    assert [bool(parts and parts[1]) for parts in linked] == [True, False, True]
    # an old row tampered with is still named, behind new rows
    conn = _raw(path)
    payload = conn.execute("SELECT payload FROM events WHERE seq = 40").fetchone()[0]
    conn.execute("UPDATE events SET payload = ? WHERE seq = 40", (payload.replace(b"e", b"E", 1),))
    conn.close()
    with SQLiteEventStore(path) as store:
        bad = store.verify()
    assert (bad.ok, bad.first_bad_seq, bad.events_checked) == (False, 40, 39)


def test_the_link_covers_each_row_digest_and_the_payloads() -> None:
    rows = [("evt_1", "MessageAppended", 1, b'{"a":1}'), ("evt_2", "MessageAppended", 1, b"{}")]
    digests = [row_digest(r[3]) for r in rows]
    link = link_hash("0" * 64, 1, "ses_a", 1, rows, digests)
    assert len(link) == 64 and chain_tip(f"{digests[-1]}:{link}") == link
    other = [rows[0], ("evt_2", "MessageAppended", 1, b"[]")]
    assert link_hash("0" * 64, 1, "ses_a", 1, other, digests) != link
    assert link_hash("0" * 64, 2, "ses_a", 1, rows, digests) != link
    assert link_hash("0" * 64, 1, "ses_a", 1, rows, [digests[1], digests[0]]) != link


# --- property: any appends verify; a tampered row is named ----------------------------------

_appends = st.lists(
    st.lists(st.tuples(st.sampled_from("abc"), st.integers(1, 4)), min_size=1, max_size=2),
    min_size=1,
    max_size=6,
)


def _write(store: SQLiteEventStore, appends: list[list[tuple[str, int]]]) -> dict[int, int]:
    """Run the appends; returns seq -> first seq of its append to its stream."""
    first_of: dict[int, int] = {}
    versions: dict[str, int] = {}
    seq = 0
    for transaction in appends:
        requests, seen = [], set()
        for stream_key, n in transaction:
            stream = f"ses_{stream_key}"
            if stream in seen:
                continue
            seen.add(stream)
            events: list[Event] = [] if stream in versions else [started(stream)]
            events += [message(stream, f"text {seq} {i}") for i in range(n)]
            requests.append(AppendRequest(stream, events, versions.get(stream, 0)))
            versions[stream] = versions.get(stream, 0) + len(events)
            first = seq + 1
            for _ in events:
                seq += 1
                first_of[seq] = first
        store.append_many(requests)
    return first_of


@given(
    appends=_appends,
    pick=st.integers(0, 10**6),
    how=st.sampled_from(["payload", "digest", "id", "link"]),
)
def test_any_appends_verify_and_a_tampered_row_is_named(
    tmp_path_factory: pytest.TempPathFactory,
    appends: list[list[tuple[str, int]]],
    pick: int,
    how: str,
) -> None:
    path = tmp_path_factory.mktemp("chain") / "ledger.db"
    with SQLiteEventStore(path) as store:
        first_of = _write(store, appends)
        report = store.verify()
        assert report.ok and report.events_checked == len(first_of)
    conn = _raw(path)
    if how == "link":
        lasts = [s for (s,) in conn.execute("SELECT seq FROM events WHERE hash LIKE '%:%'")]
        target = lasts[pick % len(lasts)]
        digest = conn.execute("SELECT hash FROM events WHERE seq = ?", (target,)).fetchone()[0]
        conn.execute(
            "UPDATE events SET hash = ? WHERE seq = ?",
            (digest[:-1] + ("0" if digest[-1] != "0" else "1"), target),
        )
        expected = first_of[target]
    else:
        target = 1 + pick % len(first_of)
        expected = target
        if how == "payload":
            payload = conn.execute(
                "SELECT payload FROM events WHERE seq = ?", (target,)
            ).fetchone()[0]
            conn.execute("UPDATE events SET payload = ? WHERE seq = ?", (payload + b" ", target))
        elif how == "digest":
            conn.execute("UPDATE events SET hash = 'x' || hash WHERE seq = ?", (target,))
        else:
            conn.execute("UPDATE events SET event_id = 'evt_forged' WHERE seq = ?", (target,))
    conn.close()
    with SQLiteEventStore(path) as store:
        bad = store.verify()
    assert not bad.ok and bad.first_bad_seq == expected, (how, bad)
    assert bad.events_checked == expected - 1
