"""Differential parity with hermes-agent 0.19.0's trajectory compressor (session 31,
HERMES_SPEC §8): which turns of a finished trajectory are summarized.

Hypothesis draws ShareGPT records (a system turn, then human / gpt / tool turns with
tool responses right after the call that asked for them, 20 to 4,000 characters a
turn) and targets, and runs them through Hermes's ``TrajectoryCompressor.
compress_trajectory`` (``tests/hermes_oracle.py`` op ``trajectory``: its tokenizer is
replaced by its own characters // 4 fallback, the summary call answered, no notice)
and ctxledger's ``plan_trajectory`` given the same per-turn counts: both must skip the
same records and summarize the same turns. Not compared: the system-prompt notice,
whose tokens ctxledger adds to what must be summarized (so the result lands under the
target; Hermes appends it uncounted) and whose wording is ctxledger's own.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from helpers.hermes_differential import Hermes, drawn, mismatches, oracle
from hypothesis import strategies as st

from ctxledger.trajectories.core import TrajectoryConfig, plan_trajectory


@pytest.fixture(scope="module")
def hermes() -> Iterator[Hermes]:
    yield from oracle()


@st.composite
def _record(draw: st.DrawFn) -> dict[str, Any]:
    sizes = st.sampled_from([20, 400, 1_500, 4_000])
    turns = [{"from": "system", "value": "You are a coding agent. " + "s" * draw(sizes)}]
    for i in range(draw(st.integers(2, 14))):
        turns.append({"from": "human", "value": f"ask {i} " + "h" * draw(sizes)})
        for j in range(draw(st.integers(0, 2))):  # calls, each answered right after
            turns.append({"from": "gpt", "value": f"<tool_call>{i}.{j}</tool_call>"})
            turns.append({"from": "tool", "value": "<tool_response>" + "t" * draw(sizes)})
        turns.append({"from": "gpt", "value": f"answer {i} " + "g" * draw(sizes)})
    target = draw(st.sampled_from([1_000, 3_000, 8_000]))
    summary_target = draw(st.sampled_from([100, 750]))
    return {
        "turns": turns,
        "target": target,
        "summary_target": summary_target,
        "protect_last_n": draw(st.sampled_from([2, 4])),
    }


def _ours(item: dict[str, Any]) -> dict[str, Any]:
    config = TrajectoryConfig(
        target_max_tokens=item["target"],
        summary_target_tokens=item["summary_target"],
        protect_last_n_turns=item["protect_last_n"],
    )
    counts = [len(t["value"]) // 4 for t in item["turns"]]
    p = plan_trajectory(item["turns"], counts, config)
    if p.action != "compress":
        return {"skipped": p.reason == "under_target", "compressed": False, "start": -1, "end": -1}
    return {"skipped": False, "compressed": True, "start": p.head_end, "end": p.compress_until}


def test_the_turns_summarized_are_hermes_s(hermes: Hermes) -> None:
    items = drawn(_record(), 150)
    answers = hermes.ask("trajectory", items)
    pairs = [
        ([t["from"][0] for t in item["turns"]], theirs, _ours(item))
        for item, theirs in zip(items, answers, strict=True)
    ]
    found = mismatches(pairs)
    assert not found, f"{len(found)} of {len(pairs)} differ:\n" + "\n".join(found[:4])
