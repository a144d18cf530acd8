"""Derived values written when a long message is appended (session 39, issue 14).

:meth:`Ledger.append <ctxledger.ledger.facade.Ledger.append>` is the one way anything
writes a ledger (the CLI's ``import``, the proxy, the service, the integrations, a
what-if's replay), so it calls :func:`store_derived` once the append committed: a
message whose string content is at least
:data:`~ctxledger.compressor.factstore.STORED_MIN_CHARS` long gets its facts stored
(:mod:`ctxledger.compressor.factstore`). Written right after the append's transaction,
not in it: a crash between the two loses only the value (it is computed when read, as
for a ledger written before session 39), and a failure to store it is dropped for the
same reason. A replay re-appending a content it read from another ledger (inside
:func:`~ctxledger.eventstore.contents.sharing_contents`) copies that ledger's value when
it has one and computes nothing: a what-if must not pay the extraction it saves.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from typing import Any

from ctxledger.compressor.factstore import (
    computed_value,
    facts_kind,
    facts_version,
    stored_content,
)
from ctxledger.errors import StoreError
from ctxledger.events import MessageAppended, sha256_hex
from ctxledger.eventstore.base import AppendRequest, EventStore
from ctxledger.eventstore.contents import shared_contents

__all__ = ["store_derived"]


def store_derived(store: EventStore, requests: Sequence[AppendRequest]) -> int:
    """Store the derived values of the long messages `requests` appended; returns how many
    were written (0 for anything else: one type and length test per event)."""
    written = 0
    for request in requests:
        for event in request.events:
            if type(event) is not MessageAppended:
                continue
            content = stored_content(event.message)
            if content is not None:
                # a failure leaves the append standing; the value is computed when read
                with contextlib.suppress(StoreError):
                    written += _store_facts(store, event.message, content)
    return written


def _store_facts(store: EventStore, message: Mapping[str, Any], content: str) -> int:
    kind, version = facts_kind(message), facts_version()
    shared = shared_contents()
    ref = shared.checked_ref(content) if shared is not None else None
    if ref is None:
        ref, shared = sha256_hex(content.encode("utf-8")), None
    if store.get_derived(ref, kind, version) is not None:
        return 0  # (the same content appended again)
    # a replay copies the value of the ledger it read the content from (or none)
    value = shared.derived(ref, kind, version) if shared is not None else computed_value(message)
    if value is None:
        return 0
    store.put_derived(ref, kind, version, value)
    return 1
