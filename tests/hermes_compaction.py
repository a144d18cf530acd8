"""More questions for Hermes's own compaction code (session 32), answered by
``tests/hermes_oracle.py`` under ``.venv-hermes``'s python: the orphan repairs of a
``compress()`` with the boundaries it chose. Nothing here talks to the network.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agent import context_compressor as cc


def _public(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in m.items() if not k.startswith("_")} for m in messages]


def orphans(item: dict[str, Any]) -> dict[str, Any]:
    """Hermes's ``compress()`` of a list that may cut tool groups or already hold orphans:
    its output (after ``_sanitize_tool_pairs``) and the middle it summarized, as
    ``[compress_start, compress_end]`` of the input (``_find_tail_cut_by_tokens`` gets
    the start and returns the end; pruning keeps the count of messages)."""
    compressor = cc.ContextCompressor(
        "local-model", config_context_length=item["window"], quiet_mode=True
    )
    body = item["summary"]
    compressor._generate_summary = lambda *_, **__: compressor._with_summary_prefix(body)  # type: ignore[method-assign]
    bounds: list[int] = []
    find_tail = compressor._find_tail_cut_by_tokens

    def tail(messages: Any, head_end: int, *args: Any, **kwargs: Any) -> int:
        end = find_tail(messages, head_end, *args, **kwargs)
        bounds[:] = [head_end, end]
        return end

    compressor._find_tail_cut_by_tokens = tail  # type: ignore[method-assign]
    out = compressor.compress([dict(m) for m in item["messages"]])
    return {"out": _public(out), "bounds": bounds}


def manual(item: dict[str, Any]) -> dict[str, Any]:
    """Hermes's CLI ``/compress`` on a conversation (``cli.py``'s handler, step by step:
    the request-size estimate before, ``_compress_context(..., force=True)``, the
    estimate after, ``summarize_manual_compression``) on an ``AIAgent`` whose system
    prompt is ``item["system"]``; its summary call answers as ``item["summary"]`` says:
    ``ok``, ``fallback`` (a server error) or ``abort`` (a refused connection)."""
    import hermes_oracle
    from agent.manual_compression_feedback import summarize_manual_compression
    from agent.model_metadata import estimate_request_tokens_rough
    from hermes_loop import _start
    from run_agent import AIAgent

    agent = AIAgent(
        base_url=_start(),
        api_key="sk-oracle",
        model="local-model",
        provider="custom",
        quiet_mode=True,
        skip_memory=True,
        skip_context_files=True,
        enabled_toolsets=["todo"],
    )
    agent._cached_system_prompt = item["system"]
    history = [dict(m) for m in item["history"]]
    tools = agent.tools or None
    before = estimate_request_tokens_rough(history, system_prompt=item["system"], tools=tools)
    armed = [item["summary"] if item["summary"] != "ok" else "ok"]
    original = cc.call_llm
    cc.call_llm = hermes_oracle._summary_call(armed)
    try:
        compressed, _ = agent._compress_context(history, None, approx_tokens=before, force=True)
    finally:
        cc.call_llm = original
    after = estimate_request_tokens_rough(compressed, system_prompt=item["system"], tools=tools)
    feedback = summarize_manual_compression(
        history, compressed, before, after, compression_state=agent.context_compressor
    )
    return {
        "feedback": feedback,
        "before": [len(history), before],
        "after": [len(compressed), after],
        "dropped": agent.context_compressor._last_summary_dropped_count,
        "tools": agent.tools or [],
    }


class _Decided(Exception):
    """Raised where Hermes's gateway handler has taken its hygiene decision."""

    def __init__(self, compress: bool) -> None:
        super().__init__(compress)
        self.compress = compress


class _Anything:
    """What a runner attribute the hygiene path does not depend on reads as: callable,
    awaitable, false, empty."""

    def __call__(self, *_: Any, **__: Any) -> _Anything:
        return _Anything()

    def __getattr__(self, _: str) -> _Anything:
        return _Anything()

    def __await__(self) -> Any:
        return _Anything()
        yield  # a generator: awaiting it returns at once

    def __bool__(self) -> bool:
        return False

    def __iter__(self) -> Any:
        return iter(())


class ReadsAsNothing:
    """A runner stand-in's attributes that the path driven does not depend on read as
    :class:`_Anything` (mixed in before Hermes's ``GatewayRunner``)."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _Anything()


class _Store:
    """A session store holding one session: its entry and its transcript."""

    def __init__(self, entry: Any, history: list[dict[str, Any]]) -> None:
        self.entry, self.history = entry, history

    def get_or_create_session(self, _: Any) -> Any:
        return self.entry

    def load_transcript(self, _: str) -> list[dict[str, Any]]:
        return list(self.history)

    def has_any_sessions(self) -> bool:  # asked after hygiene when the history is empty
        return True


def _runner_class(compacts: bool) -> Any:
    from gateway import run as gateway_run

    class Runner(ReadsAsNothing, gateway_run.GatewayRunner):  # type: ignore[misc, name-defined]
        def _thread_metadata_for_source(self, *_: Any, **__: Any) -> Any:
            if compacts:  # the branch that compresses runs on (no thread)
                return None
            raise _Decided(True)  # the first call of the branch that compresses

        def _resolve_session_agent_runtime(self, **_: Any) -> Any:
            runtime = {"api_key": "sk-fake", "base_url": "http://127.0.0.1:9/v1"}
            return "local-model", runtime | {"provider": "custom"}  # (no call reaches it)

        def _voice_channel_sidecar_note(self, *_: Any, **__: Any) -> Any:
            raise _Decided(False)  # the first call after the hygiene block

    return Runner


def gateway_hygiene(
    home: Path, history: list[dict[str, Any]], compacts: bool = False, **entry: Any
) -> bool | None:
    """Hermes's own message handler (``GatewayRunner._handle_message_with_agent``) for
    one inbound message on a local platform, Hermes's home at `home`, up to where its
    hygiene has decided: True at the first call of the branch that compresses (unless
    it `compacts`: then that branch runs, on a fresh agent), False at the first call
    after the block. A fake session store holds the session (`history`, the
    ``SessionEntry`` fields `entry`); every other runner attribute reads as nothing."""
    import asyncio
    from datetime import datetime
    from types import SimpleNamespace

    from gateway import run as gateway_run
    from gateway.config import GatewayConfig, Platform
    from gateway.session import SessionEntry, SessionSource

    runner = object.__new__(_runner_class(compacts))
    runner.config, runner._session_db, runner._turn_leases = GatewayConfig(), None, None
    source = SessionSource(platform=Platform.LOCAL, chat_id="chat", user_id="user")
    entry.setdefault("session_id", "session")
    created, updated = datetime(2026, 1, 2), datetime(2026, 1, 1)
    entry = SessionEntry(session_key="key", created_at=created, updated_at=updated, **entry)
    runner.session_store = _Store(entry, history)
    event = SimpleNamespace(
        text="next", reply_to_message_id=None, reply_to_text=None, metadata={}, source=source
    )
    saved_home, gateway_run._hermes_home = gateway_run._hermes_home, home
    try:
        asyncio.run(runner._handle_message_with_agent(event, source, "key", 1))
        return None
    except _Decided as stop:
        return stop.compress
    finally:
        gateway_run._hermes_home = saved_home


def hygiene(item: dict[str, Any]) -> dict[str, Any]:
    """Hermes's gateway hygiene decision, taken by its own message handler
    (:func:`gateway_hygiene`) for one inbound message on a local platform: a fake
    session store holds the session (its transcript and its stored real prompt count),
    config.yaml gives the window and the hard message limit. Also the rough estimate
    it took of the history, when it took one."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="hermes-hygiene-") as home:
        return _hygiene_in(Path(home), item)


def _hygiene_in(home: Path, item: dict[str, Any]) -> dict[str, Any]:
    """:func:`hygiene` with its Hermes home, a directory removed after the call."""
    from agent import model_metadata

    (home / "config.yaml").write_text(
        f"model:\n  default: local-model\n  provider: custom\n"
        f"  base_url: http://127.0.0.1:9/v1\n  context_length: {item['window']}\n"
        f"compression:\n  hygiene_hard_message_limit: {item['hard_limit']}\n"
    )
    estimates: list[int] = []
    rough = model_metadata.estimate_messages_tokens_rough

    def recording(messages: Any) -> int:
        estimates.append(rough(messages))
        return estimates[-1]

    model_metadata.estimate_messages_tokens_rough = recording
    try:
        decided = gateway_hygiene(
            home, item["history"], last_prompt_tokens=item["last_prompt_tokens"]
        )
    finally:
        model_metadata.estimate_messages_tokens_rough = rough
    return {"compress": decided, "estimate": estimates[0] if estimates else None}


def lineage(item: dict[str, Any]) -> dict[str, Any]:
    """Hermes's own session store (``SessionDB``) written at ``item["path"]`` by the
    steps Hermes takes (``item["steps"]``, in order, each on session ``at``): ``start``
    a session; ``rotate`` (a compaction with ``compression.in_place: false``: ``at``
    ended with reason ``compression``, a child continues); ``branch`` (the CLI's
    ``/branch``: ``at`` ended ``branched``, a child marked ``_branched_from``);
    ``reopen`` (``/resume`` of an ended session); ``delegate`` (a sub-agent's child row,
    ``at`` left open). Each session gets one message. Returns, for each session, the
    compression lineage Hermes exports it with (``get_compression_lineage``) and the tip a
    resume of it lands on (``get_compression_tip``)."""
    import time

    from hermes_state import SessionDB

    db = SessionDB(Path(item["path"]))
    try:
        for kind, at, new in item["steps"]:
            if kind == "start":
                db.create_session(new, source="cli")
            elif kind == "rotate":
                db.end_session(at, "compression")
                db.create_session(new, source="cli", parent_session_id=at)
            elif kind == "branch":
                db.end_session(at, "branched")
                config = {"_branched_from": at}
                db.create_session(new, source="cli", parent_session_id=at, model_config=config)
            elif kind == "reopen":
                db.reopen_session(at)
            elif kind == "delegate":
                config = {"_delegate_from": at}
                db.create_session(new, source="cli", parent_session_id=at, model_config=config)
            if new:
                db.append_message(new, role="user", content=f"in {new}")
            time.sleep(0.002)  # started_at orders the children Hermes follows
        ids = [new for kind, _, new in item["steps"] if new]
        return {
            "lineage": {sid: db.get_compression_lineage(sid) for sid in ids},
            "tip": {sid: db.get_compression_tip(sid) for sid in ids},
        }
    finally:
        db.close()


OPS = {"orphans": orphans, "manual": manual, "hygiene": hygiene, "lineage": lineage}
