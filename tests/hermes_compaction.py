"""More questions for Hermes's own compaction code (session 32), answered by
``tests/hermes_oracle.py`` under ``.venv-hermes``'s python: the orphan repairs of a
``compress()`` with the boundaries it chose. Nothing here talks to the network.
"""

from __future__ import annotations

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


OPS = {"orphans": orphans}


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


OPS["manual"] = manual
