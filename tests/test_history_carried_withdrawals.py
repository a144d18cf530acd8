"""The proxy's history index over compactions and withdrawals, as a property (session
44): a client that goes on without each provisional reply, with manual compactions
anywhere between its turns (one may carry the reply into a continuation) and undos of
them, never branches; the line's recorded history is always exactly what the client
holds (plus a provisional reply it has not yet gone on without), read alike by a warm
index and a fresh one, and the tip's view holds no reply the client went without; and
the log verifies and folds to the same state."""

from __future__ import annotations

import hashlib
import tempfile
from pathlib import Path
from typing import Any

import anyio
import pytest
from helpers.pg_server import PgServer
from hypothesis import example, given, settings
from hypothesis import strategies as st

from ctxledger.analysis.undo import undo
from ctxledger.clock import SequentialIds, StepClock
from ctxledger.compressor.config import CompressionConfig
from ctxledger.events import ReplyWithdrawn
from ctxledger.ledger.facade import Ledger
from ctxledger.projections import Projector
from ctxledger.runtime.service import ContextService
from ctxledger.server.history import PROVISIONAL, HistoryIndex

CONFIG = CompressionConfig(threshold_floor_tokens=0)
PROMPT = "Be brief."
#: ``carry``: a provisional turn and a compaction right after it (which carries the reply);
#: ``undo``: the newest compaction in effect at the tip undone
OPS = st.lists(
    st.sampled_from(["turn", "provisional", "compact", "carry", "undo"]), min_size=1, max_size=9
)


def _ask(i: int) -> dict[str, Any]:
    return {"role": "user", "content": f"ask {i}: " + " ".join(f"w{i}_{j}" for j in range(50))}


class Client:
    """A chat client through the proxy's history index, as ``proxy.Turn`` places a request."""

    def __init__(self, svc: ContextService) -> None:
        self.svc, self.index = svc, HistoryIndex(svc.ledger)
        self.held: list[dict[str, Any]] = []  # what the client sends back
        self.pending: dict[str, Any] | None = None  # a provisional reply it will drop
        self.root = ""

    async def ask(self, i: int, provisional: bool) -> None:
        sent = [*self.held, _ask(i)]
        if not self.root:
            self.root = await self.svc.start_session(
                model="gpt-4.1", context_length=128_000, system_prompt=PROMPT
            )
            sid = (await self.svc.append(self.root, sent)).session_id
        else:
            sid = await self._place(sent)
        reply: dict[str, Any] = {"role": "assistant", "content": f"answer {i}"}
        if provisional:
            reply[PROVISIONAL] = "max_output_tokens"
        await self.svc.append(sid, [reply])
        self.held, self.pending = sent, reply if provisional else None
        if not provisional:
            self.held = [*sent, reply]

    async def _place(self, sent: list[dict[str, Any]]) -> str:
        match = self.index.match(self.root, sent, PROMPT)
        if not match.branch:
            assert self.pending is None
            suffix = sent[match.suffix_start :]
            return (await self.svc.append(match.session_id, suffix)).session_id
        gone = self.index.superseded(self.root, sent, PROMPT)
        assert self.pending is not None and gone is not None and gone.withdrawn, "a branch"
        suffix = sent[gone.suffix_start :]
        return (await self.svc.append(gone.session_id, suffix, withdraw=gone.withdrawn)).session_id

    def recorded(self) -> list[dict[str, Any]]:
        return [*self.held, *([self.pending] if self.pending else [])]


def _check(client: Client) -> None:
    """The line's history is what the client holds (warm and fresh), and so is the tip's
    view: its appended messages are some of the history's, in order, ending with its
    last (a reply withdrawn in a continuation must not come back, by an undo say)."""
    recorded = client.recorded()
    assert client.index.line_messages(client.root) == recorded
    assert HistoryIndex(client.svc.ledger).line_messages(client.root) == recorded
    transcript = client.svc.ledger.transcript
    stored = [transcript.stored(mid) for mid in transcript.live_ids(client.svc.tip(client.root))]
    seen = [m.message for m in stored if m.origin == "appended"]
    rest = iter(recorded)
    assert all(any(m == r for r in rest) for m in seen), "not the history's, in order"
    assert seen[-1:] == recorded[-1:]


async def _run(path: Path | str, ops: list[str]) -> list[str]:
    """Runs `ops`, checking after each; the reasons of the sessions each withdrawal went
    to (``new``: the line's first session, ``compression``: a continuation)."""
    ledger = Ledger.open(path, clock=StepClock(), ids=SequentialIds(), config=CONFIG)
    async with ContextService(ledger, config=CONFIG) as svc:
        client = Client(svc)
        for i, op in enumerate(ops):
            if op in ("turn", "provisional", "carry"):
                await client.ask(i, provisional=op != "turn")
            if op in ("compact", "carry") and client.root:
                await svc.compress(client.root)
            elif op == "undo" and client.root:
                done = svc.ledger.chains.compaction_ids_in_effect(svc.ledger.tip(client.root))
                if done:
                    undo(svc.ledger, done[0])
            if client.root:
                _check(client)
        starts = [svc.ledger.chains.lineage(s).reason for s in svc.ledger.chains.state.sessions]
        assert "branch" not in starts
        assert svc.ledger.verify().ok
        rebuilt = Projector.rebuild(svc.ledger.store, use_checkpoint=False)
        assert rebuilt.fingerprint() == svc.ledger.projector.fingerprint()
        chains = svc.ledger.chains
        return [
            chains.lineage(rec.stream).reason
            for rec in svc.ledger.store.read_all()
            if isinstance(rec.event, ReplyWithdrawn)
        ]


@settings(max_examples=30, deadline=None)
@given(ops=OPS)
@example(ops=["turn", "turn", "turn", "provisional", "compact", "turn", "provisional", "turn"])
@example(ops=["turn", "turn", "turn", "carry", "turn", "undo", "turn"])
def test_a_client_going_on_without_provisional_replies_never_branches(ops: list[str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        anyio.run(_run, Path(tmp) / "l.db", ops)


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_a_reply_carried_by_a_compaction_is_among_the_examples(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """The case the property is for, pinned, on both stores (the index reads the ended
    session's switch from the log): provisional, compact, then the next ask."""
    where: Path | str = tmp_path / "l.db"
    if backend == "postgres":
        server: PgServer = request.getfixturevalue("pg_server")
        where = f"{server.url}?schema=h_{hashlib.sha256(str(tmp_path).encode()).hexdigest()[:20]}"
    ops = ["turn", "turn", "turn", "provisional", "compact", "turn", "provisional", "turn"]
    assert anyio.run(_run, where, ops) == ["compression", "compression"]
