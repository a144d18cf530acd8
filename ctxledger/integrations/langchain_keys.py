"""Which ledger session a LangChain graph thread, or a run without one, is (no LangChain
import here: the names, the index of runs and what the middleware knows of a thread,
read from the ledger).

In the ``<thread>`` of a session id ``langchain:<thread>`` a ``~``, a ``%``, control
characters and bidirectional-text controls (session 33; a session recorded before with
one as itself goes on under it) are written ``%XX``, so no thread id holds the ``~`` of
another thread's generation; every other character is kept, so the sessions of threads
named before this escaping are found again. A thread id longer than 150 characters
(escaped) is its first 126 and a digest of the whole, so a session id stays within the
200 characters the HTTP API can name."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import anyio.lowlevel

from ctxledger import ContextService, Ledger
from ctxledger.events import Event, MessageAppended
from ctxledger.integrations.common import digest_key, host_title, taken_whole
from ctxledger.limits import NOT_IN_NAME_CLASS

#: the chat-message key holding the LangChain message id
LC_ID = "lc_id"


#: what a thread id may not hold as itself in a session id: the ``~`` that numbers
#: generations, the ``%`` of the escape, and what no name may hold (control characters,
#: bidirectional-text controls: :func:`~ctxledger.limits.check_name`, the same class)
_UNSAFE_IN_KEY = re.compile(f"[~%{NOT_IN_NAME_CLASS}]")
#: the same before session 33 (C0 controls and DEL only): keys recorded with it are found
_UNSAFE_BEFORE = re.compile(r"[~%\x00-\x1f\x7f]")


#: the longest escaped thread id kept whole in a session id: ``langchain:`` + this + a
#: generation's ``~N`` stays within the 200 characters of a session id the HTTP API can
#: name. A longer one is cut to its first KEY_KEPT characters and a digest of the whole,
#: 160 characters in all (a thread may be named like one: :func:`thread_key` tells).
_LONGEST_KEY = 150


def thread_key(thread: str, sessions: Mapping[str, Any]) -> str:
    """The thread's part of its session ids: :func:`session_key`, unless the ledger holds
    the thread's first session under a key of before: its digest key with a character
    escaped since session 33 kept as itself, or the whole id (a long one, recorded before
    the digest). A whole id shaped like a made key may be the key of another thread (one
    can name a thread so): the session under it is this thread's only if its title says so."""
    key = session_key(thread)
    if f"langchain:{key}" in sessions:
        return key
    before = session_key(thread, _UNSAFE_BEFORE)
    if f"langchain:{before}" in sessions:
        return before
    whole = escaped(thread, _UNSAFE_BEFORE)
    info = sessions.get(f"langchain:{whole}")
    titles = (f"langchain thread {thread}", host_title("langchain thread", thread))
    if info is not None and taken_whole(whole, info.title, titles):
        return whole
    return key


def session_key(thread: str, unsafe: re.Pattern[str] = _UNSAFE_IN_KEY) -> str:
    """`thread` with each of :data:`_UNSAFE_IN_KEY` as ``%XX``: one way back, never the
    ``~`` of a generation. Any other character stays (``user/42``, ``Zürich``, spaces),
    as thread ids were written before the escaping, so their sessions are found again.
    Past :data:`_LONGEST_KEY` characters: its start, ``.h`` and 32 hex digits of the
    sha256 of the whole id (a 10,000-character id made a 10,010-character session id)."""
    key = escaped(thread, unsafe)
    if len(key) <= _LONGEST_KEY:
        return key
    return digest_key(key, thread)


def escaped(thread: str, unsafe: re.Pattern[str] = _UNSAFE_IN_KEY) -> str:
    return unsafe.sub(
        lambda m: "".join(f"%{b:02X}" for b in m.group().encode("utf-8", "surrogatepass")),
        thread,
    )


def is_run(thread: str) -> bool:
    """A run without a thread id: ``default:<its id>`` (``default`` before its own keys)."""
    return thread == "default" or thread.startswith("default:")


#: the root of a run's session: ``langchain:default[:<id>]`` and its generation
_RUN_ROOT = re.compile(r"langchain:(default(?::[^~]*)?)(?:~[0-9]+)?", re.DOTALL)


#: the records :meth:`RunIndex.update` reads between two yields to the event loop
CHUNK = 2_000


def run_of(root: str) -> str | None:
    """The run (its thread) whose session `root` is, None for a thread's session."""
    match = _RUN_ROOT.fullmatch(root)
    return None if match is None else match.group(1)


class RunIndex:
    """The sessions of runs without a thread id (``langchain:default``...), by the id of
    the last message each recorded; read from the ledger when asked, from where the last
    read stopped. One entry per such session (a run's LangChain ids are unique per run:
    its model's replies), so a run resent with its messages is found in one look-up."""

    def __init__(self) -> None:
        self.seq = 0
        self.by_last: dict[str, str] = {}
        self.last_of: dict[str, str] = {}

    async def update(self, service: ContextService) -> dict[str, str]:
        """Read what the ledger gained since the last call, :data:`CHUNK` records at a
        time, letting the loop's other tasks run between (the first call in a process
        reads the whole log: 0.5 s at 100,000 records)."""
        ledger = service.ledger
        ledger.refresh()
        end = ledger.projector.last_seq
        while self.seq < end:  # from self.seq each time: another task may have read on
            stop = min(self.seq + CHUNK, end)
            for rec in ledger.store.read_all(self.seq + 1, stop):
                self._add(ledger, rec.event)
            self.seq = stop
            await anyio.lowlevel.checkpoint()
        return self.by_last

    def _add(self, ledger: Ledger, event: Event) -> None:
        if not isinstance(event, MessageAppended):
            return
        lc_id = event.message.get(LC_ID)
        if not isinstance(lc_id, str) or run_of(ledger.chains.root(event.session_id)) is None:
            return
        old = self.last_of.get(event.session_id)
        if old is not None and self.by_last.get(old) == event.session_id:
            del self.by_last[old]
        self.last_of[event.session_id] = lc_id
        self.by_last[lc_id] = event.session_id


class Thread:
    """What the middleware knows about one graph thread: its ledger root and the state
    message ids already appended there; `version`: its tip and that tip's ledger version
    when this process last wrote or read it (another process on the ledger moves it;
    None: read it again); `mine`: what this process had seen when a re-read found
    another process's write (nothing, ``[]``, for a thread first read from the ledger),
    kept until this process writes the thread again."""

    def __init__(self, root: str, seen: list[str], version: tuple[str, int] | None = None) -> None:
        self.root = root
        self.seen = seen
        self.version = version
        self.mine: list[str] | None = None


def expected_version(known: Thread, tip: str) -> int | None:
    """The version an append to `tip` expects: the one this process last wrote or read
    there (None, unchecked, when it has not read that tip)."""
    read = known.version
    return read[1] if read is not None and read[0] == tip else None


def rewrites(ids: list[str], seen: list[str]) -> bool:
    """Whether the history `ids` rewrites `seen` (a session's recorded ids): it still holds
    a message `seen` has after the first one it dropped or replaced (a ``RemoveMessage``,
    a summary before a kept tail). Another worker's branch of one conversation only adds
    after the messages both share; so does a regenerate of the last answer, which this
    cannot tell from one."""
    shared = 0
    for mine, theirs in zip(ids, seen, strict=False):
        if mine != theirs:
            break
        shared += 1
    return not set(seen[shared:]).isdisjoint(ids[shared:])


def last_recorded(service: ContextService, root: str) -> str | None:
    """The LangChain id of the last message of the session `root`'s live view, the last
    one it recorded, without reading its chain (None: a view that ends without one)."""
    transcript = service.ledger.transcript
    live = transcript.session(service.tip(root)).live
    last = transcript.original(live[-1]).get(LC_ID) if live else None
    return last if isinstance(last, str) else None


def recorded_ids(service: ContextService, root: str) -> list[str]:
    """The LangChain ids of the messages the session `root` (its chain) recorded."""
    seen: list[str] = []
    for sid in service.ledger.chains.chain(service.tip(root)):
        for rec in service.ledger.store.read_session(sid):
            event = rec.event
            if isinstance(event, MessageAppended) and isinstance(event.message.get(LC_ID), str):
                seen.append(event.message[LC_ID])
    return seen
