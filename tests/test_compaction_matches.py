"""One rule names a compaction by its id or a prefix (ledger/refs.py), used by the
session resolver and by analysis/compactions (review of session 41: two copies)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ctxledger.ledger.refs import compaction_matches

ids = st.sets(st.text("abc_", min_size=1, max_size=5), max_size=6)


@given(ids, st.text("abc_", max_size=5))
def test_an_exact_id_wins_else_every_id_it_begins(compacted: set[str], ref: str) -> None:
    found = compaction_matches(compacted, ref)
    if ref in compacted:
        assert found == [ref]
    else:
        assert sorted(found) == sorted(c for c in compacted if c.startswith(ref))


def test_an_id_that_is_the_prefix_of_another_is_still_named() -> None:
    assert compaction_matches({"cmp_1": "s", "cmp_12": "s"}, "cmp_1") == ["cmp_1"]
