"""The views a chain's compactions turned into one another, as pieces facts are checked in.

The audit and ``trace`` ask one question per compaction: which facts were in the view
it compacted (what the model saw just before) and are no longer in the view it made?
A summary can live anywhere in a view: its own message, merged into a user or
assistant message (summary first or last), or an imported source agent's summary.
So every message of a view is split into *pieces*: the summary body it holds (with
the compaction that wrote it) and the rest of the message (the original it was
merged into, or the whole message). A piece the next view does not hold verbatim was
*rewritten* by the compaction; every fact stated in a rewritten piece and in no piece
of the new view was dropped by that compaction, and by no other one.

A piece *states* a fact when the fact's normalized value occurs in its text, or when
extracting facts from it yields that fact (``exit code 2`` is read from
``<returncode>2</returncode>``). Read-only; facts are extracted once per message
content and kept in a bounded process-wide cache (:data:`FACTS`), since they are a
pure function of the message.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import msgspec

from ctxledger.analysis.compactions import SUMMARY_ORIGINS, CompactionRecord
from ctxledger.compressor.factmatch import (
    JOIN,
    Forms,
    Haystack,
    JoinedHaystack,
    fact_text,
    joined_haystack,
    written_windows,
)
from ctxledger.compressor.facts import Fact, extract_facts
from ctxledger.compressor.factscan import LONG_TEXT
from ctxledger.compressor.factstore import read_facts, stored_content
from ctxledger.compressor.markers import (
    FOREIGN_END,
    FOREIGN_MERGE_DELIMITER,
    FOREIGN_MERGE_HEADER,
    FOREIGN_TAGS,
    LEGACY_PREFIXES,
    merge_delimiter,
    merge_lead,
    summary_end_marker,
    summary_prefix,
)
from ctxledger.compressor.normalstore import Getter, read_forms
from ctxledger.eventstore.contents import shared_contents
from ctxledger.eventstore.derived import STORED_MIN_CHARS
from ctxledger.ledger.facade import Ledger
from ctxledger.messages import JSON
from ctxledger.projections.transcript import load_bodies

#: a separator no normalized fact contains: a match never spans two pieces
_JOIN = JOIN


@dataclass(slots=True)
class Piece:
    """Part of one message of a view: a summary body or the message's own text."""

    #: the message that holds it in the view (None: the system prompt)
    holder: str | None
    #: ``summary``, ``message``, ``system`` or ``frame`` (the summary's fixed framing)
    kind: str
    text: str
    #: for ``message`` pieces: the message to extract facts from (summary taken out)
    message: JSON | None = None
    #: for ``summary`` pieces: the compaction that wrote it (None when unknown)
    compaction_id: str | None = None
    #: the original message the text comes from (a merge or strip followed back)
    root: str | None = None


@dataclass(slots=True)
class Group:
    """Pieces checked together: one joined haystack and the facts extracted from them."""

    pieces: list[Piece]
    hay: Haystack | JoinedHaystack
    facts: set[str]

    def states(self, fact: Fact) -> bool:
        return fact.normalized in self.facts or self.hay.holds(
            fact.kind, fact.normalized, written_windows(fact.value)
        )


@dataclass(slots=True)
class Step:
    """One compaction: the pieces it rewrote, the view it made, the summary it wrote."""

    record: CompactionRecord
    rewritten: list[Piece]
    rewritten_group: Group
    #: the rewritten pieces that are messages (not summaries)
    rewritten_messages: Group
    #: the rewritten summary pieces (previous summaries), by the compaction that wrote them
    previous: list[Group]
    after: Group
    summary: Group


# --------------------------------------------------------------------------- fact cache


class FactCache:
    """The facts of a message, kept by its content across queries (bounded, least recently used).

    Facts are a pure function of the message (``extract_facts([message])``), so the
    compactions of a chain, the audit and ``trace`` of one process, and repeated
    audits (the server, a TUI) extract each piece once. Keys are a digest of the
    message's canonical JSON; the cache holds at most `limit` messages' facts.
    """

    def __init__(self, limit: int = 20_000) -> None:
        self.limit = limit
        self.enabled = True
        self.hits = 0
        self.misses = 0
        self._items: OrderedDict[bytes, list[Fact]] = OrderedDict()
        self._lock = threading.Lock()
        self._encoder = msgspec.json.Encoder(order="sorted")

    def key(self, message: Mapping[str, Any]) -> bytes:
        """The cache key of `message`: a digest of its canonical JSON.

        A long string content (a 10 MB message) is digested apart, once per string
        object (:func:`content_digest`), and the rest of the message with it: keys of
        that form start with a byte no JSON encoding starts with, so the two forms
        never meet.
        """
        content = message.get("content")
        if isinstance(content, str) and len(content) >= LONG_CONTENT:
            rest = self._encoder.encode({**message, "content": None})
            return hashlib.blake2b(
                b"\x00" + content_digest(content) + rest, digest_size=16
            ).digest()
        return hashlib.blake2b(self._encoder.encode(message), digest_size=16).digest()

    def facts(self, message: Mapping[str, Any], derived: Getter | None = None) -> list[Fact]:
        """`message`'s facts: remembered, stored (in the ledger a what-if read its content
        from, else in `derived`: the audited ledger's values), or extracted."""
        if not self.enabled:
            return extract_facts([message])
        key = self.key(message)
        with self._lock:
            found = self._items.get(key)
            if found is not None:
                self._items.move_to_end(key)
                self.hits += 1
                return found
        facts = _stored_facts(message, derived)
        if facts is None:
            facts = extract_facts([message])
        with self._lock:
            self.misses += 1
            self._items[key] = facts
            while len(self._items) > self.limit:
                self._items.popitem(last=False)
        return facts

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self.hits = self.misses = 0

    def __len__(self) -> int:
        return len(self._items)


def _stored_facts(message: Mapping[str, Any], derived: Getter | None) -> list[Fact] | None:
    """The facts stored for a long message (:mod:`ctxledger.compressor.factstore`) in the
    ledger a what-if read its content from, else in `derived`, or None (compute them).
    The content's ref is its digest, which :meth:`FactCache.key` just took (remembered
    per string): a value under it was made from that very text."""
    content = stored_content(message)
    get = _getter(derived) if content is not None else None
    if get is None or content is None:
        return None
    return read_facts(message, content_digest(content).hex(), get)


def _getter(derived: Getter | None) -> Getter | None:
    """Where derived values are read: inside :func:`sharing_contents` (a what-if) the
    store a content was read from, else `derived` (the audited ledger's, or None)."""
    shared = shared_contents()
    return shared.derived if shared is not None else derived


#: the process's fact cache (``uncached()`` turns it off, e.g. to compare results)
FACTS = FactCache()

#: a string content at least this long is digested once per string object (FactCache.key):
#: the fact matcher's notion of a long text
LONG_CONTENT = LONG_TEXT
#: id(text) -> (text, sha256 of its UTF-8): the last few long contents digested
_DIGESTS: OrderedDict[int, tuple[str, bytes]] = OrderedDict()
_DIGESTS_KEPT = 4
_DIGESTS_LOCK = threading.Lock()


def content_digest(text: str) -> bytes:
    """sha256 of `text`'s UTF-8 (surrogates passed), remembered for the last few string
    objects digested: a what-if asks for the key of the same 10 MB content several times
    (strings are immutable, so the object held is the text digested)."""
    digest = _known_digest(text)
    if digest is None:
        digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()
    with _DIGESTS_LOCK:
        _DIGESTS[id(text)] = (text, digest)
        while len(_DIGESTS) > _DIGESTS_KEPT:
            _DIGESTS.popitem(last=False)
    return digest


def _remembered(text: str) -> bytes | None:
    """The digest :func:`content_digest` remembers for that very string, or None."""
    with _DIGESTS_LOCK:
        found = _DIGESTS.get(id(text))
        if found is None or found[0] is not text:
            return None
        _DIGESTS.move_to_end(id(text))
        return found[1]


def _known_digest(text: str) -> bytes | None:
    """The digest of `text` known without hashing: the one :func:`content_digest`
    remembers for that very string, else the ref of a checked read (a blob whose bytes
    hashed to its ref: that is the digest), else None."""
    found = _remembered(text)
    if found is not None:
        return found
    ref = _checked_ref(text)
    return bytes.fromhex(ref) if ref is not None else None


def _checked_ref(text: str) -> str | None:
    """The ref of `text` when this run read it from a blob that hashed to the ref (that
    very string, or an equal copy: a piece cut out of a merge, compared (~1 ms), not
    hashed (~10 ms per 10 MB)), else None (outside :func:`sharing_contents`: None)."""
    shared = shared_contents()
    ref = shared.checked_ref(text) if shared is not None else None
    if ref is None and shared is not None:
        equal = shared.prefix_of(text, len(text))
        ref = equal[0] if equal is not None and equal[1] == len(text) else None
    return ref


def _stored_forms(text: str, derived: Getter | None) -> Forms | None:
    """The normal forms of a long content stored where :func:`_getter` reads (see
    :mod:`ctxledger.compressor.normalstore`), or None (they are made). Its ref is the
    digest the fact cache's key just took, or that of a checked read: never hashed."""
    get = _getter(derived) if len(text) >= STORED_MIN_CHARS else None
    if get is None:
        return None
    digest = _known_digest(text)
    return read_forms(text, digest.hex(), get) if digest is not None else None


@contextmanager
def uncached() -> Iterator[None]:
    """Extract every piece afresh inside the block (the cache is neither read nor filled)."""
    before = FACTS.enabled
    FACTS.enabled = False
    try:
        yield
    finally:
        FACTS.enabled = before


# --------------------------------------------------------------------------- summaries


def _prefixes() -> tuple[str, ...]:
    return (summary_prefix(), *LEGACY_PREFIXES)


#: texts at least this long are searched from the occurrences of a needle's first character
_LONG_SEARCH = LONG_TEXT
#: ... at most this many of them, then by ``str.find`` from there
_PROBES = 32


def _find(text: str, needle: str, start: int = 0) -> int:
    """``text.find(needle, start)``, faster on a long text where the
    needle's first character is rare (a 10 MB message without any ``[``): finding that
    character is a ``memchr``, a needle search is several times slower. Any match starts
    at such a character, so trying each (the first few, then searching the rest) finds
    the same first match."""
    if not needle or len(text) - start < _LONG_SEARCH:
        return text.find(needle, start)
    first = needle[0]
    pos = text.find(first, start)
    for _ in range(_PROBES):
        if pos < 0 or text.startswith(needle, pos):
            return pos
        pos = text.find(first, pos + 1)
    return text.find(needle, pos) if pos >= 0 else -1


def _replace(text: str, old: str, new: str) -> str:
    """``text.replace(old, new)``, not scanned twice when a non-empty `old` is absent."""
    return text.replace(old, new) if not old or _find(text, old) >= 0 else text


def split_summary(text: str) -> tuple[str, str] | None:
    """``(summary body, the rest of the text)`` when `text` holds a summary, else None.

    Finds the summary wherever it sits (first, or after the message it was merged
    into), from its prefix to its end marker; the merge delimiter and lead line belong
    to neither.
    """
    found = [(i, p) for p in _prefixes() if (i := _line_start_find(text, p)) >= 0]
    if not found:
        return _split_foreign(text)
    start, prefix = min(found)
    end_marker = summary_end_marker()
    body_start = start + len(prefix)
    end = _find(text, end_marker, body_start) if end_marker else -1
    delim = merge_delimiter()
    cut = _find(text, delim, body_start)
    if end >= 0 and (cut < 0 or end < cut):
        body, after = text[body_start:end], text[end + len(end_marker) :]
    elif cut >= 0:
        body, after = text[body_start:cut], text[cut:]
    else:
        body, after = text[body_start:], ""
    # the lead line of a summary merged after the message (issue 10) belongs to neither
    rest = text[:start] + after
    for mark in (delim.strip(), merge_lead().strip()):
        rest = _replace(rest, mark, " ")
    return body.strip(), rest.strip()


def _foreign_span(text: str) -> tuple[int, int, int, int] | None:
    """Where a summary Hermes wrote sits in `text` (see ``markers.FOREIGN_TAGS``): its
    tag's start, its body's start (the line after the tag's preamble) and end, and the
    end of its closing marker's line; None when `text` holds none."""
    starts = [i for tag in FOREIGN_TAGS if (i := _line_start_find(text, tag)) >= 0]
    if not starts:
        return None
    start = min(starts)
    line_end = text.find("\n", start)
    body_start = len(text) if line_end < 0 else line_end + 1
    end = _line_start_find(text[body_start:], FOREIGN_END)
    if end < 0:
        return start, body_start, len(text), len(text)
    end += body_start
    close = text.find("\n", end)
    return start, body_start, end, len(text) if close < 0 else close


def _split_foreign(text: str) -> tuple[str, str] | None:
    span = _foreign_span(text)
    if span is None:
        return None
    start, body_start, body_end, after = span
    rest = text[:start] + " " + text[after:]
    for mark in (FOREIGN_MERGE_HEADER, FOREIGN_MERGE_DELIMITER):
        rest = _replace(rest, mark, " ")
    return text[body_start:body_end].strip(), rest.strip()


def frame_text(text: str) -> str:
    """The fixed framing ctxledger put around a summary in `text` (prefix, end marker,
    merge delimiter and lead line), joined; empty when there is none.

    The model reads it with the view, so a fact it happens to state (the quoted
    ``"is a"`` in "what follows is a handoff") is stated by the view: without this
    piece the audit called such a fact lost where the whole view still holds it.
    """
    marks = (
        *_prefixes(),
        summary_end_marker(),
        merge_delimiter().strip(),
        merge_lead().strip(),
    )
    framing = [m for m in marks if m and _find(text, m) >= 0]
    span = _foreign_span(text)
    if span is not None:  # Hermes's preamble line, closing marker line and merge marks
        start, body_start, body_end, after = span
        framing += [text[start:body_start], text[body_end:after]]
        framing += [m for m in (FOREIGN_MERGE_HEADER, FOREIGN_MERGE_DELIMITER) if m in text]
    return _JOIN.join(framing)


def _line_start_find(text: str, prefix: str) -> int:
    """Where `prefix` starts a line of `text` (leading blanks allowed), or -1.

    An occurrence inside a line sends the search to the next line, so each line is
    looked at once (one line holding the prefix thousands of times stays linear)."""
    pos = _find(text, prefix)
    while pos >= 0:
        line_start = text.rfind("\n", 0, pos) + 1
        if not text[line_start:pos].strip():
            return pos
        next_line = text.find("\n", pos)
        if next_line < 0:
            return -1
        pos = _find(text, prefix, next_line + 1)
    return -1


# --------------------------------------------------------------------------- views


@dataclass
class ChainViews:
    """Pieces of the messages of one ledger, extracted once per query."""

    ledger: Ledger
    #: message id -> (compaction that wrote the summary it holds, the summary body)
    summary_of: dict[str, tuple[str, str]] = field(default_factory=dict)
    _pieces: dict[str, list[Piece]] = field(default_factory=dict)
    _facts: dict[tuple[str | None, str, str], list[Fact]] = field(default_factory=dict)

    def learn(self, records: Iterable[CompactionRecord]) -> None:
        """Which layout messages hold which compaction's summary."""
        for record in records:
            for entry in record.switch.layout:
                if entry.origin in SUMMARY_ORIGINS:
                    self.summary_of[entry.message_id] = (record.compaction_id, record.summary.text)

    def root(self, message_id: str) -> str:
        """The original message a merged, stripped or persisted message came from."""
        messages = self.ledger.transcript.state.messages
        seen = {message_id}
        current = message_id
        while True:
            stored = messages.get(current)
            if stored is None or stored.origin == "appended" or stored.source_id is None:
                return current
            if stored.source_id in seen or stored.source_id not in messages:
                return current
            if stored.origin == "summary":
                return current
            seen.add(stored.source_id)
            current = stored.source_id

    def pieces(self, message_id: str) -> list[Piece]:
        cached = self._pieces.get(message_id)
        if cached is None:
            cached = self._pieces[message_id] = self._split(message_id)
        return cached

    def _split(self, message_id: str) -> list[Piece]:
        stored = self.ledger.transcript.stored(message_id)
        message = stored.message
        known = self.summary_of.get(message_id)
        text = fact_text(message)
        if known is not None:
            out = [Piece(message_id, "summary", known[1], compaction_id=known[0])]
            if stored.origin == "merged" and stored.source_id is not None:
                out.extend(self._originals(message_id, stored.source_id))
            return self._framed(out, text)
        split = split_summary(text) if message.get("role") in ("user", "assistant") else None
        if split is None:
            return [Piece(message_id, "message", text, message, root=self.root(message_id))]
        body, rest = split
        out = [Piece(message_id, "summary", body)]
        if rest:
            original = {**message, "content": rest} if "content" in message else dict(message)
            out.append(Piece(message_id, "message", rest, original, root=self.root(message_id)))
        return self._framed(out, text)

    @staticmethod
    def _framed(pieces: list[Piece], text: str) -> list[Piece]:
        frame = frame_text(text)
        if frame:
            pieces.append(Piece(pieces[0].holder, "frame", frame))
        return pieces

    def _originals(self, holder: str, source_id: str) -> list[Piece]:
        """The non-summary pieces of `source_id`, as held by `holder` (a merge of it)."""
        if source_id not in self.ledger.transcript.state.messages:
            return []
        return [
            Piece(holder, p.kind, p.text, p.message, p.compaction_id, p.root)
            for p in self.pieces(source_id)
            if p.kind not in ("summary", "frame")
        ]

    def view(self, system_prompt: str | None, message_ids: Sequence[str]) -> list[Piece]:
        transcript = self.ledger.transcript
        # the bodies not split yet, read in one batch (one by one, a rebuilt ledger's
        # audit made one query per message)
        load_bodies([transcript.stored(mid) for mid in message_ids if mid not in self._pieces])
        out = [Piece(None, "system", system_prompt)] if system_prompt else []
        for mid in message_ids:
            out.extend(self.pieces(mid))
        return out

    def session_view(self, session_id: str) -> list[Piece]:
        view = self.ledger.transcript.session(session_id)
        return self.view(view.system_prompt, view.live)

    def facts(self, piece: Piece) -> list[Fact]:
        """The facts extracted from one piece (its message, or a summary read as prose)."""
        key = (piece.holder, piece.kind, piece.text)
        cached = self._facts.get(key)
        if cached is None:
            message: Mapping[str, Any] = piece.message or {
                "role": "assistant",
                "content": piece.text,
            }
            if piece.kind == "summary":
                message = {"role": "assistant", "content": piece.text}
            cached = self._facts[key] = FACTS.facts(message, self.ledger.store.get_derived)
        return cached

    def group(self, pieces: list[Piece]) -> Group:
        facts = {f.normalized for p in pieces for f in self.facts(p)}
        get = self.ledger.store.get_derived
        hay = joined_haystack([p.text for p in pieces], lambda text: _stored_forms(text, get))
        return Group(pieces, hay, facts)

    def step(self, record: CompactionRecord) -> Step:
        """What `record` rewrote (pieces of its view the new view lacks) and what it made."""
        before = self.session_view(record.session_id)
        after = self.view(record.switch.system_prompt, [e.message_id for e in record.switch.layout])
        after_texts = {(p.kind == "summary", p.text) for p in after}
        rewritten = [p for p in before if (p.kind == "summary", p.text) not in after_texts]
        by_writer: dict[str | None, list[Piece]] = {}
        for p in rewritten:
            if p.kind == "summary":
                by_writer.setdefault(p.compaction_id, []).append(p)
        summary = Piece(None, "summary", record.summary.text, compaction_id=record.compaction_id)
        return Step(
            record=record,
            rewritten=rewritten,
            rewritten_group=self.group(rewritten),
            rewritten_messages=self.group(
                [p for p in rewritten if p.kind not in ("summary", "frame")]
            ),
            previous=[self.group(ps) for ps in by_writer.values()],
            after=self.group(after),
            summary=self.group([summary]),
        )


__all__ = [
    "FACTS",
    "ChainViews",
    "FactCache",
    "Group",
    "Piece",
    "Step",
    "frame_text",
    "split_summary",
    "uncached",
]
