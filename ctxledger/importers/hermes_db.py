"""Hermes Agent's SQLite session store (``state.db``) -> ``ImportedSession`` chains.

Read-only (``file:...?mode=ro``): the database is never written. Tables used:
``sessions(id, source, model, model_config, system_prompt | system_prompt_hash,
parent_session_id, started_at, ended_at, end_reason, title, input_tokens,
output_tokens, cache_read_tokens, cache_write_tokens, reasoning_tokens, ...)`` and
``messages(id, session_id, role, content, tool_call_id, tool_calls (JSON text),
tool_name, finish_reason, reasoning, reasoning_content, reasoning_details,
codex_reasoning_items, active, compacted, ...)``. Only ``sessions.id`` and
``messages.session_id / role / content`` are required; every other column is used
when present and its absence is reported in the warnings.

Chains: a session that ended with reason ``compression`` is the parent of the
session whose ``parent_session_id`` names it (Hermes's rotation). Other children
(branches, sub-agents) keep their parent link too; the ledger tells them apart by
the parent's end reason, and by Hermes's marks where that does not tell (a branch's
or a sub-agent's parent compacted later: ``continues_parent``). In-place compaction (rows
flagged ``active = 0, compacted = 1``) is imported as a chain as well: the archived
rows become parent segments (split where the session's first message reappears, one
segment per compaction) and the active rows the continuation. Rewound rows (``active = 0,
compacted = 0``) are skipped. Session token totals become one aggregate usage
report after the last message.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ctxledger.errors import ImportFormatError, InvalidInput
from ctxledger.importers.common import SessionBuilder, SourceText, normalize_tool_calls
from ctxledger.importers.model import ImportedSession
from ctxledger.integers import shown
from ctxledger.limits import check_token_count, json_depth, not_json

#: session columns kept as the imported session's extras (provenance, not behaviour)
_SESSION_EXTRAS = (
    "source",
    "started_at",
    "ended_at",
    "cwd",
    "git_branch",
    "message_count",
    "tool_call_count",
    "api_call_count",
    "estimated_cost_usd",
    "actual_cost_usd",
    "billing_provider",
)
#: the columns read, each with whether its absence changes what is imported (then the
#: warnings report it); a column that is missing is simply not selected
_SESSION_COLUMNS: dict[str, bool] = {
    "id": False,
    "model": True,
    "model_config": False,
    "system_prompt": True,
    "system_prompt_hash": False,
    "parent_session_id": True,
    "end_reason": True,
    "title": False,
    "input_tokens": True,
    "output_tokens": True,
    "cache_read_tokens": False,
    "cache_write_tokens": False,
    "reasoning_tokens": False,
    **dict.fromkeys(_SESSION_EXTRAS, False),
}
_MESSAGE_COLUMNS: dict[str, bool] = {
    "id": False,
    "session_id": False,
    "role": False,
    "content": False,
    "tool_call_id": True,
    "tool_calls": True,
    "tool_name": True,
    "finish_reason": False,
    "reasoning": False,
    "reasoning_content": True,
    "reasoning_details": False,
    "codex_reasoning_items": False,
    "active": True,
    "compacted": True,
}
_JSON_EXTRAS = ("reasoning_details", "codex_reasoning_items")
#: how far a compression chain is walked (a cycle ends a walk earlier)
CHAIN_CAP = 10_000


class _Store:
    """The read-only connection, the columns present and the statements built from them."""

    def __init__(self, conn: sqlite3.Connection, path: str) -> None:
        self.conn = conn
        self.path = path
        self.session_cols = self._columns("sessions")
        self.message_cols = self._columns("messages")
        if "id" not in self.session_cols:
            raise ImportFormatError(
                "not a Hermes state.db: no 'sessions' table with an 'id' column", path=path
            )
        missing = {"session_id", "role", "content"} - self.message_cols
        if missing:
            raise ImportFormatError(
                f"not a Hermes state.db: the 'messages' table lacks {', '.join(sorted(missing))}",
                path=path,
            )
        scols = [c for c in _SESSION_COLUMNS if c in self.session_cols]
        mcols = [c for c in _MESSAGE_COLUMNS if c in self.message_cols]
        order = "started_at, rowid" if "started_at" in self.session_cols else "rowid"
        self.sessions_sql = f"SELECT {', '.join(scols)} FROM sessions ORDER BY {order}"
        msg_order = "id" if "id" in self.message_cols else "rowid"
        self.messages_sql = (
            f"SELECT {', '.join(mcols)} FROM messages WHERE session_id = ? ORDER BY {msg_order}"
        )
        self.has_prompt_table = bool(self._columns("system_prompts") >= {"hash", "prompt"})
        self.schema_warnings = [
            f"state.db has no {table}.{col} column: that data is not imported"
            for table, cols, have in (
                ("messages", _MESSAGE_COLUMNS, self.message_cols),
                ("sessions", _SESSION_COLUMNS, self.session_cols),
            )
            for col, important in cols.items()
            if important
            and col not in have
            and not (col == "system_prompt" and "system_prompt_hash" in have)
        ]

    def _columns(self, table: str) -> set[str]:
        return {row[1] for row in self.conn.execute(f"PRAGMA table_info({table})")}

    def system_prompt(self, row: Mapping[str, Any]) -> str | None:
        if isinstance(row.get("system_prompt"), str):
            return str(row["system_prompt"])
        digest = row.get("system_prompt_hash")
        if digest and self.has_prompt_table:
            found = self.conn.execute(
                "SELECT prompt FROM system_prompts WHERE hash = ?", (digest,)
            ).fetchone()
            return str(found[0]) if found else None
        return None


def _json(value: Any, what: str, src: SourceText, where: str, *, stored: bool = True) -> Any:
    """A column's JSON; one `stored` in a message must be JSON as it is (a NaN would be
    stored as null); ``model_config``, of which only the window is read, need not."""
    if value is None or value == "":
        return None
    try:
        decoded = json.loads(value)
    except (TypeError, ValueError, RecursionError):  # RecursionError: nested too deep
        raise src.error(f"{what} is not valid JSON", where) from None
    if stored and not json_depth(decoded)[1]:  # json.loads takes NaN, Infinity, 1e999 (inf)
        raise src.error(f"{what} is not valid JSON: {not_json(decoded, what)}", where)
    return decoded


def _tool_calls(raw: Any, b: SessionBuilder, where: str, index: int) -> list[dict[str, Any]]:
    calls = _json(raw, "tool_calls", b.src, where)
    if not calls:
        return []
    if not isinstance(calls, list):
        raise b.src.error("tool_calls must be a JSON list", where)
    normalize_tool_calls(b, calls, index)
    return calls


def _message(row: Mapping[str, Any], b: SessionBuilder) -> dict[str, Any]:
    where = f"session {shown(b.key)}, messages row {row.get('id', '?')}"
    role = row["role"]
    msg: dict[str, Any] = {"role": role, "content": row["content"]}
    calls = (
        _tool_calls(row.get("tool_calls"), b, where, len(b.messages)) if role == "assistant" else []
    )
    if calls:
        msg["tool_calls"] = calls
    elif msg["content"] is None and role in ("assistant", "user", "system"):
        msg["content"] = ""
        b.warn(f"{role} rows with NULL content were imported with empty content")
    if role == "tool":
        msg["tool_call_id"] = row.get("tool_call_id")
        if row.get("tool_name"):
            msg["name"] = row["tool_name"]
    reasoning = row.get("reasoning_content") or row.get("reasoning")
    if reasoning:
        msg["reasoning_content"] = reasoning
    if row.get("finish_reason"):
        msg["finish_reason"] = row["finish_reason"]
    for col in _JSON_EXTRAS:
        value = _json(row.get(col), col, b.src, where)
        if value:
            msg[col] = value
    return msg


def _generations(rows: Sequence[Mapping[str, Any]]) -> list[list[Mapping[str, Any]]]:
    """Archived rows split into one list per in-place compaction (the first message repeats)."""
    if not rows:
        return []
    first = (rows[0]["role"], rows[0]["content"])
    out: list[list[Mapping[str, Any]]] = [[]]
    for row in rows:
        if out[-1] and (row["role"], row["content"]) == first:
            out.append([])
        out[-1].append(row)
    return out


def _segments(rows: Sequence[Mapping[str, Any]], notes: list[str]) -> list[list[Mapping[str, Any]]]:
    live: list[Mapping[str, Any]] = []
    archived: list[Mapping[str, Any]] = []
    rewound = 0
    for row in rows:
        active, compacted = row.get("active", 1), row.get("compacted", 0)
        if compacted:
            archived.append(row)
        elif active == 0:
            rewound += 1
        else:
            live.append(row)
    if rewound:
        notes.append(f"{rewound} rewound rows (active = 0, compacted = 0) were skipped")
    gens = _generations(archived)
    if gens:
        notes.append(
            f"in-place compaction: {len(archived)} archived rows imported as {len(gens)} parent segment(s)"
        )
    return [*gens, live] if live or not gens else gens


def _usage(row: Mapping[str, Any], b: SessionBuilder) -> None:
    raw = {
        "input": row.get("input_tokens") or 0,
        "output": row.get("output_tokens") or 0,
        "cache_read": row.get("cache_read_tokens") or 0,
        "cache_write": row.get("cache_write_tokens") or 0,
        "reasoning": row.get("reasoning_tokens") or 0,
    }
    if not all(type(v) is int for v in raw.values()):
        raise b.src.error(
            "a token count column holds something other than an integer", f"session {shown(b.key)}"
        )
    try:
        for key, value in raw.items():
            check_token_count(value, f"{key} tokens")  # the ledger's range: not negative
    except InvalidInput as exc:
        raise b.src.error(
            f"a token count column is out of range: {exc}", f"session {shown(b.key)}"
        ) from None
    if raw["reasoning"] > raw["output"]:
        b.warn("reasoning tokens above the output total were not kept")
        raw["reasoning"] = 0
    if any(raw.values()) and b.messages:
        b.add_usage(
            raw,
            f"session {shown(b.key)}",
            shape="canonical",
            model=row.get("model"),
            aggregate=True,
        )


def _session_fields(store: _Store, row: Mapping[str, Any], src: SourceText) -> dict[str, Any]:
    where = f"session {shown(row['id'])}"
    config = _json(row.get("model_config"), "model_config", src, where, stored=False)
    ctx = config.get("context_length") if isinstance(config, dict) else None
    extras: dict[str, Any] = {k: row[k] for k in _SESSION_EXTRAS if row.get(k) is not None}
    if config is not None:
        extras["model_config"] = config
    return {
        "model": row.get("model"),
        "title": row.get("title"),
        "context_length": ctx if isinstance(ctx, int) and not isinstance(ctx, bool) else None,
        "extras": extras,
    }


def _parent_of(row: Mapping[str, Any]) -> str | None:
    """The row's parent session id as text; NULL (or empty) is no parent, never ``'None'``."""
    value = row.get("parent_session_id")
    return None if value is None or value == "" else str(value)


def _check_ids(rows: list[Mapping[str, Any]], path: str) -> set[str]:
    """Every session's id as text, each once: a NULL id, or two rows whose ids read the same
    (``'x'`` twice, or ``5`` and ``'5'``), would merge or misattribute sessions."""
    seen: set[str] = set()
    for row in rows:
        raw = row["id"]
        if raw is None or raw == "":
            raise ImportFormatError("a row of the sessions table has no id", path=path)
        if str(raw) in seen:
            raise ImportFormatError(
                f"two rows of the sessions table have the id {shown(str(raw))} (read as text); "
                "session ids must be unique",
                path=path,
            )
        seen.add(str(raw))
    return seen


def _segment_key(sid: str, k: int, taken: set[str]) -> str:
    """The key of archived segment `k` of session `sid` (``sid#k``), never another session's."""
    key = f"{sid}#{k}"
    while key in taken:
        key += "'"
    taken.add(key)
    return key


def _import_session(
    store: _Store, src: SourceText, row: Mapping[str, Any], parent_key: str | None, taken: set[str]
) -> list[ImportedSession]:
    sid = str(row["id"])
    rows = [dict(r) for r in store.conn.execute(store.messages_sql, (row["id"],))]
    notes: list[str] = []
    segments = _segments(rows, notes)
    out: list[ImportedSession] = []
    for k, seg in enumerate(segments):
        last = k == len(segments) - 1
        b = SessionBuilder(src, sid if last else _segment_key(sid, k + 1, taken), "hermes_db")
        b.system_prompt = store.system_prompt(row)
        for r in seg:
            b.add(_message(r, b), f"session {shown(sid)}, messages row {r.get('id', '?')}")
        if last:
            _usage(row, b)
        for note in (*store.schema_warnings, *notes):
            b.warn(note)
        out.append(
            b.build(
                parent_key=out[-1].key if out else parent_key,
                end_reason=row.get("end_reason") if last else "compression",
                continues=bool(out) or continues_parent(row),
                **_session_fields(store, row, src),
            )
        )
    return out


def continues_parent(row: Mapping[str, Any]) -> bool:
    """Whether a child row can be its parent's compression continuation, by Hermes's own
    rule (its store's ``get_compression_tip``): not a branch (the CLI's ``/branch`` marks
    ``model_config._branched_from``), a sub-agent (``_delegate_from``) or a tool's
    session. The parent's end reason alone does not tell: a branched parent resumed
    later and compacted with rotation ends ``compression`` too, and a sub-agent's parent
    may rotate after it started."""
    raw = row.get("model_config")
    try:
        config = raw if isinstance(raw, dict) else json.loads(raw or "null")
    except (TypeError, ValueError, RecursionError):
        config = None
    if isinstance(config, dict) and any(
        config.get(k) is not None for k in ("_branched_from", "_delegate_from")
    ):
        return False
    return str(row.get("source") or "") != "tool"


def compression_parents(
    get_session: Callable[[str], Any], session_id: str
) -> list[tuple[str, Mapping[str, Any]]]:
    """The sessions `session_id` continues, nearest first, each as (id, row), read with
    `get_session` (a Hermes store's, or a dict's ``get``): up through parents that ended
    by compression while each row continues its parent (:func:`continues_parent`), as
    Hermes's ``get_compression_tip`` links them. A cycle ends the walk, as does
    :data:`CHAIN_CAP`. The importer and the Hermes engine's resume both walk this way."""
    out: list[tuple[str, Mapping[str, Any]]] = []
    row = get_session(session_id)
    seen = {session_id}
    for _ in range(CHAIN_CAP):
        if not isinstance(row, Mapping) or not continues_parent(row):
            break
        parent_id = _parent_of(row)
        if parent_id is None or parent_id in seen:
            break
        parent = get_session(parent_id)
        if not isinstance(parent, Mapping) or parent.get("end_reason") != "compression":
            break
        out.append((parent_id, parent))
        seen.add(parent_id)
        row = parent
    return out


def _chain_of(rows: list[Mapping[str, Any]], session: str, path: str) -> list[Mapping[str, Any]]:
    """The compression chain holding `session`: up through compression parents, then down
    (children that continue their parent only, the earliest started first)."""
    by_id = {str(r["id"]): r for r in rows}
    if session not in by_id:
        raise ImportFormatError(f"no session {shown(session)} in this state.db", path=path)
    parents = compression_parents(by_id.get, session)
    chain = [parents[-1][1] if parents else by_id[session]]
    for _ in range(CHAIN_CAP):
        if chain[-1].get("end_reason") != "compression":
            break
        child = next(
            (
                r
                for r in rows
                if _parent_of(r) == str(chain[-1]["id"]) and r not in chain and continues_parent(r)
            ),
            None,
        )
        if child is None:
            break
        chain.append(child)
    return chain


def _parents_first(rows: list[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    by_id = {str(r["id"]): r for r in rows}
    out: list[Mapping[str, Any]] = []
    placed: set[str] = set()
    for r in rows:
        stack: list[Mapping[str, Any]] = []
        cur: Mapping[str, Any] | None = r
        while cur is not None and str(cur["id"]) not in placed and len(stack) <= len(rows):
            stack.append(cur)
            cur = by_id.get(_parent_of(cur) or "")
        for item in reversed(stack):
            if str(item["id"]) not in placed:
                placed.add(str(item["id"]))
                out.append(item)
    return out


def parse_hermes_db(
    path: str | os.PathLike[str], *, session: str | None = None
) -> list[ImportedSession]:
    """Import every session of a Hermes ``state.db`` (or only the compression chain holding `session`).

    Parents come before their children. Raises :class:`ImportFormatError` when the
    file is not a readable Hermes store or a message row is malformed (an orphan tool
    result, invalid ``tool_calls`` JSON); nothing is returned in that case.
    """
    name = os.fspath(path)
    if not os.path.isfile(name):
        raise ImportFormatError("no such file", path=name)
    src = SourceText("", name)
    try:
        conn = sqlite3.connect(f"{Path(name).resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error as err:
        raise ImportFormatError(f"cannot open the database read-only: {err}", path=name) from None
    try:
        conn.row_factory = sqlite3.Row
        store = _Store(conn, name)
        rows: list[Mapping[str, Any]] = [dict(r) for r in conn.execute(store.sessions_sql)]
        known = _check_ids(rows, name)
        if session is not None:
            rows = _chain_of(rows, session, name)
            known = {str(r["id"]) for r in rows}  # a subset of the rows just checked
        taken = set(known)
        out: list[ImportedSession] = []
        for row in _parents_first(rows):
            parent = _parent_of(row)
            key = parent if parent in known else None
            out.extend(_import_session(store, src, row, key, taken))
    except sqlite3.DatabaseError as err:
        raise ImportFormatError(f"not a readable SQLite session store: {err}", path=name) from None
    except UnicodeDecodeError:  # (SQLite's message quotes a damaged schema, not UTF-8)
        raise ImportFormatError(
            "not a readable SQLite session store: its schema is damaged", path=name
        ) from None
    finally:
        conn.close()
    if not out:
        raise ImportFormatError("the state.db holds no sessions", path=name)
    return out
