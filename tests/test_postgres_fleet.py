"""A PostgreSQL ledger shared by a fleet (session 37): appends that do not depend on the
statements a pool connection prepared (a ``DISCARD ALL``, a pooler in transaction mode
handing out another server session)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import test_eventstore_postgres

from ctxledger.eventstore import postgres_append
from ctxledger.eventstore.postgres import PostgresEventStore
from ctxledger.testing.eventstore import message

# the store and its URL as the store's own tests make them (one schema per test)
url, store = test_eventstore_postgres.url, test_eventstore_postgres.store

_HELD = "SELECT count(*) FROM pg_prepared_statements WHERE name LIKE 'ctxledger_%'"


def _each_path(store: PostgresEventStore, before: Any) -> list[int]:
    """One append down each path (one event, a few, one with a blob, a COPY batch, a
    stale version told by the client-side check), `before()` ahead of each."""
    versions: list[int] = []
    for events in (1, 3, 1, 20):
        before()
        text = "z" * 100_000 if len(versions) == 2 else "m"  # the third stores a blob
        batch = [message("ses_a", f"{text} {i}") for i in range(events)]
        versions.append(store.append("ses_a", batch, expected_version=None))
    before()
    with pytest.raises(Exception, match="not the expected 1"):
        store.append("ses_a", [message("ses_a", "late")], expected_version=1)
    return versions


@pytest.mark.parametrize("prepares", [True, False])
def test_appends_need_no_statement_prepared_on_their_session(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, prepares: bool
) -> None:
    """(Session 36 left it: after a ``DISCARD ALL`` every append but a 2-16 event one
    failed, ``prepared statement "ctxledger_one" does not exist``.) The statements are
    prepared again; where that does not hold (`prepares` False: as if the prepare went to
    another server session, a pooler in transaction mode) the appends run on plain
    statements, with the same rows and hashes."""
    with PostgresEventStore(url, index_dir=tmp_path, pool_size=1) as store:
        store.append("ses_a", [message("ses_a", "first")], expected_version=None)
        if not prepares:
            monkeypatch.setattr(postgres_append, "prepare", lambda conn, again=False: None)

        def discard() -> None:
            store._run("discard", lambda conn: conn.execute("DISCARD ALL"))

        assert _each_path(store, discard) == [2, 5, 6, 26]
        held = store._run("look", lambda c: c.execute(_HELD).fetchone())
        assert held == ((6,) if prepares else (0,))
        assert store.verify().ok and store.verify().events_checked == 26
    with PostgresEventStore(url, index_dir=tmp_path, pool_size=1) as fresh:
        versions = [r.version for r in fresh.read_stream("ses_a")]
        assert versions == list(range(1, 27))  # nothing lost, nothing twice
