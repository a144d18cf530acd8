"""Session 40: a long content's normal forms stored at append time, and the append
hashing a long content once (derived values, issue 14)."""

from __future__ import annotations

import codecs
import hashlib
import json
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import grimp
import pytest
from helpers.ledger_helpers import run_cli as _cli
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxledger import CompressionConfig, OfflineSummarizer, compact
from ctxledger.analysis import factviews
from ctxledger.analysis.audit import audit_chain
from ctxledger.analysis.whatif import whatif
from ctxledger.clock import SequentialIds, StepClock
from ctxledger.compressor import factmatch, factnormal, factstore, normalstore
from ctxledger.compressor import facts as facts_module
from ctxledger.compressor.factmatch import Haystack, normalize, normalize_cased
from ctxledger.events import MessageAppended, sha256_hex
from ctxledger.eventstore import contents, fingerprints
from ctxledger.eventstore.base import AppendRequest
from ctxledger.eventstore.derived import STORED_MIN_CHARS
from ctxledger.ledger import Ledger

_LONG = STORED_MIN_CHARS

_PIECES = st.sampled_from(
    ["a", "Word", " ", "  ", "\n", "\t", "é", "ß", "ﬁ", "¹", "\\", "\u201c", "\xa0", "¨", "x.py",
     # NUL, CR (alone and before a newline), lone surrogates, combining marks (review)
     "\x00", "\r", "\r\n", "\ud800", "\udc00", "e\u0301", "\u0301", "\u0345", "İ", "Σ"]
)  # fmt: skip


@contextmanager
def _pieces_of(size: int) -> Iterator[None]:
    """normalize_cased's long-text path for texts longer than `size` (tests lower it)."""
    before = factnormal._PIECE
    factnormal._PIECE = size
    try:
        yield
    finally:
        factnormal._PIECE = before


@settings(max_examples=200, deadline=None)
@given(st.lists(_PIECES, max_size=40).map("".join))
def test_stored_normal_forms_are_the_forms_made(text: str) -> None:
    """Whatever a stored value tells is what normalizing makes (long and short paths),
    and a haystack given those forms is the one made without them."""
    for size in (4, 1 << 30):
        with _pieces_of(size):
            value = normalstore.computed_value(text)
            forms = normalstore.forms_of(text, value)
            made = (normalize_cased(text), normalize(text))
            assert forms is None or forms == made
            hay = Haystack(text, forms)
            assert (hay.cased, hay.folded) == made
            if text.isascii() and text == made[0]:  # (an ASCII text in its form is told so)
                assert value[0] & normalstore.CASED_IS_TEXT


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from([" ", "a", "é", "Ø", "ß", "\xdc", "\u0100", "\u2020", "\ud800"])).map(
        "".join
    ),
    st.integers(1, 40),
)
def test_a_double_space_is_found_as_a_search_finds_it(text: str, block: int) -> None:
    """The latin-1 blocks read as UTF-16 units (0xd8-0xdf bytes make surrogates) and
    the rest searched as it is agree with ``"  " in text``, across block edges."""
    assert factnormal.has_double_space(text, block) == ("  " in text)


def test_a_text_not_latin1_early_is_searched_as_it_is(monkeypatch: pytest.MonkeyPatch) -> None:
    """Review LOW-5: once a block is not latin-1 the rest is one plain search (no block
    of it is encoded and read as UTF-16), and the first block is a 16th of the size, so
    a wide text wastes little encoding before it."""
    decoded: list[int] = []
    real = codecs.utf_16_le_decode

    def counting(data: Any, *args: Any) -> Any:
        decoded.append(len(data))
        return real(data, *args)

    monkeypatch.setattr(codecs, "utf_16_le_decode", counting)
    block = 1 << 12
    words = _words(8 * block // 5)
    assert not factnormal.has_double_space("€" + words, block)
    assert decoded == []
    assert factnormal.has_double_space(words + "€  ", block)
    assert decoded and max(decoded[:2]) <= block // 16 + 1


def test_the_forms_version_covers_the_matching_codes_real_import_graph() -> None:
    graph = grimp.build_graph("ctxledger")
    upstream = graph.find_upstream_modules(normalstore.ROOT) | {normalstore.ROOT}
    assert set(fingerprints.imported_modules(normalstore.ROOT)) == upstream
    assert normalstore.normal_version() is not None


def test_each_version_roots_at_the_module_that_computes_the_stored_value() -> None:
    """Review LOW-1: the fingerprint starts at the module whose code makes and reads the
    value (its bit layout, its encoding), so an edit there changes the version too; its
    graph holds the matching and extraction code."""
    assert (
        normalstore.ROOT
        == normalstore.computed_value.__module__
        == "ctxledger.compressor.normalstore"
    )
    assert factstore.ROOT == factstore.computed_value.__module__ == "ctxledger.compressor.factstore"
    assert "ctxledger.compressor.factnormal" in fingerprints.imported_modules(normalstore.ROOT)
    assert "ctxledger.compressor.facts" in fingerprints.imported_modules(factstore.ROOT)


def test_a_single_spaced_text_is_its_own_form_and_a_damaged_value_tells_nothing() -> None:
    text = "error file src/app.py delta é " * 10
    text = text.strip()
    assert normalstore.computed_value(text) == b"\x03"
    assert normalstore.computed_value(text.title()) == b"\x01"  # (folding changes it)
    assert normalstore.computed_value(text + "\n") == b"\x00"
    assert normalstore.forms_of(text, b"\x03") == (text, text)
    assert normalstore.forms_of(text.title(), b"\x01") == (text.title(), text)
    for damaged in (b"", b"\x00", b"\x02", b"\x07", b"\x03\x03"):
        assert normalstore.forms_of(text, damaged) is None


# --------------------------------------------------------------------------- a what-if


def _words(n: int) -> str:
    """A long content of single-spaced words (its own normal form)."""
    words = ["error", "file", "src/app.py", "delta", "token", "retry", "é"]
    return " ".join(words[(i * 7 + i // 3) % len(words)] for i in range(n))


def _whatif_report(path: Path, sid: str) -> str:
    factviews.FACTS.clear()
    factmatch.LONG_HAYSTACKS.clear()
    ledger = Ledger.open(path, clock=StepClock(), ids=SequentialIds(), existing=True)
    try:
        return repr(whatif(ledger, sid, summarizer=OfflineSummarizer()))
    finally:
        ledger.close()


def _long_normalizations(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls = [0]
    real = factmatch.normalize

    def counting(text: str) -> str:
        calls[0] += len(text) >= _LONG
        return real(text)

    monkeypatch.setattr(factmatch, "normalize", counting)
    return calls


def test_a_whatif_reads_the_stored_forms_and_reports_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "l.db"
    ledger = Ledger.open(path, clock=StepClock(), ids=SequentialIds(), durability="normal")
    sid = ledger.start_session(model="m", context_length=200_000, system_prompt="You code.")
    big = _words(_LONG // 5)
    assert len(big) >= _LONG and normalstore.computed_value(big) == b"\x03"
    turns: list[dict[str, Any]] = [
        {"role": "user", "content": "fix src/app.py: error in delta"},
        {"role": "assistant", "content": "Looking at src/app.py."},
        {"role": "user", "content": big},
        {"role": "assistant", "content": "noted"},
    ]
    ledger.append_messages(sid, turns * 2)
    ledger.close()
    calls = _long_normalizations(monkeypatch)
    stored = _whatif_report(path, sid)
    assert calls == [0]  # the forms were read, not made
    with sqlite3.connect(path) as conn:
        conn.execute("DELETE FROM derived WHERE kind = 'normal'")
    assert _whatif_report(path, sid) == stored and calls[0] >= 1


# --------------------------------------------------------------------------- the append


def test_an_append_hashes_a_long_content_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The derived values take the ref the append's blob was stored under: one sha256 of
    the long content in the whole append, wherever it would be made (review LOW-3)."""
    ledger = Ledger.open(tmp_path / "l.db", clock=StepClock(), ids=SequentialIds())
    sid = ledger.start_session(model="m", context_length=200_000, system_prompt="x")
    hashed: list[int] = []
    real = hashlib.sha256

    def counting(data: bytes = b"", **kwargs: Any) -> Any:
        hashed.append(len(data))
        return real(data, **kwargs)

    monkeypatch.setattr(hashlib, "sha256", counting)
    message = {"role": "user", "content": _words(_LONG // 5) + "\n"}
    ledger.append_messages(sid, [message])
    monkeypatch.undo()
    ref = sha256_hex(message["content"].encode("utf-8"))
    assert [n for n in hashed if n >= _LONG] == [len(message["content"].encode("utf-8"))]
    assert ledger.store.get_derived(ref, normalstore.KIND, normalstore.normal_version()) == b"\x00"
    assert contents.hashed_ref(message["content"]) is None  # (taken: nothing kept)
    ledger.close()


def test_a_hashed_ref_is_taken_once_and_only_for_that_very_string() -> None:
    text = _words(_LONG // 5)
    with contents.remembering_hashes():
        assert contents.hashed_ref(text) is None
        copy = "".join([text[:10], text[10:]])
        hashed = contents._HASHED.get()
        assert hashed is not None
        hashed[id(text)] = (text, "r")
        assert contents.hashed_ref(copy) is None and contents.hashed_ref(text) == "r"
        assert contents.hashed_ref(text) is None


def test_no_content_is_held_after_an_append_or_a_direct_store_append(tmp_path: Path) -> None:
    """Review LOW-2: the refs are remembered only inside ``Ledger.append`` (for the values
    it stores after its commit); a store appended to directly remembers none, and
    nothing is left behind by either."""
    ledger = Ledger.open(tmp_path / "l.db", clock=StepClock(), ids=SequentialIds())
    sid = ledger.start_session(model="m", context_length=200_000, system_prompt="x")
    message = {"role": "user", "content": _words(_LONG // 5)}
    ledger.append_messages(sid, [message])
    assert contents._HASHED.get() is None

    def direct(n: int) -> str:  # (a message appended by the store alone; its content)
        fields = ledger.event_fields(sid)
        event = MessageAppended(
            **fields, message_id=f"direct-{n}", message=dict(message), tokens=1, encoding="x"
        )
        version = ledger.store.stream_version(sid)
        ledger.store.append_many(
            [AppendRequest(stream=sid, expected_version=version, events=[event])]
        )
        return str(event.message["content"])

    direct(1)
    assert contents._HASHED.get() is None
    with contents.remembering_hashes():
        held = contents._HASHED.get()
        content = direct(2)
        assert held is not None and [text for text, _ref in held.values()] == [content]
    assert contents._HASHED.get() is None
    ledger.close()


# --------------------------------------------------------------------------- ``ctxledger audit``


def _long_extractions(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls = [0]
    real = facts_module._message_items

    def counting(message: Any) -> Any:
        content = message.get("content")
        calls[0] += isinstance(content, str) and len(content) >= _LONG
        return real(message)

    monkeypatch.setattr(facts_module, "_message_items", counting)
    return calls


def _audit(path: Path, sid: str) -> str:
    factviews.FACTS.clear()
    factmatch.LONG_HAYSTACKS.clear()
    ledger = Ledger.open(path, clock=StepClock(), ids=SequentialIds(), existing=True)
    try:
        return repr(audit_chain(ledger, sid))
    finally:
        ledger.close()


def test_an_audit_outside_a_whatif_reads_the_stored_values(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``ctxledger audit`` reads the audited ledger's stored facts and forms (the same
    computation as a what-if's), and reports the same without them."""
    path = tmp_path / "l.db"
    config = CompressionConfig(context_length=16_000)
    ledger = Ledger.open(path, clock=StepClock(), ids=SequentialIds(), config=config)
    sid = ledger.start_session(model="m", context_length=16_000, system_prompt="You code.")
    turns: list[dict[str, Any]] = [
        {"role": "user", "content": f"fix src/app{i}.py: error in delta {i}"} for i in range(30)
    ]
    turns[10:10] = [
        {"role": "user", "content": _words(_LONG // 5)},
        {"role": "assistant", "content": "ok"},
    ]
    ledger.append_messages(sid, turns)
    anyio.run(compact, ledger, sid, OfflineSummarizer())
    ledger.close()
    extractions, normalizations = _long_extractions(monkeypatch), _long_normalizations(monkeypatch)
    stored = _audit(path, sid)
    assert "compaction" in stored and extractions == [0] and normalizations == [0]
    with sqlite3.connect(path) as conn:
        conn.execute("DELETE FROM derived")
    assert _audit(path, sid) == stored and extractions[0] >= 1 and normalizations[0] >= 1


# --------------------------------------------------------------------------- ``ctxledger upgrade``


def test_upgrade_stores_the_values_of_long_messages_already_in_the_log(tmp_path: Path) -> None:
    """A ledger whose long messages have no values (appended before session 39): a read
    command stores none, ``ctxledger upgrade`` stores each kind once, the log unchanged."""
    path = tmp_path / "l.db"
    ledger = Ledger.open(path, clock=StepClock(), ids=SequentialIds(), durability="normal")
    sid = ledger.start_session(model="m", context_length=200_000, system_prompt="x")
    big = {"role": "user", "content": _words(_LONG // 5)}
    ledger.append_messages(sid, [big, {"role": "assistant", "content": "ok"}, dict(big)])
    with sqlite3.connect(path) as conn:
        expected = sorted(conn.execute("SELECT ref, kind, version, value FROM derived"))
        conn.execute("DROP TABLE derived")
    ledger.close()
    head = _cli(path, "verify", "--json")[1]
    for read in (("audit", sid), ("replay", sid, "--summarizer", "offline")):
        assert _cli(path, *read)[0] == 0
    with sqlite3.connect(path) as conn:  # (a read command wrote nothing)
        assert not conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'derived'").fetchone()
    code, out = _cli(path, "upgrade", "--json")
    assert code == 0 and json.loads(out) == {
        "message_heads_filled": 0,
        "derived_values_stored": 3,
        "derived_values_replaced": 0,
        "unreadable_contents_skipped": 0,
    }
    with sqlite3.connect(path) as conn:
        assert sorted(conn.execute("SELECT ref, kind, version, value FROM derived")) == expected
    code, out = _cli(path, "upgrade")
    assert code == 0 and out.strip() == "nothing to fill", out
    assert _cli(path, "verify", "--json")[1] == head
