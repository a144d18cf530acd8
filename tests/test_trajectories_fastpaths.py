"""Session 44's cuts to batch trajectory compression's CPU (docs/notes/s44-traj9.md):
the output file stays byte for byte what main wrote before them, and each cut equals
the plain code it replaced (the reference extractor's ``_lines_with``, finditer over
every match; redaction's rules looked for one by one, kept here)."""

from __future__ import annotations

import hashlib
import importlib
import json
import random
from pathlib import Path
from typing import Any

from helpers.reference_facts.factkinds import _lines_with as every_matching_line
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxledger.compressor import factkinds
from ctxledger.compressor.summarizers.offline import OfflineSummarizer
from ctxledger.trajectories import TrajectoryConfig, compress_file_sync

#: the module (the package's ``redact`` is its function)
redaction = importlib.import_module("ctxledger.compressor.redact")

#: pieces of tool outputs: test summaries, result lines (one whose match runs onto the
#: next line: ``result\n:``), exceptions, paths, and secrets of each redaction rule
_OUTPUTS = (
    "===== 3 passed, 1 failed in 0.52s =====",
    "Ran 4 tests in 0.010s\n\nOK",
    "FAILED (failures=2)",
    "result\n: 42 rows",
    "Output = done",
    "check()\n returned 0",
    "all tests passed",
    "expected 3 but got 4",
    'Traceback (most recent call last):\n  File "src/app.py", line 12, in run\nValueError: bad input',
    "src/app.py:12: error: Name 'x' is not defined",
    "bash: foo: command not found",
    "process exited with code 2",
    "api_key=sk-proj-abcdefghijklmnopqrstuvwx",
    "token ghp_abcdefghijklmnopqrstuvwxyz0123456789 used",
    "Authorization: Bearer abcdefgh12345678",
    "postgres://app:hunter22@db.internal:5432/x",
    "AKIAABCDEFGHIJKLMNOP and aws_secret = 'abcdefghijklmnopqrstuvwxyz0123456789ABCD'",
    "--password s3cret-value",
    "Cookie: session=abc123def",
    "DB_PASSWORD=correct-horse",
    "served at http://localhost:8080/ v1.2.3 on port 8080",
    "42 files changed, 3 MB, took 12 seconds",
)
_WORDS = ("the", "test", "build", "fix", "path", "result", "passed", "failed", "error", "src")


def _text(rng: random.Random, low: int, high: int) -> str:
    return " ".join(rng.choices(_WORDS, k=rng.randint(low, high)))


def _trajectory(rng: random.Random, index: int) -> dict[str, Any]:
    """A Hermes-style ShareGPT trajectory whose tool outputs hold facts and secrets."""
    turns = [
        {"from": "system", "value": "You are a function-calling agent. " + _text(rng, 50, 120)},
        {"from": "human", "value": f"Fix the failing test in src/app_{index}.py, please."},
    ]
    for i in range(rng.randint(8, 20)):
        call = {"name": "terminal", "arguments": {"command": f"pytest tests/test_{i}.py -q"}}
        turns.append(
            {
                "from": "gpt",
                "value": f"{_text(rng, 3, 20)}\n<tool_call>\n{json.dumps(call)}\n</tool_call>",
            }
        )
        lines = [_text(rng, 5, 40) for _ in range(rng.randint(1, 12))]
        lines += rng.sample(_OUTPUTS, k=rng.randint(0, 4))
        rng.shuffle(lines)
        content = "\n".join(lines) if rng.random() < 0.7 else " ".join(lines)
        body = {"tool_call_id": f"call_{index}_{i}", "name": "terminal", "content": content}
        turns.append(
            {"from": "tool", "value": f"<tool_response>\n{json.dumps(body)}\n</tool_response>"}
        )
    turns.append({"from": "gpt", "value": "The test passes now. " + _text(rng, 5, 15)})
    return {"id": f"traj-{index}", "conversations": turns}


#: sha256 of the output main wrote for the trajectories below at f6ee61b7, before
#: session 44's cuts (the test's data is generated here, nothing else is read)
_MAINS_OUTPUT = "663fff610c2b42b1a9d6a52ac941ced9d21a49821bb425a12a1d288d288dc247"


def test_compressed_output_is_byte_for_byte_mains(tmp_path: Path) -> None:
    rng = random.Random(44)
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    src.write_text("".join(json.dumps(_trajectory(rng, i)) + "\n" for i in range(24)))
    config = TrajectoryConfig(target_max_tokens=1500, summary_target_tokens=400, concurrency=4)
    report = compress_file_sync(src, out, config, OfflineSummarizer(), progress=False)
    assert report.compressed >= 12 and report.failed == 0
    assert "[REDACTED]" in out.read_text()  # the summaries went through the redaction
    assert hashlib.sha256(out.read_bytes()).hexdigest() == _MAINS_OUTPUT


#: what the two patterns match, and the whitespace, ``:``, ``=`` and ``)`` around them
_LINE_PIECES = st.sampled_from(
    [
        "result", "results", "Output", " ", "\n", "\t", ":", "=", ")", "returned", "raised",
        "passed", "failed", "in", "into", "this", "the", "path", "tests", "all", "3", "ok",
        "success", "expected", "got", "✓", "ValueError", "os.", "Exception", "is", "fixed",
        "works", "now", "_", ".",
    ]
)  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(st.lists(_LINE_PIECES, max_size=30).map("".join))
def test_lines_with_finds_the_lines_of_every_match(text: str) -> None:
    for pattern in (factkinds._RESULT_LINE, factkinds._EXCEPTION_IN_LINE):
        assert factkinds._lines_with(pattern, text) == every_matching_line(pattern, text)


def _redact_rule_by_rule(text: str) -> str:
    """The oracle: each rule's triggers looked for on their own (main's code)."""
    if not text:
        return text
    folded = text.lower()
    for triggers, pattern, replacement in redaction._RULES:
        if any(t in folded for t in triggers):
            text = pattern.sub(replacement, text)
    return redaction._redact_assignments(text)


_SECRET_PIECES = st.sampled_from([*_OUTPUTS, " ", "\n", "sk-", "GH", "xoxb-1234567890ab", "="])


@settings(max_examples=300, deadline=None)
@given(st.lists(_SECRET_PIECES, max_size=8).map("".join))
def test_redaction_runs_equal_the_rules_one_by_one(text: str) -> None:
    assert redaction.redact(text) == _redact_rule_by_rule(text)
