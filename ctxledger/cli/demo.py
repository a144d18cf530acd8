"""``ctxledger demo``: the main job (see :mod:`ctxledger.demo.run`)."""

from __future__ import annotations

import sys

import anyio
import click

from ctxledger.cli.app import cli, emit_json, handle_errors, state_of
from ctxledger.demo.run import run_demo
from ctxledger.terminal import PlainConsole


@cli.command()
@click.option(
    "--seed", type=int, default=7, show_default=True, help="Seed of the generated session."
)
@click.option("--turns", type=int, default=40, show_default=True, help="User turns to simulate.")
@click.option("--context-length", type=int, default=128_000, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print the final report as JSON.")
@click.pass_context
@handle_errors
def demo(ctx: click.Context, seed: int, turns: int, context_length: int, as_json: bool) -> None:
    """Drive a long generated coding-agent session through the service (offline summarizer)."""
    db = state_of(ctx).db

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
    ok = (
        getattr(report, "replay_equal", False)
        and not getattr(report, "replay_drift", 1)
        and getattr(report, "log_verified", False)
    )
    if not ok:
        sys.exit(1)
