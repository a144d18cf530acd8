"""A compaction's two shortcuts (issue 14, session 24): bodies read alone, own events
folded as written.

* ``SQLiteEventStore.read_bodies`` hands out exactly the messages ``read_at`` does
  (blob-held contents, rows written before the head columns, non-message and missing
  seqs included); ``Bodies`` uses it and leaves the garbage collector as it found it.
* Property: ``assemble.apply(copy_carried=False)`` (what ``record`` uses) builds the
  same continuation, sharing only messages carried unchanged with its input.
* Property: the events a compaction appends and folds in memory (``ledger.ownfold``)
  are, record for record, what reading them back gives, and the projections equal a
  fold of the whole log; when another writer's rows come first, or the store cannot say
  where rows landed, the ledger reads back as before.
"""

from __future__ import annotations

import gc
import shutil
from pathlib import Path

import msgspec
import pytest
from helpers.ledger_helpers import SMALL, compact_now, make_ledger, session_with_turns
from helpers.strategies import planner_configs, planner_sessions
from hypothesis import given, settings
from hypothesis import strategies as st

import ctxledger.ledger.facade as facade
from ctxledger import Ledger
from ctxledger.events import MessageAppended, Recorded
from ctxledger.eventstore import SQLiteEventStore
from ctxledger.eventstore.rows import decode_bodies
from ctxledger.ledger.ownfold import written_records
from ctxledger.projections import Projector
from ctxledger.projections.bodies import Bodies

GOLDEN_PRE_HEADS = Path(__file__).parent / "golden" / "ledger_pre_heads.db"


def _messages_by_read_at(store: SQLiteEventStore, seqs: list[int]) -> dict[int, object]:
    return {
        rec.seq: rec.event.message
        for rec in store.read_at(seqs)
        if isinstance(rec.event, MessageAppended)
    }


# --- bodies alone ----------------------------------------------------------------------


def test_read_bodies_hands_out_what_read_at_does(tmp_path: Path) -> None:
    ledger = make_ledger(tmp_path / "l.db")
    try:
        sid = session_with_turns(ledger, 6)
        big = "paste " + "z" * 70_000  # kept in the blob table, re-inflated on read
        ledger.append_messages(sid, [{"role": "user", "content": big}])
        ledger.report_usage(sid, {"prompt_tokens": 10, "completion_tokens": 1})
        store = ledger.store
        assert isinstance(store, SQLiteEventStore)
        top = ledger.projector.last_seq
        seqs = list(range(1, top + 5))  # every row, non-messages and missing seqs too
        found = store.read_bodies(seqs)
        assert found == _messages_by_read_at(store, seqs)
        assert list(found.values())[-1]["content"] == big
        assert store.read_bodies([]) == {}
    finally:
        ledger.close()


def test_read_bodies_of_a_ledger_written_before_the_head_columns(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    shutil.copyfile(GOLDEN_PRE_HEADS, path)
    store = SQLiteEventStore(str(path))
    try:
        seqs = [rec.seq for rec in store.read_all()]
        assert store.read_bodies(seqs) == _messages_by_read_at(store, seqs)
    finally:
        store.close()


def test_decode_bodies_leaves_what_it_cannot_take_to_a_whole_read() -> None:
    enc = msgspec.json.encode
    message = {"role": "user", "content": "hi"}
    base = {"kind": "MessageAppended", "message_id": "m", "tokens": 3, "encoding": "e"}
    rows = [
        (1, MessageAppended.SCHEMA, enc({**base, "message": message})),
        (2, MessageAppended.SCHEMA, enc({**base, "message": message, "content_ref": "ab"})),
        (3, MessageAppended.SCHEMA + 1, enc({**base, "message": message})),  # another schema
        (4, MessageAppended.SCHEMA, enc({"kind": "SessionEnded", "reason": "x"})),
        (5, MessageAppended.SCHEMA, b"not json"),
    ]
    found, rest = decode_bodies(rows)
    assert found == {1: message}
    assert rest == [2, 3, 4, 5]


class _Failing:
    def read_at(self, seqs: object) -> list[Recorded]:
        raise RuntimeError("boom")


@pytest.mark.parametrize("enabled", [True, False])
def test_a_body_read_leaves_the_collector_as_it_found_it(tmp_path: Path, enabled: bool) -> None:
    ledger = make_ledger(tmp_path / "l.db")
    try:
        sid = session_with_turns(ledger, 3)
        expected = ledger.api_messages(sid)
    finally:
        ledger.close()
    store = SQLiteEventStore(str(tmp_path / "l.db"))
    was = gc.isenabled()
    try:
        if not enabled:
            gc.disable()
        transcript = Projector.rebuild(store, use_checkpoint=False).transcript
        assert transcript.api_messages(sid) == expected
        assert gc.isenabled() is enabled
        with pytest.raises(RuntimeError, match="boom"):
            Bodies(_Failing()).load_many([1])  # a store without read_bodies: read_at
        assert gc.isenabled() is enabled
    finally:
        if was:
            gc.enable()
        store.close()


# --- own events folded as written ---------------------------------------------------------


class _Spy:
    """Wraps ``facade.fold_written``: what it folded (None when it read back instead)."""

    def __init__(self) -> None:
        self.folded: list[bool] = []
        self.real = facade.fold_written

    def __call__(self, projector: Projector, *args: object) -> bool:
        done = self.real(projector, *args)  # type: ignore[arg-type]
        self.folded.append(done)
        return done

    def __enter__(self) -> _Spy:
        facade.fold_written = self  # type: ignore[assignment]
        return self

    def __exit__(self, *exc: object) -> None:
        facade.fold_written = self.real


def _fold_of_the_log(ledger: Ledger) -> Projector:
    projector = Projector()
    projector.apply_all(ledger.store.read_all())
    return projector


@settings(max_examples=12, deadline=None)
@given(
    seed=st.integers(0, 50),
    turns=st.integers(4, 14),
    big=st.booleans(),
    pins=st.lists(st.integers(0, 40), max_size=3),
    rounds=st.integers(1, 3),
    reopen=st.booleans(),
)
def test_a_compaction_folded_as_written_equals_its_events_read_back(
    tmp_path_factory: pytest.TempPathFactory,
    seed: int,
    turns: int,
    big: bool,
    pins: list[int],
    rounds: int,
    reopen: bool,
) -> None:
    path = tmp_path_factory.mktemp("own") / "l.db"
    ledger = make_ledger(path)
    try:
        sid = session_with_turns(ledger, turns, seed=seed, big=big)
        for n in range(rounds):
            ids = ledger.transcript.live_ids(sid)
            for pick in pins:
                if ids[pick % len(ids)] not in ledger.transcript.session(sid).pinned:
                    ledger.pin(sid, ids[pick % len(ids)])
            if reopen:  # bodies folded from heads, read from the log by the compaction
                ledger.close()
                ledger = make_ledger(path, namespace=f"r{n}")  # fresh ids
            seen: list[Recorded] = []
            ledger.projector.listeners.append(seen.append)
            with _Spy() as spy:
                outcome = compact_now(ledger, sid, trigger="manual")
            ledger.projector.listeners.clear()
            if outcome.action != "compressed":
                assert n > 0  # a first manual compaction of 4+ turns always compresses
                break
            assert spy.folded == [True]
            # record for record (event, seq, version, hash): what the log gives back
            assert seen and seen == ledger.store.read_at([rec.seq for rec in seen])
            whole = _fold_of_the_log(ledger)
            assert ledger.projector.fingerprint() == whole.fingerprint()
            new = outcome.new_session_id
            assert new is not None
            assert ledger.api_messages(new) == whole.transcript.api_messages(new)
            assert ledger.transcript.api_tokens(new) == whole.transcript.api_tokens(new)
            sid = new
            ledger.append_messages(sid, [{"role": "user", "content": "next"}])
    finally:
        ledger.close()


def test_another_writer_first_means_a_read_back(tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    ledger = make_ledger(path)
    other = Ledger.open(path, config=SMALL)
    try:
        sid = session_with_turns(ledger, 8)
        side = other.start_session(model="m")  # rows our projections have not folded
        other.append_messages(side, [{"role": "user", "content": "meanwhile"}])
        with _Spy() as spy:
            outcome = compact_now(ledger, sid, trigger="manual")
        assert outcome.action == "compressed"
        assert spy.folded == [False]  # read back: the other writer's rows come first
        whole = _fold_of_the_log(ledger)
        assert ledger.projector.fingerprint() == whole.fingerprint()
        assert ledger.transcript.api_messages(side) == whole.transcript.api_messages(side)
    finally:
        other.close()
        ledger.close()


def test_written_records_refuses_what_it_cannot_fold_as_is(tmp_path: Path) -> None:
    from ctxledger.eventstore.base import AppendRequest

    ledger = make_ledger(tmp_path / "l.db")
    try:
        sid = ledger.start_session(model="m")
        event = MessageAppended(
            **ledger.event_fields(sid),
            message_id="m1",
            message={"role": "user", "content": "hi"},
            tokens=5,
            encoding="o200k_base",
        )
        request = AppendRequest(sid, [event], ledger.version(sid))
        last = ledger.projector.last_seq
        versions = ledger.store.append_many([request])
        # a message may be stored as a blob and re-inflated: always read back
        assert written_records(ledger.store, [request], versions, last) is None
        # a store that cannot say where rows landed: read back
        assert written_records(object(), [request], versions, last) is None
    finally:
        ledger.close()


# --- the collector during a compaction ---------------------------------------------------


class _Watching:
    """A summarizer that notes whether the collector runs while it is awaited."""

    kind = "watching"

    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.enabled: list[bool] = []

    async def summarize(self, request: object) -> object:
        from ctxledger.compressor.summarizers.base import SummaryResult
        from ctxledger.errors import SummarizerError

        self.enabled.append(gc.isenabled())
        if self.fail:
            raise SummarizerError("no route", failure_class="network")
        return SummaryResult(text="## Goal\nwatch", summarizer=self.kind)


@pytest.mark.parametrize("fail", [False, True])
def test_the_collector_runs_while_the_summarizer_is_awaited(tmp_path: Path, fail: bool) -> None:
    import anyio

    from ctxledger.errors import SummarizerError
    from ctxledger.ledger.compaction import compact

    ledger = make_ledger(tmp_path / "l.db")
    try:
        sid = session_with_turns(ledger, 8)
        watching = _Watching(fail)
        assert gc.isenabled()
        if fail:
            with pytest.raises(SummarizerError):
                anyio.run(compact, ledger, sid, watching)  # type: ignore[arg-type]
        else:
            outcome = anyio.run(compact, ledger, sid, watching)  # type: ignore[arg-type]
            assert outcome.action == "compressed"
        assert watching.enabled == [True]  # paused only around the synchronous stretches
        assert gc.isenabled()
    finally:
        ledger.close()


# --- the continuation without copies of what is carried unchanged ---------------------------


@settings(max_examples=60, deadline=None)
@given(
    messages=planner_sessions(),
    config=planner_configs(),
    window=st.integers(2_000, 20_000),
    pins=st.lists(st.integers(0, 60), max_size=2),
)
def test_apply_without_carried_copies_builds_the_same_continuation(
    messages: list[dict[str, object]], config: object, window: int, pins: list[int]
) -> None:
    from ctxledger.compressor.assemble import apply
    from ctxledger.compressor.planner import plan, rough_counts

    pinned = sorted({p % len(messages) for p in pins})
    the_plan = plan(
        messages,
        config,  # type: ignore[arg-type]
        rough_counts(messages),
        context_length=window,
        pinned=pinned,
        force=True,
    )
    if the_plan.action != "compress":
        return
    before = msgspec.json.encode(messages)
    copied = apply(the_plan, messages, "the summary")
    shared = apply(the_plan, messages, "the summary", copy_carried=False)
    assert shared == copied
    assert msgspec.json.encode(messages) == before  # the source is never changed
    sources = {id(m) for m in messages}
    assert not any(id(m) in sources for m in copied.messages)
    for message, entry in zip(shared.messages, shared.entries, strict=True):
        if id(message) in sources:  # only a message carried as it was
            assert entry.origin == "carried" and message is messages[entry.source_index or 0]


def test_a_failed_look_at_the_written_rows_falls_back_to_a_read_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ctxledger.errors import StoreError

    def broken(self: SQLiteEventStore, *args: object) -> object:
        raise StoreError("the written rows could not be read")

    ledger = make_ledger(tmp_path / "l.db")
    try:
        sid = session_with_turns(ledger, 8)
        monkeypatch.setattr(SQLiteEventStore, "written_rows", broken)
        with _Spy() as spy:
            outcome = compact_now(ledger, sid, trigger="manual")
        assert outcome.action == "compressed"  # the append committed: not a failure
        assert spy.folded == [False]
        assert ledger.projector.fingerprint() == _fold_of_the_log(ledger).fingerprint()
    finally:
        ledger.close()


def test_rows_the_projections_have_not_seen_mean_no_own_fold(tmp_path: Path) -> None:
    # the store's last seq before the append is past the projections (another writer's
    # rows): an append could then be a re-send of ids that writer already stored
    from ctxledger.ledger.ownfold import fold_written

    ledger = make_ledger(tmp_path / "l.db")
    try:
        session_with_turns(ledger, 2)
        projector = ledger.projector
        assert not fold_written(projector, ledger.store, [], {}, projector.last_seq + 1)
    finally:
        ledger.close()


@pytest.mark.parametrize("theirs", ["ours", "theirs"])
def test_an_append_that_wrote_nothing_is_read_back_not_folded(tmp_path: Path, theirs: str) -> None:
    # review (session 26): another writer stores events with the same (deterministic) ids
    # between the ledger's look at the log's end and its append; the append then writes
    # nothing, and the rows at the seqs after the look are the other writer's: the ledger
    # must fold those (read back), never its own events at their seqs. Session 38: only
    # the same events are a re-send (written nothing, answered as written); the same id
    # holding another event is refused (before, it too was taken as a re-send)
    from ctxledger.errors import DuplicateEventError
    from ctxledger.events import ModelSwitched
    from ctxledger.eventstore.base import AppendRequest

    path = tmp_path / "l.db"
    ledger = make_ledger(path)
    sid = ledger.start_session(model="m0", context_length=100_000)
    version = ledger.version(sid)
    other = Ledger.open(path, config=SMALL)
    try:

        def switch(model: str) -> ModelSwitched:
            return ModelSwitched(
                event_id="evt_same", session_id=sid, at=1.0, model=model,
                context_length=100_000, previous_model="m0", previous_context_length=100_000,
            )  # fmt: skip

        real = ledger.store.last_seq

        def racing_last_seq() -> int:
            seq = real()
            other.append([AppendRequest(sid, [switch(theirs)], version)])
            return seq

        ledger.store.last_seq = racing_last_seq  # type: ignore[method-assign]
        with _Spy() as spy:
            if theirs == "ours":
                ledger.append([AppendRequest(sid, [switch("ours")], version)], own=True)
            else:
                with pytest.raises(DuplicateEventError, match="holding another event"):
                    ledger.append([AppendRequest(sid, [switch("ours")], version)], own=True)
        ledger.store.last_seq = real  # type: ignore[method-assign]
        assert spy.folded == ([False] if theirs == "ours" else [])
        assert ledger.transcript.state.sessions[sid].model == theirs
        assert ledger.projector.fingerprint() == _fold_of_the_log(ledger).fingerprint()
        assert ledger.store.last_seq() == version + 1
    finally:
        other.close()
        ledger.close()


def test_last_written_is_the_calling_threads_own_append(tmp_path: Path) -> None:
    import threading

    store = SQLiteEventStore(tmp_path / "l.db")
    ledger = make_ledger(tmp_path / "m.db")
    try:
        sid = ledger.start_session(model="m")
        events = [r.event for r in ledger.store.read_all()]
        assert store.last_written() is None
        store.append(sid, events, 0)
        assert store.last_written() == (1, len(events))
        seen: list[object] = []
        thread = threading.Thread(target=lambda: seen.append(store.last_written()))
        thread.start()
        thread.join()
        assert seen == [None]  # this thread's append is not another thread's
        assert store.last_written() == (1, len(events))
        store.append(sid, events, None)  # a re-send: nothing inserted
        assert store.last_written() is None
    finally:
        ledger.close()
        store.close()
