"""A rebuild's hot loop: fold stored rows into the transcript, messages from their heads.

Two row shapes reach it. ``read_rows`` (every store) hands out ``(seq, version,
schema, payload)``: a message is decoded into a
:class:`~ctxledger.eventstore.rows.MessageHead` (msgspec skips its body). A store
with head columns (SQLite since its migration ``0002_message_heads``) hands out
``read_heads`` pages: a message's id and token count come from two columns and its
session is the row's stream, so its payload is not read at all; rows without a head
(other events, messages written before the migration) carry their payload and are
folded as from ``read_rows``. Either way a message keeps only its seq, and its body
is read from the log the first time someone asks for it
(:class:`~ctxledger.projections.bodies.Bodies`).

Every other event goes to `other(seq, event, version)`, which must fold it into the
transcript (and any other projection). The loops are written out, not factored into
per-row calls: they run once per event of the log.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable, Mapping

from ctxledger.events import SWITCH_INLINE_SCHEMA, Event, SessionSwitched
from ctxledger.eventstore.contents import layout_problem
from ctxledger.eventstore.rows import (
    HEAD_DECODER,
    MESSAGE_SCHEMA,
    UNDECODED,
    ColumnRow,
    HeadRow,
    MessageHead,
    decode_head,
    shown,
    undecodable,
)
from ctxledger.integers import shown_id
from ctxledger.messages import JSON
from ctxledger.projections.bodies import Bodies
from ctxledger.projections.stored import SessionView, StoredMessage, TranscriptState

__all__ = ["fold_column_rows", "fold_rows"]

Other = Callable[[int, Event, int], None]
#: (stream ids, seq) -> each stream's version as of seq (``SQLiteEventStore.versions_at``)
Versions = Callable[[Iterable[int], int], Mapping[int, int]]


def fold_rows(
    state: TranscriptState,
    api: dict[str, list[JSON]],
    pages: Iterable[list[HeadRow]],
    bodies: Bodies,
    other: Other,
    after: int,
) -> tuple[int, int]:
    """Fold ``read_rows`` pages after seq `after` into `state`; returns the last seq
    folded (`after` if none) and how many rows were folded. `api` is the projection's
    cached API views (a session gaining a message folded from its head loses its view:
    rebuilt on its next read, bodies in one batch)."""
    decode, head_type, schema_now = HEAD_DECODER.decode, MessageHead, MESSAGE_SCHEMA
    sessions, messages = state.sessions, state.messages
    last, n = after, 0
    try:
        for page in pages:
            for seq, version, schema, payload in page:
                if seq <= last:
                    continue
                try:
                    item: Event | MessageHead | None = decode(payload)
                except UNDECODED:
                    item = None
                if type(item) is not head_type or schema != schema_now:
                    item = decode_head(seq, schema, payload)
                    if not isinstance(item, MessageHead):
                        other(seq, _whole(seq, schema, item, bodies), version)
                        last = seq
                        n += 1
                        continue
                # a MessageHead from here on (no isinstance: this runs once per message)
                view = sessions.get(item.session_id)
                if view is not None:
                    mid, tokens = item.message_id, item.tokens
                    sid = view.session_id  # one string per session, not per message
                    messages[mid] = StoredMessage(
                        tokens=tokens, session_id=sid, seq=seq, bodies=bodies
                    )
                    view.live.append(mid)
                    view.live_tokens += tokens
                    view.version = version
                    if api:
                        api.pop(sid, None)
                last = seq
                n += 1
    finally:
        state.last_seq = max(state.last_seq, last)
    return last, n


def fold_column_rows(
    state: TranscriptState,
    api: dict[str, list[JSON]],
    pages: Iterable[tuple[Mapping[int, str], list[ColumnRow]]],
    bodies: Bodies,
    other: Other,
    after: int,
    versions: Versions,
) -> tuple[int, int]:
    """Fold ``read_heads`` pages (stream names, rows) after seq `after` into `state`;
    returns as :func:`fold_rows`. A row with its payload is folded as :func:`fold_rows`
    folds it; one without is a message whose head is in the row's columns.

    Head rows are folded in *runs* (consecutive rows of one stream, :class:`_Run`).
    Rows carry no version: each session's ``version`` (the expected version of its next
    append) is set once at the end, `versions(stream ids, seq)` giving every touched
    stream's version as of the last row folded. In a log that verifies, every event
    belongs to its own stream and versions grow with seq, so that is the version of the
    session's last event, what an event-by-event fold leaves.
    """
    run = _Run(state, api, bodies, other)
    names: Mapping[int, str] = {}
    last, n, completed = after, 0, False
    try:
        for names, page in pages:
            if page[0][0] <= last:
                page = [row for row in page if row[0] > last]
                if not page:
                    continue
            try:
                run.fold_page(names, page)
            except BaseException:
                done = bisect.bisect_left(page, run.seq, key=_seq_of)  # rows before the failing one
                n += done
                last = page[done - 1][0] if done else last
                raise
            n += len(page)
            last = page[-1][0]
        completed = True
    finally:
        run.end()
        state.last_seq = max(state.last_seq, last)
        if run.touched and (completed or last > after):
            try:
                for stream_id, version in versions(run.touched, last).items():
                    view = state.sessions.get(names.get(stream_id, ""))
                    if view is not None:
                        view.version = version
            except Exception:
                if completed:
                    raise  # else the fold's own error is the one to see
    return last, n


class _Run:
    """Folds pages of ``read_heads`` rows, head rows in runs of one stream: the run's view
    is looked up once, and its token sum is added when the run ends — before any other
    row is folded, so every fold step sees the view as an event-by-event fold would. A
    run may go on from one page into the next."""

    __slots__ = (
        "api",
        "append",
        "bodies",
        "other",
        "seq",
        "sid",
        "state",
        "stream",
        "tokens",
        "touched",
        "view",
    )

    def __init__(
        self, state: TranscriptState, api: dict[str, list[JSON]], bodies: Bodies, other: Other
    ) -> None:
        self.state, self.api, self.bodies, self.other = state, api, bodies, other
        self.stream: int | None = None
        self.view: SessionView | None = None
        self.append: Callable[[str], None] = _no_append
        self.sid = ""
        self.tokens = 0
        #: the seq of the row being folded (after a failure: the row that failed)
        self.seq = 0
        #: every stream a row of which was folded (their versions are set at the end)
        self.touched: set[int] = set()

    def fold_page(self, names: Mapping[int, str], page: list[ColumnRow]) -> None:
        """Fold one page (rows after the projection's last seq); the rebuild's hot loop."""
        state, api, bodies, touched = self.state, self.api, self.bodies, self.touched
        sessions, messages, make = state.sessions, state.messages, StoredMessage
        # the run, unpacked into locals: this loop runs once per row of the log
        stream, view, append, sid, tokens_sum = (
            self.stream,
            self.view,
            self.append,
            self.sid,
            self.tokens,
        )
        seq = page[0][0]
        try:
            for seq, stream_id, mid, tokens, schema, payload in page:
                if payload is None:  # the head is in the columns: the payload is not read
                    if stream_id != stream:
                        if view is not None:  # the previous run ends
                            view.live_tokens += tokens_sum
                        stream, tokens_sum = stream_id, 0
                        touched.add(stream_id)
                        view = sessions.get(names.get(stream_id, ""))
                        if view is None:  # a session that never started: skipped, as
                            _check_unstarted(seq, stream_id, names, bodies)  # events are
                            continue
                        append, sid = view.live.append, view.session_id
                        if api:  # rebuilt on its next read, bodies in one batch
                            api.pop(sid, None)
                    elif view is None:
                        if stream_id not in names:  # (None: also the run's sentinel)
                            _check_unstarted(seq, stream_id, names, bodies)
                        continue
                    messages[mid] = make(tokens=tokens, session_id=sid, seq=seq, bodies=bodies)
                    append(mid)
                    tokens_sum += tokens
                    continue
                if view is not None:  # the run ends before anything else is folded
                    view.live_tokens += tokens_sum
                stream, view, tokens_sum = None, None, 0
                touched.add(stream_id)
                _fold_payload(state, api, seq, schema, payload, bodies, self.other)
        finally:
            self.stream, self.view, self.append, self.sid = stream, view, append, sid
            self.tokens, self.seq = tokens_sum, seq

    def end(self) -> None:
        """The last run ends (its token sum is added to its view)."""
        if self.view is not None:
            self.view.live_tokens += self.tokens
        self.stream, self.view, self.tokens = None, None, 0


def _check_unstarted(seq: int, stream_id: object, names: Mapping[int, str], bodies: Bodies) -> None:
    """A message row whose stream names no session that started: skipped (as a fold of
    events skips a message to a session that never started) only when its event says
    the same; else InvalidEvent naming the row (a stream column NULL, of the wrong type
    or naming no stream, a ``streams`` row deleted or renamed: skipping it lost the
    message without a word). Runs once per run of such rows, not per message."""
    name: object = names.get(stream_id, None) if isinstance(stream_id, int) else None
    if stream_id is None:
        problem = "the row's stream_id is NULL"
    elif stream_id not in names:
        problem = f"the row's stream_id {shown(stream_id)} names no stream"
    elif not isinstance(name, str):
        problem = (
            f"the row's stream_id {shown(stream_id)} names a stream whose name is {shown(name)}"
        )
    else:
        session = bodies.event_at(seq).session_id
        if session == name:
            return
        # (whole: Codex segments `stem#2`, `stem#3` must read apart)
        problem = (
            f"the row's stream {shown_id(name)} is not its event's session {shown_id(session)}"
        )
    raise undecodable(seq, problem)


def _whole(seq: int, schema: int, event: Event, bodies: Bodies) -> Event:
    """`event`, or, for a switch not stored as schema 1 stores one (its layout holds
    referenced contents, or is forged), the event read back from the log as every other
    read hands it out: re-inflated, or refused (see ``layout_problem``)."""
    if type(event) is SessionSwitched and (
        schema != SWITCH_INLINE_SCHEMA or layout_problem(event, schema) is not None
    ):
        return bodies.event_at(seq)
    return event


def _no_append(mid: str) -> None:
    raise AssertionError("a message folded outside a run")  # pragma: no cover


def _seq_of(row: ColumnRow) -> int:
    return row[0]


def _fold_payload(
    state: TranscriptState,
    api: dict[str, list[JSON]],
    seq: int,
    schema: int,
    payload: bytes,
    bodies: Bodies,
    other: Other,
) -> None:
    """Fold one row from its payload (as :func:`fold_rows` does, a message as its head),
    version 0: :func:`fold_column_rows` sets the versions at the end."""
    try:
        item: Event | MessageHead | None = HEAD_DECODER.decode(payload)
    except UNDECODED:
        item = None
    if type(item) is not MessageHead or schema != MESSAGE_SCHEMA:
        item = decode_head(seq, schema, payload)
        if not isinstance(item, MessageHead):
            other(seq, _whole(seq, schema, item, bodies), 0)
            return
    view = state.sessions.get(item.session_id)
    if view is None:
        return
    sid = view.session_id
    state.messages[item.message_id] = StoredMessage(
        tokens=item.tokens, session_id=sid, seq=seq, bodies=bodies
    )
    view.live.append(item.message_id)
    view.live_tokens += item.tokens
    if api:
        api.pop(sid, None)
