"""Shared builders for ledger-level tests: deterministic ledgers and generated sessions."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any, TypeVar

import anyio
from click.testing import CliRunner

from ctxledger.cli.main import cli
from ctxledger.clock import SequentialIds, StepClock
from ctxledger.compressor.config import CompressionConfig
from ctxledger.compressor.summarizers.offline import OfflineSummarizer
from ctxledger.demo.synth import SessionSynth
from ctxledger.events import Event
from ctxledger.eventstore.sqlite import SQLiteEventStore
from ctxledger.ledger.compaction import CompactionOutcome, compact
from ctxledger.ledger.facade import Ledger

#: a small window where compaction happens after a few turns (no 64K floor)
SMALL = CompressionConfig(context_length=16_000, threshold_floor_tokens=0)


def make_ledger(path: Path, config: CompressionConfig = SMALL, namespace: str = "t") -> Ledger:
    return Ledger.open(path, clock=StepClock(), ids=SequentialIds(namespace), config=config)


def deterministic_ledger(path: Path | None = None, config: CompressionConfig = SMALL) -> Ledger:
    """Step clock, sequential ids (no namespace), the small config; in memory when no path."""
    if path is None:
        return Ledger(
            SQLiteEventStore(":memory:"), clock=StepClock(), ids=SequentialIds(), config=config
        )
    return Ledger.open(
        path, clock=StepClock(), ids=SequentialIds(), config=config, durability="normal"
    )


#: one tool and one call to it, as the hostile-input tests' session holds them
LS_CALL = {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
LS_TOOL = {"type": "function", "function": {"name": "ls", "parameters": {"type": "object"}}}


def ledger_with_one_call() -> tuple[Ledger, str]:
    """An in-memory deterministic ledger whose one session asked, called ``ls`` and got its
    output: what a hostile argument is thrown at (the caller closes it)."""
    led = deterministic_ledger()
    sid = led.start_session(model="m", system_prompt="s", tools=[LS_TOOL])
    led.append_messages(
        sid,
        [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": None, "tool_calls": [LS_CALL]},
            {"role": "tool", "tool_call_id": "c1", "content": "out"},
        ],
    )
    return led, sid


def recorded_chain(
    path: Path | None, seed: int, turns: int = 12, **kwargs: Any
) -> tuple[Ledger, str]:
    """A generated session driven through the service (``whatif.record_generated``): (ledger, tip)."""
    from ctxledger.demo.record import record_generated

    ledger = deterministic_ledger(path)
    return ledger, record_generated(ledger, seed=seed, turns=turns, **kwargs)


def session_with_turns(ledger: Ledger, turns: int, seed: int = 3, big: bool = False) -> str:
    synth = SessionSynth(seed, big_outputs=big)
    sid = ledger.start_session(model="m", system_prompt=synth.system_prompt(), tools=synth.tools())
    for msgs in synth.turns(turns):
        ledger.append_messages(sid, msgs)
    return sid


def compact_now(ledger: Ledger, sid: str, **kwargs: object) -> CompactionOutcome:
    async def run() -> CompactionOutcome:
        return await compact(ledger, sid, OfflineSummarizer(), **kwargs)  # type: ignore[arg-type]

    return anyio.run(run)


E = TypeVar("E", bound=Event)


def chain_events(ledger: Ledger, sid: str, kind: type[E]) -> list[E]:
    """Every event of `kind` in the compression chain of `sid`, in log order (after a refresh)."""
    ledger.refresh()
    chain = set(ledger.chains.chain(sid))
    return [
        r.event for r in ledger.store.read_all() if r.stream in chain and isinstance(r.event, kind)
    ]


def dump_log(path: Path) -> list[list[tuple[object, ...]]]:
    """Every row of a SQLite ledger's log tables (events, streams, blobs), in order: two
    ledgers written alike compare equal byte for byte."""
    conn = sqlite3.connect(path)
    try:
        return [
            conn.execute(f"SELECT * FROM {table} ORDER BY 1").fetchall()
            for table in ("events", "streams", "blobs")
        ]
    finally:
        conn.close()


def run_cli(path: Path | str, *args: str) -> tuple[int, str]:
    """``ctxledger --db path args...`` in process: its exit code and output."""
    result = CliRunner().invoke(cli, ["--db", str(path), *args])
    return result.exit_code, result.output


def conversation_file(path: Path, seed: int = 5, turns: int = 14) -> Path:
    """A synthetic conversation (a system prompt and `turns` turns) written to `path` as
    OpenAI JSON lines, for the CLI's `import`."""
    synth = SessionSynth(seed, big_outputs=False)
    messages = [{"role": "system", "content": synth.system_prompt()}]
    for turn in synth.turns(turns):
        messages += turn
    path.write_text("\n".join(json.dumps(m) for m in messages) + "\n")
    return path
