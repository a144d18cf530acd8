"""A command or a library read that only reads leaves the ledger's folder as it was.

Session 35: recall's index kept its own connection to the ledger file open past
``Ledger.close`` (the ledger's ``-wal``/``-shm`` stayed beside it), and a read-only
(``mode=ro``) open made ``-wal``/``-shm`` it never removed. Now the index closes with
the store, a read-only open removes what it made (or reads the file ``immutable`` when
it may not write it: ``test_read_only_ledger``), and a writer open at the same time
keeps working (the reader takes its locks and sees what it appends).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import threading
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from helpers.ledger_helpers import compact_now, deterministic_ledger

from ctxledger import Ledger
from ctxledger.analysis.recall import SearchIndex, recall
from ctxledger.cli.main import cli
from ctxledger.errors import InvalidInput, StoreError
from ctxledger.eventstore import readonly

SID = "ses_folder"
_TEMPLATE: dict[str, bytes] = {}


def _ledger(folder: Path) -> tuple[Path, str]:
    """A ledger of one compacted session (made once, then copied), and its compaction id."""
    db = folder / "l.db"
    if not _TEMPLATE:
        with deterministic_ledger(db) as ledger:
            ledger.start_session(model="m", context_length=8192, session_id=SID)
            for turn in range(6):
                said = [{"role": "user", "content": f"step {turn} fact " * 300}]
                ledger.append_messages(SID, [*said, {"role": "assistant", "content": "ok"}])
            outcome = compact_now(ledger, SID)
            assert outcome.action == "compressed"
        _TEMPLATE.update({s: Path(f"{db}{s}").read_bytes() for s in ("", ".head", ".lock")})
        _TEMPLATE["cmp"] = str(outcome.compaction_id).encode()
    for side, data in _TEMPLATE.items():
        if side != "cmp":
            Path(f"{db}{side}").write_bytes(data)
    return db, _TEMPLATE["cmp"].decode()


def _snapshot(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.iterdir()}


def _reads(cmp: str) -> dict[str, list[str]]:
    return {
        "sessions": ["sessions"],
        "show": ["show", SID],
        "usage": ["usage", SID],
        "chain": ["chain", SID],
        "replay": ["replay", SID],
        "replay-verify": ["replay", SID, "--verify"],
        "audit": ["audit", SID],
        "diff": ["diff", SID, SID],
        "trace": ["trace", SID, "fact"],
        "recall": ["recall", SID, "fact"],
        "expand": ["expand", cmp],
        "export": ["export", SID],
        "verify": ["verify"],
    }


def test_every_reading_command_leaves_a_wal_ledgers_folder_byte_identical(
    tmp_path: Path,
) -> None:
    db, cmp = _ledger(tmp_path)
    run = CliRunner()
    # recall writes its index tables into the ledger once (by design): build them first
    first = run.invoke(cli, ["--db", str(db), "recall", SID, "fact"])
    assert first.exit_code == 0, first.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["l.db", "l.db.head", "l.db.lock"]
    for name, args in _reads(cmp).items():
        before = _snapshot(tmp_path)
        result = run.invoke(cli, ["--db", str(db), *args])
        assert result.exit_code == 0, (name, result.output[-1000:])
        assert _snapshot(tmp_path) == before, name


def test_recalls_index_connection_closes_with_the_ledger_on_every_path(tmp_path: Path) -> None:
    db, _ = _ledger(tmp_path)
    names = ["l.db", "l.db.head", "l.db.lock"]
    ledger = Ledger.open(db)
    assert recall(ledger, SID, "fact").hits
    index = SearchIndex.for_ledger(ledger)
    ledger.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == names
    assert SearchIndex._cache.get(ledger.store) is None  # (a closed store's index is gone)
    with pytest.raises(Exception, match="closed"):
        index.db.conn.execute("SELECT 1")
    # the context manager, and a with block that a failed recall leaves
    with pytest.raises(InvalidInput), Ledger.open(db) as ledger:
        assert recall(ledger, SID, "fact").hits
        recall(ledger, SID, "")
    assert sorted(p.name for p in tmp_path.iterdir()) == names
    # the store closed alone (a service, a worker) closes the index too
    ledger = Ledger.open(db)
    recall(ledger, SID, "fact")
    ledger.store.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == names


def test_a_read_only_open_leaves_no_side_file_and_a_writer_beside_it_keeps_working(
    tmp_path: Path,
) -> None:
    db, _ = _ledger(tmp_path)
    before = _snapshot(tmp_path)
    with Ledger.open(db, read_only=True) as reader:
        assert recall(reader, SID, "fact").hits
    assert _snapshot(tmp_path) == before
    # a writer already open: the reader joins its -wal/-shm (no immutable read) and
    # sees what the writer appends after it opened; the writer appends meanwhile
    with Ledger.open(db) as writer:
        sid = writer.start_session(model="m", context_length=8192)
        writer.append_messages(sid, [{"role": "user", "content": "before the reader"}])
        with Ledger.open(db, read_only=True) as reader:
            writer.append_messages(sid, [{"role": "user", "content": "after the reader"}])
            reader.refresh()
            said = [m["content"] for m in reader.api_messages(sid)]
            assert said[-2:] == ["before the reader", "after the reader"]
            reader.store.check_unchanged()
        assert (tmp_path / "l.db-wal").exists()  # (the writer's, still open: not removed)
        writer.append_messages(sid, [{"role": "user", "content": "after it closed"}])
    assert not [n for n in os.listdir(tmp_path) if n.endswith(("-wal", "-shm"))]


def recall_under_a_close(
    ledger: Ledger, session: str, monkeypatch: pytest.MonkeyPatch
) -> list[BaseException]:
    """Close `ledger` while a recall of `session` in another thread is inside the index
    (stopped in its fold until the close has begun: ordered by events); what it raised."""
    inside, closing = threading.Event(), threading.Event()
    fold, close = SearchIndex._fold, SearchIndex.close

    def held_fold(index: SearchIndex, last: int) -> Any:
        inside.set()
        assert closing.wait(60)
        return fold(index, last)

    def marked_close(index: SearchIndex) -> None:
        closing.set()
        close(index)

    monkeypatch.setattr(SearchIndex, "_fold", held_fold)
    monkeypatch.setattr(SearchIndex, "close", marked_close)
    raised: list[BaseException] = []

    def search() -> None:
        try:
            recall(ledger, session, "fact")
        except BaseException as exc:
            raised.append(exc)

    thread = threading.Thread(target=search)
    thread.start()
    assert inside.wait(60)
    ledger.close()
    thread.join()
    return raised


def test_closing_the_store_under_a_running_recall_gives_store_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A service closing the store while a request's recall is inside the index: the
    close waits for the index's lock (never closing its connection under a statement:
    that crashed the process) and the recall gets StoreError, not sqlite3's error."""
    db, _ = _ledger(tmp_path)
    ledger = Ledger.open(db)
    raised = recall_under_a_close(ledger, SID, monkeypatch)
    assert [type(e) for e in raised] == [StoreError], raised
    assert "closed" in str(raised[0])
    assert not (tmp_path / "l.db-wal").exists()
    with pytest.raises(StoreError, match="closed"):
        SearchIndex(ledger.store)  # (a closed store takes no new index connection)


def _own_0444(monkeypatch: pytest.MonkeyPatch, db: Path) -> dict[str, bool]:
    """This process may not write `db` but may write its folder (its own 0444 file; as
    root os.access says yes to everything); set ``["file"]`` to let a writer open it."""
    real, writable = os.path.realpath(db), {"file": False}
    monkeypatch.setattr(
        readonly, "_writable", lambda path, mode=os.W_OK: path != real or writable["file"]
    )
    return writable


def _append(db: Path, writable: dict[str, bool], text: str) -> Ledger:
    """A writer that appends `text` and stays open (its -wal and -shm beside the ledger)."""
    writable["file"] = True
    writer = Ledger.open(str(db))
    writable["file"] = False
    writer.append_messages(writer.tip(SID), [{"role": "user", "content": text}])
    return writer


def _texts(ledger: Ledger) -> list[str]:
    return [str(m["content"]) for m in ledger.api_messages(ledger.tip(SID))]


def test_own_0444_read_is_no_false_change_when_a_writer_opens_during_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The own-0444 file is read ``mode=ro`` (review 2: ``immutable`` there said "run the
    command again" whenever a writer that may write it opened it during a read): a
    writer that appends and closes after the open is followed, never a change."""
    db, _ = _ledger(tmp_path)
    writable = _own_0444(monkeypatch, db)
    with Ledger.open(str(db), read_only=True) as reader:
        assert reader.store._unchanged is None  # (mode=ro)
        _append(db, writable, "late").close()
        reader.store.check_unchanged()
        reader.refresh()
        assert _texts(reader)[-1] == "late"
        reader.store.check_unchanged()


def test_own_0444_read_follows_a_writer_that_came_while_it_chose(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A writer that commits between the look for side files and the connection: the
    open looks again and reads through its -shm (``mode=ro``), seeing what it wrote (the
    stamp was taken after the look and kept the writer's files as the baseline)."""
    db, _ = _ledger(tmp_path)
    writable = _own_0444(monkeypatch, db)
    choose, writers, coming = readonly.read_only_target, [], []

    def writer_comes(path: str) -> str | None:
        target = choose(path)
        if not writers and not coming:  # (the writer's own open peeks through it too)
            coming.append(True)
            writers.append(_append(db, writable, "late"))
        return target

    monkeypatch.setattr(readonly, "read_only_target", writer_comes)
    try:
        with Ledger.open(str(db), read_only=True) as reader:
            assert reader.store._unchanged is None  # (mode=ro, a writer's -shm there)
            assert _texts(reader)[-1] == "late"
            reader.store.check_unchanged()
    finally:
        writers[0].close()


def test_own_0444_with_a_live_writers_shm_reads_through_mode_ro(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A writer has the own-0444 file open (its -wal and -shm there): ``mode=ro`` reads its
    unmerged events and follows what it appends after the open."""
    db, _ = _ledger(tmp_path)
    writable = _own_0444(monkeypatch, db)
    writer = _append(db, writable, "unmerged")
    try:
        assert "mode=ro" in str(readonly.read_only_target(str(db)))
        with Ledger.open(str(db), read_only=True) as reader:
            assert reader.store._unchanged is None
            assert _texts(reader)[-1] == "unmerged"
            writer.append_messages(writer.tip(SID), [{"role": "user", "content": "after"}])
            reader.refresh()
            assert _texts(reader)[-1] == "after"
    finally:
        writer.close()


def test_a_close_racing_an_index_registration_still_closes_the_index(tmp_path: Path) -> None:
    """Another thread closes the store while the index registers its closer (between
    the look at the list of closers and the append): the close waits for it and runs it,
    so the index's connection does not outlive the store (its -wal/-shm stayed)."""
    db, _ = _ledger(tmp_path)
    store = Ledger.open(db).store
    closing = threading.Event()

    def close() -> None:
        closing.set()
        store.close()

    closer = threading.Thread(target=close)

    class Racing(list[object]):
        def append(self, item: object) -> None:
            closer.start()
            assert closing.wait(60)
            closer.join(0.3)  # (returns at once without the lock: the list was run)
            super().append(item)

    store.__dict__["_on_close"] = Racing()
    with contextlib.suppress(StoreError):  # (the index may find the store closed)
        SearchIndex(store)
    closer.join()
    assert not (tmp_path / "l.db-wal").exists()
    assert not (tmp_path / "l.db-shm").exists()


def test_a_second_close_waits_for_the_first(tmp_path: Path) -> None:
    """A close while another is still running its closers returns only once the first has
    closed everything (it returned at once, the ledger's connection still open)."""
    db, _ = _ledger(tmp_path)
    store = Ledger.open(db).store
    entered, release = threading.Event(), threading.Event()

    def slow_closer() -> None:
        entered.set()
        release.wait(60)

    store.on_close(slow_closer)
    first, second = threading.Thread(target=store.close), threading.Thread(target=store.close)
    first.start()
    assert entered.wait(60)
    second.start()
    second.join(0.3)
    waited = second.is_alive()
    release.set()
    first.join()
    second.join()
    assert waited
    assert not (tmp_path / "l.db-wal").exists()


def closed_inside_a_close(ledger: Ledger) -> bool:
    """Whether `ledger`'s close returns when a closer it runs closes the ledger again (as
    a shutdown signal handler landing in a close would); a hang is False after 60 s."""
    ledger.store.on_close(ledger.close)
    closing = threading.Thread(target=ledger.close, daemon=True)
    closing.start()
    closing.join(60)  # (a guard against a hang, not a time limit: it returns at once)
    return not closing.is_alive()


def test_a_close_inside_a_close_returns(tmp_path: Path) -> None:
    """A close made while this thread's own close runs returns; it blocked for good on a
    lock its own thread held."""
    db, _ = _ledger(tmp_path)
    assert closed_inside_a_close(Ledger.open(db))
    assert not (tmp_path / "l.db-wal").exists()


def test_an_index_for_a_closed_store_writes_no_table(tmp_path: Path) -> None:
    """Recall's index asked of a store that closed meanwhile says StoreError before it
    touches the ledger's file (its tables were written into the closed ledger first)."""
    db, _ = _ledger(tmp_path)
    ledger = Ledger.open(db)
    ledger.close()
    before = _snapshot(tmp_path)
    with pytest.raises(StoreError, match="closed"):
        SearchIndex(ledger.store)
    assert _snapshot(tmp_path) == before


def test_a_close_landing_inside_a_closer_registration_returns(tmp_path: Path) -> None:
    """A close made by a thread registering a closer (a signal handler landing inside
    ``on_close``) returns, and the registration says StoreError: it hung on the closers'
    lock its own thread held."""
    from ctxledger.eventstore import base

    db, _ = _ledger(tmp_path)
    ledger = Ledger.open(db)
    outcome: list[object] = []

    def registering_while_closed() -> None:
        with base._CLOSERS:  # (where a handler lands: inside on_close's lock)
            ledger.close()
        try:
            ledger.store.on_close(lambda: None)
        except StoreError as exc:
            outcome.append(exc)

    worker = threading.Thread(target=registering_while_closed, daemon=True)
    worker.start()
    worker.join(60)  # (a guard against a hang, not a time limit: it returns at once)
    assert not worker.is_alive()
    assert len(outcome) == 1 and isinstance(outcome[0], StoreError)
    assert not (tmp_path / "l.db-wal").exists()


def test_a_close_landing_between_a_closer_check_and_its_append_says_closed(
    tmp_path: Path,
) -> None:
    """A close landing after ``on_close`` found the store open but before its closer was
    in the list (a handler of the same thread) took the list without it: the
    registration says StoreError, so its caller closes what it opened."""
    db, _ = _ledger(tmp_path)
    ledger = Ledger.open(db)

    class ClosingOnAppend(list[object]):
        def append(self, item: object) -> None:
            ledger.close()  # (the handler, landing there)
            super().append(item)

    ledger.store.__dict__["_on_close"] = ClosingOnAppend()
    ran: list[bool] = []
    with pytest.raises(StoreError, match="closed"):
        ledger.store.on_close(lambda: ran.append(True))
    assert not ran  # (the close took the list before the closer was in it)
