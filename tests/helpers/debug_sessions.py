"""Generated single-task debugging sessions (mini-swe-agent style) and the audit's ground truth.

The task is the only user message, so every summary merges into it (or is carried
beside it); the agent runs commands, edits files, hits shell and script errors and
runs tests. :func:`ground_truth` recomputes, view by view and independently of the
audit's pieces, which compaction last dropped each fact.
"""

from __future__ import annotations

import json
import random
from typing import Any

import anyio

from ctxledger.analysis.compactions import chain_compactions
from ctxledger.compressor.factmatch import Haystack, fact_text
from ctxledger.compressor.facts import extract_facts
from ctxledger.compressor.summarizers.base import SummaryRequest, SummaryResult
from ctxledger.compressor.summarizers.offline import OfflineSummarizer
from ctxledger.ledger.compaction import compact
from ctxledger.ledger.facade import Ledger
from ctxledger.messages import JSON, content_text

MODULES = ["config", "dataset", "valuerep", "filereader", "charset", "tag", "sequence", "util"]
PACKAGES = ["pydicom", "pvlib", "astropy", "sympy", "django"]


def _call(call_id: str, name: str, **args: Any) -> JSON:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(args)},
    }


class DebugSession:
    """Deterministic turns of one agent fixing one bug."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.pkg = self.rng.choice(PACKAGES)
        self.n = 0

    def task(self) -> JSON:
        mod = self.rng.choice(MODULES)
        return {
            "role": "user",
            "content": (
                f"Fix the bug in {self.pkg}/{mod}.py: reading a file with an empty date raises "
                "an error instead of returning None. Do not change the public API and keep "
                "Python 3.8 support."
            ),
        }

    def turn(self) -> list[JSON]:
        self.n += 1
        i, rng = self.n, self.rng
        mod = rng.choice(MODULES)
        path = f"{self.pkg}/{mod}.py"
        cid = f"call_{i}"
        kind = rng.choice(["edit", "test", "shell_error", "script", "read"])
        if kind == "edit":
            old, new = f"use_{mod}_decimal = True", f"use_{mod}_decimal = False"
            cmd = f"sed -i 's/{old}/{new}/' {path} && grep -n use_{mod}_decimal {path}"
            out = f"{40 + i}:{new}"
        elif kind == "test":
            failed = rng.randint(0, 3)
            cmd = f"python -m pytest tests/test_{mod}.py -q -x -k case_{i}"
            out = (
                f"tests/test_{mod}.py::test_case_{i} FAILED\n"
                f"E       ValueError: invalid literal for int() with base 10: 'x{i}'\n"
                f"{failed} failed, {10 + i} passed in 0.{i}s"
                if failed
                else f"{10 + i} passed in 0.{i}s"
            )
        elif kind == "shell_error":
            cmd = f"cat {self.pkg}/missing_{i}.py | head -5"
            out = f"cat: {self.pkg}/missing_{i}.py: No such file or directory"
        elif kind == "script":
            cmd = f"python reproduce_{i}.py"
            out = f"parse_date_{i}(\"\") raised: ValueError - '' is not a valid date format"
        else:
            cmd = f"nl -ba {path} | sed -n '{i},{i + 30}p'"
            out = "\n".join(
                f"{n:6d}\t    value_{n} = compute_{mod}(value_{n - 1})" for n in range(i, i + 30)
            )
        filler = " ".join(
            rng.choice(["reading", "the", "code", "path", "again", "now"]) for _ in range(60)
        )
        return [
            {
                "role": "assistant",
                "content": f"THOUGHT: step {i}, I will check {path} next. {filler}",
                "tool_calls": [_call(cid, "bash", command=cmd)],
            },
            {
                "role": "tool",
                "tool_call_id": cid,
                "content": f"<returncode>{0 if kind in ('edit', 'read') else 1}</returncode>\n<output>\n{out}\n</output>",
            },
        ]


class ForgetfulSummarizer:
    """Keeps the previous summary's lines at random and a few facts of the new turns."""

    kind = "forgetful"

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    async def summarize(self, request: SummaryRequest) -> SummaryResult:
        lines = [ln for ln in (request.previous_summary or "").splitlines() if ln.strip()]
        kept = [ln for ln in lines if self.rng.random() < 0.6]
        for fact in extract_facts(request.turns):
            if self.rng.random() < 0.3:
                kept.append(f"- {fact.value}")
        return SummaryResult(text="\n".join(kept) or "- nothing kept", summarizer=self.kind)


def drive(ledger: Ledger, seed: int, turns: int, summarizer: Any = None, every: int = 8) -> str:
    """One single-task session, compacted every `every` turns; returns the tip."""
    synth = DebugSession(seed)
    sid = ledger.start_session(model="m", context_length=16_000, system_prompt="You fix bugs.")
    ledger.append_messages(sid, [synth.task()])
    summarizer = summarizer or OfflineSummarizer()
    for t in range(1, turns + 1):
        ledger.append_messages(sid, synth.turn())
        if t % every == 0:
            outcome = anyio.run(compact, ledger, sid, summarizer)
            sid = outcome.new_session_id or sid
    return sid


# --------------------------------------------------------------------------- ground truth


def _present(messages: list[JSON], system: str | None) -> tuple[Haystack, set[str]]:
    texts = [system or ""] + [fact_text(m) for m in messages]
    facts = {f.normalized for m in messages for f in extract_facts([m])}
    facts |= {f.normalized for f in extract_facts([{"role": "assistant", "content": system or ""}])}
    return Haystack("\x00".join(texts)), facts


def ground_truth(ledger: Ledger, tip: str, known: dict[str, str]) -> dict[str, str | None]:
    """normalized fact (of `known`: normalized -> kind) absent from the tip -> the last compaction
    whose view before held it and whose view after did not (whole messages, not pieces)."""
    last: dict[str, str | None] = {}
    stored = ledger.transcript.stored
    for record in chain_compactions(ledger, tip):
        view = ledger.transcript.session(record.session_id)
        before = _present([stored(m).message for m in view.live], view.system_prompt)
        after = _present(
            [stored(e.message_id).message for e in record.switch.layout],
            record.switch.system_prompt,
        )
        for normalized, kind in known.items():
            held = normalized in before[1] or before[0].holds(kind, normalized)
            kept = normalized in after[1] or after[0].holds(kind, normalized)
            if held and not kept:
                last[normalized] = record.compaction_id
    tip_view = ledger.transcript.session(tip)
    now = _present([stored(m).message for m in tip_view.live], tip_view.system_prompt)
    return {
        n: last.get(n) for n, kind in known.items() if not (n in now[1] or now[0].holds(kind, n))
    }


def summary_lives_in_the_ask(ledger: Ledger, tip: str) -> bool:
    """Whether some compaction of the chain merged its summary into a message (the task)."""
    return any(
        e.origin == "merged"
        or content_text(ledger.transcript.stored(e.message_id).message).startswith("Fix")
        for r in chain_compactions(ledger, tip)
        for e in r.switch.layout
        if e.origin != "carried"
    )
