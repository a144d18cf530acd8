"""The keys the proxy adds to the messages it stores, which no provider knows: stripped
from every request sent upstream, on every face, in one place (:func:`unmarked_payload`).

The Responses face keeps each message's input items (``responses_items``) and the
response id of a reply (``responses_response_id``); a reply the client may go on without
is marked ``ctxledger_provisional``, and one cut inside its calls
``ctxledger_cut_in_a_call``. The chat face sends the stored view as it is, so a session
recorded through the Responses face and continued through the chat face sent these keys
to the model server (session 43's review); a strict server refuses an unknown key.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ctxledger.importers.responses import STUBS
from ctxledger.server.formats import RESPONSE_ID
from ctxledger.server.history import PROVISIONAL
from ctxledger.server.upstream_reply import CUT_IN_A_CALL

#: the proxy's own message keys, never forwarded
OWN_KEYS = frozenset({STUBS, RESPONSE_ID, PROVISIONAL, CUT_IN_A_CALL})

#: the fields of an upstream request that hold messages (chat, Anthropic) or items (Responses)
_MESSAGE_LISTS = ("messages", "input")


def unmarked(message: Any) -> Any:
    """`message` without the proxy's own keys: the same object when it has none (the
    common case; a stored message is shared with the view's cache, so never changed in
    place), else a copy."""
    if not isinstance(message, Mapping) or OWN_KEYS.isdisjoint(message):
        return message
    return {k: v for k, v in message.items() if k not in OWN_KEYS}


def unmarked_payload(payload: dict[str, Any]) -> dict[str, Any]:
    """The upstream request `payload` with its messages (or items) :func:`unmarked`."""
    for field in _MESSAGE_LISTS:
        listed = payload.get(field)
        if isinstance(listed, list) and any(
            isinstance(m, Mapping) and not OWN_KEYS.isdisjoint(m) for m in listed
        ):
            payload[field] = [unmarked(m) for m in listed]
    return payload


__all__ = ["OWN_KEYS", "unmarked", "unmarked_payload"]
