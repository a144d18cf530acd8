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
