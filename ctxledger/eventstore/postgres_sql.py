"""The SQL text of the PostgreSQL event store, built once, and the names it is keyed
by in a ledger's schema: its advisory-lock keys and its notification channel (moved out
of :mod:`ctxledger.eventstore.postgres_schema`, which keeps the migrations, in session 45)."""

from __future__ import annotations

import hashlib


def lock_key(schema: str, purpose: str) -> int:
    """A signed 64-bit advisory-lock key for `purpose` in `schema` (advisory locks are database-wide)."""
    digest = hashlib.sha256(f"ctxledger:{purpose}:{schema}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def notify_channel(schema: str) -> str:
    """The LISTEN/NOTIFY channel announcing appends to the ledger in `schema`."""
    return "ctxledger_" + hashlib.sha256(schema.encode()).hexdigest()[:16]


#: a small append in one statement (autocommit: its own transaction, one round trip):
#: inserts the rows unsealed and seals them too when the append lock is free
CALL_INSERT = (
    "SELECT o_versions, o_sealed FROM ctxledger_insert(%s, %s, %s::text[], %s::bigint[],"
    " %s::integer[], %s::bytea[], %s::text[], %s::text[], %s::integer[], %s::bytea[],"
    " %s::bytea[])"
)
#: after an insert that could not seal: wait for the sealer of the moment (the lock),
#: then seal if the rows are still unsealed (it did not see them, or it died)
CALL_AWAIT = "SELECT ctxledger_await(%s, %s, %s::text[])"
#: a one-event append in one round trip (migration 0005): returns the stream's new version
CALL_ONE = "CALL ctxledger_append_one(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, NULL)"
#: the SQLSTATE ``ctxledger_insert`` raises when an expected version is stale
STALE_VERSION = "CL409"
#: unique violations that mean "another appender got there first": retry the append
RACES = frozenset({"events_stream_version_key", "streams_stream_key"})

#: under the append lock: seal what is waiting; the sealed tail (seq, hash)
SEAL = "SELECT o_seq, o_hash FROM ctxledger_seal($1)"
LAST_SEQ = "SELECT max(seq) FROM events"
#: versions count sealed rows only (what readers see)
_VERSION_OF = (
    "(SELECT coalesce(max(e.version), 0) FROM events AS e"
    " WHERE e.stream_id = s.stream_id AND e.seq IS NOT NULL)"
)
STREAMS_NAMED = (
    f"SELECT s.stream, s.stream_id, {_VERSION_OF} FROM streams AS s WHERE s.stream = ANY(%s)"
)
STREAM_VERSION = f"SELECT {_VERSION_OF} FROM streams AS s WHERE s.stream = %s"
#: read_stream: the id and the (seq, version) of the lowest and highest sealed rows by
#: version (one index step each; a NULL sorts last, so highest: in_versions names it)
_END = (
    " LEFT JOIN LATERAL (SELECT seq, version FROM events AS e WHERE e.stream_id = s.stream_id"
    " AND e.seq IS NOT NULL ORDER BY e.version{} LIMIT 1) AS {} ON true"
)
STREAM_ENDS = (
    "SELECT s.stream_id, lo.seq, lo.version, hi.seq, hi.version FROM streams AS s"
    f"{_END.format('', 'lo')}{_END.format(' DESC', 'hi')} WHERE s.stream = %s"
)
#: streams with a sealed event, in order of their first one
STREAMS = (
    f"SELECT s.stream, {_VERSION_OF} FROM streams AS s"
    " JOIN events AS f ON f.stream_id = s.stream_id AND f.version = 1 AND f.seq IS NOT NULL"
    " ORDER BY f.seq"
)
NEXT_STREAM_IDS = "SELECT nextval('streams_id_seq') FROM generate_series(1, $1)"
NEW_STREAMS = "INSERT INTO streams (stream_id, stream, created_seq) VALUES "
INSERT_EVENTS = (
    "INSERT INTO events (seq, event_id, stream_id, version, kind, schema, payload, hash) VALUES "
)
COPY_EVENTS = (
    "COPY events (seq, event_id, stream_id, version, kind, schema, payload, hash)"
    " FROM STDIN (FORMAT BINARY)"
)
STREAMS_OF_EVENTS = (
    "SELECT e.event_id, s.stream, e.kind, e.schema, e.payload FROM events AS e"
    " JOIN streams AS s USING (stream_id) WHERE e.event_id = ANY(%s)"
)
#: reads bound only from below (the caller caps the LIMIT and drops rows past its end): an
#: upper bound makes the planner guess a small range from stale statistics, and then it
#: scans and sorts every row past the start for each batch instead of walking the index
READ_ALL = (
    "SELECT seq, version, schema, payload, hash FROM events WHERE seq >= %s ORDER BY seq LIMIT %s"
)
READ_STREAM = (
    "SELECT seq, version, schema, payload, hash FROM events"
    " WHERE stream_id = %s AND version >= %s AND seq IS NOT NULL ORDER BY version LIMIT %s"
)
VERIFY_EVENTS = (
    "SELECT e.seq, coalesce(s.stream, ''), e.version, e.event_id, e.kind, e.schema, e.payload, e.hash"
    " FROM events AS e LEFT JOIN streams AS s USING (stream_id) WHERE e.seq >= %s ORDER BY e.seq LIMIT %s"
)
LIST_BLOBS = "SELECT ref, size FROM blobs"
KNOWN_BLOBS = "SELECT ref FROM blobs WHERE ref = ANY(%s)"
INSERT_BLOB = "INSERT INTO blobs (ref, size, data) VALUES (%s, %s, %s) ON CONFLICT (ref) DO NOTHING"
GET_BLOB = "SELECT data FROM blobs WHERE ref = %s"
HAS_BLOB = "SELECT 1 FROM blobs WHERE ref = %s"
SAVE_CHECKPOINT = (
    "INSERT INTO checkpoints (name, seq, state) VALUES (%s, %s, %s)"
    " ON CONFLICT (name) DO UPDATE SET seq = excluded.seq, state = excluded.state"
)
LOAD_CHECKPOINT = "SELECT seq, state FROM checkpoints WHERE name = %s"
LEDGER_ID = "SELECT ledger_id FROM ledger_meta LIMIT 1"
