"""A Hermes ledger path whose folder cannot be made (session 36, a Hermes user's week).

``$CTXLEDGER_DB`` naming a folder that cannot be created (a parent that is a file, a
folder this user may not write) raised a bare ``OSError`` out of the engine's first
``compress``: Hermes's turn crashed with a traceback, where every other ledger error
(a read-only ledger, a directory, a file that is no ledger) is reported by Hermes as an
aborted compaction and the conversation goes on. Runs without hermes-agent: the path is
resolved by what every copy of the engine shares (``hermes_shared.Shared``).
"""

from __future__ import annotations

import stat
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
    """The plugin's ``compress`` and hooks catch :class:`CtxLedgerError` (Hermes then
    says the compaction was aborted and keeps its messages); an ``OSError`` escaped."""
    target = _under_a_file(tmp_path)
    with pytest.raises(StoreError) as caught:
        Shared(None, target).run(lambda svc: svc.config)
    said = str(caught.value)
    assert said.startswith(f"cannot create the ledger {target}") and "\n" not in said
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


def test_a_path_too_deep_is_a_store_error_too(tmp_path: Path) -> None:
    """Review of session 36: ``Path.mkdir(parents=True)`` raised ``RecursionError`` (no
    ledger error) on a path 1,500 folders deep; the store's own folder making does not."""
    deep = tmp_path.joinpath(*["a"] * 1500, "ledger.db")
    with pytest.raises(CtxLedgerError, match="cannot create the ledger"):
        Shared(None, deep).run(lambda svc: svc.config)


def test_the_ledger_folder_the_plugin_makes_is_its_owner_s_only(tmp_path: Path) -> None:
    """Review of session 36: the folder was made here with the default mode (0755: others
    could list it); the store makes it owner-only, as for every other ledger."""
    target = tmp_path / "hermes" / "ledgers" / "ctxledger.ledger.db"
    shared = Shared(None, ledger_target(target))
    shared.run(lambda svc: svc.config)
    shared.service().ledger.close()
    assert stat.S_IMODE(target.parent.stat().st_mode) == 0o700
