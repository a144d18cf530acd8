"""File formats in and out (pure parsing; nothing here touches a ledger).

* :mod:`~ctxledger.importers.detect`: :func:`load` / :func:`detect_format` — read a file
  of any supported format into :class:`ImportedSession` objects;
* one module per format: ``openai``, ``anthropic``, ``hermes_db``, ``claude_code``,
  ``codex``, ``sharegpt`` (what they share is in ``common``);
* :mod:`~ctxledger.importers.export`: :func:`export_messages` — a view in a provider format;
* :mod:`~ctxledger.importers.responses`: OpenAI Responses input items <-> chat messages
  (used by the Agents SDK adapter and the proxy's ``/v1/responses`` face).
"""

from ctxledger.importers.detect import detect_format, load, load_text
from ctxledger.importers.export import export_messages, export_session
from ctxledger.importers.model import ImportedSession, ImportedUsage

__all__ = [
    "ImportedSession",
    "ImportedUsage",
    "detect_format",
    "export_messages",
    "export_session",
    "load",
    "load_text",
]
