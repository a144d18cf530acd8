"""``ctxledger demo``: the main job (see :mod:`ctxledger.demo.run`)."""

from __future__ import annotations

import os
import shlex
import sys

import anyio
import click

from ctxledger.cli.app import (
    ASCII_INT,
    CONTEXT_LENGTH,
    AsciiIntRange,
    cli,
    echo,
    emit_json,
    handle_errors,
    state_of,
)
from ctxledger.demo.run import DemoReport, run_demo
from ctxledger.limits import check_limit_variables
from ctxledger.terminal import PlainConsole


def next_steps(db: str, report: DemoReport, context_length: int) -> list[str]:
    """Commands to explore the ledger the demo wrote, as this program was invoked."""
    prog = sys.argv[0] if os.path.basename(sys.argv[0]) == "ctxledger" else "ctxledger"
    prog = shlex.quote(prog)
    base = prog if "://" in db else f"{prog} --db {shlex.quote(db)}"  # never echo a password
    tip, root = report.tip_session, report.root_session
    return [
        "explore it:",
        f"  {base} sessions",
        f"  {base} show {tip}            # the live view, with the indexes and ids pin takes",
        f"  {base} audit {tip}           # what each compaction kept and lost",
        f"  {base} replay {root} --verify",
        f"  {prog} config --context-length {context_length}   # the settings, the budgets they give",
    ]


#: the longest demo: ~10 minutes and ~1 GB of ledger
DEMO_MAX_TURNS = 10_000


@cli.command()
@click.option(
    "--seed", type=ASCII_INT, default=7, show_default=True, help="Seed of the generated session."
)
@click.option(
    "--turns",
    # at most DEMO_MAX_TURNS: 400 turns take ~25 s and 45 MB, so 10**30 ran until interrupted
    type=AsciiIntRange(min=1, max=DEMO_MAX_TURNS),
    default=40,
    show_default=True,
    help=f"User turns to simulate (at most {DEMO_MAX_TURNS:,}).",
)
@click.option("--context-length", type=CONTEXT_LENGTH, default=128_000, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print the final report as JSON.")
@click.pass_context
@handle_errors
def demo(ctx: click.Context, seed: int, turns: int, context_length: int, as_json: bool) -> None:
    """Drive a long generated coding-agent session through the service (offline summarizer)."""
    db = state_of(ctx).db
    check_limit_variables()  # (named before the demo creates the ledger)

    async def run() -> object:
        return await run_demo(
            db,
            seed=seed,
            turns=turns,
            context_length=context_length,
            # data (paths, ids, notes) printed as text; the demo styles only its own labels
            console=PlainConsole(quiet=True)
            if as_json
            else PlainConsole(highlight=False, soft_wrap=True),
        )

    report = anyio.run(run)
    if as_json:
        emit_json(report)
    elif isinstance(report, DemoReport):
        for line in next_steps(db, report, context_length):
            echo(line)
    ok = (
        getattr(report, "replay_equal", False)
        and not getattr(report, "replay_drift", 1)
        and getattr(report, "log_verified", False)
    )
    if not ok:
        sys.exit(1)
