"""Session 39: a long message's facts stored at append time (derived values, issue 14).

The stored facts must equal a fresh extraction, be written wherever a long message is
appended (``Ledger.append``), be read by a what-if, and never be read once the code
that extracted them changed (the version's fingerprint of the extractor's sources).
"""

from __future__ import annotations

import shutil
import sqlite3
import sys
from pathlib import Path
from typing import Any

import anyio
import grimp
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxledger import OfflineSummarizer, compact, tokens
from ctxledger.analysis import factviews
from ctxledger.analysis.whatif import whatif
from ctxledger.clock import SequentialIds, StepClock
from ctxledger.compressor import facts as facts_module
from ctxledger.compressor import factstore
from ctxledger.compressor.facts import extract_facts
from ctxledger.compressor.markers import merge_lead
from ctxledger.errors import StoreError
from ctxledger.events import sha256_hex
from ctxledger.eventstore import SQLiteEventStore, fingerprints
from ctxledger.eventstore.contents import sharing_contents
from ctxledger.ledger import Ledger
from ctxledger.ledger.derived import store_derived
from ctxledger.tokens import DEFAULT_ENCODING, count_text

sys.path.insert(0, str(Path(__file__).parent.parent / "bench"))
import pathological_bench as bench

_LONG = factstore.STORED_MIN_CHARS


def _long_text(tail: str = "") -> str:
    line = "the build failed in src/app/main.py: ValueError: bad input; run `make test`\n"
    return (line * (_LONG // len(line) + 1)) + tail


def _ledger(path: Path) -> tuple[Ledger, str]:
    ledger = Ledger.open(path, clock=StepClock(), ids=SequentialIds(), durability="normal")
    sid = ledger.start_session(model="m", context_length=200_000, system_prompt="You code.")
    return ledger, sid


def _rows(path: Path) -> list[tuple[str, str, str]]:
    with sqlite3.connect(path) as conn:
        return conn.execute("SELECT ref, kind, version FROM derived").fetchall()


def _long_extractions(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """A counter of extractions of a message at least STORED_MIN_CHARS long."""
    calls = [0]
    real = facts_module._message_items

    def counting(message: Any) -> Any:
        content = message.get("content")
        if isinstance(content, str) and len(content) >= _LONG:
            calls[0] += 1
        return real(message)

    monkeypatch.setattr(facts_module, "_message_items", counting)
    return calls


# --------------------------------------------------------------------------- the version


def test_the_fingerprint_covers_the_extractors_real_import_graph() -> None:
    """The modules hashed are exactly the ones extraction imports (grimp, the import
    linter's graph, including imports inside functions): none missed, none extra."""
    graph = grimp.build_graph("ctxledger")
    upstream = graph.find_upstream_modules(factstore.ROOT) | {factstore.ROOT}
    assert set(factstore.imported_modules(factstore.ROOT)) == upstream
    assert "ctxledger.compressor.markers" in upstream  # (imported inside a function)
    tokens = graph.find_upstream_modules("ctxledger.tokens") | {"ctxledger.tokens"}
    assert set(fingerprints.imported_modules("ctxledger.tokens")) == tokens


def test_any_changed_source_byte_or_prompt_changes_the_fingerprint(tmp_path: Path) -> None:
    real = Path(factstore.__file__).parents[2]
    modules = factstore.imported_modules(factstore.ROOT)
    for name in modules:
        source = fingerprints.source_of(real, name)
        assert source is not None
        target = tmp_path / source.relative_to(real)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)
    for folder in factstore.DATA_DIRS:
        shutil.copytree(real / folder, tmp_path / folder)
    dirs = factstore.DATA_DIRS
    first = fingerprints.fingerprint_of(modules, tmp_path, dirs)
    assert first == fingerprints.fingerprint_of(modules, real, dirs) == factstore.fingerprint()
    letters = tmp_path / "ctxledger/compressor/factletters.py"
    letters.write_text(letters.read_text("utf-8") + "\n", "utf-8")
    second = fingerprints.fingerprint_of(modules, tmp_path, dirs)
    prompt = next((tmp_path / factstore.DATA_DIRS[0]).iterdir())
    prompt.write_text(prompt.read_text("utf-8") + ".", "utf-8")
    assert len({first, second, fingerprints.fingerprint_of(modules, tmp_path, dirs)}) == 3


# --------------------------------------------------------------------------- the value

_PIECES = st.sampled_from(
    [
        "src/app/main.py",
        "C:\\work\\x.log",
        "ValueError: bad input",
        "exit code 2",
        "https://example.com/a?b=1",
        "`make test`",
        "```py\nx = 1\n```",
        "you must keep tests green",
        "do not touch api/",
        "v1.2.3",
        "é",
        "\n",
        " ",
        "--",
    ]
)


@settings(max_examples=40, deadline=None)
@given(
    pieces=st.lists(st.one_of(_PIECES, st.text(max_size=12)), max_size=30),
    role=st.sampled_from(["user", "assistant", "tool", "system"]),
)
def test_facts_read_from_the_store_equal_a_fresh_extraction(pieces: list[str], role: str) -> None:
    message = {"role": role, "content": "".join(pieces)}
    store = SQLiteEventStore(":memory:")
    try:
        ref = sha256_hex(message["content"].encode("utf-8", "surrogatepass"))
        kind, version = factstore.facts_kind(message), factstore.facts_version()
        store.put_derived(ref, kind, version, factstore.computed_value(message))
        assert factstore.read_facts(message, ref, store.get_derived) == extract_facts([message])
        other = {**message, "name": "x"}  # another rest of the message: another kind
        assert factstore.read_facts(other, ref, store.get_derived) is None
    finally:
        store.close()


def test_a_damaged_value_is_not_read() -> None:
    assert factstore.decode_facts(b"\xc1 not msgpack", {"role": "user"}) is None
    assert factstore.decode_facts(b"\x91\x01", {"role": "user"}) is None


# --------------------------------------------------------------------------- write and read


def test_appending_a_long_message_stores_its_facts_a_short_one_nothing(tmp_path: Path) -> None:
    ledger, sid = _ledger(tmp_path / "l.db")
    ledger.append_messages(sid, [{"role": "user", "content": "short " * 1000}])
    assert _rows(tmp_path / "l.db") == []
    message = {"role": "user", "content": _long_text()}
    ledger.append_messages(sid, [message])
    ref = sha256_hex(message["content"].encode("utf-8"))
    expected = (ref, factstore.facts_kind(message), factstore.facts_version())
    counted = (ref, "count-after/" + DEFAULT_ENCODING, fingerprints.count_after_version())
    assert sorted(_rows(tmp_path / "l.db")) == sorted([expected, counted])
    value = ledger.store.get_derived(*expected)
    assert value is not None and factstore.decode_facts(value, message) == extract_facts([message])
    lead = merge_lead()[: merge_lead().index(" a ") + 2]
    assert fingerprints.decode_count_after(ledger.store.get_derived(*counted)) == (
        lead,
        count_text(message["content"] + lead),
    )
    ledger.append_messages(sid, [dict(message)])  # the same content again: kept, not redone
    assert len(_rows(tmp_path / "l.db")) == 2
    ledger.append_messages(sid, [{**message, "name": "n"}])  # another text than the content
    assert len(_rows(tmp_path / "l.db")) == 3  # (its facts only)
    ledger.close()


def test_a_failed_store_of_the_value_leaves_the_append_standing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger, sid = _ledger(tmp_path / "l.db")

    def refuse(*_: object) -> None:
        raise StoreError("disk full")

    monkeypatch.setattr(ledger.store, "put_derived", refuse)
    ledger.append_messages(sid, [{"role": "user", "content": _long_text()}])
    assert ledger.version(sid) == 3 and _rows(tmp_path / "l.db") == []
    assert store_derived(ledger.store, []) == 0
    ledger.close()


def _read_back_facts(path: Path, sid: str) -> list[Any]:
    """The facts of each message of `sid`, read as a what-if reads them (a fresh cache,
    contents shared with the ledger they were read from)."""
    factviews.FACTS.clear()
    ledger = Ledger.open(path, clock=StepClock(), ids=SequentialIds(), existing=True)
    try:
        with sharing_contents():
            history = [r.event for r in ledger.store.read_session(sid)]
            messages = [e.message for e in history if type(e).__name__ == "MessageAppended"]
            return [factviews.FACTS.facts(m) for m in messages]
    finally:
        ledger.close()
        factviews.FACTS.clear()


def test_stored_facts_are_read_and_a_changed_fingerprint_recomputes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "l.db"
    ledger, sid = _ledger(path)
    long_message = {"role": "user", "content": _long_text("see docs/readme.md")}
    ledger.append_messages(sid, [{"role": "user", "content": "hi"}, long_message])
    ledger.close()
    expected = [extract_facts([{"role": "user", "content": "hi"}]), extract_facts([long_message])]
    calls = _long_extractions(monkeypatch)
    assert _read_back_facts(path, sid) == expected and calls == [0]  # read, not extracted
    monkeypatch.setattr(factstore, "fingerprint", lambda: "another extractor")
    assert _read_back_facts(path, sid) == expected and calls == [1]  # stale: recomputed
    monkeypatch.undo()
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE derived SET value = x'c1'")
    calls = _long_extractions(monkeypatch)
    assert _read_back_facts(path, sid) == expected and calls == [1]  # damaged: recomputed


def _whatif_report(path: Path, sid: str) -> str:
    factviews.FACTS.clear()
    ledger = Ledger.open(path, clock=StepClock(), ids=SequentialIds(), existing=True)
    try:
        return repr(whatif(ledger, sid, summarizer=OfflineSummarizer()))
    finally:
        ledger.close()


def test_a_whatif_reads_the_stored_facts_and_reports_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "l.db"
    ledger, sid = _ledger(path)
    turns = [
        {"role": "user", "content": _long_text("fix src/app/main.py")},
        {"role": "assistant", "content": "Looking at src/app/main.py now."},
    ]
    ledger.append_messages(sid, turns * 2)
    ledger.close()
    calls = _long_extractions(monkeypatch)
    stored = _whatif_report(path, sid)
    assert calls == [0]  # the value was read (and copied into the scratch ledger)
    with sqlite3.connect(path) as conn:
        conn.execute("DELETE FROM derived")
    assert _whatif_report(path, sid) == stored and calls[0] >= 1


def test_a_ledger_without_the_table_opens_read_only_and_computes(tmp_path: Path) -> None:
    """A ledger written before migration 0003, opened read-only (it cannot be migrated
    there): opened, its values absent, its facts computed."""
    path = tmp_path / "old.db"
    ledger, sid = _ledger(path)
    ledger.append_messages(sid, [{"role": "user", "content": _long_text()}])
    ledger.close()
    with sqlite3.connect(path) as conn:
        conn.execute("DROP TABLE derived")
        conn.execute("DELETE FROM _migrations WHERE name = '0003_derived_values'")
    store = SQLiteEventStore(path, read_only=True)
    try:
        assert store.get_derived("ab" * 32, "facts/x", "v") is None
        assert store.verify().ok
    finally:
        store.close()
    ledger = Ledger.open(path, clock=StepClock(), ids=SequentialIds(), existing=True)
    assert _rows(path) == []  # migrated on a writable open; nothing computed by reading
    ledger.close()


# --------------------------------------------------------------------------- the merged count

_TEXT = st.text(alphabet=st.sampled_from(list("ab Z`~-.\n\t9é字'")), max_size=40)


@settings(max_examples=150, deadline=None)
@given(
    base=_TEXT.filter(bool),
    extension=st.one_of(st.just("\n\n--- a"), _TEXT.map(lambda t: t + "a")),
    suffix=_TEXT,
)
def test_a_stored_merged_count_counts_exactly(base: str, extension: str, suffix: str) -> None:
    """count_text_after from a remembered ``count(base + extension)`` equals a fresh
    count of any text extending ``base``: used only where a cut falls, else not used."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(tokens, "_LONG_TEXT", 1)
        with tokens.knowing_counts():
            counted = count_text(base + extension)
            tokens.remember_count_after(base, DEFAULT_ENCODING, extension, counted)
            for text in (base + extension + suffix, base + suffix):
                assert tokens.count_text_after(text, base) == count_text(text)


def test_no_merged_count_for_an_encoding_without_the_cut_pattern() -> None:
    assert tokens.cuts_apply(DEFAULT_ENCODING)
    assert not tokens.cuts_apply("no-such-encoding")


def test_a_whatif_reads_the_stored_merged_count(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The bench's message of two backtick runs has no cut near its end: without the
    stored count, each summary merged after it makes a cold what-if tokenize it again."""
    ledger, sid = bench._ledger(str(tmp_path), "l.db", bench.session("fence_runs", 0))
    anyio.run(compact, ledger, sid, OfflineSummarizer())
    long_counts = [0]
    real = tokens._encoding

    def counting(name: str) -> Any:
        enc = real(name)

        class Spy:
            _pat_str = enc._pat_str

            def encode_ordinary(self, text: str) -> list[int]:
                long_counts[0] += len(text) >= _LONG
                return enc.encode_ordinary(text)

            def __getattr__(self, name: str) -> Any:
                return getattr(enc, name)

        return Spy()

    def cold_whatif() -> str:
        bench._cold()
        return repr(whatif(ledger, sid, summarizer=OfflineSummarizer()))

    monkeypatch.setattr(tokens, "_encoding", counting)
    stored = cold_whatif()
    assert long_counts == [0]
    ledger.store._conn.execute("DELETE FROM derived WHERE kind LIKE 'count-after/%'")
    assert cold_whatif() == stored and long_counts[0] >= 1
    ledger.close()


def test_a_copy_of_a_checked_content_is_digested_without_hashing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A what-if's message piece is an equal copy of the content it read (cut out of the
    merged message): its fact-cache digest is the blob's ref, found by comparing."""
    data = _long_text().encode("utf-8")
    ref = sha256_hex(data)
    with sharing_contents() as shared:
        text = shared.text(ref, lambda _: data)
        copy = "".join(["", text[:10], text[10:]])
        assert copy == text and copy is not text

        def refuse(*_: object) -> None:
            raise AssertionError("hashed")

        monkeypatch.setattr(factviews.hashlib, "sha256", refuse)
        assert factviews.content_digest(copy).hex() == ref


def test_a_golden_ledger_of_main_reads_the_same_read_only_and_migrated(tmp_path: Path) -> None:
    """``golden/ledger_pre_sysrole.db`` (written by main before migration 0003): opened
    read-only as it is (not refused, nothing written) and migrated on a writable copy,
    it holds the same rows, verifies, and gives the same what-if report."""
    golden = Path(__file__).parent / "golden" / "ledger_pre_sysrole.db"
    path = tmp_path / "old.db"
    shutil.copyfile(golden, path)
    with sqlite3.connect(path) as conn:
        applied = [r[0] for r in conn.execute("SELECT name FROM _migrations")]
    assert "0003_derived_values" not in applied
    reports = []
    for read_only in (True, False):
        ledger = Ledger.open(path, clock=StepClock(), ids=SequentialIds(), read_only=read_only)
        try:
            records = list(ledger.store.read_all())
            assert ledger.store.verify().ok
            sid = records[0].event.session_id
            factviews.FACTS.clear()
            report = repr(whatif(ledger, sid, summarizer=OfflineSummarizer()))
            reports.append(([(r.seq, r.hash) for r in records], report))
        finally:
            ledger.close()
    assert reports[0] == reports[1]
    assert _rows(path) == []  # migrated (the table is there), nothing computed by reading
