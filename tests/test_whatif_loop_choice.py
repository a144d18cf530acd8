"""The loop a what-if replays: the one the chain's host named, or ``replay --loop`` for
a ledger recorded before hosts named theirs (session 38)."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from click.testing import CliRunner
from helpers.ledger_helpers import SMALL, deterministic_ledger
from test_whatif_honesty import _checked_between_turns

from ctxledger.analysis.replay import _other_configs
from ctxledger.analysis.undo import undo
from ctxledger.analysis.whatif import whatif
from ctxledger.cli.main import cli
from ctxledger.errors import InvalidInput
from ctxledger.events import SessionSwitched
from ctxledger.ledger.facade import Ledger
from ctxledger.ledger.spec import LOOP_KEY
from ctxledger.runtime.service import ContextService


async def _every_call(ledger: Ledger) -> str:
    """A loop that runs preflight before each model call and no hygiene, as the proxy and
    the LangChain middleware do: after the user message and after a call's tool result."""
    svc = ContextService(ledger, config=SMALL)
    sid = ledger.start_session(model="m", context_length=16_000)
    for turn in range(14):
        ask = {"role": "user", "content": f"turn {turn} " + "word " * 300}
        call = {"id": f"c{turn}", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        sid = (await svc.append(sid, [ask])).session_id
        sid = (await svc.preflight(sid)).session_id
        asked = {"role": "assistant", "content": None, "tool_calls": [call]}
        result = {"role": "tool", "tool_call_id": f"c{turn}", "content": "result " * 600}
        sid = (await svc.append(sid, [asked, result])).session_id
        sid = (await svc.preflight(sid)).session_id
        sid = (await svc.append(sid, [{"role": "assistant", "content": f"done {turn}"}])).session_id
    return svc.tip(sid)


@pytest.mark.parametrize(("where", "loop"), [("answer", "per-run"), ("tools", "every-call")])
def test_an_old_ledger_is_reproduced_with_the_loop_its_host_ran(
    tmp_path: Path, where: str, loop: str
) -> None:
    """A chain checked between turns as the Agents SDK session ("answer") or before each
    model call as the LangChain middleware and the proxy ("tools"), recorded without a
    loop (as every ledger before session 38): the default what-if keeps today's loop
    and output, ``--loop`` reproduces it."""
    db = tmp_path / "l.db"
    ledger = deterministic_ledger(db)
    if where == "answer":
        tip = anyio.run(_checked_between_turns, ledger, where)
    else:
        tip = anyio.run(_every_call, ledger)
    assert all(LOOP_KEY not in s.config for s in ledger.transcript.state.sessions.values())
    default = whatif(ledger, tip)
    assert default.reproduction is not None and not default.reproduction.exact
    assert not any(n.startswith("the what-if checked") for n in default.notes)
    [warning] = [w for w in default.reproduction.warnings if "ran preflight where" in w]
    assert warning.endswith(
        "(`replay --loop per-run` or `--loop every-call` replays those hosts' loops)"
    )
    chosen = whatif(ledger, tip, loop=loop)
    repro = chosen.reproduction
    assert repro is not None and chosen.reproduces_recorded, repro.differences
    assert repro.compactions[0] >= 2 and not any("ran preflight" in w for w in repro.warnings)
    assert chosen.notes[0] == (
        f"the what-if checked for compaction where the {loop} loop checks (chosen with --loop)"
    )
    ledger.close()
    out = CliRunner().invoke(cli, ["--db", str(db), "replay", tip, "--loop", loop])
    assert out.exit_code == 0, out.output
    assert "reproduces the recorded chain exactly" in out.output
    assert f"where the {loop} loop checks (chosen with --loop)" in out.output


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ("bogus", "'bogus'"),
        ("per_run ", "'per_run '"),
        ("ëvery-call", "non-ASCII"),
        ("x" * 60, f"'{'x' * 37}'..."),
    ],
)
def test_a_bad_loop_is_a_clear_error(tmp_path: Path, value: str, shown: str) -> None:
    db = tmp_path / "l.db"
    ledger = deterministic_ledger(db)
    tip = anyio.run(_checked_between_turns, ledger, "tools")
    with pytest.raises(InvalidInput, match="loop must be one of hermes, every-call, per-run"):
        whatif(ledger, tip, loop=value)
    svc = ContextService(ledger, config=SMALL)
    before = ledger.store.last_seq()
    with pytest.raises(InvalidInput, match="loop must be one of"):
        anyio.run(lambda: svc.start_session(model="m", context_length=16_000, loop=value))
    assert ledger.store.last_seq() == before  # nothing appended
    ledger.close()
    out = CliRunner().invoke(cli, ["--db", str(db), "replay", tip, "--loop", value])
    assert out.exit_code == 2
    assert out.output.strip() == (
        f"error: loop must be one of hermes, every-call, per-run (got {shown})"
    )
    out = CliRunner().invoke(cli, ["--db", str(db), "replay", tip, "--loop", "hermes", "--verify"])
    assert out.exit_code == 2 and "without --config/--summarizer/--out/--loop" in out.output


def test_continuations_carry_the_loop_the_host_named() -> None:
    """A compaction's continuation and an undo's carry the root's loop; a session whose
    host said nothing records none (its events as before)."""
    ledger = deterministic_ledger()
    svc = ContextService(ledger, config=SMALL)

    async def chain() -> str:
        sid = await svc.start_session(model="m", context_length=16_000, loop="every_call")
        for turn in range(6):
            ask = {"role": "user", "content": f"turn {turn} " + "word " * 300}
            sid = (await svc.append(sid, [ask, {"role": "assistant", "content": "ok"}])).session_id
        return (await svc.compress(sid)).session_id

    tip = anyio.run(chain)
    [compaction] = [
        r.compaction_id for r in ledger.chains.state.sessions.values() if r.compaction_id
    ]
    reverted = undo(ledger, compaction).new_session_id
    loops = {
        s: ledger.transcript.session(s).config.get(LOOP_KEY) for s in ledger.chains.chain(reverted)
    }
    assert tip in loops and set(loops.values()) == {"every_call"} and len(loops) == 3
    plain = anyio.run(lambda: svc.start_session(model="m", context_length=16_000))
    assert LOOP_KEY not in ledger.transcript.session(plain).config


def test_the_last_final_answer_is_checked_after_it_is_saved_under_per_run() -> None:
    """The Agents SDK's post-write hook checks after a run's final answer is saved: where
    the last answer pushes the view over the threshold, only that check compacts (an
    earlier answer's view is checked again at the next run's read)."""
    ledger = deterministic_ledger()
    svc = ContextService(ledger, config=SMALL)

    async def chain() -> str:
        sid = await svc.start_session(model="m", context_length=16_000, loop="per_run")
        for turn in range(6):
            sid = (await svc.preflight(sid)).session_id  # (the run reads its history)
            words = 3_500 if turn == 5 else 1_000
            ask = {"role": "user", "content": f"turn {turn} " + "word " * words}
            sid = (await svc.append(sid, [ask])).session_id
            sent = ledger.transcript.total_tokens(svc.tip(sid)) + 40
            sid = (await svc.append(sid, [{"role": "assistant", "content": "ok"}])).session_id
            usage = {"prompt_tokens": sent, "completion_tokens": 5}
            sid = (await svc.report_usage(sid, usage, tool_calls=False)).session_id
            sid = (await svc.preflight(sid)).session_id  # (the post-write hook)
        return svc.tip(sid)

    tip = anyio.run(chain)
    report = whatif(ledger, tip)
    repro = report.reproduction
    assert [c.trigger for c in report.recorded.compactions] == ["preflight"]
    assert repro is not None and report.reproduces_recorded, repro.differences


def test_replay_verify_compares_settings_without_the_loop() -> None:
    """A continuation's snapshot names the host's loop, the compaction's does not: not a
    second configuration to re-plan with, nor a setting said to differ."""
    ledger = deterministic_ledger()
    svc = ContextService(ledger, config=SMALL)

    async def chain() -> str:
        sid = await svc.start_session(model="m", context_length=16_000, loop="every_call")
        for turn in range(6):
            ask = {"role": "user", "content": f"turn {turn} " + "word " * 300}
            sid = (await svc.append(sid, [ask, {"role": "assistant", "content": "ok"}])).session_id
        return (await svc.compress(sid)).session_id

    tip = anyio.run(chain)
    [switch] = [
        r.event
        for s in ledger.chains.chain(tip)
        for r in ledger.store.read_session(s)
        if isinstance(r.event, SessionSwitched)
    ]
    assert LOOP_KEY in ledger.transcript.session(tip).config
    assert _other_configs(ledger, switch) == []


def test_diff_replays_the_loop_chosen_with_loop(tmp_path: Path) -> None:
    """``diff A --loop`` compares A with its what-if under that loop, as ``replay --loop``."""
    db = tmp_path / "l.db"
    ledger = deterministic_ledger(db)
    tip = anyio.run(_every_call, ledger)
    ledger.close()

    def diff(*args: str) -> str:
        out = CliRunner().invoke(cli, ["--db", str(db), "diff", tip, *args])
        assert out.exit_code == 0, out.output
        return out.output

    assert "no differences; +0 tokens" in diff("--loop", "every-call")
    assert "no differences" not in diff("--loop", "hermes")
    out = CliRunner().invoke(cli, ["--db", str(db), "diff", tip, "--loop", "bogus"])
    assert out.exit_code == 2 and "loop must be one of" in out.output
