"""``verify`` checks the derived values (a cache outside the hash chain) and ``upgrade``
mends them (session 40, review 1 of derived2: MEDIUM-1, LOW-4)."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.ledger_helpers import run_cli as _cli
from helpers.pg_server import PgServer

from ctxledger.clock import SequentialIds, StepClock
from ctxledger.compressor import normalstore
from ctxledger.compressor.factstore import computed_value, encode_facts
from ctxledger.events import sha256_hex
from ctxledger.eventstore import open_store, readonly
from ctxledger.eventstore.derived import STORED_MIN_CHARS
from ctxledger.ledger import Ledger, anchor
from ctxledger.ledger.anchor import verify_file
from ctxledger.ledger.derived import Differing

_WORDS = ["Error", "file", "src/app7.py", "délta", "retry", "ValueError:", "bad"]


def _content(sep: str) -> str:
    return sep.join(_WORDS[i % len(_WORDS)] for i in range(STORED_MIN_CHARS // 5))


def _ledger(path: Path | str, sep: str) -> str:
    """A ledger holding one long user message joined by `sep`; returns its session."""
    ledger = Ledger.open(path, clock=StepClock(), ids=SequentialIds(), durability="normal")
    try:
        sid = ledger.start_session(model="m", context_length=200_000, system_prompt="x")
        message = {"role": "user", "content": _content(sep)}
        ledger.append_messages(sid, [message, {"role": "assistant", "content": "ok"}])
    finally:
        ledger.close()
    return sid


def _rows(path: Path) -> list[tuple[str, str, str, bytes]]:
    with sqlite3.connect(path) as conn:
        return sorted(conn.execute("SELECT ref, kind, version, value FROM derived"))


def _tamper(path: Path, where: str, value: bytes) -> int:
    with sqlite3.connect(path) as conn:
        return conn.execute(f"UPDATE derived SET value = ? WHERE {where}", (value,)).rowcount


def _check_found_and_mended(
    path: Path, kind_prefix: str, good: list[tuple[str, str, str, bytes]]
) -> None:
    tampered = _rows(path)
    assert _cli(path, "verify", "--json")[0] == 0  # (plain verify does not recompute)
    code, out = _cli(path, "verify", "--derived", "--json")
    report = json.loads(out)
    assert code == 1 and not report["ok"], out
    (ref,) = {row[0] for row in good}
    assert f"derived value '{kind_prefix}" in report["problem"] and ref in report["problem"]
    assert "ctxledger upgrade" in report["problem"]
    assert _rows(path) == tampered  # (verify is read-only)
    code, out = _cli(path, "verify", "--derived")
    assert code == 1 and "FAILED" in out and kind_prefix in out, out
    code, out = _cli(path, "upgrade", "--json")
    assert code == 0 and json.loads(out)["derived_values_replaced"] == 1, out
    assert _rows(path) == good
    code, out = _cli(path, "verify", "--derived", "--json")
    assert code == 0 and json.loads(out)["ok"], out


def test_verify_names_a_tampered_normal_value_and_upgrade_replaces_it(tmp_path: Path) -> None:
    """The reviewer's tampering: a double-spaced content (normal value 00) told as its own
    normal form (03) changed audit verdicts while verify said ok."""
    path = tmp_path / "n.db"
    _ledger(path, "  ")
    good = _rows(path)
    assert (b"\x00",) in {(row[3],) for row in good if row[1] == "normal"}
    assert _cli(path, "verify", "--derived", "--json")[0] == 0
    assert _tamper(path, "kind = 'normal'", b"\x03") == 1
    _check_found_and_mended(path, "normal", good)


def test_verify_names_tampered_facts_and_upgrade_replaces_them(tmp_path: Path) -> None:
    """Every facts value set to no facts at all (the reviewer's second tampering)."""
    path = tmp_path / "f.db"
    _ledger(path, " ")
    good = _rows(path)
    message = {"role": "user", "content": _content(" ")}
    assert computed_value(message) != encode_facts([])  # (the tampering changes something)
    assert _tamper(path, "kind LIKE 'facts/%'", encode_facts([])) == 1
    _check_found_and_mended(path, "facts/", good)


def test_upgrade_replaces_nothing_on_a_sound_ledger_and_says_nothing_of_it(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    _ledger(path, " ")
    code, out = _cli(path, "upgrade")
    assert code == 0 and out.strip() == "nothing to fill", out


def test_upgrade_skips_a_content_it_cannot_read_and_says_so(tmp_path: Path) -> None:
    """LOW-4: a damaged blob (verify reports it) no longer fails the upgrade: the contents
    that cannot be read are skipped and counted, the others' values stored."""
    path = tmp_path / "b.db"
    _ledger(path, " ")
    with sqlite3.connect(path) as conn:
        conn.execute("DROP TABLE derived")
        conn.execute("UPDATE blobs SET data = X'ff' || substr(data, 2)")
    code, out = _cli(path, "upgrade", "--json")
    assert code == 0, out
    assert json.loads(out) == {
        "message_heads_filled": 0,
        "derived_values_stored": 0,
        "derived_values_replaced": 0,
        "unreadable_contents_skipped": 1,
    }
    code, out = _cli(path, "upgrade")
    assert code == 0 and out.splitlines() == [
        "no message heads to fill",
        "skipped 1 log rows whose content could not be read (see verify)",
    ], out
    assert _cli(path, "verify")[0] == 1  # (the damage itself is verify's to report)


def test_on_postgresql_verify_names_a_tampered_value_and_upgrade_mends_it(
    pg_server: PgServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CTXLEDGER_INDEX_DIR", str(tmp_path / "indexes"))
    url = f"{pg_server.url}?schema=d_{hashlib.sha256(str(tmp_path).encode()).hexdigest()[:20]}"
    _ledger(url, "  ")
    ref, version = sha256_hex(_content("  ").encode("utf-8")), normalstore.normal_version()
    assert version is not None
    with open_store(url) as store:
        assert store.get_derived(ref, normalstore.KIND, version) == b"\x00"
        store.put_derived(ref, normalstore.KIND, version, b"\x03")
    assert _cli(url, "verify")[0] == 0  # (plain verify does not recompute)
    code, out = _cli(url, "verify", "--derived", "--json")
    assert code == 1 and "derived value 'normal'" in json.loads(out)["problem"], out
    code, out = _cli(url, "upgrade")
    assert code == 0, out
    assert out.splitlines() == [
        "no message heads to fill: a PostgreSQL ledger keeps no head columns",
        "replaced 1 derived values that differed from their recomputation",
    ]
    with open_store(url) as store:
        assert store.get_derived(ref, normalstore.KIND, version) == b"\x00"
    assert _cli(url, "verify", "--derived")[0] == 0


def test_plain_verify_does_not_recompute_and_a_writer_during_the_check_is_no_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Final review MEDIUM-1 (lead's decision): the recomputation is opt-in (its cost
    depends on the contents), and it runs after the lock-free read was found unchanged:
    a file that changes during a clean check still verifies."""
    path = tmp_path / "r.db"
    _ledger(path, " ")
    calls: list[int] = []

    def changing(store: object) -> Iterator[Differing]:
        calls.append(1)
        os.utime(path, ns=(1, 1))  # (a writer touched the file meanwhile)
        return iter(())

    monkeypatch.setattr(anchor, "differing_values", changing)
    assert verify_file(path, seal=False).ok and calls == []
    # (nothing writable: a lock-free immutable read, as of an archived ledger; root's
    # os.access says yes to everything)
    monkeypatch.setattr(readonly, "_writable", lambda path, mode=os.W_OK: False)
    assert verify_file(path, seal=False, derived=True).ok and calls == [1]
