"""A late result after a compaction (review of session 46). A compaction strips a call
that has no result and summarizes older messages, so a late result may find no call
in the session's view. When a lost call made with a replacement id is still in view
while the original was summarized, the late result answers it (as ``rename_for``
treats a summarized original). When the compaction stripped the lost call itself, the
ledger has nothing to pair it with and refuses it, saying to drop it: a client that
resends the same history meets the same refusal until it does (README, orphan
section)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from helpers.reused_ids import asks, call, chat_reply, result, user
from helpers.server_rig import rig

from ctxledger import ContextService
from ctxledger.errors import InvalidMessage
from ctxledger.messages import CallLedger, repair_call_ids, validate_messages

DROP = "drop this result from the messages you send"


def _fresh(i: int, j: int) -> str:
    return f"new_{i}"


def test_a_late_result_answers_a_lost_replacement_whose_original_was_summarized() -> None:
    # A(x) answered, B(x) lost across a user message, C(x) answered; a compaction
    # summarized A: B's late result still answers B
    full = [user("go"), asks("x"), result("x"), asks("x"), user(), asks("x"), result("x")]
    fixed, repairs = repair_call_ids(full, None, _fresh)
    renames = {r.replacement: r.original for r in repairs if r.call_index is not None}
    view = [user("summary of the first turn"), *fixed[3:]]
    ledger = CallLedger()
    ledger.fold(view, renames)
    late, _ = repair_call_ids([result("x", "B's, late")], ledger, _fresh)
    validate_messages(late, ledger.overlay())
    assert late[0]["tool_call_id"] == fixed[3]["tool_calls"][0]["id"] == "new_3"


def turn(cid: str, n: int) -> list[dict[str, Any]]:
    return [user(f"step {n}"), asks(cid), result(cid, f"file{n}.py"), _said(f"done {n}")]


def _said(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


def test_a_late_result_whose_call_a_compaction_stripped_is_refused_saying_to_drop_it(
    tmp_path: Path,
) -> None:
    async def main() -> None:
        service = ContextService.open(tmp_path / "s.db")
        sid = await service.start_session(model="m", context_length=32_000)
        history = turn("call_0", 1) + turn("k", 2) + turn("j", 3)
        history += [asks("call_0", text="B: lost"), user("again"), asks("call_0", text="C")]
        history.append(result("call_0", "C's"))
        sid = (await service.append(sid, history)).session_id
        sid = (await service.compress(sid)).session_id  # strips B's call (no result)
        seq, view = service.ledger.store.last_seq(), service.api_messages(sid)
        for _ in range(2):  # a resend meets the same refusal, and nothing is appended
            with pytest.raises(InvalidMessage, match="second tool result") as err:
                await service.append(sid, [result("call_0", "B's, late")])
            assert str(err.value).startswith("message 0: ") and DROP in str(err.value)
            assert service.ledger.store.last_seq() == seq
            assert service.api_messages(sid) == view
        await service.append(sid, [user("go on")])  # without it: accepted
        await service.aclose()

    anyio.run(main)


def test_through_the_proxy_a_resent_late_result_after_a_compaction_says_to_drop_it(
    tmp_path: Path,
) -> None:
    """The same shape through the proxy: each resend of the history with the late
    result is a 422 naming the client's message to drop, and nothing is recorded; the
    history without it goes on."""
    headers = {"X-Ctxledger-Session": "late", "authorization": "Bearer sk"}
    made = {"role": "assistant", "content": None, "tool_calls": [call("call_0")]}
    history: list[Any] = [{"role": "system", "content": "be brief"}]
    history += turn("a", 1) + turn("b", 2) + turn("c", 3) + [user("go")]

    async def main() -> None:
        async with rig(tmp_path) as r:

            async def send(step: list[Any], reply: dict[str, Any] | None) -> Any:
                r.upstream.queue(chat_reply(reply or _said("ok")))
                body = {"model": "m", "messages": [*history, *step]}
                return await r.http.post("/v1/chat/completions", json=body, headers=headers)

            for step in ([], [user("again")]):  # B(call_0), lost; C(call_0)
                assert (await send(step, made)).status_code == 200
                history.extend([*step, made])
            res = await send([result("call_0", "C's")], None)
            assert res.status_code == 200, res.text
            history.extend([result("call_0", "C's"), _said("ok")])
            head = r.service.ledger.chains.chain("late")[-1]
            await r.service.compress(head)  # strips B's call (no result)
            seq = r.last_seq()
            for _ in range(2):
                res = await send([result("call_0", "B's, late")], None)
                assert res.status_code == 422 and DROP in res.text, res.text
                # the client's own index of the result to drop (its system message is 0)
                assert f"message {len(history)}: second tool result" in res.text
                assert r.last_seq() == seq
            res = await send([user("go on")], None)
            assert res.status_code == 200, res.text

    anyio.run(main)


def test_through_the_proxy_a_refusal_names_the_clients_index_after_a_developer_lead(
    tmp_path: Path,
) -> None:
    """A session recorded through the state API with a developer message first: the
    proxy matches the client's developer message as the line's lead, so the refused
    result's index is the client's own (the suffix starts after the lead, not one later)."""
    base = [
        {"role": "developer", "content": "Use pytest."},
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": "ok"},
    ]
    headers = {"X-Ctxledger-Session": "dev", "authorization": "Bearer sk"}

    async def main() -> None:
        async with rig(tmp_path) as r:
            made = await r.http.post("/v1/sessions", json={"model": "m", "session_id": "dev"})
            assert made.status_code == 201, made.text
            sent = await r.http.post("/v1/sessions/dev/messages", json={"messages": base})
            assert sent.is_success, sent.text
            seq = r.last_seq()
            # the client's list: 0 developer, 1 user, 2 assistant, 3 user, 4 a stray result
            stray = [*base, user("next"), result("zz", "late")]
            body = {"model": "m", "messages": stray}
            res = await r.http.post("/v1/chat/completions", json=body, headers=headers)
            assert res.status_code == 422, res.text
            assert "message 4: tool result for 'zz'" in res.text, res.text
            assert r.last_seq() == seq

    anyio.run(main)
