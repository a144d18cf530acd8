"""Session 44's cuts to batch trajectory compression's CPU (docs/notes/s44-traj9.md):
the output file stays byte for byte what main wrote before them, and each cut equals
the plain code it replaced (the reference extractor's ``_lines_with``, finditer over
every match; redaction's rules looked for one by one, kept here)."""

from __future__ import annotations

import importlib
import json
import random
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers.reference_facts.factkinds import _lines_with as every_matching_line
from hypothesis import Phase, example, find, given, settings
from hypothesis import strategies as st

from ctxledger.compressor import factkinds
from ctxledger.compressor.summarizers.offline import OfflineSummarizer
from ctxledger.trajectories import TrajectoryConfig, compress_file_sync

#: the module (the package's ``redact`` is its function)
redaction = importlib.import_module("ctxledger.compressor.redact")

#: pieces of tool outputs: test summaries, result lines (whose matches run onto the
#: next line: ``result\n:``, ``)\n returned``), exceptions, paths, and secrets of each
#: redaction rule (every vendor token shape among them)
_OUTPUTS = (
    "===== 3 passed, 1 failed in 0.52s =====",
    "Ran 4 tests in 0.010s\n\nOK",
    "FAILED (failures=2)",
    "result\n: 42 rows",
    "Output = done",
    "check()\n returned 0",
    "Output\n=\npassed",
    "all tests passed",
    "expected 3 but got 4",
    'Traceback (most recent call last):\n  File "src/app.py", line 12, in run\nValueError: bad input',
    "src/app.py:12: error: Name 'x' is not defined",
    "bash: foo: command not found",
    "process exited with code 2",
    "api_key=sk-proj-abcdefghijklmnopqrstuvwx",
    "openai result: sk-proj-0123456789abcdefghijklmn rejected",
    "push result: key ghp_abcdefghijklmnopqrstuvwxyz0123456789 rejected",
    "git result: key github_pat_11ABCDEFG0123456789_abcdefghijklmnop rejected",
    "slack result: key xoxb-1234567890-abcdefghij rejected",
    "maps result: key AIzaSyD3-xAmPlE_0123456789abcdefghijklm rejected",
    "aws result: key ASIAABCDEFGHIJKLMNOP expired",
    "Authorization: Bearer abcdefgh12345678",
    "postgres://app:hunter22@db.internal:5432/x",
    "AKIAABCDEFGHIJKLMNOP and aws_secret = 'abcdefghijklmnopqrstuvwxyz0123456789ABCD'",
    "--password s3cret-value",
    "Cookie: session=abc123def",
    "DB_PASSWORD=correct-horse",
    "served at http://localhost:8080/ v1.2.3 on port 8080",
    "42 files changed, 3 MB, took 12 seconds",
)
#: a line with a secret of each vendor token rule: one is in every tool output
_VENDOR_KEYS = [line for line in _OUTPUTS if " result: " in line]
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
        lines += rng.sample(_OUTPUTS, k=rng.randint(0, 4)) + rng.sample(_VENDOR_KEYS, k=1)
        rng.shuffle(lines)
        content = "\n".join(lines) if rng.random() < 0.7 else " ".join(lines)
        body = {"tool_call_id": f"call_{index}_{i}", "name": "terminal", "content": content}
        turns.append(
            {"from": "tool", "value": f"<tool_response>\n{json.dumps(body)}\n</tool_response>"}
        )
    turns.append({"from": "gpt", "value": "The test passes now. " + _text(rng, 5, 15)})
    return {"id": f"traj-{index}", "conversations": turns}


def _redact_rule_by_rule(text: str) -> str:
    """The oracle: each rule's triggers looked for on their own (main's code)."""
    if not text:
        return text
    folded = text.lower()
    for triggers, pattern, replacement in redaction._RULES:
        if any(t in folded for t in triggers):
            text = pattern.sub(replacement, text)
    return redaction._redact_assignments(text)


def _compress(src: Path, out: Path) -> bytes:
    config = TrajectoryConfig(target_max_tokens=1500, summary_target_tokens=400, concurrency=4)
    report = compress_file_sync(src, out, config, OfflineSummarizer(), progress=False)
    assert report.compressed >= 12 and report.failed == 0
    return out.read_bytes()


def test_compressed_output_is_byte_for_byte_mains(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The file written with the cuts equals the one written with main's code in their place
    (``_lines_with`` as the reference extractor keeps it, redaction rule by rule)."""
    rng = random.Random(44)
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(_trajectory(rng, i)) + "\n" for i in range(24)))
    written = _compress(src, tmp_path / "out.jsonl")
    assert b"[REDACTED]" in written  # the summaries went through the redaction
    monkeypatch.setattr(factkinds, "_lines_with", every_matching_line)
    fast = redaction.redact
    for name, module in list(sys.modules.items()):
        if name.startswith("ctxledger") and getattr(module, "redact", None) is fast:
            monkeypatch.setattr(module, "redact", _redact_rule_by_rule)
    assert _compress(src, tmp_path / "reference.jsonl") == written


#: what the two patterns match and the whitespace, ``:``, ``=`` and ``)`` around them;
#: then, drawn as often as all of those, joined pieces whose matches run onto the next line
#: (``result\n:``, ``x)\n returned``) or that start a line with a match of its own (what
#: a crossing part must never hold); ``\x85`` and ``\u2028`` are whitespace to ``\s`` but
#: no line break to ``_lines_with``
_LINE_PIECES = st.one_of(
    st.sampled_from(
        [
            "result", "results", "RESULTS", "Output", " ", "\n", "\t", ":", "=", ")", "returned",
            "raised", "passed", "failed", "in", "into", "this", "the", "path", "tests", "all",
            "3", "ok", "success", "expected", "got", "✓", "ValueError", "os.", "Exception",
            "is", "fixed", "works", "now", "_", ".",
        ]
    ),
    st.sampled_from(
        [
            "result\n", "Output\n", ")\n", "\n:", "\n=", "\n returned", "\npassed", "\n failed",
            "\n✓", "\x85", "\u2028", "\n",
        ]
    ),
)  # fmt: skip
_LINE_TEXTS = st.lists(_LINE_PIECES, max_size=30).map("".join)


@settings(max_examples=400, deadline=None)
@given(_LINE_TEXTS)
@example("result\n:")
@example("x)\n returned")
@example("Output\n=\npassed")
@example("a)\x85returned\nresult\u2028=\nfailed")
def test_lines_with_finds_the_lines_of_every_match(text: str) -> None:
    for pattern in (factkinds._RESULT_LINE, factkinds._EXCEPTION_IN_LINE):
        assert factkinds._lines_with(pattern, text) == every_matching_line(pattern, text)


@pytest.mark.parametrize(
    ("crossing_part", "widened"),
    [
        (r"result(?:s)?\s*[:=]", r"result(?:s)?\s*(?:[:=]|failed)"),
        (r"output\s*[:=]", r"output\s*(?:[:=]|passed)"),
        (r"\)\s*(?:returned|returns|raised)\b", r"\)\s*(?:returned|returns|raised|failed)\b"),
    ],
)
def test_the_check_catches_a_match_starting_in_a_crossing_part(
    crossing_part: str, widened: str
) -> None:
    """_lines_with's condition matters, and the texts above reach it: were a part of
    _RESULT_LINE that runs onto the next line to take a word that is a match of its own,
    the lines would differ, and the property above finds a text showing it."""
    assert crossing_part in factkinds._RESULT_LINE.pattern
    pattern = re.compile(factkinds._RESULT_LINE.pattern.replace(crossing_part, widened))
    text = find(
        _LINE_TEXTS,
        lambda t: factkinds._lines_with(pattern, t) != every_matching_line(pattern, t),
        settings=settings(
            max_examples=3000, database=None, derandomize=True, phases=[Phase.generate]
        ),
    )
    assert "\n" in text


@pytest.mark.parametrize("pattern", [r"\s*x", "x*", "(?m)$"])
def test_lines_with_ends_on_a_match_at_a_line_break_or_an_empty_match(pattern: str) -> None:
    """Outside its condition (a match may start at ``\n``) it still ends, one entry per line."""
    assert factkinds._lines_with(re.compile(pattern), "a\nx") == [(0, "a"), (2, "x")]


_SECRET_PIECES = st.sampled_from(
    [
        *_OUTPUTS, " ", "\n", "sk-", "GH", "xoxb-1234567890ab", "=", "github_pat_",
        "github_pat_0123456789abcdefghijKLMNOP_x", "AIza", "AIzaSyB-0123456789_abcdefghijklmnopqrs",
        "AIzaSyB-0123456789_abcdefghijklmnopqrst",
    ]
)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(st.lists(_SECRET_PIECES, max_size=8).map("".join))
def test_redaction_runs_equal_the_rules_one_by_one(text: str) -> None:
    assert redaction.redact(text) == _redact_rule_by_rule(text)
