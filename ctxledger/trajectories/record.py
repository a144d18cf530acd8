"""Recording compressed trajectories as ledger events, so they can be audited.

Each compressed trajectory becomes an imported session (the original turns) and a
compaction of it: ``SummaryGenerated`` (the summary turn's text, the middle's
message ids) and ``SessionSwitched`` whose layout carries the head and tail by id
and adds the summary message, plus the continuation's ``SessionStarted`` — the same
events a live compaction writes, so ``audit``, ``expand`` and ``diff`` work on them.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import msgspec

from ctxledger.events import Event, LayoutEntry, SessionStarted, SessionSwitched, SummaryGenerated
from ctxledger.eventstore.base import AppendRequest
from ctxledger.idkeys import keyed_title
from ctxledger.importers.model import ImportedSession
from ctxledger.importers.sharegpt import turns_to_messages
from ctxledger.inputfile import is_stream
from ctxledger.ledger.facade import Ledger
from ctxledger.ledger.importing import import_sessions
from ctxledger.projections.transcript import read_bodies
from ctxledger.tokens import count_message
from ctxledger.trajectories.batch import (
    complete_lines,
    metrics_line,
    metrics_path_for,
    read_records,
)
from ctxledger.trajectories.core import TrajectoryMetrics, turns_digest


def _split(turns: Sequence[Mapping[str, Any]]) -> tuple[str | None, list[dict[str, Any]]]:
    messages = turns_to_messages(turns)
    if messages and messages[0].get("role") == "system":
        return str(messages[0].get("content") or ""), messages[1:]
    return None, messages


def _count_without_system(turns: Sequence[Mapping[str, Any]]) -> int:
    return len(_split(turns)[1])


def record_trajectory(
    ledger: Ledger,
    key: str,
    before: Mapping[str, Any],
    after: Mapping[str, Any],
    metrics: TrajectoryMetrics,
    *,
    original: str | None = None,
) -> str | None:
    """Append one compressed trajectory as a session and its compaction; returns the
    continuation id. `original`: the record's imported session an earlier recording
    left without its compaction (compacted instead of importing the record again)."""
    start, end = metrics.turns_compressed_start, metrics.turns_compressed_end
    if not metrics.was_compressed or start is None or end is None:
        return None
    turns_in, turns_out = list(before["conversations"]), list(after["conversations"])
    system, sid = _import_original(ledger, key, turns_in, original)
    ids = ledger.transcript.live_ids(sid)
    head_n, mid_end = _count_without_system(turns_in[:start]), _count_without_system(turns_in[:end])
    new_system = _split(turns_out[:1])[0] if _opens_with_system(turns_out) else system
    summary_msg = {"role": "user", "content": str(turns_out[start].get("value", ""))}
    encoding = ledger.transcript.session(sid).encoding
    summary_id, new_sid, cid = ledger.ids("msg"), ledger.ids("ses"), ledger.ids("cmp")
    layout = _layout(ledger, ids, (head_n, mid_end), summary_id, summary_msg, encoding)
    view = ledger.transcript.session(sid)
    base = ledger.event_fields
    old: list[Event] = [
        SummaryGenerated(
            **base(sid),
            compaction_id=cid,
            summarizer="trajectory",
            model=None,
            prompt_hash="",
            input_message_ids=ids[head_n:mid_end],
            budget_tokens=metrics.summary_tokens,
            text=summary_msg["content"],
        ),
        SessionSwitched(
            **base(sid),
            compaction_id=cid,
            new_session_id=new_sid,
            trigger="batch",
            system_prompt=new_system,
            system_prompt_tokens=_system_tokens(new_system, encoding),
            layout=layout,
            plan={"turns_compressed_start": start, "turns_compressed_end": end},
            config={},
            tokens_before=metrics.original_tokens,
            tokens_after=metrics.compressed_tokens,
            # API views, as a live compaction counts them: the system message included
            messages_before=len(ids) + int(view.system_prompt is not None),
            messages_after=len(layout) + int(new_system is not None),
        ),
    ]
    started = _continuation(ledger, sid, new_sid, cid, f"trajectory:{key}")
    ledger.append(
        [AppendRequest(sid, old, ledger.version(sid)), AppendRequest(new_sid, [started], 0)]
    )
    return new_sid


def _continuation(ledger: Ledger, sid: str, new_sid: str, cid: str, source: str) -> SessionStarted:
    """The continuation session's start: the parent's model, window and encoding."""
    view = ledger.transcript.session(sid)
    return SessionStarted(
        **ledger.event_fields(new_sid),
        model=view.model,
        context_length=view.context_length,
        parent_session_id=sid,
        reason="compression",
        compaction_id=cid,
        encoding=view.encoding,
        source=source,
    )


def _opens_with_system(turns: list[Any]) -> bool:
    return bool(turns) and turns[0].get("from") == "system"


def _holds(ledger: Ledger, sid: str, turns: list[Any]) -> bool:
    """Whether the session `sid` holds these very turns (its system prompt and live
    messages are theirs). Bodies are read last and not kept: a resume compares every
    skipped record's original, and kept bodies grew its memory with the batch."""
    system, messages = _split(turns)
    view = ledger.transcript.session(sid)
    if view.system_prompt != system or len(view.live) != len(messages):
        return False
    return read_bodies([ledger.transcript.stored(m) for m in view.live]) == messages


def _compresses(
    before: Mapping[str, Any], after: Mapping[str, Any], metrics: TrajectoryMetrics
) -> bool:
    """Whether OUT's record `after` is a compression of IN's `before`: IN's turns are
    those OUT was compressed from (their digest, when the metrics file holds one), OUT's
    turns before the summary are IN's (a system turn may end with the notice), and those
    after it are IN's from the span's end. (IN regenerated with the same ids after OUT
    was written: OUT's summary is of other turns.) An uncompressed record: nothing to check."""
    start, end = metrics.turns_compressed_start, metrics.turns_compressed_end
    if not metrics.was_compressed or start is None or end is None:
        return True
    turns_in, turns_out = before.get("conversations"), after.get("conversations")
    if not isinstance(turns_in, list) or not isinstance(turns_out, list) or end > len(turns_in):
        return False
    digest = metrics.input_digest
    if len(turns_in) != metrics.original_turns or (
        digest is not None and digest != turns_digest(turns_in)
    ):
        return False
    if (
        len(turns_out) != start + 1 + len(turns_in) - end
        or turns_out[start + 1 :] != turns_in[end:]
    ):
        return False
    return all(o == i or _noticed(i, o) for i, o in zip(turns_in[:start], turns_out, strict=False))


def _noticed(turn_in: Any, turn_out: Any) -> bool:
    """Whether `turn_out` is `turn_in` with text added after its value (the notice)."""
    if not isinstance(turn_in, dict) or not isinstance(turn_out, dict):
        return False
    value = turn_in.get("value")
    added = turn_out.get("value")
    same_rest = {**turn_out, "value": value} == turn_in
    return (
        same_rest and isinstance(value, str) and isinstance(added, str) and added.startswith(value)
    )


def _import_original(
    ledger: Ledger, key: str, turns: list[Any], original: str | None
) -> tuple[str | None, str]:
    """The uncompressed trajectory as an imported session: (its system prompt, its id);
    `original` when it holds these very turns (a resume after a cut recording)."""
    system, messages = _split(turns)
    if original is not None and _holds(ledger, original, turns):
        return system, original
    session = ImportedSession(
        key=key,
        source_format="sharegpt",
        messages=messages,
        system_prompt=system,
        title=keyed_title("", key),  # (a record id with a newline, say: a key made for it)
    )
    return system, import_sessions(ledger, [session])[0]


def _layout(
    ledger: Ledger,
    ids: list[str],
    middle: tuple[int, int],
    summary_id: str,
    summary_msg: dict[str, Any],
    encoding: str,
) -> list[LayoutEntry]:
    """The continuation's layout: the head, the summary in place of the middle, the tail."""
    head_n, mid_end = middle
    tokens_of = ledger.transcript.tokens_of
    summary = LayoutEntry(
        message_id=summary_id,
        origin="summary",
        message=summary_msg,
        tokens=count_message(summary_msg, encoding),
    )
    return [
        *(LayoutEntry(message_id=m, tokens=tokens_of(m)) for m in ids[:head_n]),
        summary,
        *(LayoutEntry(message_id=m, tokens=tokens_of(m)) for m in ids[mid_end:]),
    ]


def _system_tokens(system: str | None, encoding: str) -> int:
    return count_message({"role": "system", "content": system}, encoding) if system else 0


def _recorded_here(ledger: Ledger) -> tuple[dict[str, list[str]], dict[str, str]]:
    """What the ledger holds of earlier recordings: by key, the sessions a continuation
    (source ``trajectory:<key>``) was compacted from, and an imported original left
    without its compaction (a recording cut between its two appends)."""
    done: dict[str, list[str]] = {}
    halfway: dict[str, str] = {}
    for info in ledger.chains.state.sessions.values():
        source = info.source or ""
        if source.startswith("trajectory:") and info.parent_session_id is not None:
            done.setdefault(source.removeprefix("trajectory:"), []).append(info.parent_session_id)
        elif source.startswith("sharegpt:") and info.parent_session_id is None:
            key = source.removeprefix("sharegpt:")
            untouched = info.compression_child is None and not info.ended
            if untouched and info.title == keyed_title("", key):
                halfway[key] = info.session_id
    return done, halfway


def _recorded(
    ledger: Ledger, done: Mapping[str, list[str]], key: str, record: Mapping[str, Any]
) -> bool:
    """Whether a continuation of this very record is recorded (another batch may have
    recorded a record of the same key, with other turns)."""
    turns = list(record["conversations"])
    return any(_holds(ledger, parent, turns) for parent in done.get(key, ()))


def written_keys(out_path: str | os.PathLike[str]) -> set[str]:
    """Keys of the records a batch output already holds (from its metrics file)."""
    path = metrics_path_for(out_path)
    if is_stream(out_path) or not os.path.exists(path):
        return set()  # a FIFO or /dev/null output has no metrics file beside it
    # (the lines a resume keeps: a torn last line, a crash's, is no record yet)
    return {metrics_line(line, path, i).key for i, line in enumerate(complete_lines(path), 1)}


def record_batch(
    ledger: Ledger,
    in_path: str | os.PathLike[str],
    out_path: str | os.PathLike[str],
    *,
    skip_keys: set[str] | None = None,
    warn: Callable[[str, str], None] | None = None,
) -> list[str]:
    """Record the compressed trajectories of a finished batch (except `skip_keys`: those a
    resumed run had already written, when this ledger holds their compaction: a record
    whose recording failed or was cut is recorded again); returns the continuation ids.
    A record OUT holds that is no compression of IN's record of its key (IN regenerated
    after OUT was written) is not recorded: `warn(key, message)` is told (by default,
    `warnings.warn`)."""
    inputs = {r.key: r.record for r in read_records(in_path)}
    ledger.refresh()  # another run may have recorded meanwhile (a compress takes hours)
    done, halfway = _recorded_here(ledger)
    written = skip_keys or set()
    recorded: list[str] = []
    with open(out_path, "rb") as out_fh, open(metrics_path_for(out_path), "rb") as metrics_fh:
        for lineno, (out_line, raw) in enumerate(zip(out_fh, metrics_fh, strict=False), 1):
            metrics = metrics_line(raw, metrics_fh.name, lineno)
            key = metrics.key
            before = inputs.get(key)
            if before is None or (key in written and _recorded(ledger, done, key, before)):
                continue
            after = msgspec.json.decode(out_line)
            if not _compresses(before, after, metrics):
                (warn or _warn)(key, f"{key}: {SKIPPED}")
                continue
            new = record_trajectory(
                ledger, key, before, after, metrics, original=halfway.pop(key, None)
            )
            if new is not None:
                recorded.append(new)
    return recorded


SKIPPED = "not recorded: IN changed after OUT was written: compress into a new OUT to record it"


def _warn(key: str, message: str) -> None:
    warnings.warn(message, stacklevel=3)
