"""Analysis commands: audit, diff, trace, recall, expand, undo, pin.

Read commands take ``--json``; every one prints a one-line error and exits 2 on bad
input (unknown id, malformed ``SESSION@SEQ``, empty query) with nothing appended.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click
from rich.table import Column, Table
from rich.text import Text

from ctxledger.analysis.audit import (
    AuditedFact,
    ChainAudit,
    CompactionAudit,
    audit_chain,
    audit_compaction,
    trace,
)
from ctxledger.analysis.compactions import is_compaction_ref, resolve_session_ref
from ctxledger.analysis.diff import DiffReport, SummaryDiff, diff, diff_views, session_view
from ctxledger.analysis.recall import MAX_LIMIT, expand, recall
from ctxledger.analysis.redacted import redacted_report
from ctxledger.analysis.replay import DriftReport
from ctxledger.analysis.undo import undo
from ctxledger.cli.app import (
    POSITIVE,
    REF,
    AsciiIntRange,
    cli,
    config_file_option,
    console,
    echo,
    emit_json,
    handle_errors,
    json_option,
    quiet_option,
    reading_ledger,
    state_of,
    summarizer_option,
)
from ctxledger.cli.progress import spinner
from ctxledger.errors import InvalidInput, OneReference
from ctxledger.integers import shown
from ctxledger.ledger.compaction import plan_compaction
from ctxledger.ledger.facade import Ledger
from ctxledger.ledger.refs import resolve_pin
from ctxledger.ledger.spec import check_loop
from ctxledger.messages import content_text
from ctxledger.terminal import block, inline, styled

if TYPE_CHECKING:
    from ctxledger.analysis.history import History

_SHOWN_FACTS = 12


def _fact_line(fact: AuditedFact) -> Text:
    where = f"{fact.message_id} (seq {fact.seq})" if fact.message_id else "?"
    return styled((f"{fact.kind:<10}", "dim"), f" {fact.value[:100]}  ", (f"← {where}", "dim"))


def _print_compaction(a: CompactionAudit, show_all: bool) -> None:
    mark = styled(" ", ("(undone)", "yellow")) if a.reverted else ""
    verbatim = f" ({len(a.kept_verbatim)} verbatim)" if a.kept_verbatim else ""
    console.print(
        styled((f"compaction {a.index}", "bold"), f" {a.compaction_id}")
        + mark
        + styled(
            f" by {a.summarizer}: {a.input_messages} messages summarized · "
            f"{len(a.extracted)} facts · kept {len(a.kept)}{verbatim} · lost {len(a.lost)} · "
            f"retention {a.retention:.0%}"
        )
    )
    lost = a.lost if show_all else a.lost[:_SHOWN_FACTS]
    for fact in lost:
        again = styled(" ", ("(lost at re-compression)", "red")) if fact.source == "summary" else ""
        console.print(styled("  ", ("✗", "red"), " ") + _fact_line(fact) + again)
    if len(lost) < len(a.lost):
        console.print(
            styled(("  … " + f"{len(a.lost) - len(lost)} more lost (--all shows them)", "dim"))
        )


def _print_chain(report: ChainAudit, show_all: bool) -> None:
    table = Table(
        "#",
        Column("compaction", overflow="fold"),  # an id: whole, on more lines if need be
        "summarizer",
        "summarized",
        "facts",
        "kept",
        "lost",
        "retention",
        title=f"audit of {report.root}",
    )
    for a in report.compactions:
        table.add_row(
            str(a.index),
            a.compaction_id,
            a.summarizer,
            str(a.input_messages),
            str(len(a.extracted)),
            str(len(a.kept)),
            str(len(a.lost)),
            f"{a.retention:.0%}",
        )
    console.print(table)
    for a in report.compactions:
        _print_compaction(a, show_all)
    for loss in report.lost_at_recompression[: None if show_all else _SHOWN_FACTS]:
        console.print(
            styled(
                (f"lost at re-compression {loss.recompression}", "red"),
                f" ({loss.lost_at}; kept by {loss.kept_by}): ",
            )
            + _fact_line(loss.fact)
        )
    for lost in report.lost_now_at[: None if show_all else _SHOWN_FACTS]:
        at = (
            f"lost at compaction {lost.compaction_index} ({lost.lost_at})"
            if lost.lost_at
            else "lost"
        )
        console.print(styled((at, "red"), ": ") + _fact_line(lost.fact))
    if not show_all and len(report.lost_now_at) > _SHOWN_FACTS:
        more = len(report.lost_now_at) - _SHOWN_FACTS
        console.print(styled((f"… {more} more not in the live view (--all shows them)", "dim")))
    console.print(
        f"chain: {report.facts} distinct facts, {report.known_now} still in the live view of {report.tip} "
        f"(retention {report.retention:.0%}; mean per compaction {report.mean_compaction_retention:.0%})"
    )
    by_category = " · ".join(
        f"{name} {c.known_now}/{c.facts}" for name, c in report.categories.items()
    )
    if by_category:
        console.print(f"still live, by category: {by_category}")


@cli.command()
@click.argument("ref", type=REF)
@click.option("--all", "show_all", is_flag=True, help="List every lost fact, not the first few.")
@json_option
@quiet_option
@click.pass_context
@handle_errors
def audit(ctx: click.Context, ref: str, show_all: bool, as_json: bool) -> None:
    """Which facts each compaction kept and lost (REF: a compaction id or a session)."""
    ledger = state_of(ctx).ledger(reads=True)
    if is_compaction_ref(ledger, ref):
        with spinner(ctx, f"auditing {ref}"):
            one = redacted_report(audit_compaction(ledger, ref), ledger)
        if as_json:
            emit_json(one)
        else:
            _print_compaction(one, show_all)
        return
    with spinner(ctx, f"auditing the compactions of {ref}"):
        report = redacted_report(audit_chain(ledger, resolve_session_ref(ledger, ref)), ledger)
    if as_json:
        emit_json(report)
    else:
        _print_chain(report, show_all)


_STYLE = {
    "added": ("+", "green"),
    "removed": ("-", "red"),
    "summarized": ("»", "cyan"),
    "expanded": ("«", "cyan"),
    "pruned": ("~", "yellow"),
    "restored": ("~", "yellow"),
    "changed": ("~", "magenta"),
}


def _print_diff(report: DiffReport | SummaryDiff) -> None:
    if isinstance(report, SummaryDiff):
        console.print(
            f"summary of {report.a} → summary of {report.b}: {report.token_delta:+,} tokens"
        )
        for sc in report.changes:
            sign, color = ("+", "green") if sc.kind == "added" else ("-", "red")
            console.print(styled((f"{sign} [{sc.section}] {sc.line}", color)))
        if not report.changes:
            console.print(styled(("the summaries state the same lines", "green")))
        return
    for name, side in (("A", report.a), ("B", report.b)):
        console.print(
            styled(
                (name, "bold"), f" {side.label}: {side.messages} messages, {side.tokens:,} tokens"
            )
        )
    for c in report.changes:
        sign, color = _STYLE[c.kind]
        ids = c.message_id + (f" → {c.other_id}" if c.other_id else "")
        extra = f" by {c.summary_id}" if c.summary_id else (f" ({c.detail})" if c.detail else "")
        console.print(
            styled((f"{sign} {c.kind:<10} {c.role:<9} {ids}  {c.token_delta:+,} tok{extra}", color))
        )
    summary = (
        ", ".join(f"{n} {kind}" for kind, n in sorted(report.counts.items())) or "no differences"
    )
    console.print(f"{summary}; {report.token_delta:+,} tokens")


#: the options that make ``diff A`` compare A's chain with its what-if replay
_WHATIF_OPTIONS = ("--config", "--summarizer", "--loop")


@cli.command("diff")
@click.argument("a", type=REF)
@click.argument("b", type=REF, required=False)
@config_file_option("Compare A's chain with its what-if replay under this TOML config.")
@summarizer_option(None, "Summarizer of the what-if replay (with --config; default offline).")
@click.option(
    "--b-db",
    metavar="PATH|URL",
    default=None,
    help="Resolve B in this other ledger, a file or a URL (e.g. a what-if kept with `replay --out`).",
)
@click.option(
    "--loop",
    default=None,
    metavar="hermes|every-call|per-run",
    help="What-if: check for compaction where this agent loop checks (as `replay --loop`).",
)
@json_option
@quiet_option
@click.pass_context
@handle_errors
def diff_cmd(
    ctx: click.Context,
    a: str,
    b: str | None,
    config_path: Path | None,
    summarizer_kind: str | None,
    b_db: str | None,
    loop: str | None,
    as_json: bool,
) -> None:
    """Differences between A and B: sessions, SESSION@SEQ points (see show --help) or compactions.

    With only A (a compaction): the view it replaced vs the view it made. With only A
    and --config, --summarizer or --loop: A's chain vs its what-if replay.
    """
    loop = None if loop is None else check_loop(loop)  # (before the ledger is opened)
    ledger = state_of(ctx).ledger(reads=True)
    values = (config_path, summarizer_kind, loop)
    whatif = [o for o, x in zip(_WHATIF_OPTIONS, values, strict=True) if x is not None]
    if whatif:
        if b is not None or b_db is not None:
            raise InvalidInput(
                f"{'/'.join(whatif)} compares A with its own what-if replay: give no B and no --b-db"
            )
        with spinner(ctx, f"replaying the history of {a} (what-if)"):
            report: DiffReport | SummaryDiff = _whatif_diff(
                ctx, ledger, a, (config_path, summarizer_kind, loop)
            )
    elif b_db is not None:
        if b is None:
            raise InvalidInput(
                "--b-db needs B: the session or compaction to compare in that ledger"
            )
        with reading_ledger(b_db, "--b-db") as other:
            report = diff(ledger, a, b, b_ledger=other)
    else:
        try:
            report = diff(ledger, a, b)
        except OneReference as exc:  # (the library's words name no option: this face has some)
            raise OneReference(
                "give two references to compare, one compaction id (before vs after), or one"
                " session with --config FILE, --loop LOOP or --summarizer KIND (its chain vs"
                " its what-if replay)"
            ) from exc
    if as_json:
        emit_json(report)
    else:
        _print_diff(report)


#: a what-if diff's ``--config``, ``--summarizer`` and ``--loop``
_WhatIfArgs = tuple[Path | None, str | None, str | None]


def _whatif_diff(ctx: click.Context, ledger: Ledger, a: str, args: _WhatIfArgs) -> DiffReport:
    from ctxledger.analysis.whatif import history, whatif_reads

    with whatif_reads():  # a large content is read once for the history and the replay
        return _replayed_diff(ctx, ledger, history(ledger, a), args)


def _replayed_diff(
    ctx: click.Context, ledger: Ledger, hist: History, args: _WhatIfArgs
) -> DiffReport:
    from ctxledger.analysis.whatif import replay_history
    from ctxledger.cli.compress import make_summarizer

    config_path, summarizer_kind, loop = args
    # the file overrides the recorded settings (keys it does not set keep their values)
    config = state_of(ctx).config(config_path, base=hist.config) if config_path else hist.config
    summarizer = make_summarizer(summarizer_kind, config) if summarizer_kind else None
    replayed = replay_history(hist, config=config, summarizer=summarizer, loop=loop)
    with replayed as (scratch, result):
        # only the two views are compared: no what-if report (two chain audits) is built
        tip, alt_tip = ledger.tip(hist.session_id), scratch.tip(result.session_id)
        recorded = session_view(ledger, tip, label=f"{tip} (recorded)")
        alternative = session_view(scratch, alt_tip, label=f"{alt_tip} (what-if)")
        return diff_views(recorded, alternative)


@cli.command("trace")
@click.argument("session", type=REF)
@click.argument("fact")
@json_option
@click.pass_context
@handle_errors
def trace_cmd(ctx: click.Context, session: str, fact: str, as_json: bool) -> None:
    """The life of one FACT in SESSION's chain: where it appeared, what compactions did with it."""
    report = redacted_report(trace(state_of(ctx).ledger(reads=True), session, fact))
    if as_json:
        emit_json(report)
        return
    console.print(styled((report.fact, "bold"), f": {report.status}"))
    for ap in report.appearances:
        live = styled(" ", ("(live)", "green")) if ap.live else ""
        console.print(
            styled(
                f"  seen in {ap.message_id} ({ap.role}, {ap.origin}) of {ap.session_id} at seq {ap.seq}"
            )
            + live
        )
    for step in report.compactions:
        color = {"kept": "green", "dropped": "red"}.get(step.status, "dim")
        undone = " (undone)" if step.reverted else ""
        console.print(
            styled(
                f"  compaction {step.index} {step.compaction_id}: ", (step.status, color), undone
            )
        )


@cli.command("recall")
@click.argument("session", type=REF)
@click.argument("query")
@click.option(
    "--limit",
    # (the library's bound, in the help: `x>=1` sent a user to --limit 500, refused)
    type=AsciiIntRange(min=1, max=MAX_LIMIT),
    default=10,
    show_default=True,
    help="Show at most this many messages, the newest.",
)
@json_option
@click.pass_context
@handle_errors
def recall_cmd(ctx: click.Context, session: str, query: str, limit: int, as_json: bool) -> None:
    """Full-text search over every message SESSION's chain ever held, compacted ones too."""
    result = recall(state_of(ctx).ledger(reads=True), session, query, limit)
    if as_json:
        emit_json(result)
        return
    if not result.hits:
        console.print(
            f"no message of the chain of {result.root} matches {shown(query)}", markup=False
        )
    elif result.match == "any":
        console.print(
            styled(("no message holds every word; showing messages with any of them", "dim"))
        )
    for hit in result.hits:
        where = (
            styled(("live", "green"))
            if hit.live
            else styled(f"compacted by {hit.compacted_by}" if hit.compacted_by else "not live")
        )
        console.print(
            styled((hit.message_id, "bold"), f" {hit.role} · {hit.session_id} · seq {hit.seq} · ")
            + where
        )
        console.print("  " + " ".join(hit.snippet.split()), markup=False)
    if result.more:
        count = len(result.hits)
        how = "--limit N" if count < MAX_LIMIT else "the most --limit shows: narrow the query"
        console.print(styled((f"more messages match: the newest {count} are shown ({how})", "dim")))


@cli.command("expand")
@click.argument("compaction", type=REF)
@click.option(
    "--max-chars",
    type=POSITIVE,
    default=2000,
    show_default=True,
    help="Cut each message's text (terminal only).",
)
@json_option
@click.pass_context
@handle_errors
def expand_cmd(ctx: click.Context, compaction: str, max_chars: int, as_json: bool) -> None:
    """The original messages COMPACTION's summary replaced."""
    result = expand(state_of(ctx).ledger(reads=True), compaction)
    if as_json:
        emit_json(result)
        return
    console.print(
        styled(
            (result.compaction_id, "bold"),
            f": {len(result.messages)} messages of {result.session_id} were summarized",
        )
    )
    for m in result.messages:
        note = f" (a summary written by {m.compaction_id})" if m.compaction_id else ""
        console.print(
            styled((m.message_id, "bold"), f" {m.role} · {m.tokens} tok · seq {m.seq}{note}")
        )
        text = content_text(m.message)
        for call in m.message.get("tool_calls") or ():
            # (a name is one line, escaped as ids are: it keeps no newline nor bidi mark)
            text += f"\n→ {inline(call['function']['name'])}({call['function']['arguments']})"
        cut = (
            text
            if len(text) <= max_chars
            else text[:max_chars] + f"\n… ({len(text) - max_chars:,} more chars)"
        )
        console.print(block(cut))


@cli.command("undo")
@click.argument("compaction", type=REF)
@json_option
@click.pass_context
@handle_errors
def undo_cmd(ctx: click.Context, compaction: str, as_json: bool) -> None:
    """Revert COMPACTION: the view it replaced becomes live again as a new continuation."""
    result = undo(state_of(ctx).ledger(existing=True), compaction)
    if as_json:
        emit_json(result)
        return
    console.print(
        f"undid {result.compaction_id}: {result.restored_messages} messages of {result.restored_session_id} restored"
        f" + {result.appended_after} appended since → {result.new_session_id} "
        f"({result.tokens_before:,} → {result.tokens_after:,} tokens)"
    )
    for warning in result.warnings:
        echo(f"warning: {warning}", err=True)


@cli.command("pin")
@click.argument("session", type=REF)
@click.argument("message", type=REF)
@click.option("--unpin", is_flag=True, help="Remove the pin.")
@json_option
@click.pass_context
@handle_errors
def pin_cmd(ctx: click.Context, session: str, message: str, unpin: bool, as_json: bool) -> None:
    """Pin MESSAGE in SESSION's live view: compactions never prune or summarize it.

    MESSAGE is a message id, or the short id or index `show SESSION` prints. A pin
    applies to the chain's tip: a message of an ended session must still be live there.
    """
    ledger = state_of(ctx).ledger(existing=True)
    named = ledger.resolve(session)
    sid = ledger.tip(named)
    message_id = resolve_pin(
        ledger.transcript.session(named), ledger.transcript.session(sid), message
    )
    view = ledger.transcript.session(sid)
    if unpin and message_id not in view.pinned:
        raise InvalidInput(f"message {shown(message_id)} is not pinned in {shown(sid)}")
    ledger.api_messages(sid)  # (the plan reads them: a row that cannot be read fails first)
    ledger.pin(sid, message_id, not unpin)
    prepared = plan_compaction(ledger, sid, force=True)
    index = (1 if view.system_prompt is not None else 0) + ledger.transcript.session(
        sid
    ).live.index(message_id)
    plan = prepared.plan
    if plan.action != "compress":
        kept = f"no compaction is possible now ({plan.skip_reason})"
    elif index in plan.unmerged or (plan.merged_into_tail and index == plan.merge_index):
        kept = (
            "the next compaction keeps its text but merges the handoff summary into it "
            "(a new message holding the summary, which is rewritten at each compaction and "
            "cannot stay pinned)"
        )
    elif index in plan.pinned:
        kept = "the next compaction keeps it verbatim (the plan lists it as pinned)"
    elif index in plan.summarized_indices():
        kept = "the next compaction would summarize it"
    elif index in plan.carried:
        kept = "the next compaction keeps it verbatim (the latest ask or reply, carried after the summary)"
    else:
        kept = "the next compaction keeps it verbatim (it is in the protected head or tail)"
    data = {
        "session_id": sid,
        "message_id": message_id,
        "pinned": not unpin,
        "plan_index": index,
        "plan_pinned": list(plan.pinned),
        "next_compaction": kept,
    }
    if as_json:
        emit_json(data)
    else:
        console.print(f"{'unpinned' if unpin else 'pinned'} {message_id} in {sid}: {kept}")


# --------------------------------------------------------------------------- replay helpers


def print_drift(report: DriftReport) -> None:
    """The per-compaction drift lines of ``replay --verify``."""
    for c in report.compactions:
        mark = (f"drift ({c.cause})", "red") if c.drift else ("no drift", "green")
        console.print(styled(f"  compaction {c.compaction_id} (seq {c.seq}): ", mark))
        for d in c.drift:
            console.print(f"    {d.field}: {d.explanation}", markup=False)
        for key, (recorded, planned) in c.config_changes.items():
            console.print(
                f"    config {key}: recorded snapshot says {recorded!r}, the plan was made with {planned!r}",
                markup=False,
            )
