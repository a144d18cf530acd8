"""The neutral shape every importer produces and every exporter reads.

Importers are pure parsers: file text -> ``list[ImportedSession]``. The ledger turns
those into ordinary events (``Ledger.import_sessions``), so replay, diff and audit
work on imported history exactly as on live sessions.
"""

from __future__ import annotations

from typing import Any

import msgspec

from ctxledger.messages import CallIdRepair


class ImportedUsage(msgspec.Struct, frozen=True, kw_only=True):
    """A provider usage block reported after message ``after_index`` (0-based).

    ``aggregate`` is True when the source only kept per-session totals (Hermes
    ``state.db`` token columns): one block standing for every call of the session.
    """

    after_index: int
    raw: dict[str, Any]
    shape: str | None = None
    model: str | None = None
    aggregate: bool = False


class ImportedSession(msgspec.Struct, kw_only=True):
    """One conversation from a source file, in OpenAI message shape.

    ``messages`` excludes the system prompt (kept in ``system_prompt``, as Hermes does).
    ``parent_key`` links a continuation to its parent; ``end_reason`` is the source's
    own end reason (``"compression"`` marks a compression chain link).
    """

    key: str
    source_format: str
    messages: list[dict[str, Any]]
    system_prompt: str | None = None
    #: the role the system prompt is given back in: ``system`` or ``developer`` (s38)
    system_role: str = "system"
    tools: list[dict[str, Any]] = msgspec.field(default_factory=list)
    model: str | None = None
    context_length: int | None = None
    parent_key: str | None = None
    end_reason: str | None = None
    #: False: a child of a session that ended by compression that is not its
    #: continuation, as the source tells it (Hermes: a branch or a sub-agent started
    #: before its parent was compacted); imported as a branch
    continues: bool = True
    title: str | None = None
    usages: list[ImportedUsage] = msgspec.field(default_factory=list)
    #: a continuation of a compression: the index in ``messages`` of the message holding
    #: the source agent's summary (None: find it by its wording, if the format did not say)
    summary_index: int | None = None
    #: the source agent's summary text, when the format records it apart from the messages
    summary_text: str | None = None
    warnings: list[str] = msgspec.field(default_factory=list)
    #: re-used tool-call ids the importer repaired (recorded as an event on import)
    repairs: list[CallIdRepair] = msgspec.field(default_factory=list)
    extras: dict[str, Any] = msgspec.field(default_factory=dict)
