"""The SQL text of the SQLite event store, written once and prepared once (sqlite3's
statement cache keeps each compiled). The schema itself is in
:mod:`ctxledger.eventstore.migrations`; the comments here say why a statement has
its shape, since most of them were measured.
"""

from __future__ import annotations

import functools

from ctxledger.events import MessageAppended

TAIL = "SELECT seq, hash FROM events ORDER BY seq DESC LIMIT 1"
LAST_SEQ = "SELECT max(seq) FROM events"
DATA_VERSION = "PRAGMA data_version"
CACHE_SIZE = "PRAGMA cache_size"
# a stream's version is the max of its events' versions: one seek in events_by_stream
VERSION_OF = (
    "(SELECT coalesce(max(version), 0) FROM events WHERE events.stream_id = streams.stream_id)"
)
STREAM = f"SELECT stream_id, {VERSION_OF} FROM streams WHERE stream = ?"
STREAM_VERSION = f"SELECT {VERSION_OF} FROM streams WHERE stream = ?"
# read_stream: a stream's id and its lowest and highest versions, one seek each in
# events_by_stream (a NULL or a number below 1 sorts first, text last: see in_versions);
# with the rows' seqs (STREAM_END_ROWS) only when one of them is not what a sound log has
_END = "(SELECT {} FROM events AS e WHERE e.stream_id = s.stream_id ORDER BY e.version{} LIMIT 1)"
STREAM_ENDS = (
    f"SELECT s.stream_id, {_END.format('version', '')}, {_END.format('version', ' DESC')}"
    " FROM streams AS s WHERE s.stream = ?"
)
STREAM_END_ROWS = (
    "SELECT "
    + ", ".join(_END.format(c, o) for o in ("", " DESC") for c in ("seq", "version"))
    + " FROM streams AS s WHERE s.stream_id = ?"
)
# stream_id grows with created_seq (streams are never deleted), and needs no sort
STREAMS = f"SELECT stream, {VERSION_OF} FROM streams ORDER BY stream_id"
NEW_STREAM = "INSERT INTO streams (stream, created_seq) VALUES (?, ?)"
# message_id, tokens: a message's head (migration 0002), NULL for any other event
INSERT_EVENT = (
    "INSERT INTO events"
    " (seq, event_id, stream_id, version, kind, schema, payload, hash, message_id, tokens)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
# many rows per statement: binding is the same work, but one step/reset per block
# instead of per row makes batched appends ~15 % faster than executemany alone
BLOCK = 64
#: the payloads of a streamed append, read back into its link (``sqlite_stream``)
PAYLOADS = "SELECT payload FROM events WHERE seq >= ? AND seq <= ? ORDER BY seq"
#: its header's four lists, read back the same way (one column each: nothing is held)
LINK_IDS, LINK_KINDS, LINK_SCHEMAS, LINK_DIGESTS = (
    f"SELECT {c} FROM events WHERE seq >= ? AND seq <= ? ORDER BY seq"
    for c in ("event_id", "kind", "schema", "hash")
)
INSERT_BLOCK = INSERT_EVENT + ", (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)" * (BLOCK - 1)
ROW_OF_EVENT = (
    "SELECT s.stream, e.kind, e.schema, e.payload"
    " FROM events AS e JOIN streams AS s USING (stream_id) WHERE e.event_id = ?"
)
# no kind column: the payload carries its tag, and every column fetched costs ~10 % of a read
READ_ALL = (
    "SELECT seq, version, schema, payload, hash FROM events"
    " WHERE seq >= ? AND seq <= ? ORDER BY seq LIMIT ?"
)
#: how many seqs one read_at query names (well under SQLite's 32,766 host parameters)
READ_AT_CHUNK = 500


@functools.lru_cache(maxsize=8)
def read_at(count: int) -> str:
    """The rows at `count` given seqs (read_at: a session's bodies among other sessions' rows)."""
    marks = ",".join("?" * count)
    return f"SELECT seq, version, schema, payload, hash FROM events WHERE seq IN ({marks}) ORDER BY seq"


@functools.lru_cache(maxsize=8)
def read_bodies(count: int) -> str:
    """The payloads at `count` given seqs (read_bodies: only what a message body needs)."""
    marks = ",".join("?" * count)
    return f"SELECT seq, schema, payload FROM events WHERE seq IN ({marks})"


# a rebuild's read (read_rows): no hash either, it is not folded
READ_HEADS = (
    "SELECT seq, version, schema, payload FROM events"
    " WHERE seq >= ? AND seq <= ? ORDER BY seq LIMIT ?"
)
# a rebuild's read (read_heads): a message's head from its columns, the payload only
# for a row without one (any other event, a message written before migration 0002, or
# a head of the wrong types: edited in the sqlite3 shell, folded from its payload and
# reported by verify); the stream by its id (names read once per page: STREAM_NAMES).
# No version: every column fetched costs ~0.1 s per million rows in Python objects, and
# a fold needs only each stream's last version (VERSION_AT, once per stream)
# the columns are trusted only on a row at today's MessageAppended schema (the one they
# were derived at); any other row is folded from its payload, through its upcaster. A
# NULL payload (the NOT NULL rewritten away by a tool) is read as empty, so it is the
# decoders' "cannot be decoded", not a NULL that means "the head is in the columns"
READ_HEAD_COLUMNS = (
    "SELECT seq, stream_id, message_id, tokens, schema,"
    " CASE WHEN typeof(message_id) = 'text' AND typeof(tokens) = 'integer'"
    f" AND schema = {MessageAppended.SCHEMA} THEN NULL"
    " ELSE coalesce(payload, x'') END FROM events WHERE seq >= ? AND seq <= ? ORDER BY seq LIMIT ?"
)
STREAM_NAMES = "SELECT stream_id, stream FROM streams WHERE stream_id > ? ORDER BY stream_id"
# backfill (migration 0002 left old rows without heads): messages still without one
HEADLESS_MESSAGES = (
    "SELECT e.seq, s.stream, e.schema, CAST(e.payload AS BLOB) FROM events AS e"
    " JOIN streams AS s USING (stream_id) WHERE e.seq >= ? AND e.kind = 'MessageAppended'"
    " AND (e.message_id IS NULL OR e.tokens IS NULL) ORDER BY e.seq LIMIT ?"
)
SET_HEAD = "UPDATE events SET message_id = ?, tokens = ? WHERE seq = ?"
# where an append's rows landed (no payload): a ledger folds its own events as written
WRITTEN_ROWS = (
    "SELECT seq, version, event_id, hash FROM events WHERE stream_id ="
    " (SELECT stream_id FROM streams WHERE stream = ?) AND version > ? ORDER BY version LIMIT ?"
)
# a stream's version as of a seq: walks events_by_stream down from its top (the rowid
# is in the index), so as of the log's end it is one seek; the seq names a row whose
# version is no integer (text sorts above every number)
VERSION_AT = (
    "SELECT version, seq FROM events WHERE stream_id = ? AND seq <= ? ORDER BY version DESC LIMIT 2"
)
READ_STREAM = (
    "SELECT seq, version, schema, payload, hash FROM events"
    " WHERE stream_id = ? AND version >= ? AND version <= ? ORDER BY version LIMIT ?"
)
# LEFT JOIN: a row whose stream vanished still reaches the verifier (as a hash mismatch);
# the casts keep a row edited in the sqlite3 shell (``replace(payload, ...)`` makes it
# TEXT, a NULL anywhere) a hash mismatch to report rather than a type error
VERIFY_EVENTS = (
    "SELECT e.seq, coalesce(s.stream, ''), e.version, coalesce(e.event_id, ''),"
    " coalesce(e.kind, ''), e.schema, coalesce(CAST(e.payload AS BLOB), x''), coalesce(e.hash, '')"
    " FROM events AS e LEFT JOIN streams AS s USING (stream_id) WHERE e.seq >= ? ORDER BY e.seq LIMIT ?"
)
# verify(): every row as the chain verifier reads it, plus its head columns (checked
# against the payload); read_stored (a copy) keeps VERIFY_EVENTS, the rows as hashed
VERIFY_HEADS = (
    "SELECT e.seq, coalesce(s.stream, ''), e.version, coalesce(e.event_id, ''),"
    " coalesce(e.kind, ''), e.schema, coalesce(CAST(e.payload AS BLOB), x''), coalesce(e.hash, ''),"
    " e.message_id, e.tokens"
    " FROM events AS e LEFT JOIN streams AS s USING (stream_id) WHERE e.seq >= ? ORDER BY e.seq LIMIT ?"
)
LIST_BLOBS = "SELECT ref, size FROM blobs"
INSERT_BLOB = "INSERT OR IGNORE INTO blobs (ref, size, data) VALUES (?, ?, ?)"
GET_BLOB = "SELECT data FROM blobs WHERE ref = ?"
HAS_BLOB = "SELECT 1 FROM blobs WHERE ref = ?"
SAVE_CHECKPOINT = (
    "INSERT INTO checkpoints (name, seq, state) VALUES (?, ?, ?)"
    " ON CONFLICT (name) DO UPDATE SET seq = excluded.seq, state = excluded.state"
)
LOAD_CHECKPOINT = "SELECT seq, state FROM checkpoints WHERE name = ?"
