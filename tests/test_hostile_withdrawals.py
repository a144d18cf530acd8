"""Hostile withdrawals: ``ContextService.append(withdraw=...)``, a ``ReplyWithdrawn`` built
by hand, the state API, and ledgers whose withdrawal rows were rewritten by SQL.

Session 44's fuzz round of the newest surface (session 43's ``ReplyWithdrawn``). Each
bad withdrawal a caller can send is refused with a clear error and appends nothing; a
good one takes exactly the view's last messages. A withdrawal row edited by SQL (ids
unknown, repeated, not the view's end, of another session, of the wrong type, nested
thousands deep, megabytes long; an unknown reason or session) gives every reading
command a clear error or a failed verify, never a traceback, and the notes a what-if
writes about it stay short and plain. Found here: a withdrawal with no messages was
taken (a what-if could not replay it); a note listed every id of a 200,000-id row (a
line of 1.7 MB); the deep row was a RecursionError (``hostile_rows`` contract).
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import pytest
from click.testing import CliRunner
from helpers.ledger_helpers import deterministic_ledger, run_cli
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxledger.analysis.history import history
from ctxledger.cli.main import cli
from ctxledger.errors import CtxLedgerError, InvalidInput
from ctxledger.events import MessageAppended, ReplyWithdrawn
from ctxledger.eventstore import AppendRequest
from ctxledger.integers import NOT_PRINTED_IN_LINE
from ctxledger.ledger.facade import Ledger
from ctxledger.projections import Projector
from ctxledger.runtime.service import ContextService

#: an SGR colour, a right-to-left override, a newline and a forged line
HOSTILE = "msg\x1b[31m\u202eX\nFORGED"


def _service(ledger: Ledger) -> ContextService:
    return ContextService(ledger, config=ledger.config)


def _said(i: int) -> dict[str, Any]:
    return {"role": "user", "content": f"turn {i}"}


def _session(svc: ContextService, turns: int = 3) -> tuple[str, str]:
    """A session of `turns` asks and replies (the last reply withdrawable); (sid, other):
    another session holding one message."""

    async def build() -> tuple[str, str]:
        sid = await svc.start_session(model="gpt-4.1", context_length=128_000, system_prompt="Hi.")
        for i in range(turns):
            await svc.append(sid, [_said(i)])
            await svc.append(sid, [{"role": "assistant", "content": f"reply {i}"}])
        other = await svc.start_session(model="gpt-4.1", context_length=128_000)
        await svc.append(other, [_said(99)])
        return sid, other

    return anyio.run(build)


# --- the library ------------------------------------------------------------------------


def test_a_withdrawal_with_no_messages_is_refused_and_appends_nothing() -> None:
    """It went in alone: the what-if, which replays a withdrawal with the messages of its
    append, kept the reply ("was not replayed") and no longer reproduced the view."""
    ledger = deterministic_ledger()
    svc = _service(ledger)
    sid, _ = _session(svc)
    last = ledger.transcript.session(sid).live[-1:]
    before = ledger.store.last_seq()
    said = "a withdrawal goes in the append of the messages sent instead of the reply"
    with pytest.raises(InvalidInput, match=said):
        anyio.run(lambda: svc.append(sid, [], withdraw=last))
    alone = ReplyWithdrawn(**ledger.event_fields(sid), message_ids=last)
    with pytest.raises(InvalidInput, match=said):
        ledger.append([AppendRequest(sid, [alone], ledger.version(sid))])
    assert ledger.store.last_seq() == before
    ledger.close()


def test_a_withdrawal_before_the_messages_of_its_append_is_refused() -> None:
    """A replay attaches a withdrawal to the first message read after the withdrawn ones:
    put before its append's message, it was taken and a what-if said "not replayed"."""
    ledger = deterministic_ledger()
    sid, _ = _session(_service(ledger))
    view = ledger.transcript.session(sid)
    withdrawal = ReplyWithdrawn(**ledger.event_fields(sid), message_ids=view.live[-1:])
    message = MessageAppended(
        **ledger.event_fields(sid),
        message_id=ledger.ids("msg"),
        message=_said(7),
        tokens=5,
        encoding=view.encoding,
    )
    before = ledger.store.last_seq()
    with pytest.raises(InvalidInput, match="after one of them, and this one holds none before"):
        ledger.append([AppendRequest(sid, [withdrawal, message], ledger.version(sid))])
    assert ledger.store.last_seq() == before
    ledger.append([AppendRequest(sid, [message, withdrawal], ledger.version(sid))])  # the order
    assert ledger.transcript.session(sid).live[-1] == message.message_id
    assert history(ledger, sid).notes == []
    ledger.close()


@pytest.mark.parametrize(
    ("ids", "says"),
    [
        ("msg_1", "ReplyWithdrawn.message_ids must be a list, got str"),  # (read per character)
        ([5], "ReplyWithdrawn.message_ids must be a list of str"),
        (None, "ReplyWithdrawn.message_ids must be a list, got NoneType"),  # (a TypeError)
        ([["a"]], "ReplyWithdrawn.message_ids must be a list of str"),  # (unhashable: TypeError)
        ([{"a": 1}], "ReplyWithdrawn.message_ids must be a list of str"),
        (["\ud800"], "surrogates not allowed"),
        ([], "once each and in order (got none)"),
        ([HOSTILE], "is not in the live view"),
        (["m" * 3_000_000], "(3,000,000 characters) is not in the live view"),
    ],
)
def test_a_hand_built_withdrawal_is_refused_by_name(ids: Any, says: str) -> None:
    ledger = deterministic_ledger()
    sid, _ = _session(_service(ledger))
    before = ledger.store.last_seq()
    event = ReplyWithdrawn(**ledger.event_fields(sid), message_ids=ids)
    with pytest.raises(CtxLedgerError, match=re.escape(says)) as raised:
        ledger.append_messages(sid, [_said(7)], extra_events=[event])
    message = str(raised.value)
    assert len(message) < 600 and not NOT_PRINTED_IN_LINE.search(message)
    assert ledger.store.last_seq() == before
    ledger.close()


#: how a withdraw list is spoiled: as it should be (the view's last ids), reordered, one
#: repeated, one added no ledger holds, one of another session, hostile text alone,
#: megabytes alone, the ids before the end
_SPOILED = ["none", "none", "reverse", "twice", "unknown", "other", "hostile", "long", "shift"]
_REASONS = ["incomplete", "refusal", "max_output_tokens", "because", ""]


def _withdraw(live: list[str], last: int, spoiled: str, other: str) -> list[str]:
    ids = live[len(live) - last :] if last else []
    changed = {
        "reverse": ids[::-1],
        "twice": [*ids, *ids[-1:]],
        "unknown": [*ids, "msg_unknown"],
        "other": [*ids[:-1], other],
        "hostile": [HOSTILE],
        "long": ["m" * 2_000_000],
        "shift": live[max(0, len(live) - last - 1) : len(live) - 1] if last else [],
    }
    return changed.get(spoiled, ids)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 3),
            st.sampled_from(_SPOILED),
            st.sampled_from(_REASONS),
            st.integers(0, 2),
        ),
        min_size=1,
        max_size=6,
    )
)
def test_any_withdraw_list_withdraws_the_views_end_or_appends_nothing(
    steps: list[tuple[int, str, str, int]],
) -> None:
    """Drawn withdraw lists (the view's last ids, reordered, repeated, of another
    session, unknown, hostile, not the end), reasons and batches (none too) through
    ``ContextService.append``: it withdraws exactly the view's last ids, in order, once
    each, with at least one message; anything else is a ctxledger error that appends
    nothing. The log verifies and a fresh rebuild reads the same views."""
    ledger = deterministic_ledger()
    svc = _service(ledger)
    sid, other = _session(svc)
    other_id = ledger.transcript.session(other).live[-1]
    for n, (last, spoiled, reason, size) in enumerate(steps):
        live = list(ledger.transcript.session(sid).live)
        ids = _withdraw(live, last, spoiled, other_id)
        batch = [_said(100 * n + k) for k in range(size)]
        fits = (
            len(set(ids)) == len(ids)
            and live[len(live) - len(ids) :] == ids
            and (not ids or (bool(batch) and reason in _REASONS[:3]))
        )
        before = ledger.store.last_seq()
        try:
            anyio.run(partial(svc.append, sid, batch, withdraw=ids, withdraw_reason=reason))
        except CtxLedgerError as exc:
            assert not fits, exc
            assert ledger.store.last_seq() == before
            assert not NOT_PRINTED_IN_LINE.search(str(exc)) and len(str(exc)) < 600
            continue
        assert fits, ids
        kept = live[: len(live) - len(ids)]
        assert ledger.transcript.session(sid).live[: len(kept)] == kept
        assert len(ledger.transcript.session(sid).live) == len(kept) + len(batch)
    assert ledger.verify().ok
    fresh = Projector.rebuild(ledger.store, use_checkpoint=False)
    assert fresh.fingerprint() == ledger.projector.fingerprint()
    ledger.close()


# --- the state API ----------------------------------------------------------------------


def test_the_state_api_takes_no_withdrawal(tmp_path: Path) -> None:
    """Only the proxy withdraws (a reply it recorded provisional): the state API's append
    names the field it does not know, and appends nothing."""
    from helpers.server_rig import rig

    async def main() -> list[tuple[int, str, int]]:
        async with rig(tmp_path, token="t0ken") as r:
            auth = {"Authorization": "Bearer t0ken"}
            made = await r.http.post("/v1/sessions", json={"model": "m"}, headers=auth)
            sid = made.json()["session_id"]
            url = f"/v1/sessions/{sid}/messages"
            first = await r.http.post(url, json={"messages": [_said(0)]}, headers=auth)
            mine = first.json()["message_ids"]
            out = []
            for extra in ({"withdraw": mine}, {"withdraw": [HOSTILE]}, {"withdraw_reason": "x"}):
                before = r.last_seq()
                body = {"messages": [_said(1)], **extra}
                resp = await r.http.post(url, json=body, headers=auth)
                out.append(
                    (resp.status_code, resp.json()["error"]["message"], r.last_seq() - before)
                )
            return out

    for status, message, appended in anyio.run(main):
        assert status == 422 and message.startswith("unknown field(s) 'withdraw")
        assert appended == 0


# --- ledgers whose withdrawal rows were rewritten by SQL ------------------------------

_TEMPLATE: dict[str, bytes] = {}


def _ledger(path: Path) -> dict[str, Any]:
    """A ledger of two sessions, the first with three withdrawn replies (written once,
    then copied); its second withdrawal row's payload, decoded."""
    if not _TEMPLATE:
        made = path.parent / "template.db"
        with deterministic_ledger(made) as ledger:
            svc = _service(ledger)

            async def build() -> None:
                sid = await svc.start_session(model="gpt-4.1", context_length=128_000)
                for i in range(3):
                    await svc.append(sid, [_said(i)])
                    reply = await svc.append(sid, [{"role": "assistant", "content": f"half {i}"}])
                    await svc.append(sid, [_said(10 + i)], withdraw=reply.message_ids)
                    await svc.append(sid, [{"role": "assistant", "content": f"whole {i}"}])
                other = await svc.start_session(model="gpt-4.1", context_length=128_000)
                await svc.append(other, [_said(99)])

            anyio.run(build)
        _TEMPLATE.update({s: Path(f"{made}{s}").read_bytes() for s in ("", ".head", ".lock")})
    for side, data in _TEMPLATE.items():
        Path(f"{path}{side}").write_bytes(data)
    with sqlite3.connect(path) as conn:
        rows = conn.execute(
            "SELECT seq, payload FROM events WHERE kind = 'ReplyWithdrawn' ORDER BY seq"
        ).fetchall()
    conn.close()
    seq, payload = rows[1]
    return {"seq": seq, **json.loads(payload)}


def _rewrite(path: Path, seq: int, payload: str) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE events SET payload = CAST(? AS BLOB) WHERE seq = ?", (payload, seq))
    conn.close()


def _edited(change: Callable[[dict[str, Any]], str]) -> Callable[[Path], tuple[int, str]]:
    def make(path: Path) -> tuple[int, str]:
        row = _ledger(path)
        seq = row.pop("seq")
        _rewrite(path, seq, change(row))
        return seq, row["session_id"]

    return make


def _with(**fields: Any) -> Callable[[dict[str, Any]], str]:
    return lambda row: json.dumps({**row, **fields})


def _raw_ids(text: str) -> Callable[[dict[str, Any]], str]:
    return lambda row: json.dumps({**row, "message_ids": []}).replace(
        '"message_ids": []', f'"message_ids": {text}'
    )


EDITS: dict[str, Callable[[Path], tuple[int, str]]] = {
    "unknown id": _edited(_with(message_ids=["msg_nobody"])),
    "no id": _edited(_with(message_ids=[])),
    "the same id twice": _edited(
        lambda row: json.dumps({**row, "message_ids": row["message_ids"] * 2})
    ),
    "the session's first message": _edited(_with(message_ids=["msg_00000003"])),
    "a hostile id": _edited(_with(message_ids=[HOSTILE])),
    "200,000 ids": _edited(_with(message_ids=[f"m{i}" for i in range(200_000)])),
    "an id of 2 MB": _edited(_with(message_ids=["m" * 2_000_000])),
    "ids as text": _edited(_with(message_ids="msg_1")),
    "ids nested 3,000 deep": _edited(_raw_ids("[" * 3_000 + "]" * 3_000)),
    "an id of 5,000 digits": _edited(_raw_ids("[" + "9" * 5_000 + "]")),
    "an unknown reason": _edited(_with(reason="\x1b[2J")),
    "an unknown session": _edited(_with(session_id="ses_nobody")),
    "no ids field": _edited(
        lambda row: json.dumps({k: v for k, v in row.items() if k != "message_ids"})
    ),
}

COMMANDS = [
    ["verify"],
    ["sessions"],
    ["show", "{sid}"],
    ["replay", "{sid}"],
    ["replay", "{sid}", "--verify"],
    ["replay", "{sid}", "--summarizer", "offline"],
]


@pytest.mark.parametrize("edit", sorted(EDITS))
def test_an_edited_withdrawal_row_is_a_clear_error_or_a_failed_verify(
    tmp_path: Path, edit: str
) -> None:
    db = tmp_path / "l.db"
    _, sid = EDITS[edit](db)
    runner = CliRunner()
    for command in COMMANDS:
        args = [a.format(sid=sid) for a in command]
        result = runner.invoke(cli, ["--db", str(db), *args])
        assert result.exception is None or isinstance(result.exception, SystemExit), (
            args,
            result.exception,
        )
        assert result.exit_code in (0, 1, 2), (args, result.output[-500:])
        assert "Traceback" not in result.output
        lines = result.output.splitlines()
        assert max(map(len, lines), default=0) < 3_000, (args, edit)  # (a note listed 200,000)
        assert not any(NOT_PRINTED_IN_LINE.search(line) for line in lines), args
        assert not any(line.startswith("FORGED") for line in lines), args
        if command == ["verify"]:
            assert result.exit_code == 1 and "FAILED at seq" in result.output


def test_a_note_names_a_long_withdrawal_short(tmp_path: Path) -> None:
    """The history's note on a withdrawal it cannot attach to an append (ids no message
    of the log has) names the first three ids and how many more."""
    db = tmp_path / "l.db"
    _, sid = EDITS["200,000 ids"](db)
    ledger = Ledger.open(db)
    (note,) = [n for n in history(ledger, sid).notes if "withdrawal" in n]
    ledger.close()
    assert note == (
        "the withdrawal of 'm0', 'm1', 'm2' and 199,997 more was not replayed (the replay keeps it)"
    )


def test_the_template_is_sound(tmp_path: Path) -> None:
    """(A guard: the unedited copy verifies and every command reads it.)"""
    db = tmp_path / "l.db"
    row = _ledger(db)
    for command in COMMANDS:
        args = [a.format(sid=row["session_id"]) for a in command]
        code, out = run_cli(db, *args)
        assert code == 0, (args, out[-500:])


def test_a_ledger_holding_a_lone_withdrawal_still_reads(tmp_path: Path) -> None:
    """Before session 44 a withdrawal could go in alone (an append with no message):
    such a ledger, written here past the append's check as an older writer did, verifies,
    shows, replays and what-ifs; the what-if notes the withdrawal it cannot replay and
    does not claim to reproduce the chain exactly."""
    db = tmp_path / "l.db"
    with deterministic_ledger(db) as ledger:
        svc = _service(ledger)
        sid, _ = _session(svc, turns=1)
        reply = ledger.transcript.session(sid).live[-1:]
        alone = ReplyWithdrawn(**ledger.event_fields(sid), message_ids=reply)
        ledger.store.append_many([AppendRequest(sid, [alone], ledger.version(sid))])
        ledger.refresh()
        anyio.run(lambda: svc.append(sid, [_said(1)]))
        assert not set(reply) & set(ledger.transcript.session(sid).live)
    note = f"the withdrawal of {reply[0]!r} was not replayed (the replay keeps it)"
    for command in COMMANDS:
        args = [a.format(sid=sid) for a in command]
        code, out = run_cli(db, *args)
        assert code == 0, (args, out[-500:])
        if "offline" in command:  # (its view keeps the reply: no claim of an exact replay)
            assert f"note: {note}" in out
            assert "exactly" not in out
            assert "differs: withdrawals not replayed: 1 (the what-if keeps" in out
