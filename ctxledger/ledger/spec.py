"""``SessionSpec``: how a session starts, named once.

The ledger, the service, imports and what-if replays all start sessions with the
same handful of settings; they pass one :class:`SessionSpec` instead of spelling the
parameters out again. Checking happens where the events are built
(:meth:`~ctxledger.ledger.facade.Ledger.start_events`), so every entry point is
checked alike.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from ctxledger.events import SessionReason
from ctxledger.tokens import DEFAULT_ENCODING

__all__ = ["SessionSpec"]


class SessionSpec(msgspec.Struct, frozen=True, kw_only=True):
    """Everything a session is started with (``SessionStarted`` + prompt + tools)."""

    model: str
    #: None: the ledger's configured ``context_length``
    context_length: int | None = None
    system_prompt: str | None = None
    tools: Sequence[Mapping[str, Any]] | None = None
    parent_session_id: str | None = None
    reason: SessionReason = "new"
    title: str | None = None
    #: where an imported session came from (``format:key``)
    source: str | None = None
    encoding: str = DEFAULT_ENCODING
    #: None: a new id from the ledger's id generator
    session_id: str | None = None
