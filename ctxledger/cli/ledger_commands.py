"""Read commands and import: sessions, show, usage, chain, verify, replay, import."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click
import msgspec
from rich.table import Column, Table

from ctxledger.analysis.diff import transcript_at
from ctxledger.analysis.listing import session_rows
from ctxledger.analysis.refs import ledger_ref
from ctxledger.analysis.replay import rebuild_check
from ctxledger.cli.app import (
    ASCII_INT,
    CONTEXT_LENGTH,
    POSITIVE,
    REF,
    FilePath,
    State,
    cli,
    config_file_option,
    console,
    echo,
    emit_json,
    handle_errors,
    json_option,
    note,
    quiet_option,
    state_of,
    summarizer_option,
    warnings_printed,
)
from ctxledger.cli.outpath import checked_out
from ctxledger.cli.progress import progress_bar, spinner
from ctxledger.errors import ImportFormatError, InvalidInput
from ctxledger.eventstore.opening import is_url, target_text
from ctxledger.importers.detect import load as load_import
from ctxledger.importers.detect import load_file, read_input_stream
from ctxledger.importers.model import ImportedSession
from ctxledger.inputfile import path_exists, shown_path
from ctxledger.integers import shown
from ctxledger.ledger.anchor import verify_file
from ctxledger.ledger.facade import Ledger
from ctxledger.ledger.importing import earlier_import, import_sessions
from ctxledger.ledger.refs import short_ids
from ctxledger.ledger.spec import check_loop
from ctxledger.limits import check_limit_variables
from ctxledger.messages import audio_reference, content_text, refusal_text
from ctxledger.terminal import TABLE_MIN_WIDTH, inline, styled

#: the least the sessions table's word columns (kind, model, state) keep: "live", or
#: three letters and "…"; the figures are never cut, the id folds first
_WORD_MIN = 4
#: the sessions table's rules and cell padding (6 columns: 7 rules, 2 spaces each)
_SESSIONS_FRAME = 7 + 6 * 2


def _from_stdin(text: str, fmt: str | None) -> list[ImportedSession]:
    """The sessions of text read from stdin; an error at a line says ``stdin:LINE:``
    (it said ``1: ...``, naming nothing), as one in a file names the file."""
    try:
        return load_import(None, fmt, text=text)
    except ImportFormatError as exc:
        if exc.path is not None or exc.line is None:
            raise
        message = str(exc).removeprefix(f"{exc.line}: ")
        raise ImportFormatError(message, line=exc.line, path="stdin") from None


def _refuse_repeat(ledger: Ledger, digest: str, name: str) -> None:
    """InvalidInput when the ledger holds an import of the same bytes (`digest`)."""
    earlier = earlier_import(ledger, digest)
    if earlier is None:
        return
    when = datetime.fromtimestamp(earlier.started_at, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    raise InvalidInput(
        f"{name} was imported before: the same bytes (sha256 {digest[:12]}…) became session "
        f"{earlier.session_id} ({earlier.source}) on {when}; nothing was imported "
        "(--again imports it again)"
    )


def _repeat_refuser(state: State, name: str) -> Callable[[str], None]:
    """:func:`_refuse_repeat` of the ledger `state` names, called with an input's digest
    once its bytes are read, before they are parsed (a repeat is refused without paying
    the parse). A SQLite ledger not made yet (no file, or an empty one) holds no import,
    and an input that then fails to parse must not make one."""

    def refuse(digest: str) -> None:
        db = target_text(state.db)
        if is_url(db) or (os.path.isfile(db) and os.path.getsize(db) > 0):
            _refuse_repeat(state.ledger(), digest, name)

    return refuse


@cli.command("import")
@click.argument("file", type=FilePath(allow_dash=True, path_type=Path))
@click.option(
    "--format",
    "fmt",
    default=None,
    help="openai, anthropic, hermes-db, claude-code, codex, sharegpt (default: detect).",
)
@click.option(
    "--context-length",
    type=CONTEXT_LENGTH,
    default=None,
    help="Context window to record for every imported session (overrides the file's own).",
)
@click.option("--model", default=None, help="Model name to record when the file has none.")
@click.option(
    "--max-bytes",
    type=POSITIVE,
    default=None,
    help="Refuse inputs larger than this (default: $CTXLEDGER_MAX_INPUT_BYTES, else 256 MiB).",
)
@click.option(
    "--again",
    is_flag=True,
    help="Import the file even if the ledger holds an import of the same bytes.",
)
@click.pass_context
@handle_errors
def import_cmd(
    ctx: click.Context,
    file: Path,
    fmt: str | None,
    context_length: int | None,
    model: str | None,
    max_bytes: int | None,
    again: bool,
) -> None:
    """Import a conversation file; prints the new session id(s), one per line, last.

    A file whose bytes the ledger already imported is refused (nothing is appended),
    naming the earlier import; --again imports it once more.
    """
    check_limit_variables()  # (a writing command: before its input is read, or a repeat refused)
    refuse = _repeat_refuser(state_of(ctx), "stdin" if str(file) == "-" else shown_path(file))
    if str(file) == "-":
        text, digest = read_input_stream(sys.stdin.buffer, max_bytes)
        if not again:
            refuse(digest)
        sessions = _from_stdin(text, fmt)
        del text
    else:
        if not path_exists(file, "FILE"):
            raise InvalidInput(f"{shown_path(file)}: no such file")
        sessions, digest = load_file(
            file, fmt, max_bytes=max_bytes, check=None if again else refuse
        )
    ledger = state_of(ctx).ledger()
    with warnings_printed():
        ids = import_sessions(  # (not folded: the command reads nothing after it)
            ledger, sessions, model=model, context_length=context_length, digest=digest, fold=False
        )
    for s in sessions:
        for warning in s.warnings:
            echo(f"warning: {s.key}: {warning}", err=True)
    n = sum(len(s.messages) for s in sessions)
    click.echo(f"imported {n} messages into {len(ids)} session(s)", err=True)
    for sid in ids:
        echo(sid)


@cli.command()
@json_option
@click.pass_context
@handle_errors
def sessions(ctx: click.Context, as_json: bool) -> None:
    """List sessions, oldest first."""
    rows = session_rows(state_of(ctx).ledger(reads=True))
    if as_json:
        emit_json(rows)
        return
    if not rows:  # a first run: say which ledger was read and how to fill it
        db = state_of(ctx).db
        where = "this PostgreSQL ledger" if "://" in db else db
        echo(
            f"no sessions in {where} (the ledger is --db, else $CTXLEDGER_DB, else "
            "ctxledger.db in the user data dir); `ctxledger import FILE` adds one, "
            "`ctxledger demo` plays a generated one",
            err=True,
        )
        return  # (no empty table under that line: a header and nothing, session 42)
    console.print(_sessions_table(rows))


def _sessions_table(rows: list[dict[str, Any]]) -> Table:
    """A figure is never cut on a narrow line ("2,109…" was shown for 2,109,639 tokens
    on 80 columns) and each word keeps :data:`_WORD_MIN` columns (cut with "…", whole
    in --json). An id is kept on one line to be copied whole while it fits in what is
    left; a longer one folds (a 44-character id squeezed the words to nothing)."""
    table = Table(Column("kind", min_width=_WORD_MIN), Column("model", min_width=_WORD_MIN))
    table.add_column("messages", no_wrap=True)
    table.add_column("tokens", no_wrap=True)
    table.add_column("state", min_width=_WORD_MIN)
    cells = [
        (
            str(r["kind"]),
            str(r["model"]),
            f"{r['messages']:,}",  # (grouped as tokens are: 40000 stood beside 896,523)
            f"{r['tokens']:,}",
            f"ended ({r['end_reason']})" if r["ended"] else "live",
            str(r["session_id"]),
        )
        for r in rows
    ]
    figures = sum(
        max([len(head), *(len(c[i]) for c in cells)])
        for i, head in ((2, "messages"), (3, "tokens"))
    )
    room = max(console.width, TABLE_MIN_WIDTH) - _SESSIONS_FRAME - figures - 3 * _WORD_MIN
    long_ids = any(len(inline(c[5])) > room for c in cells)
    table.add_column("session", no_wrap=not long_ids, overflow="fold")
    for c in cells:
        table.add_row(*c)
    return table


@cli.command()
@click.argument("session", type=REF)
@click.option(
    "--at",
    "at_seq",
    type=ASCII_INT,
    default=None,
    help="Show the view as of this event sequence number.",
)
@json_option
@click.pass_context
@handle_errors
def show(ctx: click.Context, session: str, at_seq: int | None, as_json: bool) -> None:
    """The API view of a session (system + live messages), now or at any point in history (SESSION@SEQ).

    Each message shows its index and a short id (a unique suffix of its message id;
    --json has the full ids); `pin` takes either.

    A session id holding @ (me@host) is named whole. When sessions a and a@1 both
    exist, a@1 is refused as ambiguous: write a@1@SEQ for session a@1, and a@01
    (or a --at 1) for session a at seq 1.
    """
    ledger = state_of(ctx).ledger(reads=True)
    ref, seq = ledger_ref(ledger, session)
    if at_seq is not None:
        if seq is not None and seq != at_seq:
            raise InvalidInput(
                f"{shown(session)} and --at {at_seq} name two points: give the sequence number once"
            )
        seq = at_seq
    sid = ledger.resolve(ref)
    transcript = transcript_at(ledger, sid, seq)
    view = transcript.session(sid)
    messages = transcript.api_messages(sid)
    tokens = transcript.api_tokens(sid)
    ids: list[str | None] = [None] * int(view.system_prompt is not None) + list(view.live)
    if seq is None and view.ended and not as_json:  # (read as the view the model gets)
        live = ledger.chains.live_end(sid)  # (the session a write is told: ended_note)
        then = f"; the conversation's live view is {live}'s" if live else ""
        note(f"{sid} ended ({view.end_reason}): this is its last view{then}")
    if as_json:
        pinned = set(view.pinned)
        emit_json(
            [
                {
                    "index": i,
                    "message_id": mid,
                    "tokens": n,
                    "pinned": mid in pinned,
                    "message": msg,
                }
                for i, (mid, msg, n) in enumerate(zip(ids, messages, tokens, strict=True))
            ]
        )
        return
    short = dict(zip(view.live, short_ids(view.live), strict=True))
    for i, (mid, msg, n) in enumerate(zip(ids, messages, tokens, strict=True)):
        label = short[mid] if mid is not None else "system"
        _echo_message(i, msg, n, label + (" [pinned]" if mid in view.pinned else ""))


def _echo_message(i: int, msg: dict[str, Any], n: int, label: str) -> None:
    """One message of ``show``: its head line, text (long ones cut), refusal, audio
    reply and tool calls, all as plain text."""
    calls = ", ".join(
        f"{c['function']['name']}({c['function']['arguments'][:60]})"
        for c in msg.get("tool_calls") or []
    )
    head = styled((f"{i:>4} {msg['role']}", "bold"), " ", (f"{n} tok", "dim"), f"  id {label}")
    if msg.get("tool_call_id"):
        head.append_text(styled(" ", (f"← {msg['tool_call_id']}", "dim")))
    console.print(head)
    text = content_text(msg)
    if text:
        echo(
            text if len(text) < 1200 else text[:800] + f"\n… ({len(text):,} chars)",
            lines=True,
        )
    refusal = refusal_text(msg)
    if refusal and refusal.strip() != text.strip():
        echo(f"  refusal: {refusal}", lines=True)
    if audio := audio_reference(msg.get("audio")):
        echo(f"  audio reply: {audio}")
    if calls:
        echo(f"  → {calls}")


_USAGE_ROWS = (
    ("calls", None), ("input", "input"), ("cache read", "cache_read"),
    ("cache write", "cache_write"), ("output", "output"), ("reasoning", "reasoning"),
    ("prompt", "prompt"), ("total", "total"),
)  # fmt: skip


def _usage_table(data: dict[str, dict[str, Any]]) -> Table:
    """One row per bucket, one column per scope (session / chain x agent / summarizer):
    five columns fit an 80-column terminal, and no column is narrower than its longest
    figure (nine columns, one per bucket, cut figures to "169,2…" there)."""
    scopes = [(scope, who) for scope in ("session", "chain") for who in ("agent", "summarizer")]
    cells = [
        [
            f"{data[scope][f'{who}_calls'] if key is None else data[scope][who][key]:,}"
            for scope, who in scopes
        ]
        for _, key in _USAGE_ROWS
    ]
    columns = [
        Column(f"{scope} {who}", justify="right", min_width=max(len(row[i]) for row in cells))
        for i, (scope, who) in enumerate(scopes)
    ]
    table = Table(Column(""), *columns)
    for (label, _), row in zip(_USAGE_ROWS, cells, strict=True):
        table.add_row(label, *row)
    return table


@cli.command()
@click.argument("session", type=REF)
@json_option
@click.pass_context
@handle_errors
def usage(ctx: click.Context, session: str, as_json: bool) -> None:
    """Token usage of a session and of its whole compression chain (agent and summarizer apart)."""
    ledger = state_of(ctx).ledger(reads=True)
    sid = ledger.resolve(session)
    data = {"session": ledger.usage(sid).to_dict(), "chain": ledger.chain_usage(sid).to_dict()}
    if as_json:
        emit_json(data)
        return
    table = _usage_table(data)
    console.print(table)
    unreported = data["chain"]["agent_calls_without_usage"]
    if unreported:
        console.print(
            f"{unreported} agent call(s) in the chain reported no usage (estimated instead)"
        )


@cli.command()
@click.argument("session", type=REF)
@json_option
@click.pass_context
@handle_errors
def chain(ctx: click.Context, session: str, as_json: bool) -> None:
    """Lineage of a session: its compression chain, branches and the compression tip.

    ``compressions`` counts the compactions in effect at the tip, as the compressor
    does (an undo is not one, and takes the compaction it reverted out of the count).
    """
    ledger = state_of(ctx).ledger(reads=True)
    sid = ledger.resolve(session)
    chains = ledger.chains
    members = chains.chain(sid)
    tip = chains.tip(sid)
    data = {
        "session_id": sid,
        "root": members[0],
        "tip": tip,
        "compression_count": chains.compression_count(tip),
        "chain": [
            {
                **msgspec.to_builtins(chains.lineage(m)),
                "kind": chains.kind(m),
                "messages": len(ledger.transcript.session(m).live),
            }
            for m in members
        ],
    }
    if as_json:
        emit_json(data)
        return
    for i, m in enumerate(members):
        node = chains.lineage(m)
        marks = styled(" ", ("(tip)", "green")) if m == data["tip"] else ""
        branches = [c for c in node.children if c != node.compression_child]
        line = styled(
            f"{'  ' * i}{'└─ ' if i else ''}",
            (m, "bold"),
            f" {chains.kind(m)} · {len(ledger.transcript.session(m).live)} messages",
        )
        console.print(line + marks)
        for b in branches:
            console.print(f"{'  ' * (i + 1)}├─ {b} ({chains.kind(b)})")
    console.print(f"compressions: {data['compression_count']}")


@cli.command()
@click.option(
    "--expect-head",
    default=None,
    metavar="HASH|SEQ:HASH",
    help="Fail unless the head hash is HASH (or the event at SEQ has HASH), as printed by an earlier verify.",
)
@click.option(
    "--strict",
    is_flag=True,
    help="Exit 1 on a warning too (the anchor not checked: another user's, or no key).",
)
@click.option(
    "--derived",
    is_flag=True,
    help="Also recompute each stored derived value of a long message and fail on one that differs (slow: seconds per MB).",
)
@json_option
@click.pass_context
@handle_errors
def verify(
    ctx: click.Context, expect_head: str | None, strict: bool, derived: bool, as_json: bool
) -> None:
    """Walk the log (without folding it), its blobs and its sealed head anchor; exit 1 on the first bad event.

    Prints the head (last seq and hash): keep it elsewhere and pass it back with
    --expect-head to detect deleted newest events even if the anchor file is lost.
    The derived values stored for long messages (a cache outside the hash chain) are
    compared with their recomputation only with --derived; `ctxledger upgrade`
    replaces one that differs.
    """
    state = state_of(ctx)
    report = verify_file(state.db, expect_head=expect_head, tell=note, derived=derived)
    if as_json:
        emit_json(report)
    elif report.ok:
        console.print(
            f"ok: {report.events_checked:,} events and {report.blobs_checked:,} blobs verify"
        )
        if report.head_seq is None:  # ("head: seq None hash None", to keep for --expect-head)
            console.print("head: none (the log is empty)")
        else:
            console.print(f"head: seq {report.head_seq} hash {report.head_hash}")
        if report.warning:
            console.print(f"warning: {report.warning}")
    else:
        event = f" (event {report.first_bad_event_id})" if report.first_bad_event_id else ""
        where = f"seq {report.first_bad_seq}" if report.first_bad_seq is not None else "the log"
        console.print(styled(("FAILED", "red"), f" at {where}{event}: {report.problem}"))
    if not report.ok or (strict and report.warning):
        sys.exit(1)


@cli.command()
@click.argument("session", type=REF)
@click.option(
    "--verify",
    "verify_plans",
    is_flag=True,
    help="Also re-run today's planner on every recorded compaction and report drift.",
)
@config_file_option(
    "What-if: re-run the chain's history under this TOML config in a scratch ledger."
)
@summarizer_option(
    None, "What-if with this summarizer (default offline; alone: the recorded config)."
)
@click.option(
    "--out",
    "out_path",
    type=FilePath(dir_okay=False, path_type=Path),
    default=None,
    help="Keep the what-if ledger in this new file (compare it with `diff A B --b-db FILE`).",
)
@click.option(
    "--loop",
    default=None,
    metavar="hermes|every-call|per-run",
    help="What-if: check for compaction where this agent loop checks (default: the loop "
    "the chain's host named, else hermes).",
)
@json_option
@quiet_option
@click.pass_context
@handle_errors
def replay(
    ctx: click.Context,
    session: str,
    verify_plans: bool,
    config_path: Path | None,
    summarizer_kind: str | None,
    out_path: Path | None,
    loop: str | None,
    as_json: bool,
) -> None:
    """Rebuild the session chain's projections from the log and check they equal the live state.

    With --config, --summarizer or --loop: a what-if replay instead (the log is only read).
    """
    if loop is not None:
        loop = check_loop(loop)  # (before the ledger is opened)
    if out_path is not None:  # (`--out L.db.head` made a ledger in the anchor's name)
        checked_out(out_path, "--out", ledger=state_of(ctx).db, new=True)
    ledger = state_of(ctx).ledger(reads=True)
    sid = ledger.resolve(session)
    if any(x is not None for x in (config_path, summarizer_kind, out_path, loop)):
        if verify_plans:
            raise InvalidInput(
                "--verify checks the recorded chain; run it without "
                "--config/--summarizer/--out/--loop"
            )
        from ctxledger.cli.whatif_command import run_whatif

        run_whatif(ctx, ledger, sid, config_path, summarizer_kind, out_path, as_json, loop)
        return
    with progress_bar(ctx, "folding events", ledger.store.last_seq()) as advance:
        report = rebuild_check(ledger, sid, progress=advance)
    out: dict[str, object] = {"rebuild": msgspec.to_builtins(report)}
    drifted = False
    if verify_plans:
        from ctxledger.analysis.replay import verify_compactions

        with spinner(ctx, f"re-planning the recorded compactions of {sid}"):
            checks = verify_compactions(ledger, sid)
        drifted = checks.drifted
        out["compactions"] = msgspec.to_builtins(checks.compactions)
    if as_json:
        emit_json(out)
    else:
        status = ("equal", "green") if report.equal else ("DIFFERENT", "red")
        console.print(
            styled(
                f"rebuilt {report.events_folded:,} events; {len(report.chain)} session(s) in the chain: ",
                status,
            )
        )
        for m in report.mismatches:
            console.print(styled("  ", ("✗", "red"), f" {m}"))
        if verify_plans:
            from ctxledger.cli.analysis import print_drift

            print_drift(checks)
    if not report.equal or drifted:
        sys.exit(1)
