"""What the PostgreSQL server cancels and rolls back while it still answers (a deadlock,
a role's ``statement_timeout`` or ``lock_timeout`` running out, a cancel) is reported
as such: a ``ServerCancelled`` saying the operation was rolled back and may be retried,
not a ``ConnectionLost`` ("the server could not be reached"), which every psycopg
``OperationalError`` read as before session 43. Nothing is appended; follow() retries
it as it retries a lost connection; the HTTP server answers it 503 ``store_busy``."""

from __future__ import annotations

import contextlib
import hashlib
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import psycopg
import psycopg.errors
import psycopg_pool
import pytest
from helpers.following import follow_beside
from helpers.pg_server import PgServer
from test_append_stream import _events

from ctxledger.errors import (
    ConnectionLost,
    DuplicateEventError,
    IntegrityError,
    ServerCancelled,
    StoreBusy,
)
from ctxledger.events import Event
from ctxledger.eventstore.base import AppendRequest, StreamedRequest
from ctxledger.eventstore.postgres import PostgresEventStore
from ctxledger.eventstore.postgres_errors import leaving, translated
from ctxledger.eventstore.preparing import prepare_append

#: (class, what its message says happened, what to raise), one hint per class
_CANCELS = [
    (psycopg.errors.DeadlockDetected, "a deadlock with another session's", "retry"),
    (psycopg.errors.SerializationFailure, "on a standby with the changes it replays", "retry"),
    (psycopg.errors.TransactionRollback, "the server rolled the transaction back", "retry"),
    (
        psycopg.errors.QueryCanceled,
        "a cancel request (pg_cancel_backend)",
        "; raise statement_timeout if it keeps happening",
    ),
    (
        psycopg.errors.LockNotAvailable,
        "ran past the role's lock_timeout",
        "; raise lock_timeout if it keeps happening",
    ),
    (
        psycopg.errors.IdleInTransactionSessionTimeout,
        "sat idle past the role's idle_in_transaction_session_timeout",
        "; raise idle_in_transaction_session_timeout if it keeps happening",
    ),
    (
        psycopg.errors.lookup("25P04"),  # TransactionTimeout, PostgreSQL 17
        "ran past the role's transaction_timeout",
        "; raise transaction_timeout if it keeps happening",
    ),
]


@pytest.mark.parametrize(
    ("cls", "why", "remedy"), _CANCELS, ids=[c.__name__ for c, _, _ in _CANCELS]
)
def test_a_cancelled_operation_is_a_rolled_back_server_cancelled(
    cls: type[psycopg.Error], why: str, remedy: str
) -> None:
    """(psycopg's DeadlockDetected is no TransactionRollback subclass: each is matched by
    its sqlstate.) Each class says what happened to it alone: a cancel is not called a
    deadlock, a deadlock not a timeout."""
    with pytest.raises(psycopg.Error) as cut, leaving("nothing"):  # (what a streamed one says)
        raise cls("cancelled by the server")
    error = translated(cut.value, "append", "ledger x")
    assert type(error) is ServerCancelled and isinstance(error, StoreBusy)
    said = str(error)
    assert said.startswith("could not append in ledger x: the server cancelled it")
    assert why in said and said.endswith(remedy)
    assert "rolled back, nothing of the append was written: retry" in said
    assert "could not be reached" not in said
    others = [w for c, w, _ in _CANCELS if c is not cls]
    assert not any(other in said for other in others)
    read = str(translated(cls("cancelled"), "read events", "ledger x"))
    assert "rolled back: retry" in read and "append" not in read
    # an append whose path said nothing may have committed its rows
    maybe = str(translated(cls("cancelled"), "append", "ledger x"))
    assert "nothing of the append" not in maybe
    assert maybe.endswith(remedy if remedy != "retry" else "(ids make it safe)")
    assert "so they may be stored: re-send the same events (ids make it safe)" in maybe
    # each path says what it left (an inner mark stays)
    for left, phrase in [
        ("nothing", "rolled back, nothing of the append was written: retry"),
        ("committed", "rolled back, but only its wait: its events were committed"),
        ("maybe", "so they may be stored: re-send"),
    ]:
        with pytest.raises(psycopg.Error) as met, leaving("nothing"), leaving(left):  # type: ignore[arg-type]
            raise cls("cancelled")
        assert phrase in str(translated(met.value, "append", "ledger x"))


@pytest.mark.parametrize(
    "exc",
    [
        psycopg.OperationalError("connection refused"),
        psycopg_pool.PoolTimeout("no connection"),
        psycopg.errors.AdminShutdown("terminating connection due to administrator command"),
        psycopg.errors.CrashShutdown("terminating connection because of crash of another"),
        psycopg.errors.CannotConnectNow("the database system is starting up"),
        psycopg.errors.IdleSessionTimeout("terminating connection due to idle-session timeout"),
    ],
    ids=["refused", "pool", "admin-shutdown", "crash", "starting-up", "idle-session"],
)
def test_an_unreachable_server_is_still_a_lost_connection(exc: psycopg.Error) -> None:
    """A server going down, restarting or ending an idle session (no transaction open):
    ConnectionLost, which follow() and the HTTP server's 503 ``store_unavailable`` retry."""
    error = translated(exc, "append", "ledger x")
    assert type(error) is ConnectionLost, error
    assert "could not be reached" in str(error) and "re-send the same events" in str(error)


def test_class_40s_other_two_are_no_cancel() -> None:
    """A transaction the server cannot say completed (40003) may be stored: re-send, as
    for a lost connection; an integrity violation (40002) is no cancel to retry."""
    unknown = translated(psycopg.errors.StatementCompletionUnknown("x"), "append", "ledger x")
    assert type(unknown) is ConnectionLost
    assert "could not say whether the transaction completed" in str(unknown)
    assert "re-send the same events" in str(unknown)
    broke = translated(
        psycopg.errors.TransactionIntegrityConstraintViolation("x"), "append", "ledger x"
    )
    assert type(broke) is IntegrityError


def _name(tmp_path: Path, tag: str) -> str:
    return f"{tag}_" + hashlib.sha256(str(tmp_path).encode()).hexdigest()[:20]


@contextlib.contextmanager
def role_url(pg_server: PgServer, tmp_path: Path, tag: str, **settings: int) -> Iterator[str]:
    """The URL of a ledger (its schema made by the admin role, so the role's own
    statements stay small) for a new superuser role whose sessions have `settings`
    (``statement_timeout=300`` …); the role and schema dropped after."""
    role = _name(tmp_path, tag)
    with psycopg.connect(pg_server.url, autocommit=True) as admin:
        admin.execute(f"CREATE ROLE {role} LOGIN SUPERUSER")
        for name, value in settings.items():
            admin.execute(f"ALTER ROLE {role} SET {name} = {int(value)}")
    try:
        PostgresEventStore(f"{pg_server.url}?schema={role}", index_dir=tmp_path).close()
        yield f"postgresql://{role}@127.0.0.1:{pg_server.port}/postgres?schema={role}"
    finally:
        with psycopg.connect(pg_server.url, autocommit=True) as admin:
            admin.execute(f"DROP SCHEMA IF EXISTS {role} CASCADE")
            admin.execute(f"DROP OWNED BY {role}")
            admin.execute(f"DROP ROLE {role}")


@contextlib.contextmanager
def append_lock_held(pg_server: PgServer, store: PostgresEventStore) -> Iterator[None]:
    """The store's append lock held by another session (the admin's) meanwhile."""
    with psycopg.connect(pg_server.url, autocommit=True) as admin:
        admin.execute("SELECT pg_advisory_lock(%s)", (store._appender.key,))
        yield


def paths_taken(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """How often each append path runs from now on: the client-side transaction
    (``Appender.transaction``), ``copy_append``, the small append's ``call`` (one
    ``call_one`` for a single event, else ``call_many``: insert, then wait) and the
    streamed writer, so a test knows which one it cut. (``call_one`` itself is not
    counted: on a connection without its prepared statement it runs twice.)"""
    from ctxledger.eventstore import postgres, postgres_stream
    from ctxledger.eventstore.postgres_append import Appender

    taken: Counter[str] = Counter()

    def counted(owner: Any, name: str) -> None:
        real = getattr(owner, name)

        def counting(*args: Any, **kwargs: Any) -> Any:
            taken[name] += 1
            return real(*args, **kwargs)

        monkeypatch.setattr(owner, name, counting)

    for name in ("transaction", "call", "call_many"):
        counted(Appender, name)
    counted(postgres, "copy_append")
    counted(postgres_stream.StreamWriter, "write")
    return taken


@pytest.mark.parametrize(
    ("path", "events"),
    [
        ("transaction", _events("ses_b", 3, "b", big=1)),  # a large content: a blob
        ("copy_append", _events("ses_b", 20, "b")),  # more than CALL_ROWS events
        ("write", _events("ses_b", 3, "b", big=1)),  # the streamed writer
    ],
    ids=["append_many_client_side", "append_many_copy", "append_stream"],
)
def test_a_lock_timeout_is_reported_as_cancelled_and_appends_nothing(
    pg_server: PgServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    path: str,
    events: list[Event],
) -> None:
    """A role whose lock waits end after 200 ms, the append lock held by another
    session: the append is cut while it waits (LockNotAvailable). Each of these paths
    is one transaction, so the message says nothing was written (session 44: the two
    append_many paths said "re-send the same events", as a small append's wait does).
    Each case checks that its path, and only it, ran."""
    with (
        role_url(pg_server, tmp_path, "lt", lock_timeout=200) as url,
        PostgresEventStore(url, index_dir=tmp_path, blob_threshold=256) as store,
    ):
        store.append_many([AppendRequest("ses_a", _events("ses_a", 2, "a"), 0)])
        taken = paths_taken(monkeypatch)
        with append_lock_held(pg_server, store), pytest.raises(ServerCancelled) as caught:
            if path == "write":
                store.append_stream([StreamedRequest("ses_b", iter(events), 0)])
            else:
                store.append_many([AppendRequest("ses_b", events, 0)])
        assert taken == {path: 1}
        said = str(caught.value)
        assert "lock timeout" in said and "nothing of the append was written: retry" in said
        assert "re-send" not in said
        store.settle()  # nothing was left unsealed either
        assert store.last_seq() == 3 and store.stream_version("ses_b") == 0
        assert store.verify().ok


def test_a_small_append_cut_while_it_waits_for_the_seal_says_its_events_are_stored(
    pg_server: PgServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A few events without blobs: ``ctxledger_insert`` commits them unsealed (the lock
    is taken), then ``ctxledger_await``'s wait is cut. The message says exactly that:
    the events are stored, not to retry them as new ones; the next seal shows them,
    and a re-send of the same events answers the stored version and adds nothing."""
    with (
        role_url(pg_server, tmp_path, "cw", lock_timeout=200) as url,
        PostgresEventStore(url, index_dir=tmp_path) as store,
    ):
        store.append_many([AppendRequest("ses_a", _events("ses_a", 2, "a"), 0)])
        events = _events("ses_b", 3, "b")
        taken = paths_taken(monkeypatch)
        with append_lock_held(pg_server, store), pytest.raises(ServerCancelled) as caught:
            store.append_many([AppendRequest("ses_b", events, 0)])
        assert taken == {"call": 1, "call_many": 1}
        said = str(caught.value)
        assert "lock timeout" in said and "nothing of the append" not in said
        assert "its events were committed before it waited for another writer's seal" in said
        assert "a server crash could still lose them" in said
        assert "re-send the same events (ids make it a no-op)" in said
        store.settle()
        assert store.stream_version("ses_b") == 4 and store.last_seq() == 7
        assert store.append_many([AppendRequest("ses_b", events, 0)]) == {"ses_b": 4}
        assert store.last_seq() == 7 and store.verify().ok


@contextlib.contextmanager
def _one_event_ledger(
    pg_server: PgServer, tmp_path: Path, tag: str, stream: str, **settings: int
) -> Iterator[tuple[PostgresEventStore, Event]]:
    """A store on a ledger for a role with `settings` (:func:`role_url`), three events of
    ses_a in it, and one new event for `stream`: what a test of a cut one-event
    ``CALL`` starts from."""
    with (
        role_url(pg_server, tmp_path, tag, **settings) as url,
        PostgresEventStore(url, index_dir=tmp_path) as store,
    ):
        store.append_many([AppendRequest("ses_a", _events("ses_a", 2, "a"), 0)])
        yield store, _events(stream, 1, stream[-1])[0]


def test_a_one_event_append_cut_while_it_waits_is_stored_and_a_resend_is_a_no_op(
    pg_server: PgServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A one-event ``CALL`` commits its row unsealed, then waits for the append lock; the
    role's lock_timeout cuts that wait, but the row is committed and the next writer's
    seal stores it. The store looks the id up after the cancel (session 45; before, it
    said "may be stored"), so the error says the events are stored, as a small
    append's cut wait does: the re-send (same ids) answers the stored version and adds
    nothing."""
    with _one_event_ledger(pg_server, tmp_path, "ow", "ses_b", lock_timeout=200) as (store, one):
        before = store.last_seq()
        taken = paths_taken(monkeypatch)
        with append_lock_held(pg_server, store), pytest.raises(ServerCancelled) as caught:
            store.append("ses_b", [one], 0)
        assert taken == {"call": 1}  # (call_one: no call_many)
        said = str(caught.value)
        assert "lock timeout" in said and "nothing of the append" not in said
        assert "its events were committed before it waited for another writer's seal" in said
        assert "may be stored" not in said
        assert store.append("ses_b", [one], 0) == 1  # the re-send: already stored
        assert store.last_seq() == before + 1 and store.stream_version("ses_b") == 1
        assert store.verify().ok


@contextlib.contextmanager
def _new_stream_held(pg_server: PgServer, store: PostgresEventStore, stream: str) -> Iterator[None]:
    """Another session has inserted `stream`'s row and not committed meanwhile, so an
    append's own insert of it waits on the unique index (until the role's lock_timeout);
    rolled back after."""
    with psycopg.connect(pg_server.url) as other:  # (a transaction left open)
        other.execute(
            f"INSERT INTO {store.schema}.streams (stream_id, stream)"
            f" VALUES (nextval('{store.schema}.streams_id_seq'), %s)",
            (stream,),
        )
        yield
        other.rollback()


def test_a_one_event_append_cut_before_its_row_committed_says_nothing_was_written(
    pg_server: PgServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same ``CALL`` cut before its commit: another session has inserted the new
    stream's row and not committed, so the procedure's own insert of it waits on the
    unique index until the role's lock_timeout cuts it. Nothing of the append was
    written, and the message says so (session 45: the look-up of its id finds none);
    once the other session rolls back, the retry appends it once."""
    with _one_event_ledger(pg_server, tmp_path, "ob", "ses_b", lock_timeout=200) as (store, one):
        before = store.last_seq()
        taken = paths_taken(monkeypatch)
        with _new_stream_held(pg_server, store, "ses_b"), pytest.raises(ServerCancelled) as caught:
            store.append("ses_b", [one], 0)
        assert taken == {"call": 1}
        said = str(caught.value)
        assert "lock timeout" in said and "nothing of the append was written: retry" in said
        assert "re-send" not in said and "committed" not in said
        store.settle()
        assert store.last_seq() == before and store.stream_version("ses_b") == 0
        assert store.append("ses_b", [one], 0) == 1
        assert store.last_seq() == before + 1 and store.verify().ok


def test_a_one_event_append_cut_before_its_insert_whose_id_is_stored_elsewhere(
    pg_server: PgServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The look-up judges the stored row as a re-send is judged, not by its id alone:
    the cut ``CALL`` carries an id already stored in another stream (ses_a), for an
    event of its own (ses_b), and is cut before its insert (the new stream's row held
    by another session). That row is no trace of this append (whose insert could not
    have committed beside it), so the message says nothing was written, not "committed
    … stored"; the retry is then refused as the duplicate it is, and nothing of ses_b
    is ever stored."""
    with (
        role_url(pg_server, tmp_path, "oc", lock_timeout=200) as url,
        PostgresEventStore(url, index_dir=tmp_path) as store,
    ):
        (first,) = _events("ses_a", 1, "a")[:1]
        store.append("ses_a", [first], 0)
        other_event = msgspec.structs.replace(_events("ses_b", 1, "b")[0], event_id=first.event_id)
        taken = paths_taken(monkeypatch)
        with _new_stream_held(pg_server, store, "ses_b"), pytest.raises(ServerCancelled) as cut:
            store.append("ses_b", [other_event], 0)
        assert taken == {"call": 1}
        said = str(cut.value)
        assert "nothing of the append was written: retry" in said
        assert "committed" not in said and "stored" not in said.split("rolled back")[1]
        with pytest.raises(DuplicateEventError, match="already stored in stream 'ses_a'"):
            store.append("ses_b", [other_event], 0)
        store.settle()
        assert store.last_seq() == 1 and store.stream_version("ses_b") == 0
        assert store.verify().ok


def test_a_one_event_append_cut_while_events_is_locked_may_be_stored_and_waits_no_longer(
    pg_server: PgServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another session holds ``LOCK TABLE events`` (a migration, a hand's maintenance):
    the ``CALL`` is cut by the role's statement_timeout, and the look-up after it would
    wait on the same lock. It runs in its own transaction under a lock_timeout of its
    own (100 ms), so it gives up on the lock (55P03, not the role's 57014 after
    another 300 ms; with neither timeout set it would wait for ever), the message says
    "may be stored" and the caller is answered."""
    from ctxledger.eventstore.postgres_append import Appender

    looked: list[str] = []
    real = Appender._already_stored

    def looking(self: Appender, conn: Any, *args: Any) -> bool:
        try:
            return real(self, conn, *args)
        except psycopg.Error as exc:
            looked.append(exc.sqlstate or "")
            raise

    with _one_event_ledger(pg_server, tmp_path, "ol", "ses_c", statement_timeout=300) as (
        store,
        one,
    ):
        before = store.last_seq()
        monkeypatch.setattr(Appender, "_already_stored", looking)
        with psycopg.connect(pg_server.url) as other:
            other.execute(f"LOCK TABLE {store.schema}.events IN ACCESS EXCLUSIVE MODE")
            with pytest.raises(ServerCancelled) as cut:
                store.append("ses_c", [one], 0)
            other.rollback()
        assert looked == ["55P03"]  # (lock_not_available: its own 100 ms ran out)
        said = str(cut.value)
        assert "statement timeout" in said and "so they may be stored: re-send" in said
        assert store.append("ses_c", [one], 0) == 1  # the lock gone: stored once
        assert store.last_seq() == before + 1 and store.verify().ok


def test_a_one_event_append_whose_session_ended_may_be_stored() -> None:
    """When the look-up cannot be made (the cancel ended the session: an idle or
    transaction timeout), or fails, a cut one-event append still says it may be
    stored; an error that is no cancel makes no look-up."""
    from ctxledger.eventstore.postgres_append import Appender

    appender = Appender(1, "channel")
    (batch,), _ = prepare_append([AppendRequest("ses_a", _events("ses_a", 1, "a"), 0)], None, 256)

    class Gone:
        broken = True

    cut = psycopg.errors.LockNotAvailable("lock timeout")
    assert appender.one_left(Gone(), cut, batch) == "maybe"  # type: ignore[arg-type]

    class Failing:
        broken = False
        transaction = contextlib.nullcontext

        def execute(self, *args: object) -> object:
            raise psycopg.OperationalError("the server closed the connection")

    assert appender.one_left(Failing(), cut, batch) == "maybe"  # type: ignore[arg-type]
    duplicate = psycopg.errors.UniqueViolation("dup")
    assert appender.one_left(Failing(), duplicate, batch) == "maybe"  # type: ignore[arg-type]


def waiting(pg_server: PgServer, event: str = "transactionid") -> bool:
    """Whether a backend waits for a lock: another transaction's end (`event`
    ``transactionid``: a row or key it holds) or an advisory lock (``advisory``)."""
    with psycopg.connect(pg_server.url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE wait_event_type = 'Lock' AND wait_event = %s",
            (event,),
        ).fetchone()
    return row is not None and row[0] > 0


def test_a_deadlock_with_a_writer_that_skips_the_blob_lock_is_reported_as_cancelled(
    pg_server: PgServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A writer that inserts a blob and then waits for the append lock without the blob
    lock first (an older ctxledger's append, here plain SQL) still deadlocks with an
    import that inserts the same blob: the import, waiting first, is the one the server
    aborts. It fails whole, as a rolled-back ServerCancelled naming the deadlock."""
    from test_postgres_sealing import wait_until

    from ctxledger.eventstore import streamed
    from ctxledger.eventstore.preparing import prepare_append

    monkeypatch.setattr(streamed, "CHUNK", 5)
    events = _events("ses_i", 12, "i", big=7)
    (ref, data), *_ = prepare_append([AppendRequest("ses_i", events, 0)], None, 256)[1].items()
    locked, go_on = threading.Event(), threading.Event()
    outcome: list[BaseException | dict[str, int]] = []

    def imported() -> Iterator[Event]:
        for i, event in enumerate(events):
            if i == 6:  # the first chunk is in, the locks held; the blob's chunk is next
                locked.set()
                go_on.wait(10)
            yield event

    url = f"{pg_server.url}?schema={_name(tmp_path, 'dd')}"
    with PostgresEventStore(url, index_dir=tmp_path, blob_threshold=256) as store:

        def run() -> None:
            try:
                outcome.append(store.append_stream([StreamedRequest("ses_i", imported(), 0)]))
            except BaseException as exc:
                outcome.append(exc)

        importer = threading.Thread(target=run)
        importer.start()
        assert locked.wait(10)
        with psycopg.connect(pg_server.url, autocommit=True) as old:
            old.execute(f"SET search_path = {store.schema}")
            old.execute("BEGIN")
            old.execute(
                "INSERT INTO blobs (ref, size, data) VALUES (%s, %s, %s)", (ref, len(data), data)
            )
            go_on.set()  # the import inserts the same blob: it waits for this transaction
            wait_until(lambda: waiting(pg_server) or not importer.is_alive())
            old.execute("SELECT pg_advisory_xact_lock(%s)", (store._appender.key,))  # a cycle
            old.execute("ROLLBACK")
        importer.join(30)
        (error,) = outcome
        assert isinstance(error, ServerCancelled), error
        assert "deadlock detected" in str(error) and "nothing of the append" in str(error)
        assert store.last_seq() == 0 and store.stream_version("ses_i") == 0


def test_a_statement_timeout_bounds_the_streamed_appends_wait_for_the_lock(
    pg_server: PgServer, tmp_path: Path
) -> None:
    """The streamed append turns the role's ``statement_timeout`` off for its own
    transaction (its ``COPY`` spans the import), but only once it holds the locks: its
    wait for them is still cut, reported as cancelled, nothing appended. Before, the
    ``SET LOCAL`` came first: the import waited until the lock was released (5 s on,
    here) and then succeeded."""
    with (
        role_url(pg_server, tmp_path, "st", statement_timeout=300) as url,
        PostgresEventStore(url, index_dir=tmp_path, blob_threshold=256) as store,
    ):
        store.append_many([AppendRequest("ses_a", _events("ses_a", 2, "a"), 0)])
        key = store._appender.key
        with psycopg.connect(pg_server.url, autocommit=True) as admin:
            admin.execute("SELECT pg_advisory_lock(%s)", (key,))
            timer = threading.Timer(5.0, lambda: admin.execute("SELECT pg_advisory_unlock_all()"))
            timer.start()
            try:
                with pytest.raises(ServerCancelled) as caught:
                    store.append_stream(
                        [StreamedRequest("ses_b", iter(_events("ses_b", 3, "b")), 0)]
                    )
            finally:
                timer.cancel()
                timer.join()
        assert "statement timeout" in str(caught.value)
        assert store.last_seq() == 3 and store.stream_version("ses_b") == 0


def test_follow_outlasts_a_read_the_server_cancels(
    pg_server: PgServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A role whose lock waits end after 200 ms; another session holds ``events`` in
    ACCESS EXCLUSIVE mode (a newer ctxledger's migration, a VACUUM FULL) until a read
    of the follower was cut (ServerCancelled): the follower backs off and goes on, as
    after a lost connection, and yields what is appended after. Before, the cut read
    ended follow() (and the server's event feed) with the error."""
    from test_postgres_sealing import wait_until

    with (
        role_url(pg_server, tmp_path, "fl", lock_timeout=200) as url,
        PostgresEventStore(url, index_dir=tmp_path) as store,
    ):
        store.append_many([AppendRequest("ses_a", _events("ses_a", 2, "a"), 0)])
        first, later = store.last_seq(), _events("ses_b", 1, "b")
        cut: list[ServerCancelled] = []
        read = store._read_batch

        def reading(*args: Any) -> Any:
            try:
                return read(*args)
            except ServerCancelled as exc:
                cut.append(exc)
                raise

        monkeypatch.setattr(store, "_read_batch", reading)
        seqs: list[int] = []

        def locker() -> None:
            wait_until(lambda: len(seqs) == first)
            with psycopg.connect(pg_server.url) as admin:  # the lock held to its commit
                admin.execute(f"LOCK TABLE {store.schema}.events IN ACCESS EXCLUSIVE MODE")
                wait_until(lambda: bool(cut))
            store.append_many([AppendRequest("ses_b", later, 0)])

        follow_beside(store, seqs, first + len(later), locker)
        assert (
            seqs == list(range(1, first + len(later) + 1)) == list(range(1, store.last_seq() + 1))
        )
        assert "lock timeout" in str(cut[0]) and "lock_timeout" in str(cut[0])
