"""A real Hermes Agent as a client of ``ctxledger serve`` (``tests/hermes_proxy_client.py``
under ``.venv-hermes``): a streamed reply with two parallel tool calls, the results,
the answer, and a second ask on the returned history all continue one session.

Hermes trims every text and re-encodes each call's arguments (compact, sorted keys)
before it sends its history back, so the recorded reply came back in another spelling
and every turn after a tool call branched the conversation (session 41)."""

from __future__ import annotations

import pytest
from helpers.hermes_run import script_ledger

from ctxledger.events import MessageAppended, SessionStarted


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    yield from script_ledger(tmp_path_factory, "hermes_proxy_client.py", "result.json")


def test_hermes_through_the_proxy_keeps_one_session_across_tool_calls(run):
    result, ledger = run
    assert result["finals"] == ["Planned: two items.", "Next: read the spec."]
    events = [r.event for r in ledger.store.read_all()]
    assert [type(e) for e in events].count(SessionStarted) == 1  # no branch
    roles = [e.message["role"] for e in events if isinstance(e, MessageAppended)]
    assert roles == ["user", "assistant", "tool", "tool", "assistant", "user", "assistant"]
    assert ledger.verify().ok
    # Hermes's first call lists the models through the proxy (passed on unchanged)
    assert result["paths"].count("/v1/models") >= 1  # (how often is hermes-agent's choice)
