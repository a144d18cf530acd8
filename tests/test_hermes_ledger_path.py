"""A Hermes ledger path whose folder cannot be made (session 36, a Hermes user's week).

``$CTXLEDGER_DB`` naming a folder that cannot be created (a parent that is a file, a
folder this user may not write) raised a bare ``OSError`` out of the engine's first
``compress``: Hermes's turn crashed with a traceback, where every other ledger error
(a read-only ledger, a directory, a file that is no ledger) is reported by Hermes as an
aborted compaction and the conversation goes on. Runs without hermes-agent: the path is
resolved by what every copy of the engine shares (``hermes_shared.Shared``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ctxledger.errors import CtxLedgerError, StoreError
from ctxledger.integrations.common import ledger_target
from ctxledger.integrations.hermes_shared import Shared


def _under_a_file(tmp_path: Path) -> Path:
    blocker = tmp_path / "notes.txt"
    blocker.write_text("a file where the ledger's folder should be\n")
    return blocker / "ledgers" / "ctxledger.ledger.db"


def test_a_folder_that_cannot_be_made_is_a_store_error_naming_it(tmp_path: Path) -> None:
    target = _under_a_file(tmp_path)
    with pytest.raises(StoreError) as caught:
        ledger_target(target)
    said = str(caught.value)
    assert said.startswith(f"cannot create the folder {target.parent} of the ledger {target}")
    assert "nothing was written" in said and "\n" not in said
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


def test_the_engine_s_shared_service_raises_what_its_hooks_catch(tmp_path: Path) -> None:
    """The plugin's ``compress`` and hooks catch :class:`CtxLedgerError` (Hermes then
    says the compaction was aborted and keeps its messages); an ``OSError`` escaped."""
    shared = Shared(None, _under_a_file(tmp_path))
    with pytest.raises(CtxLedgerError, match="cannot create the folder"):
        shared.run(lambda svc: svc.config)
