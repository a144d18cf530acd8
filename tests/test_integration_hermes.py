"""The Hermes context engine inside a real Hermes Agent (hermes-agent from PyPI).

Hermes pins its own openai and many other packages, so it lives in a separate
virtualenv, ``.venv-hermes`` (``make hermes-venv``; ``make test`` builds it first and
sets ``CTXLEDGER_REQUIRE_HERMES=1``, so in CI this test runs for real or fails). The
scenario (``tests/hermes_scenario.py``) runs under that venv's python against a fake
upstream on 127.0.0.1; this test reads what it left behind with the project's own
ctxledger: the ledger file in ``HERMES_HOME``, and the requests the upstream received.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ctxledger import Ledger
from ctxledger.events import MessageAppended, SessionSwitched

ROOT = Path(__file__).resolve().parent.parent
HERMES_PYTHON = Path(
    os.environ.get("CTXLEDGER_HERMES_PYTHON", ROOT / ".venv-hermes" / "bin" / "python")
)
CLI = str(Path(sys.executable).with_name("ctxledger"))
TURNS = 9


def _key(message: dict) -> tuple:
    calls = [c["id"] for c in message.get("tool_calls") or []]
    return (message["role"], message.get("content"), calls, message.get("tool_call_id"))


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    if not HERMES_PYTHON.exists():
        message = f"{HERMES_PYTHON} is missing: run `make hermes-venv`"
        if os.environ.get("CTXLEDGER_REQUIRE_HERMES"):
            pytest.fail(message)
        pytest.skip(message)
    workdir = tmp_path_factory.mktemp("hermes")
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("CTXLEDGER_", "HERMES_", "OPENAI_"))
    }
    proc = subprocess.run(
        [str(HERMES_PYTHON), str(ROOT / "tests" / "hermes_scenario.py"), str(workdir), str(TURNS)],
        capture_output=True,
        text=True,
        timeout=900,
        env=env,
        cwd=workdir,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    result = json.loads((workdir / "result.json").read_text())
    ledger = Ledger.open(result["db"])
    yield result, ledger
    ledger.close()


def test_hermes_loads_the_plugin_engine_with_its_tools(run):
    result, _ = run
    assert result["engine"] == "ctxledger.integrations.hermes.CtxLedgerEngine"
    assert result["context_length"] == 64_000
    assert result["threshold_tokens"] == 54_400  # the small-window floor: 85 % of 64K
    assert result["tools"] == ["expand_compaction", "recall"]
    assert result["copy_shares_ledger"]  # a per-agent deepcopy shares the ledger
    assert result["db"].endswith("home/ctxledger.ledger.db")
    # the model's recall calls were answered from the ledger
    answers = [m for r in result["requests"] for m in r["messages"] if m["role"] == "tool"]
    assert answers and all('"hits"' in m["content"] for m in answers)


def test_compress_works_inside_a_running_event_loop_on_a_copy(run):
    result, ledger = run
    in_loop = result["in_loop"]
    assert in_loop["root"] != result["ledger_root"]  # a new conversation: a new chain
    assert in_loop["compression_count"] == 1
    # a message the ledger cannot take: the host keeps its list and is told why
    assert in_loop["refused_bad_input"]
    assert "unknown role 'robot'" in in_loop["error"]
    assert in_loop["after"] < in_loop["before"]
    # Hermes keeps the system prompt to itself: the ledger's view is exactly what compress returned
    assert len(ledger.api_messages(ledger.tip(in_loop["root"]))) == in_loop["after"]


def test_every_turn_is_in_the_ledger_and_compactions_are_chained(run):
    result, ledger = run
    assert result["compression_count"] >= 1
    chain = ledger.chains.chain(ledger.tip(result["ledger_root"]))
    assert len(chain) == 1 + result["compression_count"]
    appended = [
        r.event
        for r in ledger.store.read_all()
        if isinstance(r.event, MessageAppended) and r.event.session_id in chain
    ]
    asks = [e.message["content"][:7] for e in appended if e.message["role"] == "user"]
    assert asks == [f"Turn {t}:" for t in range(TURNS)]
    # every message of the host's final list is in the ledger's view, verbatim
    live = [m for m in ledger.api_messages(chain[-1]) if m["role"] != "system"]
    assert [_key(m) for m in live] == [_key(m) for m in result["history"]]


def test_the_request_after_a_compaction_carries_the_compacted_list(run):
    result, ledger = run
    chain = ledger.chains.chain(ledger.tip(result["ledger_root"]))
    switches = [
        r.event
        for r in ledger.store.read_all()
        if isinstance(r.event, SessionSwitched) and r.event.session_id in chain
    ]
    sizes = [len(r["messages"]) for r in result["requests"]]
    for switch, start in zip(switches, result["compress_at"], strict=True):
        layout = [m for m in ledger.api_messages(switch.new_session_id) if m["role"] != "system"][
            : len(switch.layout)
        ]
        sent = result["requests"][start]["messages"][1:]  # after Hermes's own system prompt
        assert [_key(m) for m in sent[: len(layout)]] == [_key(m) for m in layout]
        assert sizes[start] < sizes[start - 1]  # smaller than the request before it
    assert switches[-1].new_session_id == chain[-1]


@pytest.mark.parametrize(
    "args", [["replay", "{root}", "--verify"], ["verify"], ["audit", "{root}"]]
)
def test_the_cli_reads_the_ledger(run, args):
    result, _ = run
    argv = [CLI, "--db", result["db"], *(a.format(root=result["ledger_root"]) for a in args)]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
