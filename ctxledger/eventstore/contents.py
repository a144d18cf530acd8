"""Large message contents shared within one run (a what-if) instead of read again.

A message content kept as a blob is content-addressed: the text stored under a sha256
ref is the same in every store that holds it. A what-if reads a 10 MB content from the
recorded ledger, appends it to its scratch ledger, and reads it back from both several
times (the projection's catch-up, the audits, the reproduction check): each read was a
10 MB blob fetch and UTF-8 decode, each append an encode and a sha256.

Inside :func:`sharing_contents` (one run), the first read of a ref is checked — its
bytes must hash to the ref, else nothing is remembered and every read of it goes to its
store as before — and its decoded text kept for the rest of the run: later reads of
that ref, in any store, hand out the same ``str`` object, and an append of that very
object (so the very same text) reuses its ref and bytes instead of encoding and hashing
it again. The token count the log recorded with such a message is remembered for that
string too (:func:`ctxledger.tokens.knowing_counts`), so the replay does not tokenize it again;
it is used only after the row holding it is checked against its append's seal.
Outside such a block nothing is remembered: ``verify``, and any read after a blob was
tampered with on disk, see the store's bytes as they are. The block remembers only
what the run reads, which the run holds anyway (the replayed history keeps every
message).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from contextvars import ContextVar

import msgspec

from ctxledger.errors import StoreError
from ctxledger.events import (
    Event,
    LayoutEntry,
    MessageAppended,
    SessionSwitched,
    dehydrate,
    hydrate,
    hydrate_text,
    sha256_hex,
)
from ctxledger.eventstore.derived import STORED_MIN_CHARS
from ctxledger.eventstore.fingerprints import (
    count_after_kind,
    count_after_version,
    decode_count_after,
)
from ctxledger.tokens import (
    knowing_counts,
    knows_count_after,
    remember_count,
    remember_count_after,
)

__all__ = [
    "SharedContents",
    "dehydrate_layout",
    "dehydrate_shared",
    "hashed_ref",
    "hydrate_layout",
    "hydrate_shared",
    "layout_problem",
    "layout_refs",
    "remember_hash",
    "remembering_hashes",
    "remembering_refs",
    "shared_contents",
    "sharing_contents",
]


class SharedContents:
    """The blob contents one run has read: ref -> text (checked against the ref)."""

    def __init__(self) -> None:
        self._texts: dict[str, str] = {}
        #: id(text) -> ref, for texts held in ``_texts`` (so the id stays theirs)
        self._refs: dict[int, str] = {}
        #: ref -> the checked bytes read (its text's UTF-8: a scratch append stores them)
        self._data: dict[str, bytes] = {}
        #: blobs fetched from a store and decoded
        self.reads = 0
        #: reads answered from the run's memory
        self.hits = 0
        #: appends that reused a known ref instead of hashing the text
        self.reused = 0
        #: ref -> the store its text was first read from (its derived values are asked there)
        self._sources: dict[str, object] = {}

    def text(self, ref: str, get_blob: Callable[[str], bytes]) -> str:
        """The text stored under `ref`: remembered, or read with `get_blob` (and remembered
        only when its bytes hash to `ref`)."""
        found = self._texts.get(ref)
        if found is not None:
            self.hits += 1
            return found
        data = get_blob(ref)
        self.reads += 1
        text = data.decode("utf-8")
        if sha256_hex(data) == ref:
            self._texts[ref] = text
            self._refs[id(text)] = ref
            self._data[ref] = data
            self._sources[ref] = getattr(get_blob, "__self__", None)  # (a store's get_blob)
        return text

    def derived(self, ref: str, kind: str, version: str) -> bytes | None:
        """A derived value of checked content `ref` stored in the store it was read from
        (``get_derived``), or None: none stored, its source is not a store, or the read
        failed (a closed store: a miss, the value is computed as without the table)."""
        get = getattr(self._sources.get(ref), "get_derived", None)
        try:
            value = get(ref, kind, version) if callable(get) else None
        except StoreError:
            return None
        return value if isinstance(value, bytes) else None

    def holds(self, ref: str, text: str) -> bool:
        """Whether `text` is the (checked) text this run keeps for `ref`."""
        return self._texts.get(ref) is text

    def checked(self, text: object) -> bool:
        """Whether `text` is a text this run read from a blob that hashed to its ref (the
        same object): valid UTF-8 when read, so it holds no lone surrogate."""
        return self.checked_ref(text) is not None

    def checked_ref(self, text: object) -> str | None:
        """The ref (sha256 hex of its UTF-8) of a text this run read and checked (the same
        object), else None. Unlike :meth:`ref_of`, not counted as a reuse."""
        ref = self._refs.get(id(text))
        return ref if ref is not None and self._texts.get(ref) is text else None

    def data_of(self, ref: str) -> bytes | None:
        """The checked bytes read for `ref` (the UTF-8 of the text kept for it), or None."""
        return self._data.get(ref)

    def prefix_of(self, text: str, threshold: int) -> tuple[str, int] | None:
        """(ref, length) of the longest text this run read and checked, at least
        `threshold` characters long, that `text` begins with (compared character by
        character), else None."""
        best: tuple[str, int] | None = None
        longest = threshold - 1
        for ref, known in self._texts.items():
            if longest < len(known) <= len(text) and text.startswith(known):
                best, longest = (ref, len(known)), len(known)
        return best

    def ref_of(self, text: str) -> str | None:
        """The ref of `text` when it is a text this run read (the same object), else None."""
        ref = self._refs.get(id(text))
        if ref is None or self._texts.get(ref) is not text:
            return None
        self.reused += 1
        return ref


_SHARED: ContextVar[SharedContents | None] = ContextVar("ctxledger_shared_contents", default=None)


def shared_contents() -> SharedContents | None:
    """The contents shared by the enclosing :func:`sharing_contents` block, if any."""
    return _SHARED.get()


@contextlib.contextmanager
def sharing_contents() -> Iterator[SharedContents]:
    """Share blob contents within the block (joins an enclosing block when there is one)."""
    current = _SHARED.get()
    if current is not None:
        yield current
        return
    shared = SharedContents()
    token = _SHARED.set(shared)
    try:
        with knowing_counts():
            yield shared
    finally:
        _SHARED.reset(token)


def hydrate_shared(
    event: MessageAppended,
    get_blob: Callable[[str], bytes],
    sealed: Callable[[], bool] | None = None,
) -> Event:
    """``hydrate(event, get_blob)``, answered from the run's memory inside :func:`sharing_contents`.

    The row's token count is remembered for the text (so the run does not tokenize it
    again) only when the text is the one its ref names (checked) and `sealed` is given:
    the count is used only once ``sealed()`` says the row itself is intact (the count
    and the ref are in its payload; see :mod:`ctxledger.eventstore.seals`).
    """
    shared, ref = _SHARED.get(), event.content_ref
    if shared is None or ref is None:
        return hydrate(event, get_blob)
    text = shared.text(ref, get_blob)
    whole = hydrate_text(event, text)
    if sealed is not None and shared.holds(ref, text):
        remember_count(whole.message, whole.encoding, whole.tokens, sealed)
        _remember_after(shared, ref, text, whole)
    return whole


def _remember_after(shared: SharedContents, ref: str, text: str, event: MessageAppended) -> None:
    """The merged count the ledger stored for a long content alone in its message (see
    :func:`ctxledger.tokens.remember_count_after`), asked once per run and encoding."""
    encoding = event.encoding
    if (
        len(text) < STORED_MIN_CHARS
        or not event.message.keys() <= {"role", "content"}
        or knows_count_after(text, encoding)
    ):
        return
    version = count_after_version()
    if version is None:
        return
    found = decode_count_after(shared.derived(ref, count_after_kind(encoding), version))
    if found is not None:
        remember_count_after(text, encoding, *found)


def dehydrate_shared(event: Event, threshold: int) -> tuple[Event, dict[str, bytes]]:
    """``dehydrate(event, threshold)``, reusing the ref of a content this run read; the
    ref of a content long enough for derived values is kept for :func:`hashed_ref`."""
    shared = _SHARED.get()
    if not isinstance(event, MessageAppended) or event.content_ref is not None:
        return dehydrate(event, threshold)
    content = event.message.get("content")
    if not isinstance(content, str):
        return dehydrate(event, threshold)
    ref = shared.ref_of(content) if shared is not None else None
    data = shared.data_of(ref) if shared is not None and ref is not None else None
    if data is None and len(content) >= max(threshold, STORED_MIN_CHARS):
        data = content.encode("utf-8")
        ref = sha256_hex(data)
        hashed = _HASHED.get()
        if hashed is not None:
            hashed[id(content)] = (content, ref)
        by_event = _REFS.get()
        if by_event is not None:
            by_event[event.event_id] = ref
    return dehydrate(event, threshold, ref=ref, data=data)


#: id(text) -> (text, ref): refs :func:`dehydrate_shared` hashed for long contents inside
#: :func:`remembering_hashes` (one ``Ledger.append``), taken by the derived values it
#: stores after its commit (:mod:`ctxledger.ledger.derived`); None outside one
_HASHED: ContextVar[dict[int, tuple[str, str]] | None] = ContextVar(
    "ctxledger_hashed_refs", default=None
)


@contextlib.contextmanager
def remembering_hashes() -> Iterator[None]:
    """Keep the refs an append hashes for :func:`hashed_ref` until the block ends (then
    nothing holds the contents: a direct ``append_many`` outside one keeps none)."""
    token = _HASHED.set({})
    try:
        yield
    finally:
        _HASHED.reset(token)


#: event id -> ref: the refs :func:`dehydrate_shared` hashed for long contents inside
#: :func:`remembering_refs` (a streamed import: ids and refs only, no content held)
_REFS: ContextVar[dict[str, str] | None] = ContextVar("ctxledger_refs_by_event", default=None)


@contextlib.contextmanager
def remembering_refs() -> Iterator[dict[str, str]]:
    """Collect, by event id, the refs the appends in the block hash for long contents:
    a streamed import reads those messages back after its commit and hands each content
    its ref (:func:`remember_hash`) instead of hashing it a second time."""
    refs: dict[str, str] = {}
    token = _REFS.set(refs)
    try:
        yield refs
    finally:
        _REFS.reset(token)


def remember_hash(text: str, ref: str) -> None:
    """Inside :func:`remembering_hashes`: `ref` is the sha256 of that very string's UTF-8
    (the caller knows: the append hashed it), for :func:`hashed_ref`."""
    hashed = _HASHED.get()
    if hashed is not None:
        hashed[id(text)] = (text, ref)


def hashed_ref(text: str) -> str | None:
    """The ref the current append hashed for that very string (forgotten once taken), or None."""
    hashed = _HASHED.get()
    found = hashed.pop(id(text), None) if hashed is not None else None
    return found[1] if found is not None and found[0] is text else None


# --- layout contents by reference (SessionSwitched schema 2) -------------------------


def dehydrate_layout(
    event: SessionSwitched, threshold: int
) -> tuple[SessionSwitched, dict[str, bytes]]:
    """`event` with each new layout message whose string content (at least `threshold`
    characters) begins with a text this run read and checked kept by reference: that
    text's blob ref and the rest of the content (see :class:`~ctxledger.events.LayoutEntry`).

    Returns the event to store and the blobs it references (stored with it when absent,
    so the reference never depends on another store). Outside :func:`sharing_contents`,
    or when no such text is known, `event` is returned as it is (stored inline): the
    ref is reused, never computed, so writing by reference costs no pass over the text.
    """
    shared = _SHARED.get()
    if shared is None:
        return event, {}
    layout: list[LayoutEntry] | None = None
    blobs: dict[str, bytes] = {}
    for index, entry in enumerate(event.layout):
        message = entry.message
        content = message.get("content") if message is not None else None
        if not isinstance(content, str) or len(content) < threshold:
            continue
        found = shared.prefix_of(content, threshold)
        data = shared.data_of(found[0]) if found is not None else None
        if found is None or data is None or message is None:
            continue
        ref, length = found
        if layout is None:
            layout = list(event.layout)
        layout[index] = msgspec.structs.replace(
            entry,
            message={k: (None if k == "content" else v) for k, v in message.items()},
            content_ref=ref,
            content_suffix=content[length:],
        )
        blobs[ref] = data
    if layout is None:
        return event, {}
    return msgspec.structs.replace(event, layout=layout), blobs


def layout_refs(event: SessionSwitched) -> list[str]:
    """The blob refs `event`'s stored layout holds (empty for a hydrated event)."""
    return [e.content_ref for e in event.layout if isinstance(e.content_ref, str)]


def layout_problem(event: SessionSwitched, schema: int) -> str | None:
    """What is wrong with `event`'s layout as stored at `schema` (pure), or None.

    What the store writes: a switch holding no reference is stored at schema 1 and none
    of its entries holds ``content_ref`` or ``content_suffix``; one stored at schema 2
    holds at least one reference, each on a new message (not one carried by id) whose
    ``message`` keeps its ``content`` key, null; a suffix only follows a reference.
    Anything else is a forged or damaged row: ``verify`` names it and reads refuse it
    (a read would otherwise make up a message, or drop a content, or hand out a suffix).
    """
    referenced = False
    for index, entry in enumerate(event.layout):
        if not isinstance(entry.content_ref, str):
            if isinstance(entry.content_suffix, str):
                return f"layout entry {index} holds a content_suffix without a content_ref"
            continue
        if schema < event.SCHEMA:
            return f"a schema {schema} SessionSwitched holds referenced layout contents"
        if entry.origin == "carried":
            return f"layout entry {index} is carried by id yet holds a content_ref"
        message = entry.message
        if message is None:
            return f"layout entry {index} holds a content_ref but no message"
        if message.get("content", "") is not None:
            return f"layout entry {index} holds a content_ref but its message.content is not null"
        referenced = True
    if schema >= event.SCHEMA and not referenced:
        return f"a schema {schema} SessionSwitched holds no referenced layout content"
    return None


def hydrate_layout(event: SessionSwitched, get_blob: Callable[[str], bytes]) -> SessionSwitched:
    """`event` (as stored) with every referenced layout content re-inflated as its blob's
    text followed by its ``content_suffix``; answered from the run's memory inside
    :func:`sharing_contents`."""
    shared = _SHARED.get()
    layout = list(event.layout)
    for index, entry in enumerate(layout):
        ref = entry.content_ref
        if not isinstance(ref, str):
            continue
        text = shared.text(ref, get_blob) if shared is not None else get_blob(ref).decode("utf-8")
        suffix = entry.content_suffix if isinstance(entry.content_suffix, str) else ""
        content = "".join((text, suffix))
        message = dict(entry.message) if entry.message is not None else {}
        message = {k: (content if k == "content" else v) for k, v in message.items()}
        message.setdefault("content", content)
        layout[index] = msgspec.structs.replace(
            entry, message=message, content_ref=msgspec.UNSET, content_suffix=msgspec.UNSET
        )
    return msgspec.structs.replace(event, layout=layout)
