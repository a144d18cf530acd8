"""Old path of the Responses items <-> chat messages converter, kept as a re-export.

The converter moved to :mod:`ctxledger.importers.responses` so that the server's
``/v1/responses`` face (a sibling layer of ``integrations``) can use it too; code that
imports it from here keeps working and gets the very same objects.
"""

from __future__ import annotations

from ctxledger.importers.responses import (
    STUBS,
    items_to_messages,
    message_to_items,
    messages_to_items,
)

__all__ = ["STUBS", "items_to_messages", "message_to_items", "messages_to_items"]
