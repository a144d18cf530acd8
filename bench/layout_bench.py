"""How fast can finished rows go into an events-table layout? (issue 14, the batched-append cap)

Inserts the same pre-encoded events, 1,000 per transaction (WAL, synchronous FULL, 4 KiB
pages unless named), into candidate layouts with no ctxledger code at all, and reports
events per CPU-second (``time.process_time``; the median of interleaved rounds) against
the raw one-column table of ``store_bench.bench_batched_append``. The ratio is the
ceiling a batched append could reach with that layout and zero Python work (encoding,
hashing, validation all cost extra). One JSON object per line: bench, value, unit,
baseline, ratio.

    python bench/layout_bench.py [--events 20000] [--rounds 7] [--work] [LAYOUT ...]

``--work`` adds, beside each layout, ``LAYOUT+work``: the same inserts plus the work any
append must do before them whatever its code (each event msgspec-encoded, a crc32 of each
payload, one sha256 over the append's payloads), timed with them: the floor of that
layout with the linked hash format (validation and the write loop not counted).

Layouts: ``current`` (8 columns, UNIQUE event_id TEXT, UNIQUE (stream_id, version):
the layout before migration ``0002_message_heads``), ``heads`` (today's: ``current``
plus the ``message_id`` and ``tokens`` columns a message row fills), ``no_id_index``
(without the event-id index), ``no_kind`` (without the kind column), ``non_unique``
(both indexes non-unique), ``id_digest`` (a non-unique index on a 64-bit digest of the
id instead of the id), ``no_secondary`` (no index besides seq), ``current_8k``
(``current`` on 8 KiB pages), ``segment`` (one row per append holding every payload,
plus a WITHOUT ROWID event-id table), ``segmentN`` (the same, an append cut into rows
of at most N events).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sqlite3
import statistics
import struct
import sys
import tempfile
import time
import zlib
from collections.abc import Callable

import msgspec

if __package__ in (None, ""):  # run as a script: make the checkout importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from store_bench import make_events

Txn = Callable[[int], None]
_COLS8 = (
    "seq INTEGER PRIMARY KEY, event_id TEXT NOT NULL, stream_id INTEGER NOT NULL,"
    " version INTEGER NOT NULL, kind TEXT NOT NULL, schema INTEGER NOT NULL,"
    " payload BLOB NOT NULL, hash TEXT NOT NULL"
)
_BY_ID = "CREATE UNIQUE INDEX events_by_id ON events (event_id);"
_BY_STREAM = "CREATE UNIQUE INDEX events_by_stream ON events (stream_id, version);"
_BATCH = 1000
_BLOCK = 64  # rows per multi-row INSERT, as the store does


class Rows:
    """The finished rows of `n` events: ids, payloads, crc digests, 64-bit id digests."""

    def __init__(self, n: int) -> None:
        events = make_events(n)
        self.events = events
        self.ids = [e.event_id for e in events]
        self.heads = [(e.message_id, e.tokens) for e in events]
        self.payloads = [msgspec.json.encode(e) for e in events]
        self.crcs = [str(zlib.crc32(p)) for p in self.payloads]
        self.digests = [
            int.from_bytes(hashlib.blake2b(i.encode(), digest_size=8).digest(), "big", signed=True)
            for i in self.ids
        ]

    def row(self, i: int, columns: str) -> tuple[object, ...]:
        stream_id, version = (i // _BATCH) % 10 + 1, (i // (10 * _BATCH)) * _BATCH + i % _BATCH + 1
        values = {
            "seq": i + 1,
            "event_id": self.ids[i],
            "digest": self.digests[i],
            "stream_id": stream_id,
            "version": version,
            "kind": "MessageAppended",
            "schema": 1,
            "payload": self.payloads[i],
            "hash": self.crcs[i],
            "message_id": self.heads[i][0],
            "tokens": self.heads[i][1],
        }
        return tuple(values[c] for c in columns.split())


def _blocks(conn: sqlite3.Connection, rows: Rows, columns: str) -> Txn:
    """A transaction body inserting 1,000 rows in blocks of _BLOCK, the rest one by one."""
    width = len(columns.split())
    one = "(" + ",".join("?" * width) + ")"
    block, single = (
        "INSERT INTO events VALUES " + ",".join([one] * _BLOCK),
        "INSERT INTO events VALUES " + one,
    )

    # built before the clock starts: only the inserts are timed
    every = [rows.row(i, columns) for i in range(len(rows.ids))]
    whole = _BATCH - _BATCH % _BLOCK
    flats = {
        lo + k: [v for r in every[lo + k : lo + k + _BLOCK] for v in r]
        for lo in range(0, len(every), _BATCH)
        for k in range(0, whole, _BLOCK)
    }

    def txn(lo: int) -> None:
        for k in range(0, whole, _BLOCK):
            conn.execute(block, flats[lo + k])
        conn.executemany(single, every[lo + whole : lo + _BATCH])

    return txn


_FULL = "seq event_id stream_id version kind schema payload hash"
_TABLES: dict[str, tuple[str, str]] = {
    "current": (f"CREATE TABLE events ({_COLS8});{_BY_ID}{_BY_STREAM}", _FULL),
    "heads": (
        f"CREATE TABLE events ({_COLS8}, message_id TEXT, tokens INTEGER);{_BY_ID}{_BY_STREAM}",
        _FULL + " message_id tokens",
    ),
    "current_8k": (f"CREATE TABLE events ({_COLS8});{_BY_ID}{_BY_STREAM}", _FULL),
    "no_id_index": (f"CREATE TABLE events ({_COLS8});{_BY_STREAM}", _FULL),
    "no_kind": (
        f"CREATE TABLE events ({_COLS8.replace(' kind TEXT NOT NULL,', '')});{_BY_ID}{_BY_STREAM}",
        "seq event_id stream_id version schema payload hash",
    ),
    "non_unique": (
        f"CREATE TABLE events ({_COLS8});" + (_BY_ID + _BY_STREAM).replace("UNIQUE INDEX", "INDEX"),
        _FULL,
    ),
    "id_digest": (
        f"CREATE TABLE events ({_COLS8}, digest INTEGER NOT NULL);"
        f"CREATE INDEX events_by_digest ON events (digest);{_BY_STREAM}",
        _FULL + " digest",
    ),
    "no_secondary": (f"CREATE TABLE events ({_COLS8});", _FULL),
}


def _raw(conn: sqlite3.Connection, rows: Rows) -> Txn:
    conn.execute("CREATE TABLE events (seq INTEGER PRIMARY KEY, payload BLOB NOT NULL)")
    payloads = [(p,) for p in rows.payloads]

    def txn(lo: int) -> None:  # exactly store_bench's raw baseline
        conn.executemany("INSERT INTO events (payload) VALUES (?)", payloads[lo : lo + _BATCH])

    return txn


def _segment(conn: sqlite3.Connection, rows: Rows, most: int = _BATCH) -> Txn:
    """One row per append (all payloads, their lengths, their digests) + an id table;
    with `most`, an append cut into rows of at most that many events (a point read
    walks one row's overflow pages, not a whole append's)."""
    conn.executescript(
        "CREATE TABLE segments (first_seq INTEGER PRIMARY KEY, stream_id INTEGER NOT NULL,"
        " first_version INTEGER NOT NULL, lengths BLOB NOT NULL, payloads BLOB NOT NULL,"
        " hashes TEXT NOT NULL);"
        "CREATE UNIQUE INDEX segments_by_stream ON segments (stream_id, first_version);"
        "CREATE TABLE event_ids (event_id TEXT PRIMARY KEY, seq INTEGER NOT NULL) WITHOUT ROWID"
    )
    per = 250
    ids = "INSERT INTO event_ids VALUES " + ",".join(["(?,?)"] * per)

    # built before the clock starts: only the inserts are timed (joining the payloads
    # into one value would be the append's work, like encoding them)
    segments: dict[int, list[tuple[object, ...]]] = {}
    flats = {}
    for lo in range(0, len(rows.ids), _BATCH):
        segments[lo] = []
        for cut in range(lo, lo + _BATCH, most):
            chunk = rows.payloads[cut : cut + most]
            first = rows.row(cut, "stream_id version")
            lengths = struct.pack(f"<{len(chunk)}I", *map(len, chunk))
            digests = ",".join(rows.crcs[cut : cut + most])
            segments[lo].append((cut + 1, first[0], first[1], lengths, b"".join(chunk), digests))
        flats[lo] = [v for i in range(lo, lo + _BATCH) for v in (rows.ids[i], i + 1)]

    def txn(lo: int) -> None:
        conn.executemany("INSERT INTO segments VALUES (?,?,?,?,?,?)", segments[lo])
        flat = flats[lo]
        for k in range(0, 2 * _BATCH, 2 * per):
            conn.execute(ids, flat[k : k + 2 * per])

    return txn


def _layout(name: str, conn: sqlite3.Connection, rows: Rows) -> Txn:
    if name == "raw":
        return _raw(conn, rows)
    if name == "segment":
        return _segment(conn, rows)
    if name.startswith("segment") and name[7:].isdigit():  # segment64: rows of <= 64 events
        return _segment(conn, rows, int(name[7:]))
    ddl, columns = _TABLES[name]
    conn.executescript(ddl)
    return _blocks(conn, rows, columns)


_ENCODE = msgspec.json.Encoder().encode


def with_work(txn: Txn, rows: Rows, encode: Callable[[object], bytes] = _ENCODE) -> Txn:
    """`txn` after the work every append does before its insert: encode each event, a
    crc32 of each payload, one sha256 over the append (results dropped: the rows
    inserted already hold the same bytes)."""
    crc, sha256 = zlib.crc32, hashlib.sha256

    def worked(lo: int) -> None:
        payloads = [encode(e) for e in rows.events[lo : lo + _BATCH]]
        digests = [str(crc(p)) for p in payloads]
        sha256(",".join(digests).encode() + b"".join(payloads)).hexdigest()
        txn(lo)

    return worked


def cpu_per_event(name: str, rows: Rows, events: int) -> float:
    """CPU µs per event to insert `events` finished rows into layout `name` (fresh file);
    a name ending in ``+work`` also does :func:`with_work`'s work in the timed part."""
    layout = name.removesuffix("+work")
    with tempfile.TemporaryDirectory() as tmp:
        conn = sqlite3.connect(os.path.join(tmp, "layout.db"), isolation_level=None)
        conn.execute(f"PRAGMA page_size = {8192 if layout.endswith('_8k') else 4096}")
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = FULL")
        conn.execute("PRAGMA cache_size = -16384")
        txn = _layout(layout, conn, rows)
        if layout != name:
            txn = with_work(txn, rows)
        start = time.process_time()
        for lo in range(0, events, _BATCH):
            conn.execute("BEGIN IMMEDIATE")
            txn(lo)
            conn.execute("COMMIT")
        spent = time.process_time() - start
        conn.close()
    return spent / events * 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument(
        "--work", action="store_true", help="also each layout with an append's minimal work"
    )
    parser.add_argument("layouts", nargs="*", default=["current", "segment"])
    args = parser.parse_args(argv)
    events = args.events - args.events % _BATCH
    rows = Rows(events)
    layouts = [n for n in args.layouts if n != "raw"]
    names = ["raw", *[v for n in layouts for v in ([n, f"{n}+work"] if args.work else [n])]]
    spent: dict[str, list[float]] = {n: [] for n in names}
    for turn in range(args.rounds):  # interleaved, reversed every other round
        for name in names if turn % 2 == 0 else names[::-1]:
            spent[name].append(cpu_per_event(name, rows, events))
    raw = statistics.median(spent["raw"])
    for name in names[1:]:
        cpu = statistics.median(spent[name])
        print(
            json.dumps(
                {
                    "bench": f"layout_insert:{name}",
                    "value": round(1e6 / cpu),
                    "unit": "events per CPU-second (finished rows, 1,000 per transaction)"
                    + (", with an append's minimal work" if name.endswith("+work") else ""),
                    "baseline": round(1e6 / raw),
                    "ratio": round(raw / cpu, 3),
                    "cpu_us_per_event": round(cpu, 2),
                    "raw_cpu_us_per_event": round(raw, 2),
                    "load_average": round(os.getloadavg()[0], 2),
                }
            ),
            flush=True,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
