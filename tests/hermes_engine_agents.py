"""The Hermes engine driven as Hermes drives it, without a model (session 37, review 1):
two agents on one conversation, and a shell's ``ctxledger compress`` landing while
Hermes waits on a model call.

Run by ``tests/test_integration_hermes_agents.py`` with the python of ``.venv-hermes``:

    .venv-hermes/bin/python tests/hermes_engine_agents.py WORKDIR

Each flow writes its own ledger in ``WORKDIR`` and what the engine said in
``WORKDIR/agents.json``; the test reads the ledgers with the project's ctxledger.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from hermes_engine_flows import a, engine, u


def _big(i: int) -> list[dict[str, Any]]:
    words = " ".join(f"alpha{i}x{k} beta" for k in range(1500))
    return [u(f"ask {i} {words}"), a(f"answer {i}")]


def two_agents(workdir: Path) -> dict[str, Any]:
    """A conversation of two huge exchanges: agent one's ``compress(force=False)`` (its
    preflight) finds too few messages twice, two strikes, and its ask is blocked even
    once the conversation has grown; a second agent (Hermes's copy of the engine for
    each AIAgent: a new process, ``--resume``, the gateway's hygiene agent) starts with
    no strikes, as Hermes's own in-memory count does, and compacts. Agent one compacts
    too after its session's end (Hermes clears its count there)."""
    one = engine(workdir / "agents.db", window=64_000)
    one.on_session_start("A")
    history = _big(0) + _big(1)
    asks = [len(one.compress(history, current_tokens=60_000)) for _ in range(2)]
    history += [m for i in range(2, 30) for m in (u(f"ask {i} " + "word " * 900), a(f"ok {i}"))]
    blocked = [one.should_compress(60_000), len(one.compress(history, current_tokens=60_000))]
    two = copy.deepcopy(one)
    fresh = [two.should_compress(60_000), len(two.compress(history, current_tokens=60_000))]
    return {
        "asks": asks,
        "blocked": blocked,
        "fresh": fresh,
        "history": len(history),
        "count": two.compression_count,
    }


def _cli(db: Path, *args: str) -> str:
    argv = [sys.executable, "-m", "ctxledger", "--db", str(db), *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, check=True).stdout


def _shell(db: Path, *args: str) -> tuple[int, str]:
    """The ``ctxledger`` command run in this process (a shell's writer, as :func:`_cli`,
    without a process start): its exit code and what it printed."""
    from click.testing import CliRunner

    from ctxledger.cli.main import cli

    said = CliRunner().invoke(cli, ["--db", str(db), *args])
    return said.exit_code, said.output


def race(workdir: Path) -> dict[str, Any]:
    """Hermes checked (nothing moved), sent its 12-message list, and a shell's
    ``ctxledger compress`` lands while it waits; the reply (two usage reports, a recall
    call) is handed over at the recall, then Hermes's next check adopts the CLI's view.
    The reports of the request on the old list belong to the session Hermes sent it on."""
    db = workdir / "race.db"
    e = engine(db, window=64_000)
    e.on_session_start("R")
    old = [m for i in range(6) for m in _big(i)]
    e.update_from_response({"prompt_tokens": 20_000, "completion_tokens": 10})
    e.handle_tool_call("recall", {"query": "alpha1x3"}, messages=old)
    sent_on = e._seen
    _cli(db, "compress", str(e._root), "--json")
    call = a("", tool_calls=[{"id": "c1", "type": "function", "function": {"name": "recall"}}])
    call["tool_calls"][0]["function"]["arguments"] = json.dumps({"query": "x"})
    for prompt in (33_333, 33_334):
        e.update_from_response({"prompt_tokens": prompt, "completion_tokens": 10})
    e.handle_tool_call("recall", {"query": "x"}, messages=[*old, call])
    result = {"role": "tool", "tool_call_id": "c1", "content": "found"}
    check = e.should_compress(100)
    view = e.compress([*old, call, result], current_tokens=40_000)
    e.update_from_response({"prompt_tokens": 9_000, "completion_tokens": 10})
    e.on_session_end("R", [*view, a("done")])
    return {
        "sent_on": sent_on,
        "adopted": e._seen,
        "check": check,
        "view": [[m["role"], (m.get("content") or "")[:12]] for m in view],
    }


def ended(workdir: Path) -> dict[str, Any]:
    """A session that ends after a shell's ``ctxledger compress``, before Hermes's next
    check (session 39): Hermes never took the moved view, and its last turn (sent on its
    own list) goes on as a branch of the view it held, not onto the moved tip. Then
    ``hermes --resume E`` (a new engine, Hermes's list and one more exchange), and the
    shell's ``ctxledger compress`` of the chain's root again."""
    db = workdir / "ended.db"
    e = engine(db, window=64_000)
    e.on_session_start("E")
    old = [m for i in range(6) for m in _big(i)]
    e.handle_tool_call("recall", {"query": "alpha1x3"}, messages=old)
    first = str(e._root)
    assert _shell(db, "compress", first)[0] == 0
    final = [*old, u("one more"), a("done")]
    e.on_session_end("E", final)
    resumed = engine(db, window=64_000)
    resumed.on_session_start("E")
    resumed.handle_tool_call("recall", {"query": "alpha1x3"}, messages=[*final, u("and"), a("ok")])
    return {
        "root": e._root,
        "count": len(old) + 2,
        "live_count": e.compression_count,
        "resumed": [resumed._root, resumed.compression_count],
        "again": _shell(db, "compress", first),
    }


def off(workdir: Path) -> dict[str, Any]:
    """Hermes with ``compression.enabled: false`` (session 39): it never asks its engine,
    so it never takes the view a shell's ``ctxledger compress`` made; its next hand-over
    (a recall call, on its own list) goes on as a branch of the view it held, not onto
    the CLI's continuation (summary first, a view Hermes never sent)."""
    home, saved = workdir / "off-home", os.environ["HERMES_HOME"]
    home.mkdir()
    (home / "config.yaml").write_text("compression:\n  enabled: false\n")
    os.environ["HERMES_HOME"] = str(home)
    try:
        db = workdir / "off.db"
        e = engine(db, window=64_000)
        e.on_session_start("O")
        sent = [m for i in range(6) for m in _big(i)]
        e.handle_tool_call("recall", {"query": "alpha1x3"}, messages=sent)
        assert _shell(db, "compress", str(e._root))[0] == 0
        sent += [u("one more"), a("done")]
        e.handle_tool_call("recall", {"query": "alpha1x3"}, messages=sent)
    finally:
        os.environ["HERMES_HOME"] = saved
    return {"root": e._root, "sent": [m["content"] for m in sent], "count": e.compression_count}


def refusals(workdir: Path) -> dict[str, Any]:
    """Hermes's ``api_request_error`` hook (session 38): a refusal for the request's size
    makes the session's next ``compress`` an ``overflow``; another failure, another
    session's refusal, or one an ask came after (Hermes answered it another way) leave
    it Hermes's preflight. A smaller window of the same model right after a
    context-length refusal is the provider's: learnt, not a model switch (review 1: not
    Hermes's own cut for the long-context tier)."""
    e = engine(workdir / "refusals.db", window=64_000)
    e.on_session_start("O")
    history = [m for i in range(30) for m in (u(f"ask {i} " + "word " * 900), a(f"ok {i}"))]
    hook = e._shared.refusal
    hook(reason="context_overflow", session_id="other")
    hook(reason="context_overflow", session_id="O")
    asked = e.should_compress(60_000)  # an ask: the refusal was answered another way
    hook(reason="rate_limit", session_id="O", status_code=429)
    view = e.compress(history, current_tokens=60_000)
    history = [
        *view,
        *(m for i in range(30, 50) for m in (u(f"ask {i} " + "word " * 900), a("ok"))),
    ]
    hook(reason="payload_too_large", session_id="O", status_code=413)
    e.compress(history, current_tokens=30_000)
    hook(reason="context_overflow", session_id="O")  # the provider stated 48,000 tokens
    e.update_model("m1", 48_000)  # (Hermes's update_model, before it compacts)
    e.should_compress(1)
    e.update_model("m1", 40_000)  # no refusal: a switch
    hook(reason="long_context_tier", session_id="O", status_code=429)
    e.update_model("m1", 32_000)  # Hermes's own cut for the tier: a switch too
    e.should_compress(1)
    return {"asked": asked, "left": dict(e._shared.refused), "count": e.compression_count}


def unanswered(workdir: Path) -> dict[str, Any]:
    """Refusals Hermes does not answer by compacting (review 1): one whose turn ended,
    one a next request came after, a turn's fourth (Hermes gives the turn up), one
    about the output cap are not pending; nor one the turn left early (no hook) when
    the gateway's hygiene agent (a fresh copy on the session) compacts next."""
    registered = engine(workdir / "unanswered.db", window=64_000)
    shared = registered._shared
    pending = []
    shared.refusal(reason="context_overflow", session_id="S", turn_id="t1")
    shared.turn_ended(session_id="S", turn_id="t1", completed=False)
    pending.append(dict(shared.refused))
    shared.refusal(reason="context_overflow", session_id="S", turn_id="t2")
    shared.request_started(session_id="S", turn_id="t2", api_request_id="r2")
    pending.append(dict(shared.refused))
    for _ in range(4):  # (Hermes compacts for the first three)
        shared.refusal(reason="payload_too_large", session_id="S", turn_id="t3")
        pending.append(dict(shared.refused))
        shared.refused.clear()
    cap = {"message": "Range of max_tokens should be [1, 65536]"}
    shared.refusal(reason="context_overflow", session_id="S", turn_id="t4", error=cap)
    pending.append(dict(shared.refused))
    shared.refusal(reason="context_overflow", session_id="S", turn_id="t5")
    pending.append(dict(shared.refused))  # kept: the turn left early, no hook after it
    hygiene = copy.deepcopy(registered)  # (Hermes's agent set-up for the hygiene agent)
    hygiene.on_session_start("S")
    history = [m for i in range(30) for m in (u(f"ask {i} " + "word " * 900), a(f"ok {i}"))]
    hygiene.compress(history, current_tokens=60_000)
    return {"pending": pending}


def _hermes_cooldown(workdir: Path) -> list[bool]:
    """Hermes's own compressor, its CLI's way (a session store): a summary failure's
    cooldown is kept on the session's row, so a second agent bound to the session, and
    the first after its session's end, are held by it; without a store, a fresh
    compressor is not."""
    from agent.context_compressor import ContextCompressor
    from hermes_state import SessionDB

    store = SessionDB(workdir / "state.db")
    store.create_session("S", source="cli")

    def compressor(bound: bool) -> Any:
        c = ContextCompressor("fake-model", config_context_length=64_000, quiet_mode=True)
        if bound:
            c.bind_session_state(store, "S")
        return c

    one = compressor(True)
    one._record_compression_failure_cooldown(86_400, "summary failed")
    two = compressor(True)
    one.on_session_end("S", [])  # clears its memory; the row keeps the cooldown
    return [
        two._automatic_compression_blocked(),
        bool(one.get_active_compression_failure_cooldown()),
        compressor(False)._automatic_compression_blocked(),
    ]


def cooldown(workdir: Path) -> dict[str, Any]:
    """A summary that failed over to the fallback starts the ledger's cooldown on the
    chain: the agent, a second agent (Hermes's copy of the engine) and the agent after
    its session's end are held, as Hermes's store-bound agents are (hermes-agent 0.19.0
    keeps the cooldown on the session's row in ``state.db``)."""
    from helpers.failing import SecretSummarizer

    os.environ["CTXLEDGER_COOLDOWN_GENERIC"] = "86400"  # (no clock in the checks)
    try:
        e = engine(workdir / "cooldown.db", window=64_000)
    finally:
        os.environ.pop("CTXLEDGER_COOLDOWN_GENERIC")
    e.on_session_start("S")

    def fail(svc: Any) -> None:
        svc.summarizer = svc.engine.summarizer = SecretSummarizer("server")

    e._shared.run(fail)
    history = [m for i in range(30) for m in (u(f"ask {i} " + "word " * 900), a(f"ok {i}"))]
    view = e.compress(history, current_tokens=60_000)
    held = [e._last_summary_fallback_used, e.should_compress(60_000)]
    held.append(copy.deepcopy(e).should_compress(60_000))
    e.on_session_end("S", [*view, a("bye")])
    held.append(e.should_compress(60_000))
    return {"ours": held, "hermes": _hermes_cooldown(workdir)}


def no_usage(workdir: Path) -> dict[str, Any]:
    """After a compaction Hermes sets its engine waiting for the provider's count; a
    response without usage (Hermes calls ``update_from_response({})``) or with one
    the engine drops (NaN) ends the wait, as it ends it for Hermes's own compressor:
    an estimate of twice the threshold is no longer deferred."""
    from agent.context_compressor import ContextCompressor

    ours = engine(workdir / "nousage.db", window=64_000)
    ours.on_session_start("N")
    history = [m for i in range(30) for m in (u(f"ask {i} " + "word " * 900), a(f"ok {i}"))]
    ours.compress(history, current_tokens=60_000)
    theirs = ContextCompressor("fake-model", config_context_length=64_000, quiet_mode=True)
    out: dict[str, Any] = {}
    for name, e in (("hermes", theirs), ("ours", ours)):
        said = []
        for usage in ({}, {"prompt_tokens": float("nan")}):
            e.last_compression_rough_tokens = e.threshold_tokens + 10  # (Hermes, after it)
            e.awaiting_real_usage_after_compression = True
            e.update_from_response(usage)
            said.append(e.should_defer_preflight_to_real_usage(2 * e.threshold_tokens))
        out[name] = said
    return out


def main() -> None:
    workdir = Path(sys.argv[1])
    (workdir / "home").mkdir(exist_ok=True)
    os.environ["HERMES_HOME"] = str(workdir / "home")
    out = {
        flow.__name__: flow(workdir)
        for flow in (two_agents, race, ended, off, refusals, unanswered, cooldown, no_usage)
    }
    (workdir / "agents.json").write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
