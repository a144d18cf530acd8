"""Every file a SQLite ledger keeps beside itself has its words in ``_SIDE_ROLES``.

Review of session 41: the table was keyed by literals ("-wal" …) beside the constants;
a suffix added to one and not the other would go unnamed (and unrefused)."""

from __future__ import annotations

from ctxledger.eventstore import files


def test_every_side_suffix_has_a_role() -> None:
    assert set(files._SIDE_ROLES) == {*files.SIDE_SUFFIXES, files.LEASES_SUFFIX}
