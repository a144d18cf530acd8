"""The main job: a long generated coding-agent session driven through the service.

It shows what ctxledger does in an agent loop: pressure warnings, oversized tool
outputs persisted out of the context, automatic compactions (before/after
messages and tokens), a manual ``/compress`` with a focus topic, the compression
chain, token usage, and a final replay that verifies every compaction from the log.
Deterministic for a given seed (injected clock and ids; offline summarizer).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
from rich.console import Console
from rich.table import Table

from ctxledger.analysis.audit import audit_chain
from ctxledger.analysis.replay import rebuild_check, verify_compactions
from ctxledger.clock import SequentialIds, StepClock
from ctxledger.compressor.config import CompressionConfig
from ctxledger.demo.synth import SessionSynth
from ctxledger.ledger.facade import Ledger
from ctxledger.runtime.service import ContextService, TurnResult
from ctxledger.tokens import count_message


class DemoReport(msgspec.Struct, kw_only=True):
    seed: int
    root_session: str
    tip_session: str
    turns: int
    messages_appended: int
    compactions: list[dict[str, Any]]
    persisted_outputs: int
    pressure_warnings: int
    usage: dict[str, Any]
    replay_equal: bool
    replay_drift: int
    log_verified: bool


def _provider_usage(svc: ContextService, sid: str, reply: dict[str, Any]) -> dict[str, Any]:
    """What a provider with prompt caching would report for sending the live view now."""
    prompt = svc.ledger.transcript.total_tokens(sid)
    cached = int(prompt * 0.8)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": count_message(reply),
        "prompt_tokens_details": {"cached_tokens": cached},
    }


async def run_demo(
    db: str | Path,
    *,
    seed: int = 7,
    turns: int = 40,
    context_length: int = 128_000,
    console: Console | None = None,
) -> DemoReport:
    out = console or Console()
    probe = Ledger.open(db)
    namespace = f"d{seed}x{len(probe.sessions())}-"
    probe.close()
    config = CompressionConfig(context_length=context_length)
    ledger = Ledger.open(db, clock=StepClock(), ids=SequentialIds(namespace), config=config)
    svc = ContextService(ledger, config=config)
    synth = SessionSynth(seed)
    sid = await svc.start_session(
        model="demo-coder-1", system_prompt=synth.system_prompt(), tools=synth.tools(), title="demo"
    )
    root = sid
    threshold = config.threshold_tokens(context_length)
    out.rule(
        f"[bold]ctxledger demo[/bold] · seed {seed} · window {context_length:,} · threshold {threshold:,} tokens"
    )
    out.print(f"ledger: {db}  session: {sid}")
    compactions: list[dict[str, Any]] = []
    persisted = warnings = appended = 0

    def show(result: TurnResult, turn: int) -> None:
        nonlocal warnings
        for c in result.compactions:
            if c.action == "compressed":
                compactions.append(
                    {
                        "turn": turn,
                        **{
                            k: getattr(c, k)
                            for k in (
                                "compaction_id",
                                "session_id",
                                "new_session_id",
                                "messages_before",
                                "messages_after",
                                "tokens_before",
                                "tokens_after",
                                "fallback",
                            )
                        },
                    }
                )
                out.print(
                    f"  [bold cyan]compaction[/bold cyan] turn {turn}: {c.messages_before} → {c.messages_after} messages, "
                    f"{c.tokens_before:,} → {c.tokens_after:,} tokens · continuation {c.new_session_id}"
                )
        for note in result.notices:
            if "compaction threshold" in note or ("%" in note and "threshold" in note):
                warnings += 1
                out.print(f"  [yellow]⚠ {note}[/yellow]")
            elif not note.startswith("Compressed"):
                out.print(f"  [dim]{note}[/dim]")

    for turn, msgs in enumerate(synth.turns(turns)):
        result = await svc.hygiene(sid)
        show(result, turn)
        sid = result.session_id
        r = await svc.append(sid, msgs[:1])
        appended += 1
        result = await svc.preflight(r.session_id)
        show(result, turn)
        sid = result.session_id
        i = 1
        while i < len(msgs):
            reply = msgs[i]
            result = await svc.report_usage(
                sid, _provider_usage(svc, sid, reply), model="demo-coder-1"
            )
            show(result, turn)
            sid = result.session_id
            j = i + 1
            while j < len(msgs) and msgs[j]["role"] == "tool":
                j += 1
            before = len(svc.ledger.transcript.state.shown)
            r = await svc.append(sid, msgs[i:j])
            appended += j - i
            persisted += len(svc.ledger.transcript.state.shown) - before
            if len(svc.ledger.transcript.state.shown) > before:
                out.print(
                    f"  [magenta]tool output persisted[/magenta] turn {turn}: a {len(msgs[j - 1]['content']):,}-char output now shows a preview block"
                )
            i = j
        if turn == turns // 2:
            out.print(f"[bold]/compress tests[/bold] (manual, focus 'tests') at turn {turn}")
            result = await svc.compress(sid, focus="tests")
            show(result, turn)
            sid = result.session_id
        if turn % 10 == 9:
            st = svc.status(sid)
            out.print(
                f"[dim]turn {turn + 1}: {st['tokens']:,} tokens live · {st['compactions']} compaction(s) · strikes {st['strikes']}[/dim]"
            )
    ledger.refresh()
    tip = ledger.tip(root)
    _print_chain(out, ledger, root)
    usage = ledger.chain_usage(tip).to_dict()
    _print_usage(out, usage)
    _print_audit(out, ledger, tip)
    rebuild = rebuild_check(ledger, tip)
    drift = verify_compactions(ledger, tip)
    verified = ledger.verify().ok
    n_drift = sum(1 for c in drift.compactions if c.drift)
    out.rule("replay")
    out.print(
        f"projections rebuilt from {rebuild.events_folded:,} events: {'[green]equal[/green]' if rebuild.equal else '[red]DIFFERENT[/red]'}"
    )
    out.print(
        f"{len(drift.compactions)} compaction(s) re-planned from the log: {'[green]no drift[/green]' if not n_drift else f'[red]{n_drift} drifted[/red]'}"
    )
    out.print(f"hash chain: {'[green]verified[/green]' if verified else '[red]BROKEN[/red]'}")
    svc.ledger.close()
    return DemoReport(
        seed=seed,
        root_session=root,
        tip_session=tip,
        turns=turns,
        messages_appended=appended,
        compactions=compactions,
        persisted_outputs=persisted,
        pressure_warnings=warnings,
        usage=usage,
        replay_equal=rebuild.equal,
        replay_drift=n_drift,
        log_verified=verified,
    )


def _print_chain(out: Console, ledger: Ledger, root: str) -> None:
    table = Table("session", "kind", "messages", "live tokens", "state", title="compression chain")
    for sid in ledger.chains.chain(root):
        view = ledger.transcript.session(sid)
        table.add_row(
            sid,
            ledger.chains.kind(sid),
            str(len(view.live)),
            f"{ledger.transcript.total_tokens(sid):,}",
            f"ended ({view.end_reason})" if view.ended else "live (tip)",
        )
    out.print(table)


def _print_audit(out: Console, ledger: Ledger, tip: str) -> None:
    """What each summary kept of its middle's salient facts (``ctxledger audit``)."""
    report = audit_chain(ledger, tip)
    table = Table(
        "compaction",
        "facts in middle",
        "kept",
        "lost",
        "retention",
        "lost at re-compression",
        title="audit",
    )
    for c in report.compactions:
        table.add_row(
            c.compaction_id,
            str(len(c.extracted)),
            str(len(c.kept)),
            str(len(c.lost)),
            f"{c.retention:.0%}",
            str(len(c.lost_at_recompression)),
        )
    out.print(table)
    out.print(
        f"the live view still states {report.known_now:,} of the chain's {report.facts:,} distinct facts ({report.retention:.0%}); `ctxledger recall` finds the rest in the log"
    )


def _print_usage(out: Console, usage: dict[str, Any]) -> None:
    table = Table(
        "who",
        "calls",
        "input",
        "cache read",
        "output",
        "prompt",
        "total",
        title="usage (whole chain)",
    )
    for who in ("agent", "summarizer"):
        u = usage[who]
        table.add_row(
            who,
            str(usage[f"{who}_calls"]),
            f"{u['input']:,}",
            f"{u['cache_read']:,}",
            f"{u['output']:,}",
            f"{u['prompt']:,}",
            f"{u['total']:,}",
        )
    out.print(table)
