"""Whether one stored row is still under its append's seal, checked without a full verify.

A what-if reuses the token count a ``MessageAppended`` row recorded for a long content
instead of tokenizing the content again (:func:`ctxledger.tokens.knowing_counts`). The
count is in the row's payload, beside the ref of the content's blob: the blob is
checked against its sha256 ref when read (:mod:`ctxledger.eventstore.contents`), the
payload here. :func:`append_sealed` re-checks the append holding the row exactly as
``verify`` does (:class:`~ctxledger.eventstore.verifier.ChainVerifier`): each row's digest,
and the append's sha256 link from the chain value before it over every row's id, kind,
position and payload. A row whose count or content ref was edited no longer matches it,
so its count is not reused (the content is counted). An edit that also rewrites this
link breaks the next append's link, and one that rewrites every link up to the head is
what ``verify --expect-head`` and the head anchor catch; a what-if reading such a log
replays forged messages anyway.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from ctxledger.errors import CtxLedgerError
from ctxledger.eventstore.rows import GENESIS_HASH, StoredRow, chain_tip, split_linked
from ctxledger.eventstore.verifier import ChainVerifier

__all__ = ["append_sealed"]

#: rows before the asked one read first when looking for where its append starts
_FIRST_SPAN = 64


class _BlobsCheckedElsewhere(dict[str, "str | None"]):
    """The verifier's blob verdicts: every ref present and fine (a content's blob is
    checked against its ref by whoever reads it; only the rows are checked here)."""

    def __contains__(self, key: object) -> bool:
        return True

    def __missing__(self, key: str) -> None:
        return None


def _ends_append(stored_hash: str) -> bool:
    """Whether a row with this hash column is the last of its append."""
    linked = split_linked(stored_hash)
    return linked is None or bool(linked[1])


def _append_rows(
    read_stored: Callable[[int, int], Iterator[StoredRow]], seq: int
) -> tuple[str, list[StoredRow]] | None:
    """(the chain value before it, the rows) of the append holding `seq`; None if cut short."""
    span = _FIRST_SPAN
    while True:
        first = max(1, seq - span)
        rows: list[StoredRow] = []
        for row in read_stored(first, seq - first + 16):
            rows.append(row)
            if row[0] >= seq and _ends_append(row[7]):
                break
        else:
            return None  # the log ends inside the append (or before seq)
        if rows[0][0] != first:
            return None
        ends = [i for i, row in enumerate(rows) if row[0] < seq and _ends_append(row[7])]
        if ends:
            return chain_tip(rows[ends[-1]][7]), rows[ends[-1] + 1 :]
        if first == 1:
            return GENESIS_HASH, rows
        span *= 4


def append_sealed(read_stored: Callable[[int, int], Iterator[StoredRow]], seq: int) -> bool:
    """Whether the append holding the row at `seq` matches its seal (see the module doc).

    `read_stored` is a store's ``read_stored(from_seq, batch_size)``. Reads the rows of
    that append and of up to a few dozen before it; False when any check fails or the
    rows cannot be read (the caller then does not trust the row's derived values).
    """
    try:
        found = _append_rows(read_stored, seq)
    except (CtxLedgerError, NotImplementedError):
        return False
    if found is None:
        return False
    prev, group = found
    verifier = ChainVerifier(_BlobsCheckedElsewhere())
    verifier.prev_hash, verifier.next_seq = prev, group[0][0]
    verifier.versions[group[0][1]] = group[0][2] - 1
    return verifier.feed(group) and verifier.report().ok
