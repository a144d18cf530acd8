"""Races and crashes: compactions are never duplicated, never lost half-way.

* Two tasks of one service compress the same session: one wins, the other continues on
  the tip (the per-chain lock).
* Two services (two Ledger objects, as two processes would have) on one SQLite file
  take turns on the chain's compaction lease: one summarizer call, one continuation.
  Without the lease (no file, or its wait ran out) both plan on the same version; the one that appends second gets ConcurrencyError inside
  the service, re-reads and continues on the winner's continuation; when the other
  writer only added messages, the loser re-plans and keeps them.
* A writer process is SIGKILLed at random moments while it compacts in a loop; after
  each kill exactly one session of the chain is live (the tip) and the log verifies.
"""

from __future__ import annotations

import contextlib
import itertools
import random
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from ctxledger.clock import SequentialIds
from ctxledger.compressor.config import CompressionConfig
from ctxledger.compressor.summarizers.base import SummaryRequest, SummaryResult
from ctxledger.compressor.summarizers.offline import OfflineSummarizer
from ctxledger.demo.synth import SessionSynth
from ctxledger.errors import ConcurrencyError
from ctxledger.events import CompressionChecked, SessionSwitched, SummaryGenerated
from ctxledger.eventstore.base import AppendRequest
from ctxledger.ledger.facade import Ledger
from ctxledger.projections import Projector
from ctxledger.runtime import service as service_module
from ctxledger.runtime.service import ContextService, TurnResult

pytestmark = pytest.mark.anyio

CONFIG = CompressionConfig(threshold_floor_tokens=0)
KILLER = Path(__file__).parent / "helpers" / "service_killer.py"


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


class GateSummarizer:
    """Holds every summary until the gate opens (a slow model call), then summarizes offline."""

    kind = "gate"

    def __init__(self) -> None:
        self.entered = anyio.Event()
        self.gate = anyio.Event()
        self.calls = 0
        self.inner = OfflineSummarizer()

    async def summarize(self, request: SummaryRequest) -> SummaryResult:
        self.calls += 1
        self.entered.set()
        await self.gate.wait()
        return await self.inner.summarize(request)


def service(db: Path, namespace: str, summarizer: Any = None) -> ContextService:
    ledger = Ledger.open(db, ids=SequentialIds(namespace), config=CONFIG, durability="normal")
    return ContextService(ledger, config=CONFIG, summarizer=summarizer)


def concurrency_spy(svc: ContextService) -> list[ConcurrencyError]:
    """Record every ConcurrencyError the service's store raises (the service handles them)."""
    raised: list[ConcurrencyError] = []
    store = svc.ledger.store
    append_many = store.append_many

    def spy(requests: list[AppendRequest], blobs: Any = None) -> dict[str, int]:
        try:
            return append_many(requests, blobs)
        except ConcurrencyError as exc:
            raised.append(exc)
            raise

    store.append_many = spy  # type: ignore[method-assign]
    return raised


async def big_session(svc: ContextService, turns: int = 12) -> str:
    sid = await svc.start_session(
        model="test-model", context_length=16_384, system_prompt="You are a coding agent."
    )
    synth = SessionSynth(3, big_outputs=False)
    for i in range(turns):
        await svc.append(sid, synth.turn(i))
    return sid


def switches(ledger: Ledger, sid: str) -> list[SessionSwitched]:
    ledger.refresh()
    return [
        r.event
        for r in ledger.store.read_all()
        if isinstance(r.event, SessionSwitched) and r.stream == sid
    ]


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "shared.db"


async def test_two_tasks_compress_the_same_session_once(tmp_path: Path) -> None:
    svc = service(tmp_path / "one.db", "")
    sid = await big_session(svc)
    results: list[TurnResult] = []

    async def compress() -> None:
        results.append(await svc.compress(sid))

    async with anyio.create_task_group() as tg:
        tg.start_soon(compress)
        tg.start_soon(compress)
    (switch,) = switches(svc.ledger, sid)
    tip = svc.tip(sid)
    assert tip == switch.new_session_id
    assert [r.session_id for r in results] == [tip, tip]
    assert sorted(r.compressed for r in results) == [False, True]
    loser = next(r for r in results if not r.compressed)
    assert "already compacted" in loser.notices[0]
    svc.ledger.close()


def test_one_service_driven_by_successive_event_loops(tmp_path: Path) -> None:
    # a CLI runs one anyio.run per command; tests run on both backends: the per-chain
    # lock must follow the running loop instead of staying bound to the first one
    svc = service(tmp_path / "loops.db", "")
    sid = anyio.run(big_session, svc)

    async def race() -> None:
        async with anyio.create_task_group() as tg:
            for _ in range(2):
                tg.start_soon(svc.compress, sid)

    for backend in ("asyncio", "trio", "asyncio"):
        before = svc.ledger.chains.compression_count(svc.tip(sid))
        anyio.run(race, backend=backend)
        assert svc.ledger.chains.compression_count(svc.tip(sid)) == before + 1
    svc.ledger.close()


@pytest.fixture
def no_lease(monkeypatch: pytest.MonkeyPatch) -> None:
    """Compaction without the cross-process lease (a store without a file, or a lease
    wait that ran out): the log's expected versions alone must keep the outcome right."""

    @contextlib.asynccontextmanager
    async def never_held(store: object, root: str, wait: float) -> AsyncIterator[bool]:
        yield False

    monkeypatch.setattr(service_module, "chain_lease", never_held)


async def test_two_services_take_turns_on_the_lease_and_call_the_model_once(db: Path) -> None:
    gate, other = GateSummarizer(), GateSummarizer()
    other.gate.set()
    a, b = service(db, "a", other), service(db, "b", gate)
    sid = await big_session(a)
    outcome: list[TurnResult] = []

    async def compress(svc: ContextService) -> None:
        outcome.append(await svc.compress(sid))

    async with anyio.create_task_group() as tg:
        tg.start_soon(compress, b)
        await gate.entered.wait()  # b holds the lease and waits for its summary
        tg.start_soon(compress, a)
        await anyio.sleep(0.3)
        assert other.calls == 0  # a waits for the lease instead of paying for a summary
        gate.gate.set()
    b_result, a_result = outcome
    assert b_result.compressed and not a_result.compressed
    assert "already compacted" in a_result.notices[0]
    assert gate.calls + other.calls == 1
    assert a_result.session_id == b_result.session_id == a.tip(sid)
    assert len(switches(a.ledger, sid)) == 1
    checks = [
        r.event for r in a.ledger.store.read_stream(sid) if isinstance(r.event, CompressionChecked)
    ]
    assert len(checks) == 1  # a decided nothing: the stream was not bumped under b
    a.ledger.close()
    b.ledger.close()


@pytest.mark.usefixtures("no_lease")
async def test_two_services_race_the_second_gets_a_conflict_and_continues_on_the_tip(
    db: Path,
) -> None:
    gate = GateSummarizer()
    a, b = service(db, "a"), service(db, "b", gate)
    sid = await big_session(a)
    conflicts = concurrency_spy(b)
    outcome: list[TurnResult] = []

    async def b_compresses() -> None:
        outcome.append(await b.compress(sid))

    async with anyio.create_task_group() as tg:
        tg.start_soon(b_compresses)
        await gate.entered.wait()  # b planned on the current version and waits for its summary
        won = await a.compress(sid)
        gate.gate.set()
    (b_result,) = outcome
    assert won.compressed and not b_result.compressed
    assert len(conflicts) == 1 and conflicts[0].stream == sid
    assert b_result.session_id == won.session_id == a.tip(sid) == b.tip(sid)
    (switch,) = switches(a.ledger, sid)  # no second continuation
    assert switch.new_session_id == won.session_id
    assert len([s for s in a.ledger.sessions() if s.parent_session_id == sid]) == 1
    # b's own writes go to the winner's continuation from now on
    appended = await b.append(sid, [{"role": "user", "content": "next"}])
    assert appended.session_id == won.session_id
    assert a.ledger.verify().ok
    a.ledger.close()
    b.ledger.close()


@pytest.mark.usefixtures("no_lease")
async def test_the_loser_replans_when_the_other_writer_only_added_messages(db: Path) -> None:
    gate = GateSummarizer()
    a, b = service(db, "a"), service(db, "b", gate)
    sid = await big_session(a)
    conflicts = concurrency_spy(b)
    outcome: list[TurnResult] = []

    async def b_compresses() -> None:
        outcome.append(await b.compress(sid))

    async with anyio.create_task_group() as tg:
        tg.start_soon(b_compresses)
        await gate.entered.wait()
        late = await a.append(
            sid, [{"role": "user", "content": "one more thing: keep the retry limit at 5"}]
        )
        gate.gate.set()
    (result,) = outcome
    assert result.compressed and len(conflicts) == 1 and gate.calls == 2
    assert late.message_ids[0] in b.ledger.transcript.live_ids(result.session_id)
    checks = [
        r.event for r in a.ledger.store.read_stream(sid) if isinstance(r.event, CompressionChecked)
    ]
    assert [c.details["attempt"] for c in checks] == [1, 2]
    assert len(switches(a.ledger, sid)) == 1
    summaries = [
        r.event for r in a.ledger.store.read_stream(sid) if isinstance(r.event, SummaryGenerated)
    ]
    assert len(summaries) == 1  # the first summary was never written
    a.ledger.close()
    b.ledger.close()


async def test_a_write_that_loses_a_race_is_redone_on_the_fresh_version(db: Path) -> None:
    a, b = service(db, "a"), service(db, "b")
    sid = await big_session(a)
    conflicts = concurrency_spy(b)
    report_usage = b.ledger.report_usage

    def raced(*args: Any, **kwargs: Any) -> Any:
        if not conflicts:  # another process appends between b's read and b's write
            a.ledger.append_messages(sid, [{"role": "user", "content": "sneaked in"}])
        return report_usage(*args, **kwargs)

    b.ledger.report_usage = raced  # type: ignore[method-assign]
    result = await b.report_usage(sid, {"prompt_tokens": 1_000, "completion_tokens": 10})
    assert result.session_id == sid and len(conflicts) == 1
    assert b.ledger.usage(sid).agent_calls == 1 and a.ledger.verify().ok
    a.ledger.close()
    b.ledger.close()


async def test_a_stale_service_reports_usage_on_the_tip(db: Path) -> None:
    a, b = service(db, "a"), service(db, "b")
    sid = await big_session(a)
    b.ledger.refresh()
    new = (await a.compress(sid)).session_id
    result = await b.report_usage(sid, {"prompt_tokens": 1_000, "completion_tokens": 10})
    assert result.session_id == new and b.ledger.usage(new).agent_calls == 1
    a.ledger.close()
    b.ledger.close()


# --- crashes ---------------------------------------------------------------------------------------


def check_after_crash(db: Path) -> tuple[int, bool]:
    """Exactly one live session in the chain (its tip), every other ended by compression;
    the log verifies and folds cleanly. Returns the chain length and whether the kill
    landed inside a compaction (decided, not yet switched)."""
    with Ledger.open(db) as ledger:
        assert ledger.verify().ok
        chain = ledger.chains.chain("ses_root")
        live = [s for s in chain if not ledger.transcript.session(s).ended]
        assert live == [chain[-1]] == [ledger.tip("ses_root")]
        assert all(ledger.transcript.session(s).end_reason == "compression" for s in chain[:-1])
        assert not ledger.transcript.state.pending  # no switch without its continuation
        fresh = Projector.rebuild(ledger.store, use_checkpoint=False)
        assert fresh.transcript.api_messages(chain[-1]) == ledger.transcript.api_messages(chain[-1])
        assert fresh.encode() == ledger.projector.encode()  # rebuilt == checkpoint + catch-up
        last = list(ledger.store.read_stream(chain[-1]))[-1].event
        return len(chain), isinstance(last, CompressionChecked)


def spawn_writer(db: Path, run: int) -> subprocess.Popen[str]:
    """A writer that imports now and opens the ledger when told (see service_killer.py)."""
    return subprocess.Popen(
        [sys.executable, str(KILLER), str(db), str(run)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.parametrize("runs", [10, pytest.param(200, marks=pytest.mark.slow)])
def test_sigkill_at_random_moments_leaves_exactly_one_live_session(
    tmp_path: Path, runs: int
) -> None:
    db = tmp_path / "killed.db"
    rng = random.Random(20_260_101)
    lengths: list[int] = []
    inside = 0
    waiting = spawn_writer(db, 0)
    for run in range(runs):
        proc = waiting
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
        assert proc.stdout.readline().strip() == "ready", proc.communicate()[1]
        if run + 1 < runs:
            waiting = spawn_writer(db, run + 1)  # imports while this one writes
        # kill only after one full compaction of this run, so the chain grows on a loaded
        # machine too; the random pause then lands the kill anywhere in the next ones
        assert proc.stdout.readline().strip() == "compacted", proc.communicate()[1]
        time.sleep(rng.uniform(0.0, 0.3))
        alive = proc.poll() is None
        proc.send_signal(signal.SIGKILL)
        _, err = proc.communicate(timeout=10)
        assert alive, f"the writer died before it was killed:\n{err}"
        length, mid_compaction = check_after_crash(db)
        lengths.append(length)
        inside += mid_compaction
    # the writer kept compacting across kills: the chain grew, never forked
    assert all(a < b for a, b in itertools.pairwise(lengths)), lengths
    assert lengths[-1] > runs, lengths
    print(f"chain lengths after each kill: {lengths}; kills inside a compaction: {inside}")
