"""The Hermes engine as Hermes drives it (``tests/hermes_engine_agents.py`` under
``.venv-hermes``, no model): a second agent is not held by the first agent's strikes,
and the reply to a request Hermes sent before a shell's ``ctxledger compress`` is
recorded on the session it was sent on (session 37, review 1)."""

from __future__ import annotations

import json

import pytest
from helpers.hermes_run import run_hermes_script

from ctxledger import Ledger
from ctxledger.analysis.replay import verify_compactions
from ctxledger.events import (
    CompressionChecked,
    ContextLimitLearned,
    MessageAppended,
    ModelSwitched,
    SessionSwitched,
    UsageReported,
)
from ctxledger.integrations.hermes_repair import as_hermes_holds


@pytest.fixture(scope="module")
def flows(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("hermes-agents")
    run_hermes_script("hermes_engine_agents.py", workdir)
    return workdir, json.loads((workdir / "agents.json").read_text())


def test_a_second_agent_is_not_held_by_the_first_agent_s_strikes(flows):
    workdir, out = flows
    said = out["two_agents"]
    assert said["asks"] == [4, 4]  # too few messages, twice: the host keeps its list
    assert said["blocked"] == [False, said["history"]]  # agent one: blocked, nothing done
    assert said["fresh"][0] is True and said["fresh"][1] < said["history"]
    assert said["count"] == 1
    ledger = Ledger.open(workdir / "agents.db")
    try:
        events = [r.event for r in ledger.store.read_all()]
        agents = [e.details["agent"] for e in events if isinstance(e, CompressionChecked)]
        assert len(agents) == 3 and agents[0] == agents[1] != agents[2]
        [switch] = [e for e in events if isinstance(e, SessionSwitched)]
        assert switch.trigger == "preflight" and not switch.plan["forced"]
        assert not verify_compactions(ledger, switch.new_session_id).drifted
    finally:
        ledger.close()


def test_the_reply_to_a_request_sent_before_a_cli_compress_stays_on_its_session(flows):
    workdir, out = flows
    said = out["race"]
    assert said["check"] is True and said["sent_on"] != said["adopted"]
    ledger = Ledger.open(workdir / "race.db")
    try:
        events = [r.event for r in ledger.store.read_all()]
        usage = {e.usage.prompt: e.session_id for e in events if isinstance(e, UsageReported)}
        sent_on, adopted = said["sent_on"], said["adopted"]
        assert usage == {20_000: sent_on, 33_333: sent_on, 33_334: sent_on, 9_000: adopted}
        # Hermes's call and the tool's answer went onto the CLI's continuation only when
        # Hermes took its view, and that view is what the ledger holds
        [switch] = [e for e in events if isinstance(e, SessionSwitched)]
        assert switch.new_session_id == adopted and ledger.tip(sent_on) == adopted
        appended = [e for e in events if isinstance(e, MessageAppended)]
        assert [e.message["role"] for e in appended if e.session_id == adopted] == [
            "assistant",
            "tool",
            "assistant",
        ]
        # (as Hermes holds it: the flow's list puts its call right after an answer, a
        # pair Hermes merges before it sends; session 46 hands it merged)
        held = as_hermes_holds(ledger.api_messages(adopted))
        view = [[m["role"], (m.get("content") or "")[:12]] for m in held]
        assert view[: len(said["view"])] == said["view"]
        assert not verify_compactions(ledger, adopted).drifted
    finally:
        ledger.close()


def test_a_refusal_hermes_reports_makes_the_next_compaction_an_overflow(flows):
    workdir, out = flows
    said = out["refusals"]
    assert said["asked"] is True and said["count"] == 2
    assert said["left"] == {"other": "context_overflow"}  # another session's, kept for it
    ledger = Ledger.open(workdir / "refusals.db")
    try:
        events = [r.event for r in ledger.store.read_all()]
        checks = [e for e in events if isinstance(e, CompressionChecked)]
        assert [e.trigger for e in checks] == ["preflight", "overflow"]
        assert "refused the request (payload_too_large)" in checks[1].source
        assert checks[1].tokens == 30_000 < checks[1].threshold_tokens
        switches = [e for e in events if isinstance(e, SessionSwitched)]
        assert [e.trigger for e in switches] == ["preflight", "overflow"]
        assert not verify_compactions(ledger, switches[-1].new_session_id).drifted
        [learnt] = [e for e in events if isinstance(e, ContextLimitLearned)]
        assert learnt.context_length == 48_000 and "(context_overflow)" in learnt.evidence
        switched = [e.context_length for e in events if isinstance(e, ModelSwitched)]
        assert switched == [40_000, 32_000]
    finally:
        ledger.close()


def test_a_refusal_hermes_does_not_answer_by_compacting_leaves_no_overflow(flows):
    """Review 1: a refusal stayed pending until an ask; the gateway's hygiene agent (and
    the TUI's and ACP's ``/compress``) never ask, and were recorded ``overflow``."""
    workdir, out = flows
    o, p = {"S": "context_overflow"}, {"S": "payload_too_large"}
    assert out["unanswered"]["pending"] == [{}, {}, p, p, p, {}, {}, o]
    ledger = Ledger.open(workdir / "unanswered.db")
    try:
        checks = [
            r.event for r in ledger.store.read_all() if isinstance(r.event, CompressionChecked)
        ]
        assert [e.trigger for e in checks] == ["preflight"]
    finally:
        ledger.close()


def test_a_summary_failure_s_cooldown_holds_every_agent_of_the_conversation(flows):
    """Session 38: Hermes 0.19.0 keeps the cooldown on the session's row in its store
    (its CLI and gateway), not only in the agent: a second agent and the agent after its
    session's end are held, as by the ledger's cooldown on the chain. Only without a
    store is it the agent's alone (not reproduced: see docs/notes/s38-hermes3.md)."""
    _, out = flows
    said = out["cooldown"]
    assert said["hermes"] == [True, True, False]
    fallback, *asks = said["ours"]
    assert fallback is True and asks == [False, False, False]


def test_a_response_without_usage_ends_the_wait_for_the_provider_s_count(flows):
    """Session 38, review 1: the deferral stayed on after a response with no usage (or
    one the engine drops), so Hermes never compacted again; its own compressor ends it."""
    _, out = flows
    assert out["no_usage"] == {"hermes": [False, False], "ours": [False, False]}


def _branched_off_the_cli_s_compress(ledger: Ledger, root: str) -> tuple[str, list[str]]:
    """The CLI's continuation ended ``branched`` holding only its own view; the
    conversation's tip `root` is a branch of the session the CLI compacted (the view the
    host held); returns the continuation's id and the branch's view (its contents)."""
    [switch] = [r.event for r in ledger.store.read_all() if isinstance(r.event, SessionSwitched)]
    cli = switch.new_session_id
    assert ledger.transcript.session(cli).end_reason == "branched"
    assert len(ledger.api_messages(cli)) == switch.messages_after  # nothing of the host's
    tip = ledger.tip(root)
    assert ledger.chains.lineage(tip).parent_session_id == switch.session_id
    return cli, [m["content"] for m in ledger.api_messages(tip) if m["role"] != "system"]


def test_a_session_ending_after_a_cli_compress_goes_on_as_a_branch(flows):
    """Session 39: its last messages went onto the CLI's continuation before, a view
    Hermes never sent (and a resume found no chain its list starts with). Review 1: a
    resume finds the branch and counts what the agent had (no compaction: the CLI's was
    never taken); a shell's ``compress`` of the chain's root names the branch to use."""
    workdir, out = flows
    said = out["ended"]
    with Ledger.open(workdir / "ended.db") as ledger:
        cli, view = _branched_off_the_cli_s_compress(ledger, said["root"])
        assert len(view) == said["count"] + 2 and view[-4:] == ["one more", "done", "and", "ok"]
        assert said["resumed"] == [said["root"], said["live_count"]] and said["live_count"] == 0
        code, error = said["again"]
        assert code != 0 and f"its live continuation is '{ledger.tip(said['root'])}'" in error
        assert f"session '{cli}' has ended (branched)" in error


def test_with_compression_off_the_host_s_list_goes_on_as_a_branch(flows):
    """Session 39 (review 1: the engine under Hermes's config, where a real Hermes run of
    five turns took ~8 s): compression off, Hermes never asks its engine, so it never
    takes the CLI's view; its next hand-over records its list as a branch of the view it
    held (before: its new messages went onto the CLI's continuation, summary first)."""
    workdir, out = flows
    said = out["off"]
    assert said["count"] == 0
    with Ledger.open(workdir / "off.db") as ledger:
        _, view = _branched_off_the_cli_s_compress(ledger, said["root"])
        assert view == said["sent"]
