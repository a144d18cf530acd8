"""Differential parity with hermes-agent 0.19.0's prune pass (session 31): which tool
results become one-liners or duplicate markers, and which call arguments are cut.

Hypothesis draws tool-heavy turns around the thresholds (results of 150 to 3,000
characters, 199 to 201 among them, identical results repeated, JSON arguments around
500 characters) and runs them through Hermes's ``_prune_old_tool_results`` with
nothing protected (``tests/hermes_oracle.py`` op ``prune``) and through ctxledger's
``prune_messages`` over every index: what each message becomes must be of the same
kind (unchanged, a one-liner, a duplicate marker, arguments cut), and cut arguments
must be valid JSON with the same keys and the same first 200 characters of every
string leaf. The one-liners' wording is compared by ``test_parity_differential_limits``;
where the pass applies (Hermes: everything before its own prune boundary; ctxledger:
the summarized middle only) is a documented difference (README "One boundary").
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from helpers.hermes_differential import Hermes, drawn, mismatches, oracle
from hypothesis import strategies as st

from ctxledger.compressor.prune import prune_messages

NAMES = ["terminal", "read_file", "search_files", "write_file", "patch", "web_search", "lint"]
RESULT_SIZES = [150, 199, 200, 201, 250, 3_000]
ARG_SIZES = [100, 499, 500, 501, 2_000]


@pytest.fixture(scope="module")
def hermes() -> Iterator[Hermes]:
    yield from oracle()


def _arguments(name: str, n: int, i: int) -> str:
    """JSON arguments of exactly `n` characters (a string leaf pads them)."""
    base = {"path": f"src/module_{i}.py", "command": "make test", "content": ""}
    pad = n - len(json.dumps(base))
    base["content"] = "y" * max(0, pad)
    return json.dumps(base)


@st.composite
def _turns(draw: st.DrawFn) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "fix the build"}]
    seen: list[str] = []
    for g in range(draw(st.integers(1, 8))):
        calls, results = [], []
        for c in range(draw(st.integers(1, 3))):
            cid, name = f"call_{g}_{c}", draw(st.sampled_from(NAMES))
            args = _arguments(name, draw(st.sampled_from(ARG_SIZES)), g)
            calls.append(
                {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}
            )
            if seen and draw(st.integers(0, 3)) == 0:
                content = draw(st.sampled_from(seen))  # the same output again
            else:
                size = draw(st.sampled_from(RESULT_SIZES))
                content = (f"output {g}.{c}: " + "line of text\n" * (size // 13 + 1))[:size]
                seen.append(content)
            results.append({"role": "tool", "tool_call_id": cid, "content": content})
        messages.append({"role": "assistant", "content": None, "tool_calls": calls})
        messages += results
    messages.append({"role": "assistant", "content": "Done."})
    return messages


def _kind(before: dict[str, Any], after: dict[str, Any]) -> Any:
    if after == before:
        return "unchanged"
    if before["role"] == "tool":
        text = str(after["content"])
        duplicate = (
            text.startswith("[Duplicate tool output") or "only that newer copy is kept" in text
        )
        return "duplicate" if duplicate else "one-liner"
    return ["args cut", [_shape(c["function"]["arguments"]) for c in after["tool_calls"]]]


def _shape(arguments: str) -> Any:
    """Valid JSON (else raises), its keys and every string leaf's first 200 characters."""
    parsed = json.loads(arguments)
    return {k: v[:200] if isinstance(v, str) else v for k, v in parsed.items()}


def _ours(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = list(messages)
    for p in prune_messages(messages, range(len(messages))):
        out[p.index] = p.replacement
    return out


def test_the_prune_pass_rewrites_what_hermes_rewrites(hermes: Hermes) -> None:
    sessions = drawn(_turns(), 40)
    answers = hermes.ask("prune", sessions)
    pairs = []
    for messages, theirs in zip(sessions, answers, strict=True):
        ours = _ours(messages)
        for i, before in enumerate(messages):
            pairs.append((before, _kind(before, theirs[i]), _kind(before, ours[i])))
    found = mismatches(pairs)
    assert not found, f"{len(found)} differ:\n" + "\n".join(found[:3])
