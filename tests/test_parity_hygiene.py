"""Differential parity with hermes-agent 0.19.0's gateway hygiene (session 32): the
safety net before the agent runs, for sessions that grew between turns (HERMES_SPEC §2).

Hermes's rule is inline in its gateway's message handler, and that handler is what
runs here: ``tests/hermes_compaction.py`` op ``hygiene`` drives
``GatewayRunner._handle_message_with_agent`` for one inbound message with a fake
session store (the transcript, the stored real prompt count), a config.yaml giving the
window and the hard message limit, and every other runner attribute reading as
nothing; it stops the handler where it has decided. ctxledger runs
``ContextService.hygiene`` on the same session (no system prompt, no tools schema,
the rough estimator: Hermes's gateway estimates the history alone, README "Differences",
*Hygiene*) and the compaction it would start is recorded instead of run.

Hypothesis draws the window, the hard limit, the history (empty, too short, long; tool
groups now and then) and the stored count (none, or a share of 85 % of the window, its
exact edge included). The decisions must be equal, and the figure each side judged:
when it reached the limit, the real count exactly, the estimate within 5 % + 50 tokens
(the two rough estimates measure structures differently, README "Differences", *Rough
estimate*). An estimate that close to the limit decides either
way and is left out. Found and fixed here: ctxledger fired only past the hard message
limit; Hermes fires at it.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from helpers.hermes_differential import Hermes, drawn, mismatches, oracle
from hypothesis import strategies as st

from ctxledger.clock import SequentialIds
from ctxledger.compressor.config import CompressionConfig
from ctxledger.ledger.facade import Ledger
from ctxledger.runtime.service import ContextService, TurnResult


@pytest.fixture(scope="module")
def hermes() -> Iterator[Hermes]:
    yield from oracle()


def _group(i: int) -> list[dict[str, Any]]:
    call = {"id": f"c{i}", "type": "function"}
    call["function"] = {"name": "terminal", "arguments": '{"command": "make test"}'}
    return [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": f"c{i}", "content": f"{i} passed " + "." * 300},
    ]


@st.composite
def _item(draw: st.DrawFn) -> dict[str, Any]:
    window = draw(st.sampled_from([32_000, 200_000]))
    hard_limit = draw(st.sampled_from([10, 30, 5_000]))
    count = draw(st.sampled_from([0, 3, 4, 6, 9, 10, 11, 20, 29, 30, 31]))
    words = draw(st.sampled_from([50, 600, 3_000]))
    history: list[dict[str, Any]] = []
    while len(history) < count:
        i = len(history)
        if history and history[-1]["role"] == "user" and draw(st.integers(0, 4)) == 0:
            history.extend(_group(i))
            continue
        role = "assistant" if history and history[-1]["role"] == "user" else "user"
        history.append({"role": role, "content": f"{role} {i} " + "w " * words})
    limit = int(window * 0.85)
    stored = draw(st.sampled_from([0, 0, limit // 2, limit - 1, limit, limit * 6 // 5]))
    return {
        "window": window,
        "hard_limit": hard_limit,
        "history": history,
        "last_prompt_tokens": stored,
    }


async def _ours(path: Path, item: dict[str, Any]) -> dict[str, Any]:
    config = CompressionConfig(estimator="rough", hygiene_hard_message_limit=item["hard_limit"])
    ledger = Ledger.open(path, ids=SequentialIds(), config=config, durability="normal")
    svc = ContextService(ledger, config=config)
    sid = await svc.start_session(model="local-model", context_length=item["window"])
    if item["history"]:
        sid = (await svc.append(sid, item["history"])).session_id
    if item["last_prompt_tokens"]:
        usage = {"prompt_tokens": item["last_prompt_tokens"], "completion_tokens": 1}
        sid = (await svc.report_usage(sid, usage, tool_calls=False)).session_id
    judged: list[int] = []

    async def recording(sid: str, trigger: Any, tokens: int, *_: Any, **__: Any) -> TurnResult:
        judged.append(tokens)
        return TurnResult(session_id=sid)

    svc._auto_compress = recording  # type: ignore[method-assign]
    await svc.hygiene(sid)
    ledger.close()
    return {"compress": bool(judged), "tokens": judged[0] if judged else None}


def test_hygiene_decisions_match_hermes_s_gateway(hermes: Hermes) -> None:
    items = drawn(_item(), 48, derandomize=True)
    answers = hermes.ask("hygiene", items)
    pairs, left_out, fired = [], 0, 0
    with tempfile.TemporaryDirectory() as tmp:
        for n, (item, answer) in enumerate(zip(items, answers, strict=True)):
            assert answer["compress"] is not None, answer  # the handler reached its decision
            ours = anyio.run(_ours, Path(tmp) / f"{n}.db", item)
            estimate, limit = answer["estimate"], int(item["window"] * 0.85)
            theirs = {"compress": answer["compress"]}
            mine = {"compress": ours["compress"]}
            figure = item["last_prompt_tokens"] or estimate or 0
            if answer["compress"] and figure >= limit:  # the figure that fired: stored or estimated
                theirs["tokens"] = figure
                mine["tokens"] = ours["tokens"]
                if estimate is not None and abs(estimate - ours["tokens"]) <= 50 + estimate // 20:
                    mine["tokens"] = estimate
            if estimate is not None and abs(estimate - limit) <= 50 + limit // 20:
                left_out += 1
                continue
            fired += answer["compress"]
            shape = [
                item["window"],
                item["hard_limit"],
                len(item["history"]),
                item["last_prompt_tokens"],
            ]
            pairs.append((shape, theirs, mine))
    assert not mismatches(pairs), "\n".join(mismatches(pairs)[:3])
    assert left_out * 5 < len(items) and 0 < fired < len(pairs), (left_out, fired)
