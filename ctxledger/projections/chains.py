"""Chains projection: session lineage and compression chains.

A continuation's parent ended by compression; a branch or delegated sub-agent also
has a parent, but its parent did not end by compression. The **compression tip** of
a session is found by following compression children (capped, cycle-guarded).
"""

from __future__ import annotations

from collections.abc import Iterator

import msgspec

from ctxledger.errors import UnknownSession
from ctxledger.events import Event, SessionEnded, SessionStarted, SessionSwitched
from ctxledger.integers import shown

#: the longest compression chain the tip walk follows before giving up
MAX_CHAIN = 10_000


class Lineage(msgspec.Struct, kw_only=True):
    session_id: str
    parent_session_id: str | None
    reason: str
    started_at: float
    started_seq: int
    model: str
    title: str | None = None
    source: str | None = None
    compaction_id: str | None = None
    children: list[str] = msgspec.field(default_factory=list)
    compression_child: str | None = None
    ended: bool = False
    end_reason: str | None = None
    ended_at: float | None = None


class ChainsState(msgspec.Struct, kw_only=True):
    sessions: dict[str, Lineage] = msgspec.field(default_factory=dict)
    #: compaction id -> the session it compacted (the parent of its continuation)
    compacted: dict[str, str] = msgspec.field(default_factory=dict)
    last_seq: int = 0


class ChainsProjection:
    name = "chains"

    def __init__(self, state: ChainsState | None = None) -> None:
        self.state = state or ChainsState()

    def apply(self, seq: int, event: Event) -> None:
        if isinstance(event, SessionStarted):
            self.state.sessions[event.session_id] = Lineage(
                session_id=event.session_id,
                parent_session_id=event.parent_session_id,
                reason=event.reason,
                started_at=event.at,
                started_seq=seq,
                model=event.model,
                title=event.title,
                source=event.source,
                compaction_id=event.compaction_id,
            )
            parent = self.state.sessions.get(event.parent_session_id or "")
            if parent is not None:
                parent.children.append(event.session_id)
                if event.reason == "compression":
                    # imported chains have no SessionSwitched: the child's start links them
                    parent.compression_child = event.session_id
                    if event.compaction_id is not None:
                        self.state.compacted[event.compaction_id] = parent.session_id
        elif isinstance(event, SessionSwitched | SessionEnded):
            node = self.state.sessions.get(event.session_id)
            if node is None:
                pass  # a session that never started: skipped, as in the transcript fold
            else:
                if isinstance(event, SessionSwitched):
                    node.compression_child = event.new_session_id
                node.ended, node.end_reason, node.ended_at = True, event.reason, event.at
        self.state.last_seq = seq

    def lineage(self, session_id: str) -> Lineage:
        try:
            return self.state.sessions[session_id]
        except (KeyError, TypeError):  # TypeError: a list or a dict as the id
            raise UnknownSession(f"no session {shown(session_id)} in the log") from None

    def _forward(self, session_id: str) -> Iterator[str]:
        """`session_id`, then its compression children in turn (capped, cycle-guarded)."""
        node = self.lineage(session_id)
        seen = {session_id}
        yield session_id
        for _ in range(MAX_CHAIN):
            child = node.compression_child
            if child is None or child in seen or child not in self.state.sessions:
                return
            seen.add(child)
            node = self.state.sessions[child]
            yield child

    def tip(self, session_id: str) -> str:
        """Follow compression children to the live end of the chain."""
        node = self.state.sessions.get(session_id) if isinstance(session_id, str) else None
        if node is not None and node.compression_child is None:
            return session_id  # the common case (a live session is its own tip): no walk
        *_, last = self._forward(session_id)
        return last

    def live_end(self, session_id: str) -> str | None:
        """The live session the conversation holding `session_id` goes on in: its chain's
        tip while that has not ended; when the tip ended ``branched``, the live end of the
        chain's latest branch (started from any of its sessions), followed the same way.
        ``None`` when the chain followed ended any other way (or branched into nothing):
        an earlier branch, which the latest superseded, is never named (session 40, the
        lead's decision). At most :data:`MAX_CHAIN` chains are read. A branch is a chain
        of its own, which ``tip`` never finds."""
        sessions, tip = self.state.sessions, self.tip(session_id)
        for _ in range(MAX_CHAIN):
            node = sessions.get(tip)
            if node is not None and not node.ended:
                return tip
            if node is None or node.end_reason != "branched":
                return None
            branches = [
                sessions[c]
                for s in self.chain(tip)
                for c in sessions[s].children
                if c in sessions and sessions[c].reason == "branch"
            ]
            if not branches:
                return None
            tip = self.tip(max(branches, key=lambda b: b.started_seq).session_id)
        return None

    def ended_note(self, session_id: str) -> str:
        """What a write to the ended `session_id` is told (the ledger's and the service's
        one wording): why it ended, and where the conversation goes on
        (:meth:`live_end`), or that none of it is live."""
        node, live = self.lineage(session_id), self.live_end(session_id)
        then = f"its live continuation is {shown(live)}" if live else "start a new session"
        return f"session {shown(session_id)} has ended ({node.end_reason}); {then}"

    def root(self, session_id: str) -> str:
        """Walk back through compression parents to the chain's first session."""
        node = self.lineage(session_id)
        seen = {session_id}
        while node.reason in ("compression", "revert") and node.parent_session_id:
            parent = self.state.sessions.get(node.parent_session_id)
            if parent is None or parent.session_id in seen:
                break
            seen.add(parent.session_id)
            node = parent
        return node.session_id

    def branched_from(self, session_id: str, cap: int) -> Iterator[tuple[str, str]]:
        """The sessions the conversation holding `session_id` branched from, nearest
        first, each with its chain's root: the parent of its chain's first session when
        that is a ``branch``, then the same for the parent's chain, at most `cap` hops (a
        parent not in the log or a chain met twice ends the walk). The one walk of a
        conversation's branches: recall's scopes and the Hermes engine's compaction
        count take it, each with its own cap (one hop costs recall a compare of the
        copied prefix, the count a walk of that chain, with no body read)."""
        node = self.lineage(self.root(session_id))
        seen = {node.session_id}
        for _ in range(cap):
            parent = node.parent_session_id
            if node.reason != "branch" or parent is None or parent not in self.state.sessions:
                return
            up = self.root(parent)
            if up in seen:  # only a log the facade did not write (events appended as given)
                return
            seen.add(up)
            yield parent, up
            node = self.lineage(up)

    def chain(self, session_id: str) -> list[str]:
        """Every session of the compression chain containing `session_id`, oldest first."""
        return list(self._forward(self.root(session_id)))

    def compaction_ids_in_effect(self, session_id: str) -> list[str]:
        """The compactions whose result `session_id`'s view builds on, newest first.

        A revert (undo) restores the view its compaction replaced, so it continues
        from the session that compaction compacted: the compactions it skipped over
        (the undone one and every later one) are no longer in effect.
        """
        node = self.lineage(session_id)
        out: list[str] = []
        seen = {session_id}
        while node.parent_session_id is not None and node.reason in ("compression", "revert"):
            parent_id: str | None = node.parent_session_id
            if node.reason == "compression":
                out.append(node.compaction_id or "")
            else:
                parent_id = self.state.compacted.get(node.compaction_id or "", parent_id)
            parent = self.state.sessions.get(parent_id or "")
            if parent is None or parent.session_id in seen:
                break
            seen.add(parent.session_id)
            node = parent
        return out

    def compression_count(self, session_id: str) -> int:
        """How many compactions are in effect in `session_id` (0 for a chain's first session).

        A revert (undo) restores the view its compaction replaced, so it counts what
        the session that compaction compacted counted.
        """
        return len(self.compaction_ids_in_effect(session_id))

    def kind(self, session_id: str) -> str:
        """``root``, ``continuation``, ``branch``, ``delegate``, ``revert`` or ``import``."""
        node = self.lineage(session_id)
        if node.parent_session_id is None:
            return "root"
        return "continuation" if node.reason == "compression" else node.reason

    def encode_state(self) -> bytes:
        return msgspec.msgpack.encode(self.state)

    @classmethod
    def decode_state(cls, data: bytes) -> ChainsProjection:
        return cls(msgspec.msgpack.decode(data, type=ChainsState))
