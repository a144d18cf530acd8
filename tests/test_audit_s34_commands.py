"""Session 34: a bash call whose script starts with a ``#`` comment (``# Let me create a
test`` then the command, 16 commands of the corpus). The command fact and the offline
summary's ``RAN`` line both name the first line that runs, so the audit finds the
command kept; the reference extractor states the rule on its own."""

from __future__ import annotations

import json
from typing import Any

import pytest
from helpers.reference_facts import facts as reference

from ctxledger.compressor.facts import extract_facts, retention
from ctxledger.compressor.summarizers.base import SummaryRequest
from ctxledger.compressor.summarizers.offline import build_summary
from ctxledger.compressor.toolcalls import command_line


def _bash_turns(script: str) -> list[dict[str, Any]]:
    call = {"id": "c1", "type": "function"}
    call["function"] = {"name": "bash", "arguments": json.dumps({"command": script})}
    return [
        {"role": "user", "content": "Fix the import in the resolver."},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "done"},
    ]


@pytest.mark.parametrize(
    ("script", "command"),
    [
        (
            "# First add the import\nsed -i '27afrom x import y' src/r.py",
            "sed -i '27afrom x import y' src/r.py",
        ),
        ("#!/bin/bash\n\n  # set up\nset -e\nmake test", "set -e"),
        ("make lint # the checks\n# then\nmake", "make lint # the checks"),
        ("\n# only a note\n# and another", "# only a note"),
    ],
)
def test_a_commented_script_is_named_by_the_line_it_runs(script: str, command: str) -> None:
    turns = _bash_turns(script)
    for extract in (extract_facts, reference.extract_facts):
        assert [f.value for f in extract(turns) if f.kind == "command"] == [command]
    assert command_line(script) == command
    summary = build_summary(SummaryRequest(turns=turns, budget_tokens=2_000))
    assert f"RAN `{command}`" in summary
    commands = [fact for fact in extract_facts(turns) if fact.kind == "command"]
    assert retention(commands, summary) == (commands, [])  # the audit finds it kept
