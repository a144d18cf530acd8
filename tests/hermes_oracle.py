"""Answer questions with hermes-agent's own functions, for the differential parity tests.

Run by ``tests/test_parity_differential.py`` with the python of ``.venv-hermes`` (the
real hermes-agent from PyPI, imported, never copied):

    .venv-hermes/bin/python tests/hermes_oracle.py

It reads one JSON request a line on stdin, ``{"op": NAME, "inputs": [...]}``, runs every
input through the Hermes function ``NAME`` stands for and writes one JSON line back,
``{"outputs": [...]}`` (an input Hermes raised on gives ``{"raised": "..."}``). One
process serves a whole test module; nothing here talks to the network.
"""

from __future__ import annotations

import json
import sys
import time
from types import SimpleNamespace
from typing import Any

import httpx
import openai
from agent import context_compressor as cc
from agent import error_classifier, model_metadata, prompt_caching, usage_pricing
from agent.agent_runtime_helpers import repair_message_sequence, strip_think_blocks
from hermes_compaction import OPS as COMPACTION_OPS
from hermes_loop import loop

_CLIENT = openai.OpenAI(api_key="sk-oracle", base_url="http://127.0.0.1:9/v1")
_REQUEST = httpx.Request("POST", "http://127.0.0.1:9/v1/chat/completions")


def _namespace(value: Any) -> Any:
    """A decoded usage block as the SDK hands it over: attributes, not keys."""
    if isinstance(value, dict):
        return SimpleNamespace(**{k: _namespace(v) for k, v in value.items()})
    return value


def estimate(message: dict[str, Any]) -> dict[str, int]:
    return {
        "budget": cc._estimate_msg_budget_tokens(message),
        "rough": model_metadata.estimate_messages_tokens_rough([message]),
    }


def usage(item: dict[str, Any]) -> dict[str, int]:
    raw = item["raw"]
    result = usage_pricing.normalize_usage(
        _namespace(raw) if raw else raw, api_mode=item.get("api_mode")
    )
    return {
        "input": result.input_tokens,
        "output": result.output_tokens,
        "cache_read": result.cache_read_tokens,
        "cache_write": result.cache_write_tokens,
        "reasoning": result.reasoning_tokens,
    }


def reply(item: dict[str, Any]) -> str | None:
    """What Hermes's summary call stores for one reply message (None: a failure)."""
    if item["kind"] == "string":
        message: Any = item["value"]
    elif item["kind"] == "dict":
        message = item["value"]
    else:
        message = SimpleNamespace(content=item["value"])
    response = SimpleNamespace(choices=[SimpleNamespace(message=message)])
    original = cc.call_llm
    cc.call_llm = lambda **_: response
    try:
        compressor = cc.ContextCompressor(
            "local-model", config_context_length=200_000, quiet_mode=True
        )
        summary = compressor._generate_summary([{"role": "assistant", "content": "Working."}])
    finally:
        cc.call_llm = original
    return None if summary is None else compressor._strip_summary_prefix(summary)


def strip(text: str) -> str:
    return strip_think_blocks(None, text)


def classify(item: dict[str, Any]) -> dict[str, Any]:
    """An error exactly as the openai SDK raises it for this status and body."""
    response = httpx.Response(item["status"], content=item["body"].encode(), request=_REQUEST)
    error = _CLIENT._make_status_error_from_response(response)
    verdict = error_classifier.classify_api_error(
        error, provider="custom", model="local-model", approx_tokens=0, context_length=200_000
    )
    text = str(error).lower()  # what Hermes's conversation loop parses
    return {
        "reason": verdict.reason.value,
        "should_compress": verdict.should_compress,
        "stated_window": model_metadata.parse_context_limit_from_error(text),
        "output_cap_error": model_metadata.is_output_cap_error(text),
        "available_output": model_metadata.parse_available_output_tokens_from_error(text),
    }


def budgets(item: dict[str, Any]) -> dict[str, int]:
    window, threshold, ratio = item["window"], item["threshold"], item["target_ratio"]
    compressor = cc.ContextCompressor(
        "local-model",
        config_context_length=window,
        threshold_percent=threshold,
        summary_target_ratio=ratio,
        quiet_mode=True,
    )
    plain = cc.ContextCompressor._compute_threshold_tokens(window, threshold)
    return {
        "threshold_tokens": compressor.threshold_tokens,
        "threshold_tokens_without_small_window_raise": plain,
        "tail_budget": compressor.tail_token_budget,
        "max_summary_tokens": compressor.max_summary_tokens,
        "summary_budget": [
            [
                model_metadata.estimate_messages_tokens_rough(turns),
                compressor._compute_summary_budget(turns),
            ]
            for turns in ([{"role": "user", "content": "x" * n}] for n in item["summarized_chars"])
        ],
    }


def oneliner(item: dict[str, Any]) -> str:
    return cc._summarize_tool_result(item["name"], item["arguments"], item["content"])


def serialize(messages: list[dict[str, Any]]) -> str:
    """What Hermes sends its summarizer for these turns (``_serialize_for_summary``)."""
    compressor = cc.ContextCompressor("local-model", config_context_length=200_000, quiet_mode=True)
    return compressor._serialize_for_summary(messages)


def compress(item: dict[str, Any]) -> Any:
    """Hermes's own ``compress()`` of a message list, its summary call answered with
    ``item["summary"]`` (given the summary prefix, as Hermes's summary call does).
    With ``item["then"]``, the same compressor then compacts its output followed by
    those turns, and both outputs are returned."""
    compressor = cc.ContextCompressor(
        "local-model", config_context_length=item["window"], quiet_mode=True
    )
    body = item["summary"]
    compressor._generate_summary = lambda *_, **__: compressor._with_summary_prefix(body)  # type: ignore[method-assign]
    out = compressor.compress([dict(m) for m in item["messages"]])
    out = [{k: v for k, v in m.items() if not k.startswith("_")} for m in out]
    if "then" not in item:
        return out
    # a repeated compaction by the same compressor: the first output, then new turns
    grown = out + [dict(m) for m in item["then"]]
    again = compressor.compress(grown)
    return {
        "first": out,
        "second": [{k: v for k, v in m.items() if not k.startswith("_")} for m in again],
    }


def compacted(item: dict[str, Any]) -> dict[str, Any]:
    """Hermes's ``compress()`` of a message list (as op ``compress``) and what its summary
    call was asked for: the turns summarized and the summary budget it computed."""
    compressor = cc.ContextCompressor(
        "local-model", config_context_length=item["window"], quiet_mode=True
    )
    asked: dict[str, Any] = {}

    def summary(turns: list[dict[str, Any]], *_: Any, **__: Any) -> str:
        asked["turns"] = len(turns)
        asked["budget"] = compressor._compute_summary_budget(turns)
        asked["estimate"] = model_metadata.estimate_messages_tokens_rough(turns)
        return compressor._with_summary_prefix(item["summary"])

    compressor._generate_summary = summary  # type: ignore[method-assign]
    out = compressor.compress([dict(m) for m in item["messages"]])
    out = [{k: v for k, v in m.items() if not k.startswith("_")} for m in out]
    return {"out": out, **asked}


def repair(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The list as Hermes's agent repairs it (in place) before each model call."""
    repair_message_sequence(None, messages)
    return messages


def prune(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Hermes's prune pass over every message (``_prune_old_tool_results`` with nothing
    protected: what it does to the part of a list before its prune boundary)."""
    compressor = cc.ContextCompressor("local-model", config_context_length=200_000, quiet_mode=True)
    out, _ = compressor._prune_old_tool_results([dict(m) for m in messages], protect_tail_count=0)
    return out


def cache(item: dict[str, Any]) -> list[dict[str, Any]]:
    """Hermes's "system_and_3" cache breakpoints (``apply_anthropic_cache_control``)."""
    return prompt_caching.apply_anthropic_cache_control(
        item["messages"], cache_ttl=item["ttl"], native_anthropic=item["native"]
    )


def cache_policy(item: dict[str, Any]) -> list[bool]:
    """Whether Hermes caches a model on a provider, and with the native layout: its
    runtime resolution (``resolve_runtime_provider``: the wire, the base URL), then its
    ``anthropic_prompt_cache_policy``. A placeholder key stands in for credentials;
    the machine's variables that change the answer are cleared: a Bedrock bearer token
    (sends every Bedrock model to Converse, uncached) and an OpenRouter base URL (its
    host decides OpenRouter's layout)."""
    import os

    from agent.agent_runtime_helpers import anthropic_prompt_cache_policy
    from hermes_cli.runtime_provider import resolve_runtime_provider

    for name in ("AWS_BEARER_TOKEN_BEDROCK", "OPENROUTER_BASE_URL"):
        os.environ.pop(name, None)
    # a fixed region and placeholder keys: Hermes looks both up (botocore, ~20 ms an
    # input) for the runtime it returns, not for the cache decision
    os.environ.update(AWS_REGION="us-east-1", AWS_ACCESS_KEY_ID="oracle")
    os.environ["AWS_SECRET_ACCESS_KEY"] = "oracle"
    os.environ.setdefault("ANTHROPIC_API_KEY", "sk-ant-oracle")
    os.environ.setdefault("OPENROUTER_API_KEY", "sk-or-oracle")
    rt = resolve_runtime_provider(requested=item["provider"], target_model=item["model"])
    agent = SimpleNamespace(
        provider=rt["provider"], base_url=rt["base_url"], api_mode=rt["api_mode"], model=None
    )
    cache, native = anthropic_prompt_cache_policy(agent, model=item["model"])
    return [bool(cache), bool(native)]


class _Sandbox:
    """An environment whose writes succeed (nothing is written): the persisted form."""

    def execute(self, *_: Any, **__: Any) -> dict[str, int]:
        return {"returncode": 0}


def toolbudget(item: dict[str, Any]) -> dict[str, Any]:
    """Hermes's tool-output budget for one turn's results on a window: which results it
    stores out of the context (per result, then per turn) and each one's preview."""
    from tools import budget_config
    from tools import tool_result_storage as trs

    config = budget_config.budget_for_context_window(item["window"])
    messages, reasons = [], []
    for r in item["results"]:
        out = trs.maybe_persist_tool_result(r["content"], r["name"], r["id"], _Sandbox(), config)
        reasons.append("per_result" if out != r["content"] else None)
        messages.append({"role": "tool", "tool_call_id": r["id"], "content": out})
    trs.enforce_turn_budget(messages, _Sandbox(), config)
    for i, m in enumerate(messages):
        if reasons[i] is None and m["content"] != item["results"][i]["content"]:
            reasons[i] = "per_turn"
    return {
        "per_result": config.default_result_size,
        "per_turn": config.turn_budget,
        "reasons": reasons,
        "total_after": sum(len(m["content"]) for m in messages),
        "previews": [
            trs.generate_preview(r["content"], config.preview_size)[0] for r in item["results"]
        ],
    }


class _CharTokens:
    """A tokenizer that fails, so Hermes counts a turn as characters // 4 (its fallback)."""

    def encode(self, _: str) -> list[int]:
        raise ValueError("no tokenizer offline")


def trajectory(item: dict[str, Any]) -> dict[str, Any]:
    """Hermes's ``TrajectoryCompressor.compress_trajectory`` on one record (its tokenizer
    replaced by its own characters // 4 fallback, the summary call answered): the region
    it summarizes, or why it did not."""
    import trajectory_compressor as tc

    compressor = object.__new__(tc.TrajectoryCompressor)  # no tokenizer download, no client
    compressor.config = tc.CompressionConfig(
        target_max_tokens=item["target"],
        summary_target_tokens=item["summary_target"],
        protect_last_n_turns=item["protect_last_n"],
        add_summary_notice=False,
    )
    compressor.tokenizer = _CharTokens()
    compressor._generate_summary = lambda *_: "[CONTEXT SUMMARY]: done"  # type: ignore[method-assign]
    _, metrics = compressor.compress_trajectory([dict(t) for t in item["turns"]])
    return {
        "skipped": metrics.skipped_under_target,
        "compressed": metrics.was_compressed,
        "start": metrics.turns_compressed_start_idx,
        "end": metrics.turns_compressed_end_idx,
    }


def _failure(kind: str) -> Exception:
    """The exception Hermes's summary call raises for one kind of failure."""
    if kind == "timeout":
        return openai.APITimeoutError(request=_REQUEST)
    if kind == "refused":
        return openai.APIConnectionError(request=_REQUEST)
    if kind == "closed":
        return httpx.RemoteProtocolError(
            "peer closed connection without sending complete message body (incomplete chunked read)"
        )
    if kind == "malformed":
        return json.JSONDecodeError("Expecting value", "<html>", 0)
    if kind == "not_configured":
        return RuntimeError("No LLM provider configured for task compression")
    response = httpx.Response(int(kind), content=b'{"error": {"message": "x"}}', request=_REQUEST)
    return _CLIENT._make_status_error_from_response(response)


def summary_failure(kind: str) -> dict[str, Any]:
    """What one failure of the summary call (the first in a session) does to a compaction:
    abandoned or replaced by the fallback summary, and the cooldown that follows."""
    empty = SimpleNamespace(choices=[SimpleNamespace(message=SimpleNamespace(content=""))])

    def call(**_: Any) -> Any:
        if kind == "empty":
            return empty
        raise _failure(kind)

    original = cc.call_llm
    cc.call_llm = call
    try:
        compressor = cc.ContextCompressor(
            "local-model", config_context_length=200_000, quiet_mode=True
        )
        compressor.compress(_chat(40))
    finally:
        cc.call_llm = original
    left = compressor._summary_failure_cooldown_until - time.monotonic()
    return {
        "aborted": compressor._last_compress_aborted,
        "cooldown": round(left / 10) * 10,
    }


def _chat(pairs: int) -> list[dict[str, Any]]:
    turns = [{"role": "system", "content": "You are a coding agent."}]
    for i in range(pairs):
        turns.append({"role": "user", "content": f"ask {i} " + "u" * 4_000})
        turns.append({"role": "assistant", "content": f"answer {i} " + "a" * 4_000})
    return turns


def _guard_step(compressor: Any, step: list[Any]) -> None:
    """One step of a guard sequence, as Hermes's conversation loop drives its compressor."""
    if step[0] == "nousage":  # a response without usage, as the conversation loop hands it
        if compressor.awaiting_real_usage_after_compression:
            compressor.update_from_response({})
        return
    if step[0] == "usage":  # a provider's prompt count, as a share of the threshold
        compressor.update_from_response(
            {"prompt_tokens": int(step[1] * compressor.threshold_tokens)}
        )
        return
    body = None if step[0] == "fallback" else compressor._with_summary_prefix("## Goal\nx")
    compressor._generate_summary = lambda *_, **__: body
    compressor.compress(_chat(1 if step[0] == "noop" else 60))
    if compressor._last_compression_made_progress:  # what compress_context() then records
        compressor.last_prompt_tokens = -1
        compressor.awaiting_real_usage_after_compression = True
        compressor.record_completed_compaction(used_fallback=compressor._last_summary_fallback_used)


def guards(steps: list[list[Any]]) -> list[bool]:
    """Whether automatic compression is blocked after each step: ``["compress"]``,
    ``["fallback"]`` (the summary failed), ``["noop"]`` (too few messages),
    ``["usage", share of the threshold]``."""
    compressor = cc.ContextCompressor("local-model", config_context_length=200_000, quiet_mode=True)
    blocked = []
    for step in steps:
        _guard_step(compressor, step)
        blocked.append(compressor._automatic_compression_blocked())
    return blocked


#: an armed failure of the summary call -> the failure it raises (``_failure``)
_ARMED = {
    "fallback": "500",
    "abort": "refused",
    "malformed": "malformed",
    "rate_limit": "429",
    "auth": "401",
    "not_configured": "not_configured",
}


def _summary_call(armed: list[str]) -> Any:
    """Hermes's summary model call answering as armed: a summary or a failure (a server
    error, a refused connection, an undecodable reply, 429, 401, no provider); a call
    spends it."""

    def call(**_: Any) -> Any:
        mode, armed[0] = armed[0], "ok"
        if mode != "ok":
            raise _failure(_ARMED[mode])
        content = "## Goal\nFix the tests.\n## Completed Actions\n1. Ran them."
        return SimpleNamespace(choices=[SimpleNamespace(message=SimpleNamespace(content=content))])

    return call


def _run_compress(compressor: Any, armed: list[str], *, force: bool) -> bool:
    """One compress() of a long chat as ``compress_context`` runs it; whether it compacted."""
    original = cc.call_llm
    cc.call_llm = _summary_call(armed)
    try:
        compressor.compress(_chat(60), force=force)
    finally:
        cc.call_llm = original
    if compressor._last_compress_aborted or not compressor._last_compression_made_progress:
        return False
    compressor.last_prompt_tokens = -1
    compressor.awaiting_real_usage_after_compression = True
    compressor.record_completed_compaction(used_fallback=compressor._last_summary_fallback_used)
    return True


def _runtime_step(compressor: Any, step: list[Any], armed: list[str]) -> bool:
    """One step of a session as Hermes's loop drives its compressor; whether it compacted."""
    kind = step[0]
    if kind == "arm":  # what the next summary call does
        armed[0] = step[1]
    elif kind == "time":  # seconds pass (the cooldown runs on time.monotonic)
        compressor._summary_failure_cooldown_until -= step[1]
    elif kind in ("switch", "learn"):  # a model switch, or a window the provider stated
        model = step[1] if kind == "switch" else compressor.model
        compressor.update_model(
            model,
            step[-1],
            base_url=compressor.base_url,
            api_key=compressor.api_key,
            provider=compressor.provider,
            api_mode=compressor.api_mode,
        )
    elif kind == "final":  # a final answer without usage: no check; a pending verdict goes
        if compressor.awaiting_real_usage_after_compression:
            compressor.update_from_response({})
    elif kind == "manual":
        return _run_compress(compressor, armed, force=True)
    else:  # "usage": a tool-call response whose prompt count is a share of the threshold
        prompt = int(step[1] * compressor.threshold_tokens)
        compressor.update_from_response({"prompt_tokens": prompt, "completion_tokens": 20})
        if compressor.should_compress(prompt):
            return _run_compress(compressor, armed, force=False)
    return False


def runtime(item: dict[str, Any]) -> list[dict[str, Any]]:
    """After each step: whether it compacted, whether automatic compression is blocked
    (cooldown, strikes, the fallback breaker) and the threshold in tokens."""
    compressor = cc.ContextCompressor(
        item["model"], config_context_length=item["window"], quiet_mode=True
    )
    armed = ["ok"]
    out = []
    for step in item["steps"]:
        compacted = _runtime_step(compressor, step, armed)
        out.append(
            {
                "compacted": compacted,
                "blocked": compressor._automatic_compression_blocked(),
                "threshold": compressor.threshold_tokens,
            }
        )
    return out


OPS = {
    "compress": compress,
    "estimate": estimate,
    "usage": usage,
    "reply": reply,
    "strip": strip,
    "classify": classify,
    "budgets": budgets,
    "oneliner": oneliner,
    "serialize": serialize,
    "guards": guards,
    "summary_failure": summary_failure,
    "loop": loop,
    "runtime": runtime,
    "compacted": compacted,
    "prune": prune,
    "repair": repair,
    "cache": cache,
    "cache_policy": cache_policy,
    "toolbudget": toolbudget,
    "trajectory": trajectory,
    **COMPACTION_OPS,
}


def _answer(op: str, value: Any) -> Any:
    try:
        return OPS[op](value)
    except Exception as exc:  # reported to the test, which decides what a raise means
        return {"raised": f"{type(exc).__name__}: {exc}"}


def _no_tls_work() -> None:
    """Nothing here speaks TLS (every upstream is plain HTTP on 127.0.0.1), yet each
    ``AIAgent`` checks certifi's CA bundle and its HTTP clients load it, ~35 ms a load
    and about eight loads an agent: most of an op ``manual`` or ``loop`` input's time.
    The clients load a one-certificate bundle instead (``SSL_CERT_FILE``), and Hermes's
    check is skipped by its own switch (``HERMES_SKIP_SSL_GUARD``)."""
    import atexit
    import os
    import re
    import shutil
    import tempfile
    from pathlib import Path

    import certifi

    pem = Path(certifi.where()).read_text()
    first = re.search(r"-----BEGIN CERTIFICATE-----.*?-----END CERTIFICATE-----\n", pem, re.S)
    assert first is not None, "certifi's bundle holds no certificate"
    folder = Path(tempfile.mkdtemp(prefix="hermes-oracle-tls-"))
    atexit.register(shutil.rmtree, folder, True)
    (folder / "one.pem").write_text(first[0])
    os.environ["SSL_CERT_FILE"] = str(folder / "one.pem")
    os.environ["HERMES_SKIP_SSL_GUARD"] = "1"


def _own_hermes_home() -> None:
    """An empty Hermes home for every op, removed at exit: Hermes reads its ``.env`` and
    config from ``~/.hermes`` and writes its logs, state and defaults there, which would
    be the machine's own. (An op that needs a config writes its own home, as ``loop`` and
    ``hygiene`` do.)"""
    import atexit
    import os
    import shutil
    import tempfile

    home = tempfile.mkdtemp(prefix="hermes-oracle-home-")
    atexit.register(shutil.rmtree, home, True)
    os.environ["HERMES_HOME"] = home


def main() -> None:
    _own_hermes_home()
    _no_tls_work()
    channel = sys.stdout
    sys.stdout = sys.stderr  # whatever Hermes prints must not mix with the answers
    for line in sys.stdin:
        request = json.loads(line)
        outputs = [_answer(request["op"], value) for value in request["inputs"]]
        channel.write(json.dumps({"outputs": outputs}) + "\n")
        channel.flush()


if __name__ == "__main__":
    main()
