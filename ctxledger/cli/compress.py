"""``ctxledger compress``: a manual compaction (or its plan, with --dry-run)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import click
import msgspec

from ctxledger.cli.app import (
    cli,
    config_file_option,
    console,
    echo,
    emit_json,
    handle_errors,
    quiet_option,
    state_of,
    summarizer_option,
)
from ctxledger.cli.progress import spinner
from ctxledger.compressor.config import CompressionConfig
from ctxledger.compressor.summarizers.base import Summarizer
from ctxledger.errors import SummarizerError
from ctxledger.ledger.compaction import (
    CompactionOutcome,
    abort_feedback,
    abort_record,
    compact,
)
from ctxledger.ledger.facade import Ledger
from ctxledger.terminal import styled


def make_summarizer(
    kind: str, config: CompressionConfig, session_model: str | None = None
) -> Summarizer:
    """``offline`` (default, no network) or ``llm`` (configured by CTXLEDGER_SUMMARY_* env vars)."""
    if kind == "llm":
        from ctxledger.compressor.summarizers.llm import LLMSummarizer

        return LLMSummarizer.from_config(config, session_model=session_model)
    from ctxledger.compressor.summarizers.offline import OfflineSummarizer

    return OfflineSummarizer()


def plan_json(outcome: CompactionOutcome, ids: list[str | None]) -> dict[str, Any]:
    """The documented JSON plan: indexes into the API list plus the ids on each side."""
    plan = dict(outcome.plan)
    start, end = plan.get("compress_start", 0), plan.get("compress_end", 0)
    plan["head_ids"] = [i for i in ids[:start] if i is not None]
    plan["middle_ids"] = [i for i in ids[start:end] if i is not None]
    plan["tail_ids"] = [i for i in ids[end:] if i is not None]
    out = msgspec.to_builtins(outcome)
    out["plan"] = plan
    return out  # type: ignore[no-any-return]


def window_notes(config: CompressionConfig, window: int, session_id: str) -> list[str]:
    """What to tell the user when the config names another window than the session's."""
    wanted = config.context_length
    if wanted is None or wanted == window:
        return []
    return [
        f"the config says context_length = {wanted:,} but session {session_id} has a "
        f"{window:,}-token window: the plan uses the session's window (threshold "
        f"{config.threshold_tokens(window):,} tokens, not {config.threshold_tokens(wanted):,}). "
        "context_length only sets the window of new sessions and imports; to move this "
        "session to another window, record a switch (Ledger.switch_model) first"
    ]


@cli.command()
@click.argument("session")
@click.option(
    "--focus",
    default=None,
    help="Topic to keep in full detail (about 60-70 % of the summary budget).",
)
@summarizer_option()
@click.option(
    "--estimator",
    type=click.Choice(["exact", "rough"]),
    default=None,
    help="Token counts the planner uses (default: config, else exact).",
)
@config_file_option(
    "TOML file with compression settings (instead of the one found; env and flags still win)."
)
@click.option("--dry-run", is_flag=True, help="Print the plan; append nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print the outcome and plan as JSON.")
@quiet_option
@click.pass_context
@handle_errors
def compress(
    ctx: click.Context,
    session: str,
    focus: str | None,
    summarizer_kind: str,
    estimator: str | None,
    config_path: Path | None,
    dry_run: bool,
    as_json: bool,
) -> None:
    """Compact SESSION now (manual /compress: bypasses cooldown and the anti-thrash guard).

    The headline's counts leave the system prompt out (it is no message, as in Hermes's
    /compress); --dry-run's indexes and --json's messages_before/after count it.

    The plan always uses the session's recorded window; a config whose context_length
    differs is reported (a note on stderr, ``notes`` in --json), never applied silently.

    When the summarizer fails with an auth or network error the compaction is abandoned:
    nothing changes, a CompressionSkipped naming the failure is recorded, the messages
    preserved and the reason (redacted) go to stderr, and the exit status is 1 (with
    --json, stdout gets {"action": "aborted", "failure", "failure_class",
    "messages_before", "session_id"}). Other failures use the fallback summary.
    """
    state = state_of(ctx)
    ledger = state.ledger(existing=True)
    sid = ledger.tip(ledger.resolve(session))
    config = state.config(config_path, {"estimator": estimator})
    view = ledger.transcript.session(sid)
    ids: list[str | None] = ([None] if view.system_prompt is not None else []) + list(view.live)
    summarizer = make_summarizer(summarizer_kind, config, view.model)
    notes = window_notes(config, view.context_length, sid)

    async def run() -> CompactionOutcome:
        return await compact(
            ledger, sid, summarizer, config=config, focus=focus, trigger="manual", dry_run=dry_run
        )

    for note in notes:
        echo(f"note: {note}", err=True)
    waiting = f"compacting {sid} ({summarizer_kind} summarizer"
    if summarizer_kind == "llm":
        waiting += f", timeout {config.summary_timeout:g} s"
    try:
        with spinner(ctx, waiting + ")"):
            outcome = anyio.run(run)
    except SummarizerError as exc:  # an aborting failure (auth, network): nothing changed
        _print_abort(ledger, sid, exc, as_json=as_json)
        ctx.exit(1)
    for warning in _size_warnings(outcome, view.context_length, config):
        echo(f"warning: {warning}", err=True)
    if as_json:
        emit_json({**plan_json(outcome, ids), "notes": notes})
        return
    _print_outcome(sid, outcome, system_prompt=ids[:1] == [None])


def _size_warnings(outcome: CompactionOutcome, window: int, config: CompressionConfig) -> list[str]:
    """What a compaction (or its dry run) leaves too large: a continuation over the
    session's window, or still at the threshold. The headline's "40,354 → 20,318" alone
    read as done on a 16,000-token window (what it keeps verbatim, a long first message
    or a pinned one, can be that large)."""
    if outcome.action not in ("compressed", "dry_run"):
        return []
    tokens, threshold = outcome.tokens_after, config.threshold_tokens(window)
    verb = "would hold" if outcome.action == "dry_run" else "holds"
    holds = f"the continuation {verb} {tokens:,} tokens"
    if tokens > window:
        return [
            f"{holds}, more than the session's {window:,}-token window: "
            "no model call can take it as it is"
        ]
    if tokens >= threshold:
        return [
            f"{holds}, at or over the compaction threshold ({threshold:,} of the "
            f"{window:,}-token window): it is due for compaction again"
        ]
    return []


def _print_abort(ledger: Ledger, sid: str, exc: SummarizerError, *, as_json: bool) -> None:
    """The feedback of an abandoned compaction, on stderr: the messages preserved and the
    reason, redacted (the raw error of an HTTP reply can hold the key that was refused) as
    the recorded ``CompressionSkipped`` holds it; with --json, the outcome on stdout too."""
    _, details = abort_record(exc)
    for line in abort_feedback(ledger, sid, details["error"]).splitlines():
        echo(line, err=True)
    if as_json:  # the field names of a compaction's outcome
        emit_json(
            {
                "session_id": sid,
                "action": "aborted",
                "failure": details["error"],
                "failure_class": exc.failure_class,
                "messages_before": len(ledger.transcript.api_view(sid)),
            }
        )


def _print_outcome(sid: str, outcome: CompactionOutcome, *, system_prompt: bool) -> None:
    """What a compaction (or its dry run) did, for a person. The headline counts the
    conversation (a system prompt is no message, as Hermes's /compress counts); the
    plan's indexes are into the API list, system prompt at 0, and say so."""
    if outcome.action == "dry_run":
        p = outcome.plan
        of = f"{outcome.messages_before}" + (
            " including the system prompt" if system_prompt else ""
        )
        console.print(
            f"plan for {sid}: summarize messages [{p['compress_start']}, {p['compress_end']}) of {of}; "
            f"summary as {p['summary_role']}{' (merged into tail)' if p['merged_into_tail'] else ''}; "
            f"{len(p['prunes'])} prunes; budget {p['summary_budget_tokens']:,} tokens; "
            f"estimated {outcome.tokens_before:,} → {outcome.tokens_after:,} tokens"
        )
        # what the range alone does not say: messages of it kept verbatim (pinned ones go
        # before the summary, carried ones after it: the plan's output order)
        if p["pinned"]:
            console.print(f"  pinned, kept verbatim before the summary: messages {p['pinned']}")
        merged = p["merge_index"] if p["merged_into_tail"] else None
        for note in p["notes"]:
            console.print(f"  note: {_merged_carried_note(note, p['carried'], merged)}")
    elif outcome.action == "skipped":
        console.print(f"not compressed: {outcome.skip_reason}")
        # one print per line: the console shows a newline inside a string as "\n"
        console.print(_headline(outcome))
        console.print(f"Tokens: {outcome.tokens_before:,}, unchanged")
    else:
        # the feedback's headline (what the service tells a /compress: counts without the
        # system prompt, a fallback named), then the exact counts --dry-run estimates, as
        # recorded, in place of the feedback's chars/4 figures
        console.print(_headline(outcome))
        console.print(f"Tokens: {outcome.tokens_before:,} → {outcome.tokens_after:,}")
        if outcome.fallback:
            # the feedback's notes (after its headline and size line): what the fallback
            # summary replaced, and why (redacted, on one line)
            for note in outcome.feedback.splitlines()[2:]:
                console.print(styled((note, "yellow")))
        console.print(
            f"continuation: {outcome.new_session_id} (compaction {outcome.compaction_id})"
        )


def _merged_carried_note(note: str, carried: list[int], merge_index: int | None) -> str:
    """A planner's note that says carried messages are kept "after the summary", worded
    for a summary merged into one of them: it then goes into that message, after its
    text. Only the printed line changes: the notes are stored in the plan as the planner
    wrote them, which a replay reproduces byte for byte."""
    if merge_index not in carried:
        return note
    return note.replace(
        " after the summary", f" (the summary is merged into message {merge_index}, after its text)"
    )


def _headline(outcome: CompactionOutcome) -> str:
    """The first line of the outcome's feedback (HERMES_SPEC §7; `compact` gives every
    outcome but a dry run one): the conversation's counts, a system prompt not counted,
    "with fallback" when the summarizer failed."""
    return outcome.feedback.partition("\n")[0]
