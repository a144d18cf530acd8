"""A what-if reuses a recorded token count only from a row its append's seal still covers.

Inside a what-if a long message's recorded count stands in for tokenizing it again
(``tokens.knowing_counts``). The count sits in the row's payload beside the ref of
the content's blob; the blob is checked against its sha256 ref when read, and the row
against its append's seal (row digests and sha256 link, as ``verify`` checks them,
``EventStore.sealed``) when the count is first asked for. An edited row is counted
again, so the what-if's side of the report is the one an intact log gives.
"""

from __future__ import annotations

import random
import sqlite3
import zlib
from pathlib import Path
from typing import Any

import pytest
from helpers.ledger_helpers import compact_now, deterministic_ledger
from test_whatif_shared_reads import counting_long_texts

from ctxledger import tokens
from ctxledger.analysis.whatif import WhatIfReport, whatif
from ctxledger.compressor.config import CompressionConfig
from ctxledger.events import MessageAppended
from ctxledger.eventstore.base import AppendRequest
from ctxledger.eventstore.sqlite import SQLiteEventStore
from ctxledger.ledger.facade import Ledger

WINDOW = CompressionConfig(context_length=16_000, threshold_floor_tokens=0)
_WORDS = ["alpha", "beta", "file", "test", "error", "src/app.py", "retry", "token"]


def _messages() -> list[dict[str, Any]]:
    rng = random.Random(7)
    out: list[dict[str, Any]] = [{"role": "user", "content": "fix it " + " ".join(_WORDS)}]
    for call in range(1, 21):
        out.append({"role": "assistant", "content": " ".join(rng.choices(_WORDS, k=15))})
        out.append({"role": "user", "content": " ".join(rng.choices(_WORDS, k=60))})
        if call == 10:  # one long user message (a blob: >= 64 KB), ~20k tokens
            big = " ".join(rng.choices(_WORDS, k=20_000))[:80_000]
            out += [{"role": "user", "content": big}, {"role": "assistant", "content": "ok"}]
    return out


def _recorded(path: Path) -> tuple[Ledger, str]:
    ledger = deterministic_ledger(path, config=WINDOW)
    sid = ledger.start_session(model="m", context_length=16_000, system_prompt="You code.")
    ledger.append_messages(sid, _messages())
    compact_now(ledger, sid)
    return ledger, sid


def _big_row(path: Path) -> tuple[int, bytes, str]:
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT seq, payload, hash FROM events ORDER BY seq").fetchall()
    for seq, payload, stored_hash in rows:
        if b'"content_ref":"' in bytes(payload):
            return seq, bytes(payload), stored_hash
    raise AssertionError("no message kept as a blob")


def _edit_count(path: Path, *, fix_digest: bool) -> int:
    """Raise the long message's recorded count by 5,000 in its payload (and, with
    `fix_digest`, recompute the row's own crc digest so only the append's link differs)."""
    seq, payload, stored_hash = _big_row(path)
    head, sep, rest = payload.partition(b'"tokens":')
    digits = rest[: len(rest) - len(rest.lstrip(b"0123456789"))]
    edited = head + sep + str(int(digits) + 5000).encode() + rest[len(digits) :]
    new_hash = stored_hash
    if fix_digest:
        _, colon, link = stored_hash.partition(":")
        new_hash = f"{zlib.crc32(edited)}{colon}{link}"
    with sqlite3.connect(path) as conn:
        conn.execute(
            "UPDATE events SET payload = ?, hash = ? WHERE seq = ?", (edited, new_hash, seq)
        )
    return int(digits)


def _whatif_side(report: WhatIfReport) -> tuple[object, ...]:
    return (report.whatif, [t.whatif for t in report.turns], report.reproduction)


@pytest.mark.parametrize("fix_digest", [False, True], ids=["payload", "payload+digest"])
def test_an_edited_count_is_not_reused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fix_digest: bool
) -> None:
    intact, sid = _recorded(tmp_path / "intact.db")
    expected = whatif(intact, sid)
    intact.close()
    path = tmp_path / "edited.db"
    _recorded(path)[0].close()
    recorded_count = _edit_count(path, fix_digest=fix_digest)
    edited = Ledger.open(path, config=WINDOW)
    assert not edited.store.verify().ok
    big = _messages()[21]["content"]
    assert recorded_count == tokens.count_message({"role": "user", "content": big})
    counted = counting_long_texts(monkeypatch)
    report = whatif(edited, sid)
    assert big in counted  # the edited row's count was not used: the text was counted
    assert _whatif_side(report)[:2] == _whatif_side(expected)[:2]
    # had the edited count been trusted, the what-if's side would have moved with it
    monkeypatch.setattr(SQLiteEventStore, "sealed", lambda self, seq: True)
    trusting = whatif(edited, sid)
    assert _whatif_side(trusting)[:2] != _whatif_side(expected)[:2]
    edited.close()


def test_an_intact_row_is_reused_without_counting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger, sid = _recorded(tmp_path / "r.db")
    expected = whatif(ledger, sid)
    counted = counting_long_texts(monkeypatch)
    checked: list[int] = []
    real = SQLiteEventStore.sealed

    def sealed(self: SQLiteEventStore, seq: int) -> bool:
        checked.append(seq)
        return real(self, seq)

    monkeypatch.setattr(SQLiteEventStore, "sealed", sealed)
    report = whatif(ledger, sid)
    big = _messages()[21]["content"]
    assert big not in counted
    assert len(checked) == 1  # asked once, when the count was first needed
    assert report == expected
    ledger.close()


def _event(n: int, stream: str = "s1") -> MessageAppended:
    return MessageAppended(
        event_id=f"e{n}",
        session_id=stream,
        at=0.0,
        message_id=f"m{n}",
        message={"role": "user", "content": f"hello {n}"},
        tokens=6,
        encoding=tokens.DEFAULT_ENCODING,
    )


def _rewrite_payload(path: Path, seq: int) -> None:
    with sqlite3.connect(path) as conn:
        (payload,) = conn.execute("SELECT payload FROM events WHERE seq = ?", (seq,)).fetchone()
        edited = bytes(payload).replace(b"hello", b"HELLO")
        conn.execute("UPDATE events SET payload = ? WHERE seq = ?", (edited, seq))


@pytest.mark.parametrize("chain", ["linked", "per_event"])
def test_sealed_checks_the_append_holding_the_row(tmp_path: Path, chain: str) -> None:
    path = tmp_path / "s.db"
    store = SQLiteEventStore(path)
    # appends of 3, 150 (longer than the first look-back) and 2 events, another stream between
    store.append_many([AppendRequest("s1", [_event(n) for n in range(1, 4)], 0, chain)])  # type: ignore[arg-type]
    store.append_many([AppendRequest("s2", [_event(1000, "s2")], 0, chain)])  # type: ignore[arg-type]
    store.append_many([AppendRequest("s1", [_event(n) for n in range(4, 154)], 3, chain)])  # type: ignore[arg-type]
    store.append_many([AppendRequest("s1", [_event(n) for n in range(154, 156)], 153, chain)])  # type: ignore[arg-type]
    last = store.last_seq()
    assert all(store.sealed(seq) for seq in range(1, last + 1))
    store.close()
    _rewrite_payload(path, 100)  # inside the long append
    store = SQLiteEventStore(path)
    intact = {1, 2, 3, 4, last - 1, last}
    assert {seq for seq in range(1, last + 1) if store.sealed(seq)} == (
        intact if chain == "linked" else set(range(1, last + 1)) - {100}
    )
    assert not store.sealed(last + 1)  # no such row
    store.close()
    assert not store.sealed(1)  # a closed store: not trusted (and no error)
