"""``replay SESSION`` as a what-if (``--config``, ``--summarizer``, ``--out``, ``--loop``):
the chain's history re-run in a scratch ledger, beside the recorded chain."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click
from rich.table import Table

from ctxledger.cli.app import console, emit_json, state_of
from ctxledger.cli.progress import spinner
from ctxledger.ledger.facade import Ledger
from ctxledger.terminal import styled

if TYPE_CHECKING:
    from ctxledger.analysis.history import History
    from ctxledger.analysis.whatif import WhatIfReport


def run_whatif(
    ctx: click.Context,
    ledger: Ledger,
    session_id: str,
    config_path: Path | None,
    summarizer_kind: str | None,
    out_path: Path | None,
    as_json: bool,
    loop: str | None = None,
) -> None:
    """``replay SESSION --config OTHER.toml [--summarizer] [--out FILE] [--loop LOOP]``."""
    from ctxledger.analysis.whatif import history, whatif_reads

    with whatif_reads():  # a large content is read once for the history, replay and report
        hist = history(ledger, session_id)  # the recorded config and the replayed steps
        report = _replayed_report(
            ctx, ledger, session_id, hist, config_path, summarizer_kind, out_path, loop
        )
    if as_json:
        emit_json(report)
        return
    _print_whatif(report)


def _replayed_report(
    ctx: click.Context,
    ledger: Ledger,
    session_id: str,
    hist: History,
    config_path: Path | None,
    summarizer_kind: str | None,
    out_path: Path | None,
    loop: str | None,
) -> WhatIfReport:
    from ctxledger.analysis.whatif import replay_history, whatif_report
    from ctxledger.cli.compress import make_summarizer

    # the file overrides the recorded settings (keys it does not set keep their values)
    config = state_of(ctx).config(config_path, base=hist.config) if config_path else hist.config
    summarizer = make_summarizer(summarizer_kind, config) if summarizer_kind else None
    with (
        spinner(ctx, f"replaying the history of {session_id} (what-if)"),
        replay_history(hist, config=config, summarizer=summarizer, out=out_path, loop=loop) as (
            scratch,
            result,
        ),
    ):
        return whatif_report(
            ledger, hist, scratch, result, config=config, summarizer=summarizer, out=out_path
        )


def _print_whatif(report: WhatIfReport) -> None:
    """The what-if beside the recorded chain, then what it reproduced and what differs."""
    changes = ", ".join(
        f"{k}: {old!r} → {new!r}" for k, (old, new) in report.config_changes.items()
    )
    console.print(
        f"what-if of {report.root} ({report.summarizer} summarizer): {changes or 'recorded config'}",
        markup=False,
    )
    table = Table("", "recorded", "what-if")
    rec, alt = report.recorded, report.whatif
    rows = [
        ("compactions", len(rec.compactions), len(alt.compactions)),
        ("model calls", rec.model_calls, alt.model_calls),
        ("tokens sent", rec.tokens_sent, alt.tokens_sent),
        ("summarizer tokens", rec.summarizer_tokens, alt.summarizer_tokens),
        (
            "facts still known",
            f"{rec.facts_known_now}/{rec.facts}",
            f"{alt.facts_known_now}/{alt.facts}",
        ),
    ]
    for name, x, y in rows:
        table.add_row(
            name,
            f"{x:,}" if isinstance(x, int) else str(x),
            f"{y:,}" if isinstance(y, int) else str(y),
        )
    table.add_row("retention", f"{rec.retention:.0%}", f"{alt.retention:.0%}")
    console.print(table)
    repro = report.reproduction
    if report.reproduces_recorded:
        console.print(
            styled(
                (
                    "the what-if reproduces the recorded chain exactly: every compaction "
                    "(inputs, summary, layout, tokens) and every turn's prompt tokens match",
                    "green",
                )
            )
        )
    elif repro is not None:
        console.print(
            f"reproduced: {repro.matching_compactions} of {repro.compactions[0]} recorded "
            f"compactions; {repro.turns - repro.turns_differing} of {repro.turns} turns' prompt tokens"
        )
        for line in repro.differences:
            console.print(f"differs: {line}")
    for line in repro.warnings if repro is not None else ():
        console.print(styled(("warning:", "yellow"), f" {line}"))
    for note in report.notes:
        console.print(styled((f"note: {note}", "dim")))
    if report.out:
        console.print(f"what-if ledger kept in {report.out} (tip {alt.tip})", markup=False)
