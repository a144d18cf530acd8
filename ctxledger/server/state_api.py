"""The state API's write side: everything an agent loop does through ``ContextService``.

Each handler parses and checks its input first (a 400/422 appends nothing), then makes
one service call and answers with what the service returned plus the session's
stream ``version``, the expected version of a client's next optimistic append.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import msgspec
from starlette.requests import Request
from starlette.responses import Response

from ctxledger import CompactionOutcome, TurnResult, compact
from ctxledger.errors import ConcurrencyError, DuplicateEventError, InvalidInput
from ctxledger.integers import shown
from ctxledger.ledger.spec import check_loop
from ctxledger.server.idempotency import KEY_PARAM, REPLAYED, KeyedAppend, request_key
from ctxledger.server.routing import (
    JSON,
    Endpoint,
    Param,
    check_session_id,
    json_object,
    path_param,
    query_bool,
    query_int,
)

if TYPE_CHECKING:
    from ctxledger.server.state import ServerState


def turn_json(state: ServerState, result: TurnResult) -> dict[str, Any]:
    out: dict[str, Any] = msgspec.to_builtins(result)
    out["version"] = state.ledger.version(result.session_id)
    return out


_START = (
    Param("model", "string", True, "model name"),
    Param("context_length", "integer", False, "context window in tokens (default: the server's)"),
    Param("system_prompt", "string"),
    Param(
        "system_role",
        "string",
        False,
        "the system prompt's role: system (default) or developer (with a system_prompt)",
    ),
    Param("tools", "array", False, "OpenAI function tool schemas (count toward preflight)"),
    Param("parent_session_id", "string"),
    Param("reason", "string", False, "new, branch or delegate"),
    Param("title", "string"),
    Param("session_id", "string", False, "choose the id (default: generated)"),
    Param(
        "agent_loop",
        "string",
        False,
        "where the client checks for compaction, for a what-if to replay: every_call "
        "(before each model call), per_run (when a run reads its history and after its "
        "final answer) or hermes (when not given: a branch takes its parent's, else "
        "hermes)",
    ),
)


async def start_session(request: Request, state: ServerState) -> Response:
    body = await json_object(request, _START)
    if body.get("session_id") is not None:
        check_session_id(body["session_id"], "session_id")
    reason = body.get("reason") or "new"
    if reason not in ("new", "branch", "delegate"):
        raise InvalidInput(f"reason must be new, branch or delegate, not {shown(reason)}")
    body["reason"] = reason
    loop = body.pop("agent_loop", None)  # (checked before anything is appended)
    body["loop"] = None if loop is None else check_loop(loop, "agent_loop")
    body.setdefault("context_length", None)
    if body["context_length"] is None:
        body["context_length"] = state.context_length
    sid = await state.service.start_session(**body)
    return JSON({"session_id": sid, "version": state.ledger.version(sid)}, status_code=201)


_APPEND = (
    Param("messages", "array", True, "OpenAI-shape chat messages"),
    Param(
        "expected_version",
        "integer",
        False,
        "optimistic concurrency: 409 unless the session is at this version",
    ),
)


async def append(request: Request, state: ServerState) -> Response:
    key = request_key(request)  # (a bad key is refused before the body is read)
    body = await json_object(request, _APPEND)
    sid = path_param(request, "session_id")
    if key is None:
        result = await state.service.append(
            sid, body["messages"], expected_version=body.get("expected_version")
        )
        return JSON(turn_json(state, result))
    return await _keyed_append(state, KeyedAppend(key, sid, body), sid, body)


async def _keyed_append(
    state: ServerState, keyed: KeyedAppend, sid: str, body: dict[str, Any]
) -> Response:
    """An append with an ``Idempotency-Key`` (``server/idempotency``): the first answer
    again when the request is stored, else the append under the key's ids."""
    messages = body["messages"]
    count = len(messages) if isinstance(messages, list) else 0
    stored = keyed.stored(state.ledger, count)
    if stored is not None:
        return JSON(stored, headers=REPLAYED)
    try:
        result = await state.service.append(
            sid, messages, expected_version=body.get("expected_version"), ids=keyed.ids
        )
    except (DuplicateEventError, InvalidInput, ConcurrencyError) as exc:
        # the same request stored meanwhile (a racing re-send: its ids are taken, or its
        # expected version passed) is answered from the store; a stored event id of the
        # key holding another event: the key's reuse
        stored = keyed.stored(state.ledger, count)
        if stored is not None:
            return JSON(stored, headers=REPLAYED)
        if isinstance(exc, DuplicateEventError):
            raise keyed.reused() from None
        raise
    return JSON(turn_json(state, result))


_USAGE = (
    Param(
        "usage",
        "object",
        True,
        "the provider's usage block (OpenAI chat, Responses or Anthropic shape)",
    ),
    Param("model", "string"),
    Param("cost_usd", "number"),
    Param("tool_calls", "boolean"),
)


async def report_usage(request: Request, state: ServerState) -> Response:
    body = await json_object(request, _USAGE)
    sid = path_param(request, "session_id")
    result = await state.service.report_usage(
        sid,
        body["usage"],
        model=body.get("model"),
        cost_usd=body.get("cost_usd"),
        tool_calls=body.get("tool_calls"),
    )
    return JSON(turn_json(state, result))


async def preflight(request: Request, state: ServerState) -> Response:
    await json_object(request, ())
    result = await state.service.preflight(path_param(request, "session_id"))
    return JSON(turn_json(state, result))


async def hygiene(request: Request, state: ServerState) -> Response:
    await json_object(request, ())
    result = await state.service.hygiene(path_param(request, "session_id"))
    return JSON(turn_json(state, result))


_SYSTEM = (
    Param("system_prompt", "string", True, "the system prompt the next call sends"),
    Param("role", "string", False, "its role: system or developer (default: as now)"),
)


async def system_prompt(request: Request, state: ServerState) -> Response:
    body = await json_object(request, _SYSTEM)
    sid = path_param(request, "session_id")
    role = body.get("role")  # (None: the role the session's prompt has)
    result = await state.service.set_system_prompt(sid, body["system_prompt"], role=role)
    return JSON(turn_json(state, result))


_COMPRESS = (
    Param("focus", "string", False, "topic to keep in full detail"),
    Param("dry_run", "boolean", False, "return the plan; append nothing"),
)


async def compress(request: Request, state: ServerState) -> Response:
    body = await json_object(request, _COMPRESS)
    sid = path_param(request, "session_id")
    if not body.get("dry_run"):
        return JSON(turn_json(state, await state.service.compress(sid, focus=body.get("focus"))))
    tip = state.service.tip(sid)
    svc = state.service
    outcome = await compact(
        svc.ledger,
        tip,
        svc.summarizer,
        config=svc.config,
        focus=body.get("focus"),
        trigger="manual",
        dry_run=True,
    )
    plan = plan_json(state, tip, outcome)
    return JSON({"session_id": tip, "dry_run": True, **plan, "version": state.ledger.version(tip)})


def plan_json(state: ServerState, sid: str, outcome: CompactionOutcome) -> dict[str, Any]:
    """The outcome with the plan's message ids on each side (as ``compress --dry-run --json``)."""
    view = state.ledger.transcript.session(sid)
    ids: list[str | None] = ([None] if view.system_prompt is not None else []) + list(view.live)
    plan = dict(outcome.plan)
    start, end = plan.get("compress_start", 0), plan.get("compress_end", 0)
    plan["head_ids"] = [i for i in ids[:start] if i is not None]
    plan["middle_ids"] = [i for i in ids[start:end] if i is not None]
    plan["tail_ids"] = [i for i in ids[end:] if i is not None]
    out: dict[str, Any] = msgspec.to_builtins(outcome)
    out["plan"] = plan
    return out


_PROVIDER_ERROR = (
    Param("status", "integer", False, "the HTTP status of the failed call"),
    Param("body", "any", False, "the error body (text or JSON)"),
    Param("requested_max_tokens", "integer", False, "the output cap of the failed call"),
)


async def provider_error(request: Request, state: ServerState) -> Response:
    body = await json_object(request, _PROVIDER_ERROR)
    sid = path_param(request, "session_id")
    recovery = await state.service.handle_provider_error(
        sid,
        body.get("status"),
        body.get("body"),
        requested_max_tokens=body.get("requested_max_tokens"),
    )
    out: dict[str, Any] = msgspec.to_builtins(recovery)
    out["version"] = state.ledger.version(recovery.session_id)
    return JSON(out)


async def api_messages(request: Request, state: ServerState) -> Response:
    sid = path_param(request, "session_id")
    cache = query_bool(request, "cache", None)
    tip = state.service.tip(sid)
    messages = state.service.api_messages(tip, cache=cache)
    return JSON({"session_id": tip, "version": state.ledger.version(tip), "messages": messages})


async def read_persisted(request: Request, state: ServerState) -> Response:
    sid = path_param(request, "session_id")
    ref = path_param(request, "ref")
    offset = query_int(request, "offset", 0)
    limit = query_int(request, "limit", None, minimum=1)
    if limit is None:
        result = await state.service.read_persisted(sid, ref, offset or 0)
    else:
        result = await state.service.read_persisted(sid, ref, offset or 0, limit)
    return JSON(result)


async def session_status(request: Request, state: ServerState) -> Response:
    sid = state.ledger_resolve(path_param(request, "session_id"))
    out = state.service.status(sid)
    out["version"] = state.ledger.version(out["session_id"])
    return JSON(out)


async def end_session(request: Request, state: ServerState) -> Response:
    body = await json_object(request, (Param("reason", "string"),))
    sid = path_param(request, "session_id")
    await state.service.end_session(sid, body.get("reason") or "closed")
    tip = state.service.tip(sid)
    return JSON({"session_id": tip, "ended": True, "version": state.ledger.version(tip)})


_S = "/v1/sessions/{session_id}"
ENDPOINTS = [
    Endpoint(
        "POST",
        "/v1/sessions",
        start_session,
        "Start a session",
        body=_START,
        responses={201: "the new session id"},
    ),
    Endpoint("GET", _S, session_status, "The tip's numbers and runtime state (and its version)"),
    Endpoint(
        "POST",
        _S + "/messages",
        append,
        "Append messages (all or nothing; optional expected version and Idempotency-Key)",
        body=_APPEND,
        headers=(KEY_PARAM,),
        responses={
            400: "invalid_idempotency_key: the Idempotency-Key is empty, too long or holds "
            "another character than visible ASCII; nothing appended",
            409: "expected_version is stale: nothing written; current_version says where the session is",
            422: "invalid_input / invalid_message: bad input, nothing appended; "
            "idempotency_key_reused: the key was used for another request (another body or "
            "path), nothing appended",
        },
    ),
    Endpoint(
        "POST",
        _S + "/usage",
        report_usage,
        "Report a provider response's usage (may compact in the loop)",
        body=_USAGE,
    ),
    Endpoint(
        "POST",
        _S + "/preflight",
        preflight,
        "Before a model call: compact if system + messages + tools ≥ threshold",
        body=(),
    ),
    Endpoint(
        "POST",
        _S + "/system-prompt",
        system_prompt,
        "Change the system prompt (recorded only when it differs; then preflight)",
        body=_SYSTEM,
    ),
    Endpoint("POST", _S + "/hygiene", hygiene, "Gateway safety net (85 % of the window)", body=()),
    Endpoint(
        "POST", _S + "/compress", compress, "Manual /compress (focus, dry run)", body=_COMPRESS
    ),
    Endpoint(
        "POST",
        _S + "/provider-error",
        provider_error,
        "Classify a provider error; returns how to retry",
        body=_PROVIDER_ERROR,
    ),
    Endpoint(
        "POST",
        _S + "/end",
        end_session,
        "End the session's chain",
        body=(Param("reason", "string"),),
    ),
    Endpoint(
        "GET",
        _S + "/api-messages",
        api_messages,
        "The view to send the model (cache markers when enabled)",
        query=(Param("cache", "boolean", False, "force prompt-cache markers on or off"),),
    ),
    Endpoint(
        "GET",
        "/v1/sessions/{session_id}/persisted/{ref}",
        read_persisted,
        "A slice of a persisted tool output of the session's chain (the read_persisted tool)",
        query=(Param("offset", "integer"), Param("limit", "integer")),
    ),
]

__all__ = ["ENDPOINTS", "plan_json", "turn_json"]
