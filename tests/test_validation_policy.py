"""One validation policy for every entry point: re-used tool-call ids are repaired, with a
warning, and the repair is recorded as a ``ToolCallIdsRepaired`` event (replay exact)."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import anyio
import pytest
from click.testing import CliRunner
from helpers.ledger_helpers import chain_events, make_ledger

from ctxledger import ContextService, Ledger
from ctxledger.analysis.replay import rebuild_check
from ctxledger.cli.main import cli
from ctxledger.errors import InvalidMessage
from ctxledger.events import ToolCallIdsRepaired, decode_event, encode_event
from ctxledger.importers.detect import load as load_import
from ctxledger.ledger.importing import import_sessions
from ctxledger.messages import CallLedger, check_new_messages, repair_call_ids
from ctxledger.projections import Projector


def call(cid: str, command: str = "ls") -> dict[str, Any]:
    args = json.dumps({"command": command})
    return {"id": cid, "type": "function", "function": {"name": "terminal", "arguments": args}}


def turn(cid: str, n: int) -> list[dict[str, Any]]:
    """One tool round trip whose call id is `cid` (as tau-bench logs re-use them)."""
    return [
        {"role": "user", "content": f"step {n}"},
        {"role": "assistant", "content": None, "tool_calls": [call(cid, f"ls dir{n}")]},
        {"role": "tool", "tool_call_id": cid, "content": f"file{n}.py"},
        {"role": "assistant", "content": f"done {n}"},
    ]


CONVERSATION = turn("call_0", 1) + turn("call_0", 2) + turn("call_0", 3)


def call_ids(messages: list[dict[str, Any]]) -> list[str]:
    out = []
    for m in messages:
        out += [c["id"] for c in m.get("tool_calls") or ()]
        if m.get("role") == "tool":
            out.append(m["tool_call_id"])
    return out


def repairs_of(ledger: Ledger, sid: str) -> list[ToolCallIdsRepaired]:
    return chain_events(ledger, sid, ToolCallIdsRepaired)


# --- the pure repair ----------------------------------------------------------------------------


def test_repair_renames_the_later_call_and_its_result_without_mutating_input() -> None:
    original = json.loads(json.dumps(CONVERSATION))
    fixed, repairs = repair_call_ids(CONVERSATION, None, lambda i, j: f"new_{i}_{j}")
    assert original == CONVERSATION
    assert call_ids(fixed) == ["call_0", "call_0", "new_5_0", "new_5_0", "new_9_0", "new_9_0"]
    assert [(r.index, r.call_index, r.original) for r in repairs] == [
        (5, 0, "call_0"),
        (6, None, "call_0"),
        (9, 0, "call_0"),
        (10, None, "call_0"),
    ]


def test_a_result_goes_to_the_original_call_while_that_one_is_unanswered() -> None:
    parallel = [
        {"role": "assistant", "content": None, "tool_calls": [call("x")]},
        {"role": "assistant", "content": None, "tool_calls": [call("x")]},
        {"role": "tool", "tool_call_id": "x", "content": "first"},
        {"role": "tool", "tool_call_id": "x", "content": "second"},
    ]
    fixed, _ = repair_call_ids(parallel, None, lambda i, j: "y")
    assert call_ids(fixed) == ["x", "y", "x", "y"]


def test_a_result_whose_original_call_left_the_view_goes_to_the_replacement() -> None:
    # a compaction between a repaired call and its result summarized the original away:
    # the new session's view holds only the replacement, still awaiting its result
    ledger = CallLedger()
    ledger.fold([{"role": "assistant", "content": None, "tool_calls": [call("new")]}], {"new": "x"})
    fixed, repairs = repair_call_ids(
        [{"role": "tool", "tool_call_id": "x", "content": "r"}], ledger, str
    )
    assert call_ids(fixed) == ["new"]
    assert [(r.call_index, r.original, r.replacement) for r in repairs] == [(None, "x", "new")]


def test_a_compaction_between_a_repaired_call_and_its_result_keeps_the_pair(tmp_path: Path) -> None:
    async def main() -> list[dict[str, Any]]:
        service = ContextService.open(tmp_path / "s.db")
        sid = await service.start_session(model="m", context_length=32_000)
        sid = (
            await service.append(sid, turn("call_0", 1) + turn("k", 2) + turn("j", 3))
        ).session_id
        sid = (await service.compress(sid)).session_id  # the head (turn 1) is kept this time
        sid = (await service.append(sid, turn("call_0", 4)[:2])).session_id  # re-used: repaired
        sid = (await service.compress(sid)).session_id  # turn 1, the original, summarized
        sid = (await service.append(sid, turn("call_0", 4)[2:])).session_id  # result: old id
        view = service.api_messages(sid)
        await service.aclose()
        return view

    view = anyio.run(main)
    assert "call_0" not in call_ids(view)
    assert view[-2]["tool_call_id"] == view[-3]["tool_calls"][0]["id"]


def test_ids_within_one_message_and_a_taken_replacement_are_repaired() -> None:
    ledger = CallLedger(issued=["dup"], answered=["dup"])
    ledger.issued.add("syn")
    msg = {"role": "assistant", "content": None, "tool_calls": [call("dup"), call("a"), call("a")]}
    fixed, repairs = repair_call_ids([msg], ledger, lambda i, j: "syn")
    assert call_ids(fixed) == ["syn_1", "a", "syn_2"]  # "syn" is taken, then "syn_1" is
    assert len(repairs) == 2


# --- the ledger ----------------------------------------------------------------------------------


def test_ledger_repairs_across_appends_logs_and_records_the_repair(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    ledger = make_ledger(tmp_path / "l.db")
    sid = ledger.start_session(model="m", context_length=32_000)
    ledger.append_messages(sid, turn("call_0", 1))
    with caplog.at_level(logging.WARNING, logger="ctxledger"):
        ids = ledger.append_messages(sid, turn("call_0", 2)[:2])  # the call alone
        ledger.append_messages(sid, turn("call_0", 2)[2:])  # its result, under the old id
    # the log names the message as stored (the id `show` and `pin` take), not its batch index
    assert f"message {ids[1]}: re-used tool-call id 'call_0'" in caplog.text
    stored = ledger.api_messages(sid)
    assert len(set(call_ids(stored))) == 2 and call_ids(stored)[0] == "call_0"
    (call_fix,), (result_fix,) = (e.repairs for e in repairs_of(ledger, sid))
    assert (call_fix.message_id, call_fix.call_index, call_fix.original) == (ids[1], 0, "call_0")
    assert result_fix.call_index is None and result_fix.replacement == call_fix.replacement
    assert all(e.source == "append" for e in repairs_of(ledger, sid))
    assert rebuild_check(ledger, sid).equal
    rebuilt = Projector.rebuild(ledger.store).transcript.state
    assert rebuilt.call_renames == ledger.transcript.state.call_renames
    ledger.close()


def test_a_pending_repair_survives_reopening_the_ledger(tmp_path: Path) -> None:
    db = tmp_path / "l.db"
    with make_ledger(db) as ledger:
        sid = ledger.start_session(model="m", context_length=32_000)
        ledger.append_messages(sid, turn("call_0", 1) + turn("call_0", 2)[:2])
    with make_ledger(db, namespace="u") as again:
        again.append_messages(sid, turn("call_0", 2)[2:])
        stored = again.api_messages(sid)
    assert stored[-2]["tool_call_id"] == stored[-3]["tool_calls"][0]["id"] != "call_0"


def test_other_bad_input_is_still_rejected_with_nothing_appended(tmp_path: Path) -> None:
    with make_ledger(tmp_path / "l.db") as ledger:
        sid = ledger.start_session(model="m", context_length=32_000)
        ledger.append_messages(sid, turn("call_0", 1))
        before = ledger.store.last_seq()
        with pytest.raises(InvalidMessage, match="second tool result"):
            ledger.append_messages(
                sid, [{"role": "tool", "tool_call_id": "call_0", "content": "x"}]
            )
        assert ledger.store.last_seq() == before


# --- the service and import agree -------------------------------------------------------------


def test_service_append_repairs_and_says_so(tmp_path: Path) -> None:
    async def main() -> tuple[list[str], list[dict[str, Any]], str]:
        async with ContextService.open(tmp_path / "s.db") as svc:
            sid = await svc.start_session(model="m", context_length=32_000)
            notices: list[str] = []
            for n in (1, 2, 3):
                for msgs in (turn("call_0", n)[:2], turn("call_0", n)[2:]):
                    notices += (await svc.append(sid, msgs)).notices
            return notices, svc.api_messages(sid, cache=False), sid

    notices, messages, sid = anyio.run(main)
    assert len(notices) == 4 and all(n.startswith("repaired message") for n in notices)
    assert len(set(call_ids(messages))) == 3
    with Ledger.open(tmp_path / "s.db") as ledger:
        assert len(repairs_of(ledger, sid)) == 4
        assert rebuild_check(ledger, sid).equal


def test_import_and_service_store_the_same_conversation(tmp_path: Path) -> None:
    path = tmp_path / "tau.json"
    path.write_text(json.dumps(CONVERSATION))
    sessions = load_import(path, "openai")
    assert sessions[0].warnings == ["re-used tool-call ids were replaced by synthesized ids (x2)"]
    with make_ledger(tmp_path / "i.db") as ledger:
        (imported,) = import_sessions(ledger, sessions, context_length=32_000)
        via_import = ledger.api_messages(imported)
        (event,) = repairs_of(ledger, imported)
        assert event.source == "import" and len(event.repairs) == 4
        assert {r.message_id for r in event.repairs} <= set(
            ledger.transcript.session(imported).live
        )
        assert rebuild_check(ledger, imported).equal

    async def via_service() -> list[dict[str, Any]]:
        async with ContextService.open(tmp_path / "s.db") as svc:
            sid = await svc.start_session(model="m", context_length=32_000)
            await svc.append(sid, CONVERSATION)
            return svc.api_messages(sid, cache=False)

    served = anyio.run(via_service)

    def shape(messages: list[dict[str, Any]]) -> list[Any]:
        ids = call_ids(messages)
        renumber = {cid: n for n, cid in enumerate(dict.fromkeys(ids))}
        return [renumber[c] for c in ids] + [m.get("content") for m in messages]

    assert shape(served) == shape(via_import)


def test_cli_import_warns_and_records_the_repair(tmp_path: Path) -> None:
    path = tmp_path / "tau.json"
    path.write_text(json.dumps(CONVERSATION))
    db = tmp_path / "c.db"
    out = CliRunner().invoke(
        cli, ["--db", str(db), "import", str(path), "--context-length", "32000"]
    )
    assert out.exit_code == 0, out.output
    assert "warning:" in out.stderr and "re-used tool-call ids" in out.stderr
    sid = out.stdout.strip().splitlines()[-1]
    with Ledger.open(db) as ledger:
        assert len(repairs_of(ledger, sid)) == 1


def test_the_repair_event_round_trips_at_schema_1() -> None:
    event = ToolCallIdsRepaired(event_id="e", session_id="s", at=1.0, repairs=[], source="import")
    assert ToolCallIdsRepaired.SCHEMA == 1
    assert decode_event(encode_event(event), "ToolCallIdsRepaired", 1) == event


def test_a_whole_list_precheck_follows_the_same_policy() -> None:
    """What an adapter checks before it starts a session (the Hermes engine does)."""
    repairs = check_new_messages(CONVERSATION)
    assert [r.index for r in repairs] == [5, 6, 9, 10]
    assert {r.original for r in repairs} == {"call_0"}
    assert check_new_messages(turn("call_0", 1)) == []
    with pytest.raises(InvalidMessage, match="no earlier assistant message issued"):
        check_new_messages([{"role": "tool", "tool_call_id": "x", "content": "?"}])


# --- the proxy: same policy, and the client's line still continues -----------------------------


def test_the_proxy_repairs_re_used_ids_and_the_client_keeps_its_line(tmp_path: Path) -> None:
    from helpers.server_rig import rig

    async def main() -> tuple[list[Any], list[str], list[ToolCallIdsRepaired]]:
        async with rig(tmp_path) as r:
            client = r.openai()
            history: list[Any] = [{"role": "system", "content": "Be brief."}, *CONVERSATION]
            history.append({"role": "user", "content": "and now?"})
            sent_ids = []
            for _ in range(2):
                res = await client.chat.completions.create(model="gpt-4.1", messages=history)
                sent_ids.append(call_ids(r.upstream.requests[-1].json["messages"]))
                history += [
                    {"role": "assistant", "content": res.choices[0].message.content},
                    {"role": "user", "content": "once more"},
                ]
            ledger = r.service.ledger
            [node] = ledger.sessions()  # one line: the second turn did not branch
            return (
                sent_ids,
                [n.session_id for n in ledger.sessions()],
                repairs_of(ledger, node.session_id),
            )

    sent_ids, sessions, repairs = anyio.run(main)
    assert len(sessions) == 1
    assert len(repairs) == 1 and len(repairs[0].repairs) == 4  # recorded once, not per turn
    first, second = sent_ids
    assert first == second[: len(first)]  # the upstream sees one stable, repaired history
    assert len(set(first)) == 3 and first[:2] == ["call_0", "call_0"]


# --- the HTTP state API: the same policy as ContextService.append ------------------------------


def test_the_state_api_repairs_a_re_used_id_and_refuses_what_the_policy_refuses(
    tmp_path: Path,
) -> None:
    from helpers.server_rig import rig

    async def main() -> tuple[list[Any], list[str], list[ToolCallIdsRepaired], int, int]:
        async with rig(tmp_path) as r:
            started = await r.http.post("/v1/sessions", json={"model": "gpt-4.1"})
            sid = started.json()["session_id"]
            first = await r.http.post(
                f"/v1/sessions/{sid}/messages", json={"messages": turn("call_0", 1)}
            )
            assert first.status_code == 200, first.text
            again = await r.http.post(
                f"/v1/sessions/{sid}/messages", json={"messages": turn("call_0", 2)}
            )
            assert again.status_code == 200, again.text
            before = r.last_seq()
            # a second result for an answered call is still refused, nothing appended
            bad = await r.http.post(
                f"/v1/sessions/{sid}/messages",
                json={"messages": [{"role": "tool", "tool_call_id": "call_0", "content": "?"}]},
            )
            view = (await r.http.get(f"/v1/sessions/{sid}/api-messages")).json()
            messages = view["messages"] if isinstance(view, dict) else view
            return (
                messages,
                again.json()["notices"],
                repairs_of(r.service.ledger, sid),
                bad.status_code,
                r.last_seq() - before,
            )

    messages, notices, repairs, bad_status, appended = anyio.run(main)
    ids = call_ids([m for m in messages if m.get("role") != "system"])
    assert ids[:2] == ["call_0", "call_0"] and ids[2] == ids[3] != "call_0"
    assert [n.split(":")[0] for n in notices] == ["repaired message 1", "repaired message 2"]
    assert len(repairs) == 1 and [e.replacement for e in repairs[0].repairs] == [ids[2]] * 2
    assert (bad_status, appended) == (422, 0)
