"""``ctxledger migrate``: copy a ledger between stores (SQLite file <-> PostgreSQL URL)."""

from __future__ import annotations

import os

import click

from ctxledger.cli.app import cli, console, emit_json, handle_errors
from ctxledger.errors import InvalidInput
from ctxledger.eventstore import is_url, open_store
from ctxledger.eventstore.transfer import copy_ledger


@cli.command()
@click.option("--from", "source", required=True, metavar="PATH|URL", help="The ledger to copy.")
@click.option(
    "--to", "dest", required=True, metavar="PATH|URL", help="An empty (or new) ledger to fill."
)
@click.option(
    "--batch", "batch_events", type=int, default=1000, show_default=True,
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
    if not is_url(source) and not os.path.isfile(source):
        raise InvalidInput(f"--from {source}: no such ledger file")
    # a SQLite copy commits without fsync and is made durable when closed (the WAL is
    # checkpointed); over the network a durable commit costs little more
    with (
        open_store(source) as src,
        open_store(dest, durability="full" if is_url(dest) else "normal") as dst,
    ):
        report = copy_ledger(src, dst, batch_events=batch_events)
    if as_json:
        emit_json(report)
        return
    console.print(
        f"copied {report.events} events of {report.streams} sessions and {report.blobs} blobs "
        f"in {report.transactions} transactions; every hash matches the source and the copy "
        "verifies",
        markup=False,
    )
