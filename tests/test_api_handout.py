"""`api_messages` hands out a copy of the projection's cached view: the contract holds.

The list a caller gets is the caller's: it never changes after it was handed out
(appends, persisted outputs and compactions fold into the ledger's own view), and
whatever the caller does to it (every mutating list method, slices, ``+=``) never
reaches the ledger: the next read shows exactly the folded messages. Copies and
pickles are plain lists. The real ledger and service are used throughout.
"""

from __future__ import annotations

import copy
import json
import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxledger import CompressionConfig, ContextService, Ledger

Message = dict[str, Any]

MUTATIONS: dict[str, Callable[[list[Any]], object]] = {
    "append": lambda m: m.append({"role": "user", "content": "injected"}),
    "extend": lambda m: m.extend([{"role": "user", "content": "x"}] * 2),
    "insert": lambda m: m.insert(0, {"role": "user", "content": "first"}),
    "pop": lambda m: m.pop(),
    "pop0": lambda m: m.pop(0),
    "remove": lambda m: m.remove(m[1]),
    "clear": lambda m: m.clear(),
    "sort": lambda m: m.sort(key=lambda x: str(x.get("content"))),
    "reverse": lambda m: m.reverse(),
    "setitem": lambda m: m.__setitem__(1, {"role": "user", "content": "replaced"}),
    "setslice": lambda m: m.__setitem__(slice(0, 2), []),
    "delitem": lambda m: m.__delitem__(-1),
    "delslice": lambda m: m.__delitem__(slice(1, None)),
    "iadd": lambda m: m.__iadd__([{"role": "user", "content": "+="}]),
    "imul": lambda m: m.__imul__(2),
}


def _ledger(tmp_path: Path) -> tuple[Ledger, str]:
    ledger = Ledger.open(tmp_path / "l.db", config=CompressionConfig())
    sid = ledger.start_session(model="gpt-4o", context_length=128_000, system_prompt="Be brief.")
    ledger.append_messages(sid, [{"role": "user", "content": f"question {i}"} for i in range(5)])
    return ledger, sid


def _folded(ledger: Ledger, sid: str) -> list[Message]:
    """The view rebuilt from ids, bypassing the cached view."""
    t = ledger.transcript
    return [{"role": "system", "content": "Be brief."}, *t.live_messages(sid)]


@pytest.mark.parametrize("name", sorted(MUTATIONS))
def test_a_callers_change_never_reaches_the_ledger(tmp_path: Path, name: str) -> None:
    ledger, sid = _ledger(tmp_path)
    first = ledger.api_messages(sid)
    expected = copy.deepcopy(_folded(ledger, sid))
    MUTATIONS[name](first)
    assert ledger.api_messages(sid) == expected
    assert ledger.api_messages(sid) is not first
    ledger.append_messages(sid, [{"role": "user", "content": "after"}])
    assert ledger.api_messages(sid) == [*expected, {"role": "user", "content": "after"}]
    ledger.close()


def test_a_held_list_never_changes_under_its_holder(tmp_path: Path) -> None:
    ledger, sid = _ledger(tmp_path)
    held = ledger.api_messages(sid)
    snapshot = list(held)
    ledger.append_messages(sid, [{"role": "user", "content": "one more"}])
    assert held == snapshot
    now = ledger.api_messages(sid)
    assert now == [*snapshot, {"role": "user", "content": "one more"}]
    # the cached view is the projection's own, extended in place as events fold
    view = ledger.transcript.api_view(sid)
    ledger.append_messages(sid, [{"role": "user", "content": "and another"}])
    assert ledger.transcript.api_view(sid) is view
    assert held == snapshot
    ledger.close()


def test_copies_pickles_and_encodings_are_plain_lists(tmp_path: Path) -> None:
    ledger, sid = _ledger(tmp_path)
    view = ledger.api_messages(sid)
    assert type(view) is list and view is not ledger.transcript.api_view(sid)
    for other in (
        copy.copy(view),
        copy.deepcopy(view),
        pickle.loads(pickle.dumps(view)),
        view[:],
        view + [],  # noqa: RUF005 (the concatenation itself is under test)
        view.copy(),
    ):
        assert type(other) is list
        assert other == view
    assert json.loads(json.dumps(view)) == view
    assert msgspec.json.decode(msgspec.json.encode(view)) == view
    copy.copy(view).append({"role": "user", "content": "x"})  # a copy is not the view
    assert ledger.api_messages(sid) == _folded(ledger, sid)
    ledger.close()


def test_two_readers_each_keep_their_own_list(tmp_path: Path) -> None:
    ledger, sid = _ledger(tmp_path)
    a, b = ledger.api_messages(sid), ledger.api_messages(sid)
    a.append({"role": "user", "content": "only a"})
    b.pop()
    assert len(a) == 7 and len(b) == 5
    assert ledger.api_messages(sid) == _folded(ledger, sid)
    ledger.close()


@settings(max_examples=25, deadline=None)
@given(
    steps=st.lists(
        st.one_of(
            st.tuples(st.just("append"), st.integers(1, 3)),
            st.tuples(st.just("read"), st.booleans()),
            st.tuples(st.sampled_from(sorted(MUTATIONS)), st.integers(0, 5)),
        ),
        max_size=25,
    )
)
def test_interleaved_reads_writes_and_mutations(tmp_path_factory: Any, steps: list[Any]) -> None:
    ledger, sid = _ledger(tmp_path_factory.mktemp("h"))
    held: list[tuple[list[Any], list[Any]]] = []  # (handed list, what it was when handed)
    n = 0
    for kind, arg in steps:
        if kind == "append":
            ledger.append_messages(
                sid, [{"role": "user", "content": f"m{n + i}"} for i in range(arg)]
            )
            n += arg
        elif kind == "read":
            got = ledger.api_messages(sid)
            assert got == _folded(ledger, sid)
            if arg:
                held.append((got, list(got)))
        elif held:
            handed, _ = held.pop(arg % len(held))
            if len(handed) >= 2:
                MUTATIONS[kind](handed)
        for handed, when in held:
            assert handed == when
    assert ledger.api_messages(sid) == _folded(ledger, sid)
    ledger.close()


def test_the_service_hands_out_the_same_contract(tmp_path: Path) -> None:
    async def main() -> None:
        ledger = Ledger.open(tmp_path / "s.db", config=CompressionConfig())
        svc = ContextService(ledger, config=CompressionConfig())
        sid = await svc.start_session(model="gpt-4o", context_length=128_000, system_prompt="Hi.")
        await svc.append(sid, [{"role": "user", "content": "first"}])
        got = svc.api_messages(sid)
        got.append({"role": "assistant", "content": "not appended"})
        await svc.append(sid, [{"role": "assistant", "content": "reply"}])
        assert [m["content"] for m in svc.api_messages(sid)] == ["Hi.", "first", "reply"]
        assert [m["content"] for m in got] == ["Hi.", "first", "not appended"]
        await svc.aclose()

    anyio.run(main)


def test_a_list_changed_on_another_thread_never_reaches_the_ledger(tmp_path: Path) -> None:
    """The framework adapters run the service on a loop thread while the host changes
    the list it got: each reader's list is its own, whatever the threads do."""
    import threading

    ledger, sid = _ledger(tmp_path)
    lists: list[list[Message]] = []
    done = threading.Event()

    def caller() -> None:
        while not done.is_set() or lists:
            if lists:
                got = lists.pop()
                for _ in range(50):
                    got.append({"role": "user", "content": "host's own"})
                    got.pop(0)

    thread = threading.Thread(target=caller)
    thread.start()
    for i in range(200):
        lists.append(ledger.api_messages(sid))
        ledger.append_messages(sid, [{"role": "user", "content": f"turn {i}"}])
    done.set()
    thread.join()
    assert ledger.api_messages(sid) == _folded(ledger, sid)
    assert len(_folded(ledger, sid)) == 1 + 5 + 200
    ledger.close()
