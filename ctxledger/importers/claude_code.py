"""Claude Code session JSONL -> ``ImportedSession`` chain.

A Claude Code session file holds one record per line: ``user`` / ``assistant``
records carrying an Anthropic ``message``, linked by ``uuid`` / ``parentUuid``;
``system`` records (``subtype: compact_boundary`` marks a compaction, with
``logicalParentUuid`` pointing at the last record before it); ``summary`` records
(``summary`` + ``leafUuid``); and bookkeeping records (file snapshots, ...).

The conversation is the chain that ends at the last non-sidechain user/assistant
record, followed back through ``parentUuid``. Where the chain reaches a root that
is a compact boundary (or is preceded by a ``summary`` record whose ``leafUuid`` is
an earlier record), the walk continues from that record and the part before
becomes the parent session, ended with reason ``compression``. Forks that were
abandoned (edits, retries) and sidechains (sub-agent runs) are not on the chain and
are not imported. Assistant records that share one API message id are merged into
one message; its usage (the last record's) is attached once.

Claude Code does not log the system prompt or the tool schemas.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ctxledger.importers.anthropic import add_anthropic_message
from ctxledger.importers.common import (
    SessionBuilder,
    SourceText,
    read_json_lines,
    source_name,
    type_name,
)
from ctxledger.importers.model import ImportedSession

_MESSAGE_TYPES = ("user", "assistant")
_SESSION_FIELDS = ("sessionId", "cwd", "version", "gitBranch")
_SYNTHETIC_MODEL = "<synthetic>"

Record = tuple[int, dict[str, Any]]


def _is_boundary(rec: Mapping[str, Any]) -> bool:
    return rec.get("type") == "system" and rec.get("subtype") == "compact_boundary"


class _Chain:
    """The records of one file, indexed by uuid, and the walk along parentUuid."""

    def __init__(self, src: SourceText, records: list[Record]) -> None:
        self.src = src
        self.records = records
        self.by_uuid: dict[str, int] = {}
        self.warnings: list[str] = []
        for i, (_, rec) in enumerate(records):
            uuid = rec.get("uuid")
            if isinstance(uuid, str):
                self.by_uuid[uuid] = i

    def leaf(self) -> int:
        for i in range(len(self.records) - 1, -1, -1):
            rec = self.records[i][1]
            if rec.get("type") in _MESSAGE_TYPES and not rec.get("isSidechain"):
                return i
        raise self.src.error("no user or assistant records in this Claude Code log", 1)

    def _link(self, root: int) -> int | None:
        """The record an earlier segment ends with, if `root` starts a continuation."""
        rec = self.records[root][1]
        if _is_boundary(rec):
            target = rec.get("logicalParentUuid")
            if isinstance(target, str) and target in self.by_uuid:
                return self.by_uuid[target]
            self.warnings.append("a compact boundary points at a record that is not in this file")
            return None
        for j in range(root - 1, -1, -1):
            prev = self.records[j][1]
            if prev.get("type") in _MESSAGE_TYPES or _is_boundary(prev):
                return None
            leaf = prev.get("leafUuid")
            if (
                prev.get("type") == "summary"
                and isinstance(leaf, str)
                and self.by_uuid.get(leaf, root) < root
            ):
                return self.by_uuid[leaf]
        return None

    def segments(self) -> list[list[int]]:
        """Record indices of each segment, oldest segment first, each in chronological order."""
        segments: list[list[int]] = []
        current: list[int] = []
        seen: set[int] = set()
        i: int | None = self.leaf()
        while i is not None:
            if i in seen:
                raise self.src.error("parentUuid links form a cycle", self.records[i][0])
            seen.add(i)
            current.append(i)
            parent = self.records[i][1].get("parentUuid")
            if isinstance(parent, str) and parent:
                i = self.by_uuid.get(parent)
                if i is None:
                    self.warnings.append(
                        "the chain starts at a parentUuid that is not in this file"
                    )
                continue
            i = self._link(i)
            if i is not None:
                segments.append(current[::-1])
                current = []
        segments.append(current[::-1])
        return segments[::-1]


def _merged_assistant(
    records: list[Record], idxs: list[int], start: int
) -> tuple[dict[str, Any], int]:
    """Merge consecutive assistant records of one API message; returns (message, next position)."""
    first = records[idxs[start]][1]["message"]
    merged = dict(first)
    blocks: list[Any] = []
    pos = start
    while pos < len(idxs):
        rec = records[idxs[pos]][1]
        msg = rec.get("message")
        if (
            rec.get("type") != "assistant"
            or not isinstance(msg, dict)
            or (pos > start and msg.get("id") != first.get("id"))
        ):
            break
        content = msg.get("content")
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        blocks.extend(content if isinstance(content, list) else ())
        # later records overwrite earlier fields: the last one carries the final usage
        merged.update({k: v for k, v in msg.items() if k != "content"})
        pos += 1
        if first.get("id") is None:
            break
    merged["content"] = blocks
    return merged, pos


def _segment(
    src: SourceText, records: list[Record], idxs: list[int], key: str
) -> tuple[SessionBuilder, str | None, int | None]:
    """The segment's messages, its model, and which message is Claude Code's compact summary."""
    b = SessionBuilder(src, key, "claude_code")
    model: str | None = None
    summary_index: int | None = None
    pos = 0
    while pos < len(idxs):
        lineno, rec = records[idxs[pos]]
        kind = rec.get("type")
        if kind not in _MESSAGE_TYPES:
            label = rec.get("subtype") or kind
            if not _is_boundary(rec):
                b.warn(f"{label!s} records on the chain are not messages and were skipped")
            pos += 1
            continue
        msg = rec.get("message")
        if not isinstance(msg, dict):
            raise src.error(
                f"a {kind} record needs a 'message' object, got {type_name(msg)}", lineno
            )
        if kind == "user":
            if rec.get("isCompactSummary") and summary_index is None:
                summary_index = len(b.messages)
            add_anthropic_message(b, {**msg, "role": "user"}, lineno, len(b.messages))
            pos += 1
            continue
        merged, pos = _merged_assistant(records, idxs, pos)
        add_anthropic_message(b, {**merged, "role": "assistant"}, lineno, len(b.messages))
        mmodel = merged.get("model")
        if isinstance(mmodel, str) and mmodel != _SYNTHETIC_MODEL:
            model = mmodel
            if isinstance(merged.get("usage"), dict):
                b.add_usage(merged["usage"], lineno, shape="anthropic", model=mmodel)
    return b, model, summary_index


def _records(src: SourceText, text: str) -> list[Record]:
    out: list[Record] = []
    for lineno, rec in read_json_lines(text, src.path, "Claude Code session records"):
        if not isinstance(rec, dict) or not isinstance(rec.get("type"), str):
            raise src.error(
                f"expected a record object with a string 'type', got {type_name(rec)}", lineno
            )
        out.append((lineno, rec))
    return out


def _titles(records: list[Record]) -> dict[str, str]:
    return {
        rec["leafUuid"]: rec["summary"]
        for _, rec in records
        if rec.get("type") == "summary"
        and isinstance(rec.get("leafUuid"), str)
        and isinstance(rec.get("summary"), str)
    }


def parse_claude_code(text: str, *, path: str | None = None) -> list[ImportedSession]:
    """Parse one Claude Code session log into its compression chain (oldest segment first).

    Raises :class:`ImportFormatError` (with the 1-based line) for malformed input;
    nothing is returned unless every segment validates.
    """
    src = SourceText(text, path)
    records = _records(src, text)
    chain = _Chain(src, records)
    segments = chain.segments()
    titles = _titles(records)
    first = next((rec for _, rec in records if isinstance(rec.get("sessionId"), str)), {})
    base = str(first.get("sessionId") or source_name(path))
    sessions: list[ImportedSession] = []
    for k, idxs in enumerate(segments):
        last = k == len(segments) - 1
        key = base if last else f"{base}#{k + 1}"
        b, model, summary_index = _segment(src, records, idxs, key)
        for w in chain.warnings:
            b.warn(w)
        b.warn("Claude Code logs do not record the system prompt or the tool schemas")
        head = records[idxs[0]][1] if idxs else {}
        leaf_uuid = records[idxs[-1]][1].get("uuid") if idxs else None
        session = b.build(
            model=model,
            parent_key=sessions[-1].key if sessions else None,
            end_reason=None if last else "compression",
            title=titles.get(leaf_uuid) if isinstance(leaf_uuid, str) else None,
            extras={f: head[f] for f in _SESSION_FIELDS if f in head},
        )
        session.summary_index = summary_index if sessions else None
        sessions.append(session)
    return sessions
