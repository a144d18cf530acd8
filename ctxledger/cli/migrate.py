"""``ctxledger migrate``: copy a ledger between stores (SQLite file <-> PostgreSQL URL);
``ctxledger upgrade``: finish an in-place upgrade (fill derived columns and values)."""

from __future__ import annotations

from typing import cast

import click

from ctxledger.cli.app import (
    LEDGER_TARGET,
    POSITIVE,
    cli,
    console,
    emit_json,
    handle_errors,
    json_option,
    reading_store,
    state_of,
)
from ctxledger.cli.progress import spinner
from ctxledger.errors import CtxLedgerError, InvalidInput, LedgerChanged
from ctxledger.eventstore import EventStore, SQLiteEventStore, is_url, open_store
from ctxledger.eventstore.opening import refuse_unfit_path, target_text
from ctxledger.eventstore.space import UNPERSISTED
from ctxledger.eventstore.transfer import copy_ledger
from ctxledger.ledger.derived import Backfill, backfill_derived


@cli.command()
@click.option("--from", "source", required=True, type=LEDGER_TARGET, help="The ledger to copy.")
@click.option(
    "--to", "dest", required=True, type=LEDGER_TARGET, help="An empty (or new) ledger to fill."
)
@click.option(
    "--batch", "batch_events", type=POSITIVE, default=1000, show_default=True,
    help="Events per transaction at most.",
)  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@handle_errors
def migrate(source: str, dest: str, batch_events: int, as_json: bool) -> None:
    """Copy every event of a ledger into an empty one, hashes re-verified.

    Either side may be a SQLite file or a postgresql://user@host/db URL. The source
    must verify; each copied event must land with the source's hash; the copy is
    verified at the end. The source is only read.
    """
    if source == dest:
        raise InvalidInput("--from and --to name the same ledger")
    if dest in UNPERSISTED:
        raise InvalidInput(f"--to {dest} keeps nothing once the command ends: give a file or URL")
    if not is_url(dest):  # (its refusals named "the ledger path"; its folders are made)
        refuse_unfit_path(target_text(dest), "--to")
    # a SQLite copy commits without fsync and is made durable when closed (the WAL is
    # checkpointed); over the network a durable commit costs little more. The source is
    # opened read-only where it cannot be written (an archive, another user's file)
    copied = 0
    try:
        with (
            reading_store(source, "--from") as src,
            open_store(dest, durability="full" if is_url(dest) else "normal") as dst,
        ):
            try:
                report = copy_ledger(src, dst, batch_events=batch_events)
            finally:
                copied = _events_in(dst)
    except LedgerChanged as exc:  # --to must be empty: once the copy began, say to empty it
        if not copied:
            raise
        raise LedgerChanged(f"{exc}, after emptying --to {dest} (it holds the copy)") from exc
    if as_json:
        emit_json(report)
        return
    console.print(
        f"copied {report.events} events of {report.streams} sessions and {report.blobs} blobs "
        f"in {report.transactions} transactions; every hash matches the source and the copy "
        "verifies",
        markup=False,
    )


def _events_in(store: EventStore) -> int:
    """The last seq of `store` (0: empty, or it cannot say)."""
    try:
        return store.last_seq()
    except CtxLedgerError:
        return 0


@cli.command()
@json_option
@click.pass_context
@handle_errors
def upgrade(ctx: click.Context, as_json: bool) -> None:
    """Fill what opening an older ledger left for later; safe to run again.

    A SQLite ledger written before message heads were columns (migration
    0002_message_heads) opens at once and folds those rows from their payloads;
    this writes their message id and token count beside them, a thousand rows per
    transaction (other writers go on between batches), so later rebuilds skip the
    payloads. Nothing hashed changes: verify gives the same head before and after.
    A PostgreSQL ledger keeps no such columns. Either one then gets the derived values
    of its long messages (their facts, normal forms and merged count, which a what-if
    and an audit read instead of computing them; an append stores them since session
    39): those missing are computed and stored, and those that differ from their
    recomputation (what `verify --derived` reports) are replaced, outside the log's
    hashes.
    """
    db = target_text(state_of(ctx).db)  # the file require_ledger_file checks
    if is_url(db):
        # (an unknown scheme or a server it cannot reach is an error)
        with open_store(db) as pg, spinner(ctx, "checking and storing derived values"):
            filled, derived = 0, backfill_derived(pg)
        text = "no message heads to fill: a PostgreSQL ledger keeps no head columns"
    else:
        # (a missing, empty or table-less file is refused: there is nothing to fill)
        store = cast(SQLiteEventStore, open_store(db, existing=True))
        with store, spinner(ctx, "filling message heads, checking and storing derived values"):
            filled, derived = store.backfill_heads(), backfill_derived(store)
        text = (
            f"filled the heads of {filled:,} message rows written before migration "
            "0002_message_heads; rebuilds now skip their payloads"
            if filled
            else "no message heads to fill"
        )
    lines = _derived_lines(derived)
    lines = [text, *lines] if filled or lines else ["nothing to fill"]
    if as_json:
        emit_json(
            {
                "message_heads_filled": filled,
                "derived_values_stored": derived.stored,
                "derived_values_replaced": derived.replaced,
                "unreadable_contents_skipped": derived.unreadable,
            }
        )
    else:
        for line in lines:  # (one print each: the console shows a newline in data escaped)
            console.print(line, markup=False)


def _derived_lines(derived: Backfill) -> list[str]:
    """What the upgrade did to the derived values, one line each (none when nothing)."""
    lines = []
    if derived.stored:
        lines.append(f"stored {derived.stored:,} derived values of long message contents")
    if derived.replaced:
        lines.append(
            f"replaced {derived.replaced:,} derived values that differed from their recomputation"
        )
    if derived.unreadable:
        lines.append(
            f"skipped {derived.unreadable:,} log rows whose content could not be read (see verify)"
        )
    return lines
