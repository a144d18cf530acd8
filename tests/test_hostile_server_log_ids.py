"""The proxy's log lines name a session escaped, never raw.

Session ids are checked where they are recorded today (``check_name``: no control
character), but a ledger written before those checks, or edited by SQL, may hold one.
The proxy finds such a session itself (a branch of a family the client names, its
repeat, its next turn) and named it with a bare ``%s``: an ESC sequence, a bidi override
and a newline reached the operator's terminal, the newline forging a log line. Here a
branch's id is rewritten by SQL to hold them, and the proxy's log lines about it are
read with caplog.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from pathlib import Path
from typing import Any

import anyio
import pytest
from helpers.fake_upstream import Say
from helpers.server_rig import rig

from ctxledger.integers import NOT_PRINTED_IN_LINE

#: an SGR colour, a right-to-left override and a newline that would start a forged line
HOSTILE = "\x1b[31m\u202eX\nFORGED"
FAMILY = {"X-Ctxledger-Session": "fam"}


async def _turn(tmp_path: Path, messages: list[dict[str, Any]], *say: Say) -> int:
    async with rig(tmp_path) as r:
        r.upstream.queue(*say)
        body = {"model": "m", "messages": messages}
        resp = await r.http.post("/v1/chat/completions", json=body, headers=FAMILY)
        return resp.status_code


def _old_ledger(tmp_path: Path, suffix: str = HOSTILE) -> str:
    """The server's ledger holding family ``fam`` and a branch of it whose id (in the
    streams table and every payload naming it) is rewritten by SQL to end with `suffix`."""
    assert anyio.run(_turn, tmp_path, [{"role": "user", "content": "one"}]) == 200
    assert anyio.run(_turn, tmp_path, [{"role": "user", "content": "two"}]) == 200  # branch
    with sqlite3.connect(tmp_path / "server.db") as conn:
        (branch,) = [s for (s,) in conn.execute("SELECT stream FROM streams") if s != "fam"]
        hostile = branch + suffix
        conn.execute("UPDATE streams SET stream = ? WHERE stream = ?", (hostile, branch))
        conn.execute(
            "UPDATE events SET payload = CAST(replace(CAST(payload AS TEXT), ?, ?) AS BLOB)",
            (branch, json.dumps(hostile)[1:-1]),  # as JSON writes it: \u001b, \n
        )
        conn.execute("DELETE FROM checkpoints")  # (a projection cache: read the rows)
    conn.close()
    return hostile


def _lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "ctxledger.server"]


@pytest.mark.parametrize(
    ("messages", "say", "wanted"),
    [
        ([{"role": "user", "content": "two"}], (), "a repeated turn's reply is not recorded"),
        (
            [
                {"role": "user", "content": "two"},
                {"role": "assistant", "content": "answer 1"},  # (each rig its own upstream)
                {"role": "user", "content": "three"},
            ],
            (Say("  "),),
            "a reply empty is not recorded",
        ),
    ],
    ids=["repeat", "empty-reply"],
)
def test_a_stored_session_id_is_logged_escaped(
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    messages: list[dict[str, Any]],
    say: tuple[Say, ...],
    wanted: str,
) -> None:
    hostile = _old_ledger(tmp_path)
    with caplog.at_level(logging.INFO, logger="ctxledger.server"):
        assert anyio.run(_turn, tmp_path, messages, *say) == 200
    (line,) = [m for m in _lines(caplog) if wanted in m]
    shown = hostile.replace("\x1b", "\\x1b").replace("\u202e", "\\u202e").replace("\n", "\\n")
    assert line == f"session {shown}: {wanted}"
    assert not NOT_PRINTED_IN_LINE.search(line)


def test_a_stored_session_id_of_megabytes_is_logged_cut(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """An id no check of today lets in (5,000 characters) is cut in a log line as an
    error cuts it: its start and its end, and its length."""
    hostile = _old_ledger(tmp_path, HOSTILE + "y" * 5_000)
    with caplog.at_level(logging.INFO, logger="ctxledger.server"):
        assert anyio.run(_turn, tmp_path, [{"role": "user", "content": "two"}]) == 200
    (line,) = [m for m in _lines(caplog) if "a repeated turn's reply" in m]
    head = hostile[:40].replace("\x1b", "\\x1b").replace("\u202e", "\\u202e")
    head = head.replace("\n", "\\n")
    cut = f"{head}…{'y' * 24} ({len(hostile):,} characters)"
    assert line == f"session {cut}: a repeated turn's reply is not recorded"
