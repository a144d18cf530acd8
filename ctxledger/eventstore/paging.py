"""Reading the log in pieces: the seq runs :meth:`EventStore.read_at` reads with one
range query each, and the paging every backend reads the log in seq order with (moved
out of ``base.py`` in session 40)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import TypeVar

from ctxledger.errors import InvalidInput

#: :meth:`EventStore.read_at` reads seqs at most this far apart in one range query
_RUN_GAP = 64

Row = TypeVar("Row")


def seq_runs(seqs: Sequence[int]) -> Iterator[list[int]]:
    """`seqs` sorted and deduplicated, in runs of seqs at most ``_RUN_GAP`` apart: each run
    is read with one range query by :meth:`EventStore.read_at` (read-only)."""
    wanted = sorted(set(seqs))
    start = 0
    while start < len(wanted):
        end = start
        while end + 1 < len(wanted) and wanted[end + 1] - wanted[end] <= _RUN_GAP:
            end += 1
        yield wanted[start : end + 1]
        start = end + 1


def paged(
    fetch: Callable[[int, int], Sequence[Row]],
    from_seq: int,
    batch_size: int,
    seq_of: Callable[[Row], int],
) -> Iterator[Row]:
    """Rows of ``fetch(next_seq, limit)``, one page after another until a short page: how
    every backend reads the log in seq order without holding it all (read-only)."""
    if batch_size < 1:
        raise InvalidInput(f"batch_size must be >= 1, got {batch_size}")
    next_seq = from_seq
    while True:
        rows = fetch(next_seq, batch_size)
        yield from rows
        if len(rows) < batch_size:
            return
        next_seq = seq_of(rows[-1]) + 1


__all__ = ["paged", "seq_runs"]
