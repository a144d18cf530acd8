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
from ctxledger.terminal import PlainConsole, styled
from ctxledger.tokens import count_message

#: the model the generated agent talks to
MODEL = "demo-coder-1"


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


_COMPACTION_FIELDS = (
    "compaction_id",
    "session_id",
    "new_session_id",
    "messages_before",
    "messages_after",
    "tokens_before",
    "tokens_after",
    "fallback",
)


class _Run:
    """One demo run: the service, where it prints, and what it counted."""

    def __init__(self, svc: ContextService, out: Console) -> None:
        self.svc = svc
        self.out = out
        self.compactions: list[dict[str, Any]] = []
        self.persisted = self.warnings = self.appended = 0

    def show(self, result: TurnResult, turn: int) -> str:
        """Print what a service call did; return the session to continue in."""
        for c in result.compactions:
            if c.action != "compressed":
                continue
            self.compactions.append(
                {"turn": turn, **{k: getattr(c, k) for k in _COMPACTION_FIELDS}}
            )
            self.out.print(
                styled(
                    "  ",
                    ("compaction", "bold cyan"),
                    f" turn {turn}: {c.messages_before} → {c.messages_after} messages, "
                    f"{c.tokens_before:,} → {c.tokens_after:,} tokens · "
                    f"continuation {c.new_session_id}",
                )
            )
        for note in result.notices:
            if "compaction threshold" in note or ("%" in note and "threshold" in note):
                self.warnings += 1
                self.out.print(styled("  ", (f"⚠ {note}", "yellow")))
            elif not note.startswith("Compressed"):
                self.out.print(styled("  ", (note, "dim")))
        return result.session_id

    async def drive(self, sid: str, synth: SessionSynth, turns: int) -> str:
        """Every generated turn, a manual ``/compress`` half-way, a status line every 10."""
        svc, out = self.svc, self.out
        for turn, msgs in enumerate(synth.turns(turns)):
            sid = await self.turn(sid, turn, msgs)
            if turn == turns // 2:
                out.print(
                    styled(("/compress tests", "bold"), f" (manual, focus 'tests') at turn {turn}")
                )
                sid = self.show(await svc.compress(sid, focus="tests"), turn)
            if turn % 10 == 9:
                st = svc.status(sid)
                line = f"turn {turn + 1}: {st['tokens']:,} tokens live · {st['compactions']} compaction(s) · strikes {st['strikes']}"
                out.print(styled((line, "dim")))
        return sid

    async def turn(self, sid: str, turn: int, msgs: list[dict[str, Any]]) -> str:
        """One user turn: hygiene, the user message, preflight, then each reply with the
        usage a provider would report and the tool results that follow it."""
        svc = self.svc
        sid = self.show(await svc.hygiene(sid), turn)
        r = await svc.append(sid, msgs[:1])
        self.appended += 1
        sid = self.show(await svc.preflight(r.session_id), turn)
        i = 1
        while i < len(msgs):
            usage = _provider_usage(svc, sid, msgs[i])
            sid = self.show(await svc.report_usage(sid, usage, model=MODEL), turn)
            j = i + 1
            while j < len(msgs) and msgs[j]["role"] == "tool":
                j += 1
            before = len(svc.ledger.transcript.state.shown)
            await svc.append(sid, msgs[i:j])
            self.appended += j - i
            shown = len(svc.ledger.transcript.state.shown) - before
            self.persisted += shown
            if shown:
                size = len(msgs[j - 1]["content"])
                self.out.print(
                    styled(
                        "  ",
                        ("tool output persisted", "magenta"),
                        f" turn {turn}: a {size:,}-char output now shows a preview block",
                    )
                )
            i = j
        return sid


async def run_demo(
    db: str | Path,
    *,
    seed: int = 7,
    turns: int = 40,
    context_length: int = 128_000,
    console: Console | None = None,
) -> DemoReport:
    """Drive `turns` generated user turns through a ContextService on the ledger `db`,
    print what happens, then check the log: rebuild, re-plan, verify."""
    out = console or PlainConsole(highlight=False, soft_wrap=True)
    probe = Ledger.open(db)
    namespace = f"d{seed}x{len(probe.sessions())}-"
    probe.close()
    config = CompressionConfig(context_length=context_length)
    ledger = Ledger.open(db, clock=StepClock(), ids=SequentialIds(namespace), config=config)
    try:  # (closed, so its head is sealed, on Ctrl-C or an error too: session 42)
        svc = ContextService(ledger, config=config)
        synth = SessionSynth(seed)
        root = sid = await svc.start_session(
            model=MODEL, system_prompt=synth.system_prompt(), tools=synth.tools(), title="demo"
        )
        threshold = config.threshold_tokens(context_length)
        out.rule(
            styled(
                ("ctxledger demo", "bold"),
                f" · seed {seed} · window {context_length:,} · threshold {threshold:,} tokens",
            )
        )
        out.print(f"ledger: {db}  session: {sid}")
        run = _Run(svc, out)
        await run.drive(sid, synth, turns)
        ledger.refresh()
        tip = ledger.tip(root)
        _print_chain(out, ledger, root)
        usage = ledger.chain_usage(tip).to_dict()
        _print_usage(out, usage)
        _print_audit(out, ledger, tip)
        equal, n_drift, verified = _print_checks(out, ledger, tip)
    finally:
        ledger.close()
    return DemoReport(
        seed=seed,
        root_session=root,
        tip_session=tip,
        turns=turns,
        messages_appended=run.appended,
        compactions=run.compactions,
        persisted_outputs=run.persisted,
        pressure_warnings=run.warnings,
        usage=usage,
        replay_equal=equal,
        replay_drift=n_drift,
        log_verified=verified,
    )


def _print_checks(out: Console, ledger: Ledger, tip: str) -> tuple[bool, int, bool]:
    """Rebuild the projections, re-plan every compaction and verify the hash chain."""
    rebuild = rebuild_check(ledger, tip)
    drift = verify_compactions(ledger, tip)
    verified = ledger.verify().ok
    n_drift = sum(1 for c in drift.compactions if c.drift)
    out.rule("replay")
    good, bad = "green", "red"
    out.print(
        styled(
            f"projections rebuilt from {rebuild.events_folded:,} events: ",
            ("equal", good) if rebuild.equal else ("DIFFERENT", bad),
        )
    )
    out.print(
        styled(
            f"{len(drift.compactions)} compaction(s) re-planned from the log: ",
            ("no drift", good) if not n_drift else (f"{n_drift} drifted", bad),
        )
    )
    out.print(styled("hash chain: ", ("verified", good) if verified else ("BROKEN", bad)))
    return rebuild.equal, n_drift, verified


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
    table.columns[0].no_wrap = True  # an id is only useful whole (`ctxledger audit ID`)
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
