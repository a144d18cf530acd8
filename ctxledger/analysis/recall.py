"""Recall and expand: lossless access to every message a chain ever held.

The search index is a projection with its own tables in a local SQLite file (the
ledger's own file for a SQLite ledger, a side file per machine for a PostgreSQL one:
``EventStore.local_index_path``), written through a separate connection (sqlite-utils)
and never touching the event store's tables, which are read only through the
:class:`EventStore` API:

* ``search_messages`` — one row per indexed message: every ``MessageAppended`` (the
  original content, tool-call names and arguments) and every summary or merged
  message a compaction wrote, with session id, chain root, message id, role, origin
  and the seq of the event that recorded it; ``search_messages_fts`` is its FTS5
  index (external content, made by ``enable_fts``; rows are added to it by hand, so
  no trigger re-tokenizes a row).
* ``search_sessions`` (session -> chain root), ``search_compacted`` (message -> the
  compaction that first summarized it) and ``search_state`` (the last folded seq).

Hits come newest first. Ranking by FTS5's bm25 needs each term's document count, a
full doclist scan: about 20 ms per common word at a million messages, and ~250 ms to
rank every match of two common words, against well under a millisecond for the
newest matches. A recall asks where something came up, and the newest mention is
usually the one an agent needs; more words narrow it.

The index is folded lazily: each query first folds ``store.read_all(last_seq + 1)``
in one write transaction, so it never misses an event and two processes never fold
the same events twice. An in-memory ledger gets a private in-memory index.

:func:`expand` returns the original messages a summary replaced. :data:`RECALL_TOOL`,
:data:`EXPAND_TOOL` and :func:`handle_tool_call` expose both to an agent, so it can
pull back detail a summary dropped.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import weakref
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import msgspec
import sqlite_utils

from ctxledger.analysis.compactions import SUMMARY_ORIGINS
from ctxledger.analysis.conversation import WHOLE, Scope, conversation_scopes
from ctxledger.analysis.expand import ExpandedMessage, Expansion, expand
from ctxledger.analysis.recall_query import MAX_QUERY_TERMS, fts_terms
from ctxledger.analysis.redacted import occurrences, snippet_of
from ctxledger.compressor.redact import redact
from ctxledger.errors import (
    InvalidInput,
    StoreError,
)
from ctxledger.events import MessageAppended, SessionStarted, SessionSwitched, SummaryGenerated
from ctxledger.eventstore.base import EventStore
from ctxledger.integers import shown
from ctxledger.ledger.facade import Ledger
from ctxledger.messages import JSON, refusal_text
from ctxledger.projections.transcript import grew_from, read_bodies
from ctxledger.tokens import message_text

#: bump to rebuild every index built by an older layout (2: a refusal's text is indexed)
INDEX_SCHEMA = 2
MAX_LIMIT = 100
#: events folded per write transaction (a long first build still lets writers in between)
FOLD_CHUNK = 20_000

_SEARCH = """
SELECT m.message_id, m.session_id, m.role, m.origin, m.seq, c.compaction_id,
       search_messages_fts.rowid,
       CASE WHEN length(m.text) <= {short} THEN
            snippet(search_messages_fts, 0, '«', '»', '…', 16) END
FROM search_messages_fts
JOIN search_messages AS m ON m.id = search_messages_fts.rowid
LEFT JOIN search_compacted AS c ON c.message_id = m.message_id
WHERE search_messages_fts MATCH ? AND ({scopes})
ORDER BY search_messages_fts.rowid DESC
LIMIT ?
"""
#: FTS5's snippet() of one row; its cost grows with the square of the row's matches
#: (40,000 of one word: 10 s), so it is asked only for rows with few (_FTS_SNIPPET_HITS)
_SNIPPETS = (
    "SELECT rowid, snippet(search_messages_fts, 0, '«', '»', '…', 16) FROM search_messages_fts "
    "WHERE search_messages_fts MATCH ? AND rowid IN ({})"
)
#: above this many occurrences of the query's words, a hit's snippet is cut in Python
_FTS_SNIPPET_HITS = 1000
#: a row this short cannot hold more than _FTS_SNIPPET_HITS matches (a word and a
#: separator each): the search makes its snippet; a longer hit is counted first, and
#: those with few matches get theirs from one further query (it walks the index again)
_SHORT_TEXT = 2 * _FTS_SNIPPET_HITS
#: one chain (root) to the last seq that belongs to the conversation
_SCOPE = "(m.root_id = ? AND m.seq <= ?)"
#: ... less the messages a branch dropped (a JSON list of ids)
_SCOPE_DROPPED = (
    "(m.root_id = ? AND m.seq <= ? AND m.message_id NOT IN (SELECT value FROM json_each(?)))"
)
_INSERT_MESSAGE = (
    "INSERT INTO search_messages (message_id, session_id, root_id, role, origin, seq, text) "
    "VALUES (?, ?, ?, ?, ?, ?, ?)"
)
_TABLES = (
    "search_messages_fts",
    "search_messages",
    "search_sessions",
    "search_compacted",
    "search_state",
)
_INDEX_NEW = "INSERT INTO search_messages_fts (rowid, text) SELECT id, text FROM search_messages WHERE id > ?"


class RecallHit(msgspec.Struct, frozen=True, kw_only=True):
    message_id: str
    session_id: str
    role: str
    origin: str
    seq: int
    snippet: str
    #: the compaction that first summarized this message (None: never compacted)
    compacted_by: str | None
    #: whether the message is in the live view of the chain's tip
    live: bool


class RecallResult(msgspec.Struct, frozen=True, kw_only=True):
    session_id: str
    root: str
    query: str
    #: ``all`` words matched (or nothing matched), or ``any`` when no message held them
    #: all and the hits hold some of them
    match: str
    hits: list[RecallHit]
    #: more messages match than the ``limit`` hits shown (the older ones are left out)
    more: bool = False


class SearchIndex:
    """The FTS5 projection of one event store (see the module docstring)."""

    _cache: ClassVar[weakref.WeakKeyDictionary[EventStore, SearchIndex]] = (
        weakref.WeakKeyDictionary()
    )

    def __init__(self, store: EventStore) -> None:
        # weakly: the per-store cache must not keep a closed ledger's store alive
        self._store_ref = weakref.ref(store)
        path = store.local_index_path("recall")
        conn = sqlite3.connect(
            path,
            isolation_level=None,
            check_same_thread=False,
        )
        conn.execute("PRAGMA busy_timeout = 5000")
        self.db = sqlite_utils.Database(conn)
        self._lock = threading.Lock()
        self._closed = False
        self._roots: dict[str, str] = {}
        self._live: dict[str, tuple[int, str | None, set[str]]] = {}
        try:
            self._create()
            self._roots = {
                str(s): str(r)
                for s, r in conn.execute("SELECT session_id, root_id FROM search_sessions")
            }
            # (its connection must not outlive the store's; registered once made, so a
            # close meanwhile never closes it under _create: StoreError here instead)
            store.on_close(self.close)
        except BaseException:
            conn.close()
            raise

    @classmethod
    def for_ledger(cls, ledger: Ledger) -> SearchIndex:
        """The index of `ledger`'s store (one per store per process)."""
        index = cls._cache.get(ledger.store)
        if index is None:
            index = cls(ledger.store)
            cls._cache[ledger.store] = index
        return index

    @property
    def store(self) -> EventStore:
        store = self._store_ref()
        if store is None:
            raise StoreError("the ledger of this search index was closed; open it again")
        return store

    def close(self) -> None:
        """Close the index's connection, once no call is inside it (its store's close runs
        this unlocked: a call inside that reads the store gets StoreError and lets go)."""
        store = self._store_ref()
        if store is not None and self._cache.get(store) is self:
            del self._cache[store]
        with self._lock:
            self._closed = True
            self.db.conn.close()

    def _open(self) -> sqlite3.Connection:
        """The connection, under :attr:`_lock`; StoreError once closed (with its store)."""
        if self._closed:
            raise StoreError("the ledger of this search index was closed; open it again")
        return self.db.conn

    # --- schema ---------------------------------------------------------------------

    def _write(self) -> _Transaction:
        return _Transaction(self)

    def _create(self) -> None:
        """Create the index tables once (or again, when an older layout is found)."""
        db, conn = self.db, self.db.conn
        if db.table("search_state").exists():
            row = conn.execute("SELECT schema FROM search_state WHERE id = 1").fetchone()
            if (
                row is not None
                and row[0] == INDEX_SCHEMA
                and db.table("search_messages_fts").exists()
            ):
                return
            if row is not None and row[0] != INDEX_SCHEMA:
                with self._write():
                    for name in _TABLES:
                        conn.execute(f"DROP TABLE IF EXISTS [{name}]")
        with self._write():
            messages = db.table("search_messages")
            messages.create(
                {
                    "id": int,
                    "message_id": str,
                    "session_id": str,
                    "root_id": str,
                    "role": str,
                    "origin": str,
                    "seq": int,
                    "text": str,
                },
                pk="id",
                if_not_exists=True,
            )
            messages.create_index(
                ["message_id"], index_name="search_messages_by_id", if_not_exists=True
            )
            db.table("search_sessions").create(
                {"session_id": str, "root_id": str}, pk="session_id", if_not_exists=True
            )
            db.table("search_compacted").create(
                {"message_id": str, "compaction_id": str}, pk="message_id", if_not_exists=True
            )
            db.table("search_state").create(
                {"id": int, "schema": int, "last_seq": int}, pk="id", if_not_exists=True
            )
            conn.execute(
                "INSERT OR IGNORE INTO search_state (id, schema, last_seq) VALUES (1, ?, 0)",
                (INDEX_SCHEMA,),
            )
        # enable_fts runs a script (which commits on its own), so it stays outside the
        # transaction; another process creating it first is fine
        try:
            db.table("search_messages").enable_fts(["text"], fts_version="FTS5")
        except sqlite3.OperationalError:
            if not db.table("search_messages_fts").exists():
                raise

    # --- folding --------------------------------------------------------------------

    def catch_up(self) -> int:
        """Fold every event appended since the last fold; returns how many messages were indexed."""
        added = 0
        while True:
            with self._write():
                last = int(
                    self.db.conn.execute(
                        "SELECT last_seq FROM search_state WHERE id = 1"
                    ).fetchone()[0]
                )
                rows, compacted, sessions, seq = self._fold(last)
                if seq == last:
                    return added
                self._write_rows(rows, compacted, sessions, seq)
                added += len(rows)

    def _root(self, session_id: str, sessions: Mapping[str, str]) -> str:
        """The chain root of a session already folded (by this fold, this process or another)."""
        root = sessions.get(session_id) or self._roots.get(session_id)
        if root is None:
            row = self.db.conn.execute(
                "SELECT root_id FROM search_sessions WHERE session_id = ?", (session_id,)
            ).fetchone()
            root = str(row[0]) if row is not None else session_id
            self._roots[session_id] = root
        return root

    def _fold(
        self, last: int
    ) -> tuple[list[tuple[Any, ...]], list[tuple[str, str]], dict[str, str], int]:
        rows: list[tuple[Any, ...]] = []
        compacted: list[tuple[str, str]] = []
        sessions: dict[str, str] = {}
        seq = last
        for rec in self.store.read_all(last + 1, last + FOLD_CHUNK):
            seq, event = rec.seq, rec.event
            if isinstance(event, MessageAppended):
                root = self._root(event.session_id, sessions)
                rows.append(
                    (
                        event.message_id,
                        event.session_id,
                        root,
                        str(event.message.get("role") or ""),
                        "appended",
                        seq,
                        _indexed_text(event.message),
                    )
                )
            elif isinstance(event, SessionStarted):
                parent = event.parent_session_id
                linked = parent is not None and event.reason in ("compression", "revert")
                sessions[event.session_id] = (
                    self._root(parent, sessions) if linked and parent else event.session_id
                )
            elif isinstance(event, SessionSwitched):
                root = self._root(event.session_id, sessions)
                for entry in event.layout:
                    if entry.message is not None and entry.origin in SUMMARY_ORIGINS:
                        rows.append(
                            (
                                entry.message_id,
                                event.new_session_id,
                                root,
                                str(entry.message.get("role") or ""),
                                entry.origin,
                                seq,
                                _indexed_text(entry.message),
                            )
                        )
            elif isinstance(event, SummaryGenerated):
                compacted.extend((mid, event.compaction_id) for mid in event.input_message_ids)
        return rows, compacted, sessions, seq

    def _write_rows(
        self,
        rows: list[tuple[Any, ...]],
        compacted: list[tuple[str, str]],
        sessions: dict[str, str],
        seq: int,
    ) -> None:
        conn = self.db.conn
        top = conn.execute("SELECT coalesce(max(id), 0) FROM search_messages").fetchone()[0]
        conn.executemany(_INSERT_MESSAGE, rows)
        conn.execute(_INDEX_NEW, (top,))
        conn.executemany("INSERT OR IGNORE INTO search_compacted VALUES (?, ?)", compacted)
        conn.executemany(
            "INSERT OR REPLACE INTO search_sessions VALUES (?, ?)", list(sessions.items())
        )
        conn.execute("UPDATE search_state SET last_seq = ? WHERE id = 1", (seq,))
        self._roots.update(sessions)

    # --- queries --------------------------------------------------------------------

    def live_ids(self, ledger: Ledger, tip: str) -> set[str]:
        """The tip's live message ids, kept up to date incrementally (read again after a
        withdrawn reply shortened the view: :func:`grew_from`)."""
        live = ledger.transcript.session(tip).live
        n, last, ids = self._live.get(tip, (0, None, set()))
        if not grew_from(live, n, last):
            n, ids = 0, set()
        ids.update(live[n:])
        self._live[tip] = (len(live), live[-1] if live else None, ids)
        return ids

    def snippets(self, match: str, rowids: list[int]) -> dict[int, str]:
        """FTS5's snippets of matching rows, in one query (read-only; a row that no longer
        matches is absent): one MATCH walks the index, one per row was ~0.3 ms each."""
        if not rowids:
            return {}
        sql = _SNIPPETS.format(",".join("?" * len(rowids)))
        with self._lock:
            rows = self._open().execute(sql, (match, *rowids)).fetchall()
        return {int(rowid): str(text) for rowid, text in rows}

    def search(
        self, scopes: str | Sequence[Scope], match: str, limit: int
    ) -> list[tuple[Any, ...]]:
        """Raw rows for an FTS5 `match` expression within one chain (its root), or within
        ``(root, last seq, dropped ids)`` scopes (:func:`~ctxledger.analysis.conversation.conversation_scopes`;
        read-only)."""
        scopes = [Scope(scopes, WHOLE)] if isinstance(scopes, str) else list(scopes)
        where = " OR ".join(_SCOPE_DROPPED if s.dropped else _SCOPE for s in scopes)
        sql = _SEARCH.format(short=_SHORT_TEXT, scopes=where)
        bound: list[object] = []
        for s in scopes:
            bound += [s.root, s.bound, *([json.dumps(sorted(s.dropped))] if s.dropped else [])]
        with self._lock:
            try:
                return self._open().execute(sql, (match, *bound, limit)).fetchall()
            except sqlite3.OperationalError as exc:
                raise InvalidInput(
                    f"cannot search for that query ({exc}); use plain words"
                ) from None


class _Transaction:
    """``BEGIN IMMEDIATE`` ... ``COMMIT`` (``ROLLBACK`` on error) on the index's connection."""

    def __init__(self, index: SearchIndex) -> None:
        self.index = index
        self.lock = index._lock

    def __enter__(self) -> None:
        self.lock.acquire()
        try:
            self.conn = self.index._open()
            self.conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            self.lock.release()
            raise StoreError(f"cannot update the search index: {exc}; retry") from exc
        except BaseException:
            self.lock.release()
            raise

    def __exit__(self, exc_type: object, *rest: object) -> None:
        try:
            self.conn.execute("ROLLBACK" if exc_type is not None else "COMMIT")
        finally:
            self.lock.release()


# --------------------------------------------------------------------------- recall


def _indexed_text(message: JSON) -> str:
    """What recall finds a message by: the text a reader reads, and a refusal's text
    (something the model said; a content-null refusal has no other text)."""
    text = message_text(message, text_only=True)
    return "\n".join(p for p in (text, refusal_text(message) or "") if p)


def recall(ledger: Ledger, session_id: str, query: str, limit: int = 10) -> RecallResult:
    """Full-text search over every message the chain of `session_id` ever held, and
    the chains it branched from up to each branch point (:mod:`~ctxledger.analysis.conversation`).

    Compacted messages are found too (``compacted_by`` names the compaction to
    ``expand``). Words must all match; when no message holds them all but some hold
    one of them, those come back with ``match="any"`` (no hit at all: ``match="all"``
    and no hits). Hits come newest first (see the module docstring for why not by bm25).
    """
    terms = fts_terms(query)
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise InvalidInput(f"limit must be an integer from 1 to {MAX_LIMIT}, got {shown(limit)}")
    ledger.refresh()
    sid = ledger.resolve(session_id)
    scopes = conversation_scopes(ledger, sid)
    root = scopes[0].root
    index = SearchIndex.for_ledger(ledger)
    index.catch_up()
    match, expr = "all", " ".join(terms)
    rows = index.search(scopes, expr, limit + 1)  # one more: whether the hits are all
    if not rows and len(terms) > 1:
        any_rows = index.search(scopes, " OR ".join(terms), limit + 1)
        if any_rows:  # only then is "any word" what the hits are
            match, rows, expr = "any", any_rows, " OR ".join(terms)
    more, rows = len(rows) > limit, rows[:limit]
    live = index.live_ids(ledger, ledger.tip(sid))
    messages = ledger.transcript.state.messages
    ids = [r[0] for r in rows if r[0] in messages]
    bodies = dict(zip(ids, read_bodies([messages[i] for i in ids]), strict=True))  # one batch
    fts = {r[6]: r[7] for r in rows if r[7] is not None}  # made by the search
    long = [r for r in rows if r[7] is None]
    many = {r[6] for r in long if _many_matches(bodies.get(r[0]), terms)}
    fts.update(index.snippets(expr, [r[6] for r in long if r[6] not in many]))
    hits = [
        RecallHit(
            message_id=r[0],
            session_id=r[1],
            role=r[2],
            origin=r[3],
            seq=int(r[4]),
            compacted_by=r[5],
            snippet=_snippet(bodies.get(r[0]), fts.get(r[6], ""), terms, r[6] in many),
            live=r[0] in live,
        )
        for r in rows
    ]
    return RecallResult(
        session_id=sid, root=root, query=query.strip(), match=match, hits=hits, more=more
    )


def _many_matches(message: JSON | None, terms: list[str]) -> bool:
    """Whether FTS5's snippet of `message` would cost too much (see _FTS_SNIPPET_HITS)."""
    stop = _FTS_SNIPPET_HITS + 1
    return message is not None and occurrences(message_text(message), terms, stop) >= stop


def _snippet(message: JSON | None, fts: str, terms: list[str], many: bool) -> str:
    if message is None:
        return redact(fts)
    return snippet_of(message, None if many else fts, terms)


__all__ = [
    "MAX_QUERY_TERMS",
    "ExpandedMessage",
    "Expansion",
    "RecallHit",
    "RecallResult",
    "SearchIndex",
    "expand",
    "fts_terms",
    "recall",
]
