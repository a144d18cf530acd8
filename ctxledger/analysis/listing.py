"""Listing sessions: one row per session, oldest first, with its place in the chains
(kind, parent), model, window, size and state. ``ctxledger sessions`` prints these rows
and the server's ``GET /v1/sessions`` returns them."""

from __future__ import annotations

from typing import Any

from ctxledger.ledger.facade import Ledger

__all__ = ["session_rows"]


def session_rows(ledger: Ledger) -> list[dict[str, Any]]:
    """A row per session; ``version`` is what an append's ``expected_version`` compares."""
    rows = []
    for node in ledger.sessions():
        sid = node.session_id
        view = ledger.transcript.session(sid)
        rows.append(
            {
                "session_id": sid,
                "kind": ledger.chains.kind(sid),
                "parent_session_id": node.parent_session_id,
                "model": view.model,
                "context_length": view.context_length,
                "messages": len(view.live),
                "tokens": ledger.transcript.total_tokens(sid),
                "ended": view.ended,
                "end_reason": view.end_reason,
                "title": node.title,
                "version": view.version,
            }
        )
    return rows
