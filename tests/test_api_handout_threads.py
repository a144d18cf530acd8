"""`api_messages` across threads, as the framework adapters use it.

The adapters run the service on a private loop thread (``LoopThread``) while the host
framework holds, reads and changes the lists it got on its own thread. Appends fold
on the loop thread at the same time. Whatever the interleaving: a list a caller holds
never gains the ledger's later appends, nothing a caller does to its list reaches the
ledger's view (which stays equal to a rebuild from the log), and every list is a
consistent prefix of the log (the system message, then the appended messages in
order, none missing). The value handed out is a plain ``list`` that ``json``,
``msgspec``, ``orjson``, ``httpx`` / ``httpx2`` and the OpenAI and Anthropic SDKs serialize from its
real items. Also here: the two per-call shortcuts of the read path (the tip of a
session without a compression child; the store's change token) against their slow
forms. Real ledger, service, loop thread, SDKs and an in-process fake upstream.
"""

from __future__ import annotations

import copy
import json
import random
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import anyio
import httpx
import httpx2
import msgspec
import openai
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxledger import CompressionConfig, ContextService, Ledger
from ctxledger.errors import StoreError
from ctxledger.eventstore import SQLiteEventStore
from ctxledger.integrations.common import LoopThread
from ctxledger.projections import Projector
from ctxledger.projections.chains import ChainsProjection, Lineage
from tests.helpers.fake_upstream import FakeUpstream, Say
from tests.test_api_handout import MUTATIONS

Message = dict[str, Any]
SYSTEM = "Be brief."


class Rig:
    """A ledger and service living on a loop thread, driven from other threads."""

    def __init__(self, path: Path) -> None:
        self.loop = LoopThread(name="handout-loop")
        config = CompressionConfig()

        async def make() -> tuple[ContextService, str]:
            ledger = Ledger.open(path, config=config, durability="normal")
            svc = ContextService(ledger, config=config)
            sid = await svc.start_session(
                model="gpt-4o", context_length=10_000_000, system_prompt=SYSTEM
            )
            return svc, sid

        self.svc, self.sid = self.loop.run(make)

    def append(self, contents: list[str]) -> None:
        batch = [{"role": "user", "content": c} for c in contents]

        async def write() -> None:
            await self.svc.append(self.sid, batch)

        self.loop.run(write)

    def read(self) -> list[Message]:
        async def get() -> list[Message]:
            return self.svc.api_messages(self.sid, cache=False)

        return self.loop.run(get)

    def rebuilt(self) -> list[Message]:
        """The view folded from the log by a fresh projector (no cached view involved)."""

        async def fold() -> list[Message]:
            projector = Projector.rebuild(self.svc.ledger.store, use_checkpoint=False)
            return projector.transcript.api_messages(self.sid)

        return self.loop.run(fold)

    def close(self) -> None:
        self.loop.run(self.svc.aclose)
        self.loop.close()


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    r = Rig(tmp_path / "threads.db")
    yield r
    r.close()


def _is_log_prefix(got: list[Message], total: int) -> bool:
    """System message, then m0, m1, ... in order with none missing (at most `total`)."""
    contents = [m["content"] for m in got]
    k = len(contents) - 1
    return contents == [SYSTEM, *(f"m{i}" for i in range(k))] and k <= total


def _run_concurrently(rig: Rig, batches: list[int], reader: Any) -> int:
    """Append `batches` (sizes) from a writer thread while `reader()` runs on this one."""
    total = sum(batches)
    done = threading.Event()
    failures: list[BaseException] = []

    def writer() -> None:
        n = 0
        try:
            for size in batches:
                rig.append([f"m{n + i}" for i in range(size)])
                n += size
        except BaseException as exc:  # surfaced by the test below
            failures.append(exc)
        finally:
            done.set()

    thread = threading.Thread(target=writer, name="handout-writer")
    thread.start()
    try:
        reader(done)
    finally:
        thread.join(timeout=60)
    assert not failures, failures
    return total


def test_appends_never_reach_a_held_list_and_changes_never_reach_the_ledger(rig: Rig) -> None:
    rnd = random.Random(14)
    held: list[tuple[list[Message], list[Message]]] = []  # (the list, what it must be)
    names = sorted(MUTATIONS)

    def reader(done: threading.Event) -> None:
        reads = 0
        while not done.is_set() or reads < 5:
            got = rig.read()
            reads += 1
            assert _is_log_prefix(got, 10_000)
            if len(got) >= 2 and rnd.random() < 0.7:
                # change it here while the loop thread keeps folding appends
                MUTATIONS[rnd.choice(names)](got)
            held.append((got, list(got)))
            for mine, expected in held[-20:]:
                assert mine == expected

    total = _run_concurrently(rig, [rnd.randint(1, 4) for _ in range(120)], reader)
    for mine, expected in held:
        assert mine == expected  # the ledger never touched a list it handed out
    final = rig.read()
    assert _is_log_prefix(final, total) and len(final) == 1 + total
    assert final == rig.rebuilt()


def test_lists_changed_on_a_third_thread_while_appends_fold(rig: Rig) -> None:
    """The reader hands each list to a host thread that changes it at once."""
    lists: list[list[Message]] = []
    ready = threading.Condition()
    stop = threading.Event()

    def host() -> None:
        while True:
            with ready:
                ready.wait_for(lambda: lists or stop.is_set(), timeout=5)
                if not lists and stop.is_set():
                    return
                got = lists.pop() if lists else None
            if got is not None:
                for _ in range(20):
                    got.append({"role": "user", "content": "host's own"})
                    got.pop(0)
                got.clear()

    thread = threading.Thread(target=host, name="handout-host")
    thread.start()

    def reader(done: threading.Event) -> None:
        while not done.is_set():
            got = rig.read()
            assert _is_log_prefix(got, 10_000)
            with ready:
                lists.append(got)
                ready.notify()

    try:
        total = _run_concurrently(rig, [2] * 100, reader)
    finally:
        stop.set()
        with ready:
            ready.notify()
        thread.join(timeout=60)
    final = rig.read()
    assert len(final) == 1 + total and _is_log_prefix(final, total)
    assert final == rig.rebuilt()


@settings(max_examples=12, deadline=None)
@given(
    batches=st.lists(st.integers(1, 5), min_size=1, max_size=30),
    plan=st.lists(st.tuples(st.sampled_from(sorted(MUTATIONS)), st.booleans()), max_size=40),
)
def test_any_interleaving_keeps_the_contract(
    tmp_path_factory: Any, batches: list[int], plan: list[tuple[str, bool]]
) -> None:
    rig = Rig(tmp_path_factory.mktemp("hyp") / "h.db")
    held: list[tuple[list[Message], list[Message]]] = []
    try:

        def reader(done: threading.Event) -> None:
            for name, keep in plan:
                got = rig.read()
                assert _is_log_prefix(got, sum(batches))
                if len(got) >= 2:
                    MUTATIONS[name](got)
                if keep:
                    held.append((got, list(got)))

        total = _run_concurrently(rig, batches, reader)
        for mine, expected in held:
            assert mine == expected
        final = rig.read()
        assert len(final) == 1 + total and final == rig.rebuilt()
    finally:
        rig.close()


# --- what a caller does with the list: serialize it -------------------------------------


def _contents(messages: list[Message]) -> list[Any]:
    return [m["content"] for m in messages]


def test_encoders_serialize_the_real_items_of_a_list_taken_mid_appends(rig: Rig) -> None:
    taken: list[list[Message]] = []

    def reader(done: threading.Event) -> None:
        while not done.is_set():
            taken.append(rig.read())

    _run_concurrently(rig, [3] * 40, reader)
    assert taken
    for got in taken[:: max(1, len(taken) // 10)]:
        assert type(got) is list
        frozen = copy.deepcopy(got)
        assert json.loads(json.dumps(got)) == frozen  # the C encoder reads the real items
        assert msgspec.json.decode(msgspec.json.encode(got)) == frozen
        assert orjson.loads(orjson.dumps(got)) == frozen
        for client in (httpx, httpx2):
            body = client.Request("POST", "http://x.test/", json={"messages": got}).content
            assert json.loads(body)["messages"] == frozen


def test_the_openai_and_anthropic_sdks_send_exactly_the_view(rig: Rig) -> None:
    rig.append([f"m{i}" for i in range(6)])
    view = rig.read()
    upstream = FakeUpstream()
    upstream.queue(Say("ok"), Say("ok"))

    async def send() -> None:
        # the SDKs speak ``httpx2``; its ASGI transport reaches the fake in-process
        http = httpx2.AsyncClient(transport=httpx2.ASGITransport(app=upstream))
        oai = openai.AsyncOpenAI(
            api_key="k", base_url="http://upstream.test/v1", max_retries=0, http_client=http
        )
        await oai.chat.completions.create(model="gpt-4o", messages=view)  # type: ignore[arg-type]
        claude = anthropic.AsyncAnthropic(
            api_key="k", base_url="http://upstream.test", max_retries=0, http_client=http
        )
        await claude.messages.create(
            model="claude-handout-test",
            max_tokens=16,
            system=view[0]["content"],
            messages=view[1:],  # type: ignore[arg-type]
        )
        await http.aclose()

    anyio.run(send)
    sent_openai, sent_anthropic = upstream.requests
    assert sent_openai.json["messages"] == view
    assert _contents(sent_anthropic.json["messages"]) == _contents(view[1:])
    assert sent_anthropic.json["system"] == SYSTEM
    assert rig.read() == view  # sending changed nothing


# --- the read path's shortcuts ------------------------------------------------------------


def _lineage(sid: str, child: str | None) -> Lineage:
    return Lineage(
        session_id=sid,
        parent_session_id=None,
        reason="new",
        started_at=0.0,
        started_seq=0,
        model="m",
        compression_child=child,
    )


@settings(max_examples=60, deadline=None)
@given(children=st.dictionaries(st.sampled_from("abcdefgh"), st.sampled_from("abcdefghxyz")))
def test_the_tip_shortcut_equals_the_chain_walk(children: dict[str, str]) -> None:
    """Chains, cycles and children that never started: the shortcut (no compression
    child) and the walk agree for every session."""
    chains = ChainsProjection()
    for sid in "abcdefgh":
        chains.state.sessions[sid] = _lineage(sid, children.get(sid))
    for sid in "abcdefgh":
        *_, walked = chains._forward(sid)
        assert chains.tip(sid) == walked
    with pytest.raises(Exception, match="no session"):
        chains.tip("q")


def test_a_read_right_after_our_append_still_sees_another_writers_append(
    tmp_path: Path,
) -> None:
    path = tmp_path / "two.db"
    config = CompressionConfig()

    async def main() -> None:
        mine = Ledger.open(path, config=config)
        other = Ledger.open(path, config=config)
        svc = ContextService(mine, config=config)
        sid = await svc.start_session(model="gpt-4o", context_length=128_000)
        for i in range(20):
            await svc.append(sid, [{"role": "user", "content": f"mine {i}"}])
            other.refresh()
            other.append_messages(sid, [{"role": "assistant", "content": f"theirs {i}"}])
            got = svc.api_messages(sid, cache=False)
            assert got[-2:] == [
                {"role": "user", "content": f"mine {i}"},
                {"role": "assistant", "content": f"theirs {i}"},
            ]
        other.close()
        await svc.aclose()

    anyio.run(main)


def test_the_change_token_of_a_closed_store_is_a_clear_error(tmp_path: Path) -> None:
    store = SQLiteEventStore(tmp_path / "c.db")
    store.change_token()
    store.close()
    with pytest.raises(StoreError, match="closed"):
        store.change_token()
