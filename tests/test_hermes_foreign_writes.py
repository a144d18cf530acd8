"""The Hermes engine's view of another writer's append into the session Hermes holds
(session 45), without Hermes: ``hermes_host.moved`` sees an append or a withdrawal in
that session (not only a moved tip), and ``as_hermes_holds`` gives a view as Hermes's
agent holds it once it merged adjacent user texts."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxledger.compressor.config import CompressionConfig
from ctxledger.integrations import hermes_host
from ctxledger.runtime.service import ContextService

CONFIG = CompressionConfig(threshold_floor_tokens=0)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
@pytest.mark.parametrize("withdraw", [False, True])
async def test_a_write_into_the_held_session_moves_it(svc: ContextService, withdraw: bool) -> None:
    sid = await svc.start_session(model="m", context_length=64_000)
    await svc.append(
        sid, [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]
    )
    key = hermes_host.view_key(svc, sid)
    assert not hermes_host.moved(svc, sid, sid, key)
    assert not hermes_host.moved(svc, sid, None, None)  # (the host holds no view yet)
    last = svc.ledger.transcript.live_ids(sid)[-1]
    note = [{"role": "user", "content": "a note"}]
    await svc.append(sid, note, withdraw=[last] if withdraw else [])
    assert svc.tip(sid) == sid and hermes_host.moved(svc, sid, sid, key)
    assert not hermes_host.moved(svc, sid, sid, hermes_host.view_key(svc, sid))


def test_adjacent_user_texts_are_merged_as_hermes_merges_them() -> None:
    view: list[dict[str, Any]] = [
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": "b"},
        {"role": "user", "content": "note"},
        {"role": "user", "content": "ask"},
        {"role": "user", "content": ""},
        {"role": "user", "content": [{"type": "text", "text": "blocks"}]},
    ]
    held = hermes_host.as_hermes_holds(view)
    assert held == [
        view[0],
        view[1],
        {"role": "user", "content": "note\n\nask"},
        view[5],  # (a list of blocks is left alone)
    ]
    assert view[2] == {"role": "user", "content": "note"}  # (the view is not changed)


_MESSAGES = st.lists(
    st.fixed_dictionaries(
        {"role": st.sampled_from(["user", "assistant", "tool"]), "content": st.text(max_size=5)}
    ),
    max_size=12,
)


@given(_MESSAGES)
def test_holding_keeps_every_text_and_leaves_no_user_pair(messages: list[dict[str, Any]]) -> None:
    held = hermes_host.as_hermes_holds(messages)
    for before, after in itertools.pairwise(held):
        assert not before["role"] == after["role"] == "user"
    words = [m["content"] for m in messages if m["content"]]
    assert [t for m in held for t in m["content"].split("\n\n") if t] == [
        t for w in words for t in w.split("\n\n") if t
    ]
    assert hermes_host.as_hermes_holds(held) == held


@pytest.mark.anyio
async def test_a_resume_finds_a_chain_holding_a_merged_note(svc: ContextService) -> None:
    """A resumed Hermes (``hermes --resume``, the gateway after an eviction) holds the
    merged form of a view with another writer's note: the chain is still its own."""
    titles = {hermes_host.title("H1")}
    sid = await svc.start_session(model="m", context_length=64_000, title=hermes_host.title("H1"))
    await svc.append(
        sid, [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]
    )
    await svc.append(sid, [{"role": "user", "content": "a note"}])  # (another writer)
    await svc.append(sid, [{"role": "user", "content": "ask 2"}])  # (Hermes's, synced)
    merged = {"role": "user", "content": "a note\n\nask 2"}
    hermes_list = [
        *hermes_host.as_hermes_holds(_view(svc, sid)),
        {"role": "assistant", "content": "2"},
    ]
    assert hermes_list[2] == merged
    found = await hermes_host.resumed_chain(svc, hermes_list, titles, "m", 64_000)
    assert found is not None and found[0] == sid and found[1] == hermes_list[:3]
    # (a list as recorded, the note not merged, is found too)
    found = await hermes_host.resumed_chain(svc, _view(svc, sid), titles, "m", 64_000)
    assert found is not None and found[0] == sid and len(found[1]) == 4


def _view(svc: ContextService, sid: str) -> list[dict[str, Any]]:
    return hermes_host.unmarked(svc.ledger.transcript.live_messages(sid))
