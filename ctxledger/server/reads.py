"""The state API's read side: the analysis commands of the CLI, as JSON.

Read-only: every handler folds the events other writers appended first and never
writes. The JSON is what the matching ``ctxledger … --json`` command prints.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import msgspec
from starlette.requests import Request
from starlette.responses import Response

from ctxledger import audit_chain, audit_compaction, diff, expand, recall, trace
from ctxledger.analysis.listing import session_rows
from ctxledger.analysis.redacted import redacted_report
from ctxledger.analysis.replay import rebuild_check, verify_compactions
from ctxledger.errors import InvalidInput
from ctxledger.server.routing import (
    JSON,
    Endpoint,
    Param,
    path_param,
    query_bool,
    query_int,
    query_str,
)

if TYPE_CHECKING:
    from ctxledger.server.state import ServerState


async def sessions(request: Request, state: ServerState) -> Response:
    ledger = state.ledger
    ledger.refresh()
    rows = session_rows(ledger)
    return JSON({"sessions": rows})


async def chain(request: Request, state: ServerState) -> Response:
    sid = state.ledger_resolve(path_param(request, "session_id"))
    ledger, chains = state.ledger, state.ledger.chains
    members = chains.chain(sid)
    tip = chains.tip(sid)
    return JSON(
        {
            "session_id": sid,
            "root": members[0],
            "tip": tip,
            "compression_count": chains.compression_count(tip),
            "chain": [
                {
                    **msgspec.to_builtins(chains.lineage(m)),
                    "kind": chains.kind(m),
                    "messages": len(ledger.transcript.session(m).live),
                }
                for m in members
            ],
        }
    )


async def usage(request: Request, state: ServerState) -> Response:
    sid = state.ledger_resolve(path_param(request, "session_id"))
    ledger = state.ledger
    return JSON(
        {
            "session_id": sid,
            "session": ledger.usage(sid).to_dict(),
            "chain": ledger.chain_usage(sid).to_dict(),
        }
    )


async def replay(request: Request, state: ServerState) -> Response:
    sid = state.ledger_resolve(path_param(request, "session_id"))
    report = rebuild_check(state.ledger, sid)
    out: dict[str, Any] = {
        "session_id": sid,
        "equal": report.equal,
        "rebuild": msgspec.to_builtins(report),
    }
    if query_bool(request, "verify"):
        checks = verify_compactions(state.ledger, sid)
        out["drifted"] = checks.drifted
        out["compactions"] = msgspec.to_builtins(checks.compactions)
    return JSON(out)


async def audit_session(request: Request, state: ServerState) -> Response:
    sid = state.ledger_resolve(path_param(request, "session_id"))
    return JSON(redacted_report(audit_chain(state.ledger, sid), state.ledger))


async def audit_one(request: Request, state: ServerState) -> Response:
    report = audit_compaction(state.ledger, path_param(request, "compaction_id"))
    return JSON(redacted_report(report, state.ledger))


async def trace_fact(request: Request, state: ServerState) -> Response:
    sid = state.ledger_resolve(path_param(request, "session_id"))
    fact = query_str(request, "fact", required=True)
    assert fact is not None
    return JSON(redacted_report(trace(state.ledger, sid, fact), state.ledger))


async def recall_query(request: Request, state: ServerState) -> Response:
    sid = state.ledger_resolve(path_param(request, "session_id"))
    query = query_str(request, "query", required=True)
    assert query is not None
    limit = query_int(request, "limit", 10, minimum=1)
    return JSON(recall(state.ledger, sid, query, limit or 10))


async def expand_compaction(request: Request, state: ServerState) -> Response:
    return JSON(expand(state.ledger, path_param(request, "compaction_id")))


async def diff_refs(request: Request, state: ServerState) -> Response:
    a = query_str(request, "a", required=True)
    b = query_str(request, "b")
    assert a is not None
    if b is not None and not b.strip():
        raise InvalidInput("query parameter 'b' must not be empty when given")
    state.ledger.refresh()
    return JSON(diff(state.ledger, a.strip(), b.strip() if b else None))


_S = "/v1/sessions/{session_id}"
_READ = "read"
ENDPOINTS = [
    Endpoint("GET", "/v1/sessions", sessions, "Every session, oldest first", tag=_READ),
    Endpoint(
        "GET", _S + "/chain", chain, "Lineage: the compression chain, branches, the tip", tag=_READ
    ),
    Endpoint(
        "GET", _S + "/usage", usage, "Canonical usage of the session and its chain", tag=_READ
    ),
    Endpoint(
        "GET",
        _S + "/replay",
        replay,
        "Rebuild the chain's projections from the log and compare (verify: re-plan)",
        tag=_READ,
        query=(Param("verify", "boolean", False, "also re-plan every recorded compaction"),),
    ),
    Endpoint(
        "GET",
        _S + "/audit",
        audit_session,
        "Facts each compaction of the chain kept and lost",
        tag=_READ,
    ),
    Endpoint(
        "GET",
        _S + "/trace",
        trace_fact,
        "The life of one fact across messages and compactions",
        tag=_READ,
        query=(Param("fact", "string", True),),
    ),
    Endpoint(
        "GET",
        _S + "/recall",
        recall_query,
        "Full-text search over every message the chain held",
        tag=_READ,
        query=(Param("query", "string", True), Param("limit", "integer")),
    ),
    Endpoint(
        "GET",
        "/v1/compactions/{compaction_id}/expand",
        expand_compaction,
        "The original messages a compaction's summary replaced",
        tag=_READ,
    ),
    Endpoint(
        "GET",
        "/v1/compactions/{compaction_id}/audit",
        audit_one,
        "Facts one compaction kept and lost",
        tag=_READ,
    ),
    Endpoint(
        "GET",
        "/v1/diff",
        diff_refs,
        "Differences between sessions, SESSION@SEQ points or compactions",
        tag=_READ,
        query=(Param("a", "string", True), Param("b", "string")),
    ),
]

__all__ = ["ENDPOINTS"]
