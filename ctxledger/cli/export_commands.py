"""Data in and out: ``export`` of a session view, ``trajectories compress`` for training data."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import click

from ctxledger.analysis.diff import transcript_at
from ctxledger.analysis.refs import ledger_ref
from ctxledger.cli.app import (
    NON_NEGATIVE,
    POSITIVE,
    REF,
    SECONDS,
    FilePath,
    cli,
    console,
    echo,
    emit_json,
    handle_errors,
    json_text,
    state_of,
    summarizer_option,
)
from ctxledger.cli.outpath import checked_out
from ctxledger.errors import CtxLedgerError, InvalidInput
from ctxledger.eventstore.opening import is_url
from ctxledger.importers.export import export_messages
from ctxledger.inputfile import shown_path
from ctxledger.ledger.facade import Ledger


@cli.command()
@click.argument("session", type=REF)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["openai", "anthropic", "sharegpt"]),
    default="openai",
    show_default=True,
)
@click.option(
    "--out",
    "out_path",
    type=FilePath(dir_okay=False, path_type=Path),
    default=None,
    help="Write to a file instead of stdout ('-': stdout).",
)
@click.pass_context
@handle_errors
def export(ctx: click.Context, session: str, fmt: str, out_path: Path | None) -> None:
    """Export the live view of SESSION (or SESSION@SEQ) as OpenAI, Anthropic or ShareGPT JSON.

    SESSION@SEQ reads as in `show --help` (an id holding @, an ambiguous one).
    """
    if out_path is not None and str(out_path) == "-":  # (it wrote a file named "-")
        out_path = None
    if out_path is not None:
        checked_out(out_path, "--out", ledger=state_of(ctx).db)
    ledger = state_of(ctx).ledger(reads=True)
    ref, seq = ledger_ref(ledger, session)
    sid = ledger.resolve(ref)
    transcript = transcript_at(ledger, sid, seq)
    view = transcript.session(sid)
    messages = transcript.live_messages(sid)
    text = export_messages(view.system_prompt, messages, fmt, view.system_role)
    if out_path is None:
        click.echo(json_text(text))
    else:
        try:
            out_path.write_text(text + "\n", encoding="utf-8")
        except OSError as exc:
            shown = shown_path(out_path)
            raise InvalidInput(f"cannot write {shown}: {exc.strerror or exc}") from None
        echo(f"wrote {out_path}", err=True)


@cli.group()
def trajectories() -> None:
    """Batch compression of finished ShareGPT trajectories (training data, HERMES_SPEC §8)."""


@trajectories.command("compress")
@click.argument("in_path", type=FilePath(exists=True, dir_okay=False, path_type=Path))
@click.argument("out_path", type=FilePath(dir_okay=False, path_type=Path))
@click.option(
    "--target",
    "target",
    type=POSITIVE,
    default=15_250,
    show_default=True,
    help="Target tokens per trajectory.",
)
@click.option(
    "--summary-target",
    type=POSITIVE,
    default=750,
    show_default=True,
    help="Tokens of the summary turn.",
)
@click.option(
    "--protect-last",
    type=NON_NEGATIVE,
    default=4,
    show_default=True,
    help="Last turns kept verbatim.",
)
@click.option(
    "--no-notice", is_flag=True, help="Do not add the compaction notice to the system turn."
)
@click.option("--concurrency", type=POSITIVE, default=16, show_default=True)
@click.option(
    "--max-requests",
    type=POSITIVE,
    default=8,
    show_default=True,
    help="Concurrent summarizer requests.",
)
@click.option(
    "--timeout",
    "timeout",
    type=SECONDS,
    default=300.0,
    show_default=True,
    help="Seconds per trajectory.",
)
@click.option("--retries", type=NON_NEGATIVE, default=3, show_default=True)
@summarizer_option()
@click.option("--no-progress", is_flag=True)
@click.option("--json", "as_json", is_flag=True, help="Print the aggregate report as JSON.")
@click.pass_context
@handle_errors
def trajectories_compress(
    ctx: click.Context,
    in_path: Path,
    out_path: Path,
    target: int,
    summary_target: int,
    protect_last: int,
    no_notice: bool,
    concurrency: int,
    max_requests: int,
    timeout: float,
    retries: int,
    summarizer_kind: str,
    no_progress: bool,
    as_json: bool,
) -> None:
    """Compress IN.jsonl into OUT.jsonl (resumable); with an explicit --db, record each as events."""
    from ctxledger.cli.compress import make_summarizer
    from ctxledger.trajectories import TrajectoryConfig, compress_file
    from ctxledger.trajectories.record import written_keys

    state = state_of(ctx)
    stream = _checked_out(in_path, out_path, ledger=state.db, recording=state.explicit)
    if state.explicit and (is_url(state.db) or os.path.lexists(state.db)):
        state.ledger()  # opened first: a file that is no ledger is refused before OUT is written
    config = TrajectoryConfig(
        target_max_tokens=target,
        summary_target_tokens=summary_target,
        protect_last_n_turns=protect_last,
        add_notice=not no_notice,
        concurrency=concurrency,
        max_concurrent_requests=max_requests,
        per_trajectory_timeout=timeout,
        retries=retries,
    )
    summarizer = make_summarizer(summarizer_kind, state.config())
    already = written_keys(out_path)

    async def run() -> object:
        return await compress_file(
            in_path,
            out_path,
            config,
            summarizer,
            progress=not (no_progress or as_json or state.quiet),
        )

    report = anyio.run(run)
    data = report.to_dict()  # type: ignore[attr-defined]
    if state.explicit:  # a new ledger only now: a compress that failed leaves no file
        data.update(_record(state.ledger, in_path, out_path, already))
    if as_json:
        emit_json(data)
    else:
        _print_trajectory_report(data, state.db)
    if stream and not state.quiet:
        echo(
            f"note: {out_path} is a FIFO or /dev/null: no metrics file or report was written beside it",
            err=True,
        )


def _record(
    ledger: Callable[[], Ledger], in_path: Path, out_path: Path, already: set[str]
) -> dict[str, list[str]]:
    """Record OUT's new records in the ledger (opened here: a new --db path can go bad
    while compress runs); on a failure, say that OUT holds them all and that the same
    command records the rest (the error's own line and code follow). Returns the report's
    ``recorded_sessions`` and ``not_recorded`` (the keys whose IN record changed)."""
    from ctxledger.trajectories.record import record_batch

    skipped: list[str] = []

    def warn(key: str, line: str) -> None:
        skipped.append(key)
        echo(f"warning: {line}", err=True)

    try:
        recorded = record_batch(ledger(), in_path, out_path, skip_keys=already, warn=warn)
    except CtxLedgerError:
        echo(
            f"note: {out_path} holds every record; the recording stopped: run the same "
            "command again to record those the ledger does not hold yet",
            err=True,
        )
        raise
    return {"recorded_sessions": recorded, "not_recorded": skipped}


def _checked_out(in_path: Path, out_path: Path, *, ledger: str, recording: bool) -> bool:
    """Whether OUT is a stream (a FIFO, /dev/null); InvalidInput when OUT cannot be
    written as asked (:func:`checked_out`: IN itself, a missing folder, the ledger or one
    of its files however it was named, and so for the metrics and report beside OUT;
    when `recording`, an explicit --db records the run: a stream)."""
    from ctxledger.trajectories import metrics_path_for, report_path_for

    beside = (metrics_path_for(out_path), report_path_for(out_path))
    stream = checked_out(out_path, "OUT", ledger=ledger, reads=(in_path,), beside=beside)
    if stream and recording:
        raise InvalidInput(
            f"{out_path} is a FIFO or /dev/null: it cannot be read back to record its "
            "compactions with --db; write OUT to a file"
        )
    return stream


def _print_trajectory_report(data: dict[str, Any], db: object) -> None:
    """The one-paragraph summary of a ``trajectories compress`` run."""
    console.print(
        f"{data['total_records']} trajectories: {data['compressed']} compressed, {data['skipped_under_target']} under target, "
        f"{data['still_over_limit']} still over the limit, {data['failed']} failed · tokens {data['tokens_before']:,} → "
        f"{data['tokens_after']:,} (ratio {data['ratio']:.3f}) in {data['seconds']:.1f}s"
    )
    if "recorded_sessions" in data:
        console.print(f"recorded {len(data['recorded_sessions'])} compactions in {db}")
    if data.get("not_recorded"):
        echo("not recorded (IN changed after OUT was written): " + ", ".join(data["not_recorded"]))
