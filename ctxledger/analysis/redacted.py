"""Secrets never leave the log through an analysis: the redacted forms of its outputs.

The log keeps originals byte-for-byte (replay depends on it); what reaches a
terminal or an agent goes through the one redactor (:mod:`ctxledger.compressor.redact`)
first, as summaries do. Computation stays on the originals (fact matching, counts),
so redacting the output changes no verdict, only what is shown.

- recall snippets: FTS cuts a snippet at token boundaries, which can cut a secret so
  that its shape is no longer recognisable (``…proj-abc…``). A hit whose message
  holds a secret therefore gets a snippet cut from the *redacted* text instead.
- expand: every original message is shown through ``redact_message``.
- audit / trace reports: every fact value (and its normalized form) is redacted.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from typing import Any, TypeVar

import msgspec

from ctxledger.compressor.redact import REDACTED, redact, redact_message
from ctxledger.ledger.facade import Ledger
from ctxledger.messages import JSON
from ctxledger.tokens import message_text

_SNIPPET_CHARS = 160
#: a word as the full-text index cuts one (letters and digits; ``_`` separates)
_WORD = re.compile(r"[^\W_]+")

S = TypeVar("S", bound=msgspec.Struct)


def occurrences(text: str, terms: Sequence[str], stop: int) -> int:
    """How often the words of `terms` occur in `text` as whole words, counted up to
    `stop` (``src/a.py``'s ``a`` is not every letter a of a log)."""
    lowered = text.lower()
    found = 0
    for word in _words(terms):
        for _ in _whole(word).finditer(lowered):
            found += 1
            if found >= stop:
                return found
    return found


def _words(terms: Sequence[str]) -> set[str]:
    return {w.lower() for t in terms for w in _WORD.findall(t)}


@functools.lru_cache(maxsize=256)
def _whole(word: str) -> re.Pattern[str]:
    """`word` as a whole word; the literal comes first, so ``re`` scans for it fast (a
    leading lookbehind would be tried at every position)."""
    literal = re.escape(word)
    return re.compile(rf"{literal}(?<![^\W_]{literal})(?![^\W_])")


def snippet_of(message: JSON, fts_snippet: str | None, terms: Sequence[str]) -> str:
    """The FTS snippet, or one cut from the redacted text when the message holds a secret
    or no FTS snippet was made (a message with too many matches for FTS5's snippet)."""
    text = message_text(message)
    clean = redact(text)
    if clean == text and fts_snippet is not None:
        return redact(fts_snippet)
    words = _words(terms)
    lowered = clean.lower()
    first = min((m.start() for w in words if (m := _whole(w).search(lowered))), default=0)
    start = max(0, first - _SNIPPET_CHARS // 2)
    piece = clean[start : start + _SNIPPET_CHARS]
    for word in sorted(words, key=len, reverse=True):
        piece = re.sub(rf"(?i)\b({re.escape(word)})\b", r"«\1»", piece)
    return ("…" if start else "") + piece + ("…" if start + _SNIPPET_CHARS < len(clean) else "")


def shown_message(message: JSON) -> JSON:
    """A redacted copy of a message for display (the stored one is never touched)."""
    return redact_message(message)


class _Sources:
    """Whether a fact value is (part of) a secret of the message it was extracted from.

    A fact can be a bare quoted value (``'pa55-w0rd'``) that no rule recognises on its
    own; its message says what it is: the value is hidden when it occurs in the
    message's text but no longer in the redacted text.
    """

    def __init__(self, ledger: Ledger | None) -> None:
        self.ledger = ledger
        self._texts: dict[str, tuple[str, str]] = {}

    def hides(self, message_id: str | None, value: str) -> bool:
        if self.ledger is None or not message_id or not value:
            return False
        if message_id not in self._texts:
            stored = self.ledger.transcript.state.messages.get(message_id)
            text = message_text(stored.message) if stored is not None else ""
            self._texts[message_id] = (text, redact(text))
        text, clean = self._texts[message_id]
        return value in text and value not in clean


def _fact(fact: S, sources: _Sources) -> S:
    value = redact(fact.value)  # type: ignore[attr-defined]
    if value == fact.value and sources.hides(getattr(fact, "message_id", None), value):  # type: ignore[attr-defined]
        value = REDACTED
    if value == fact.value:  # type: ignore[attr-defined]
        return fact
    return msgspec.structs.replace(fact, value=value, normalized=value.lower())


def redacted_report(report: S, ledger: Ledger | None = None) -> S:
    """An audit (chain or compaction) or trace report with every fact value redacted.

    Walks the report's structs and lists of structs (reports are a few levels deep);
    a struct with a string ``value`` is a fact, a string ``fact`` is a traced query.
    With the `ledger`, a fact that is a bare secret value is recognised from the
    message it came from.
    """
    return _redacted(report, _Sources(ledger))


def _redacted(report: S, sources: _Sources) -> S:
    if isinstance(getattr(report, "value", None), str):
        return _fact(report, sources)
    changes: dict[str, Any] = {}
    for name in report.__struct_fields__:
        value = getattr(report, name)
        if name == "fact" and isinstance(value, str) and redact(value) != value:
            changes[name] = redact(value)
            changes["normalized"] = changes[name].lower()
        elif isinstance(value, msgspec.Struct):
            changes[name] = _redacted(value, sources)
        elif isinstance(value, list) and any(isinstance(v, msgspec.Struct) for v in value):
            changes[name] = [
                _redacted(v, sources) if isinstance(v, msgspec.Struct) else v for v in value
            ]
    return msgspec.structs.replace(report, **changes) if changes else report


__all__ = ["redacted_report", "shown_message", "snippet_of"]
