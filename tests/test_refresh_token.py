"""Ledger.refresh skips its catch-up query only when the store's change token says nothing moved.

The token (``PRAGMA data_version`` + this connection's own commits) must move for
every append, whoever makes it: another connection, another process, this store used
directly, or another Ledger over the same store; and a replaced projector is refolded.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from ctxledger import Ledger
from ctxledger.eventstore import SQLiteEventStore
from ctxledger.projections import Projector


def _open(path: Path) -> Ledger:
    return Ledger.open(path)


def test_the_token_moves_for_appends_from_another_connection_and_this_one(tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    with SQLiteEventStore(path) as store, SQLiteEventStore(path) as other:
        first = store.change_token()
        assert store.change_token() == first  # nothing happened
        Ledger(other).start_session(model="m", context_length=8192)
        second = store.change_token()
        assert second != first
        Ledger(store).start_session(model="m", context_length=8192)
        assert store.change_token() != second


def test_refresh_folds_what_every_kind_of_writer_appended(tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    with _open(path) as ledger, _open(path) as neighbour:
        sid = ledger.start_session(model="m", context_length=8192)
        assert ledger.refresh() == 0  # up to date: the query is skipped
        neighbour.refresh()
        neighbour.append_messages(sid, [{"role": "user", "content": "from another connection"}])
        assert ledger.refresh() == 1
        # another Ledger sharing this very store (and connection)
        twin = Ledger(ledger.store)
        twin.append_messages(sid, [{"role": "assistant", "content": "same connection"}])
        assert ledger.refresh() == 1
        # another process
        code = (
            "import sys; from ctxledger import Ledger\n"
            "with Ledger.open(sys.argv[1]) as l:\n"
            "    l.append_messages(sys.argv[2], [{'role': 'user', 'content': 'from a process'}])\n"
        )
        subprocess.run([sys.executable, "-c", code, str(path), sid], check=True)
        assert ledger.refresh() == 1
        contents = [m["content"] for m in ledger.api_messages(sid)]
        assert contents == ["from another connection", "same connection", "from a process"]
        # a projector swapped for an older one is folded up again
        ledger.projector = Projector()
        assert ledger.refresh() == ledger.store.last_seq()


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(1, 3)), min_size=1, max_size=8))
def test_after_any_interleaving_refresh_equals_a_rebuild(
    tmp_path_factory: object, steps: list[tuple[bool, int]]
) -> None:
    path = Path(tmp_path_factory.mktemp("tok")) / "l.db"  # type: ignore[attr-defined]
    with _open(path) as ledger, _open(path) as other:
        sid = ledger.start_session(model="m", context_length=8192)
        other.refresh()
        for mine, n in steps:
            writer = ledger if mine else other
            writer.refresh()
            writer.append_messages(sid, [{"role": "user", "content": f"m{i}"} for i in range(n)])
            if mine:
                ledger.api_messages(sid)
        ledger.refresh()
        fresh = Projector.rebuild(ledger.store, use_checkpoint=False)
        assert ledger.projector.last_seq == fresh.last_seq == ledger.store.last_seq()
        assert ledger.api_messages(sid) == fresh.transcript.api_messages(sid)
