"""The review of session 42's quote sweep, mended (``docs/notes/s42-hostile7.md``).

Ids a log holds are quoted whole (a user copies them; ``stem#2`` and ``stem#3`` must read
apart), a provider's excerpt whole, one set of characters is escaped by the library's
errors and the terminal alike (ordinary non-ASCII text prints as it is), and the small
ones: a config file's byte offset past a BOM, a backslash shown once, a URL's password
never shown, SQLite's own page cap, a metrics line edited in the middle refused.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import msgspec
import pytest

from ctxledger.analysis.refs import parse_ref
from ctxledger.compressor.config import _humanize, load_config
from ctxledger.compressor.settings import find_config_file
from ctxledger.errors import ContextOverflowError, InvalidConfig, InvalidEvent, InvalidInput
from ctxledger.events import SessionStarted
from ctxledger.eventstore.base import AppendRequest
from ctxledger.eventstore.postgres_url import check_postgres_url
from ctxledger.eventstore.sqlite import SQLiteEventStore
from ctxledger.inputfile import shown_path
from ctxledger.integers import ID_CHARS, escaped, printable, shown_id
from ctxledger.ledger.facade import Ledger
from ctxledger.limits import MAX_SESSION_ID_CHARS
from ctxledger.runtime.overflow import OverflowRecovery, ProviderErrorClass
from ctxledger.terminal import inline
from ctxledger.trajectories.batch import resume_state

#: a Codex-like session id: longer than any 40-character cut
LONG = "codex-" + "0123456789abcdef" * 4


# ------------------------------------------------------------ ids quoted whole (HIGH 1, MEDIUM 4)


def test_a_refused_ref_names_the_session_ids_it_starts_whole() -> None:
    ids = [f"me@{LONG}#2", f"me@{LONG}#3"]
    with pytest.raises(InvalidInput) as caught:
        parse_ref("me@codex", ids)
    text = str(caught.value)
    assert repr(ids[0]) in text and repr(ids[1]) in text, text


def test_an_ambiguous_ref_says_what_to_write_whole() -> None:
    ref = f"{LONG}@5"
    with pytest.raises(InvalidInput) as caught:
        parse_ref(ref, [LONG, ref], last_seq=42)
    text = str(caught.value)
    assert repr(f"{ref}@42") in text and repr(f"{LONG}@05") in text, text


def test_two_ids_differing_at_the_end_read_apart_in_an_append_error(tmp_path: Path) -> None:
    store = SQLiteEventStore(str(tmp_path / "l.db"))
    event = SessionStarted(
        event_id="evt_1", session_id=f"{LONG}#2", at=1.0, model="m", context_length=128_000
    )
    with pytest.raises(InvalidEvent) as caught:
        store.append_many([AppendRequest(f"{LONG}#3", [event], 0)])
    text = str(caught.value)
    assert repr(f"{LONG}#2") in text and repr(f"{LONG}#3") in text, text
    assert store.last_seq() == 0
    store.close()


def test_shown_id_is_whole_up_to_the_id_bound_and_keeps_both_ends_past_it() -> None:
    assert ID_CHARS == MAX_SESSION_ID_CHARS
    assert shown_id("a" * ID_CHARS) == repr("a" * ID_CHARS)
    long = "s" * 5_000 + "#2"
    text = shown_id(long)
    assert len(text) < 120 and "#2" in text and "5,002 characters" in text
    assert shown_id(5) == "5"


# ---------------------------------------------------------- a provider's excerpt (HIGH 2)


def test_the_providers_excerpt_is_quoted_whole() -> None:
    evidence = (
        "This model's maximum context length is 8192 tokens. However, your messages "
        "resulted in 12000 tokens > 2000"
    )
    cls = ProviderErrorClass(kind="prompt_too_long", evidence=evidence)
    recovery = OverflowRecovery(1)
    recovery.start_attempt(cls)
    with pytest.raises(ContextOverflowError) as caught:
        recovery.start_attempt(cls)
    assert f"('{evidence}')" in str(caught.value)


def test_the_providers_excerpt_is_escaped() -> None:
    cls = ProviderErrorClass(kind="prompt_too_long", evidence="too long\x1b[2J")
    recovery = OverflowRecovery(1)
    recovery.start_attempt(cls)
    with pytest.raises(ContextOverflowError) as caught:
        recovery.start_attempt(cls)
    assert "too long\\x1b[2J" in str(caught.value)


# ------------------------------------------------------------- one character set (MEDIUM 3)


@pytest.mark.parametrize(
    "name",
    [
        "レポート\u30002024.json",  # ideographic space
        "rapport\xa0final.json",  # no-break space
        "👨\u200d👩\u200d👧.json",  # zero-width joiners
        "flag\U000e0067\U000e0062.json",  # tag characters
        "ملف.json",
    ],
)
def test_ordinary_non_ascii_names_print_as_they_are(name: str, tmp_path: Path) -> None:
    """As on main: a path is shown as it is (U+3000 was written \\u3000)."""
    assert printable(name) == name == shown_path(name) == inline(name)
    with pytest.raises(InvalidConfig) as caught:
        load_config(tmp_path / name, env={})
    assert f"{tmp_path / name} does not exist" in str(caught.value)


def test_the_library_and_the_terminal_escape_the_same_characters() -> None:
    sample = [chr(c) for c in range(0x3100)] + [chr(c) for c in range(0xFE00, 0x10000)]
    sample += ["\U000e0001", "\U0001f600", "\U0010ffff"]
    for char in sample:
        assert printable(char) == inline(char), hex(ord(char))
    assert printable("a\x1bb\x9bc\x00\n\t\u202e\u200f\ud800") == (
        "a\\x1bb\\x9bc\\x00\\n\\t\\u202e\\u200f\\ud800"
    )


def test_a_character_past_the_bmp_is_escaped_with_eight_digits() -> None:
    assert escaped("\U000e0001") == "\\U000e0001"
    assert escaped("\u202e") == "\\u202e"
    assert escaped("\x1b") == "\\x1b"


# ------------------------------------------------------ target_text is path_text (MEDIUM 5)


@pytest.mark.parametrize("bad", ["l\x00.db", "l\ud800.db"])
def test_the_store_and_the_ledger_refuse_a_bad_path_in_the_same_words(
    bad: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InvalidInput) as by_ledger:
        Ledger.open(bad)
    with pytest.raises(InvalidInput) as by_store:
        SQLiteEventStore(bad)
    assert str(by_ledger.value) == str(by_store.value)
    assert "which no file name can" in str(by_store.value)
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------------------------------------------ the LOWs


def test_a_bad_byte_in_a_file_with_a_bom_is_at_its_own_offset(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_bytes(b"\xef\xbb\xbfthreshold = 0.5\n\xff\n")
    with pytest.raises(InvalidConfig) as caught:
        load_config(path, env={})
    assert "the byte 0xff at offset 19" in str(caught.value)
    assert path.read_bytes()[19] == 0xFF


def test_the_config_variable_shows_a_backslash_once(tmp_path: Path) -> None:
    named = str(tmp_path / "a\\b.toml")
    with pytest.raises(InvalidConfig) as caught:
        find_config_file(env={"CTXLEDGER_CONFIG": named}, cwd=tmp_path)
    assert f"CTXLEDGER_CONFIG={named}: no such config file" in str(caught.value)


def test_a_url_that_is_not_postgresql_is_named_without_its_password() -> None:
    with pytest.raises(InvalidInput) as caught:
        check_postgres_url("mysql://u:hunter2@db.example/x?key=s3cret")
    text = str(caught.value)
    assert "hunter2" not in text and "s3cret" not in text and "db.example" in text
    with pytest.raises(InvalidInput, match="a PostgreSQL URL is text, got int"):
        check_postgres_url(5)  # type: ignore[arg-type]


def test_the_page_cap_is_sqlites_own() -> None:
    SQLiteEventStore(":memory:", max_page_count=4_294_967_294).close()
    with pytest.raises(InvalidConfig, match="from 1 to 4,294,967,294"):
        SQLiteEventStore(":memory:", max_page_count=4_294_967_295)


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_metrics_line_edited_in_the_middle_is_refused_and_nothing_trimmed(
    tmp_path: Path,
) -> None:
    out, metrics = tmp_path / "out.jsonl", tmp_path / "out.metrics.jsonl"
    out.write_bytes(b'{"k": 1}\n{"k": 2}\n{"k": 3}\n')
    metrics.write_bytes(b'{"key": "a"}\nnot json\n{"key": "c"}\n')
    before = (_digest(out), _digest(metrics))
    with pytest.raises(InvalidInput, match=r"out\.metrics\.jsonl:2 is not JSON"):
        resume_state(out, metrics)
    assert (_digest(out), _digest(metrics)) == before


def test_a_torn_last_line_is_still_dropped(tmp_path: Path) -> None:
    out, metrics = tmp_path / "out.jsonl", tmp_path / "out.metrics.jsonl"
    out.write_bytes(b'{"k": 1}\n{"k": 2}\n')
    metrics.write_bytes(b'{"key": "a"}\n{"key": "b"}\n{"ke')
    assert [m.key for m in resume_state(out, metrics)] == ["a", "b"]
    metrics.write_bytes(b'{"key": "a"}\n{"ke\n')
    assert [m.key for m in resume_state(out, metrics)] == ["a"]
    assert out.read_bytes() == b'{"k": 1}\n'


def test_a_cut_config_key_says_it_was_cut() -> None:
    exc = msgspec.ValidationError("Expected `int`, got `str` - at `$." + "k" * 150 + "`")
    text = _humanize(exc)
    assert text.startswith("k" * 100 + "… (cut): Expected `int`"), text


@pytest.mark.parametrize("window", [10**9 + 1, 10**400])
def test_a_window_past_the_context_limit_is_refused_by_name(window: int) -> None:
    # a 400-digit window overflowed the threshold's float product (OverflowError)
    from ctxledger.compressor.config import CompressionConfig
    from ctxledger.compressor.planner import plan

    with pytest.raises(InvalidConfig, match="up to 1,000,000,000") as caught:
        plan([{"role": "user", "content": "x"}], CompressionConfig(), [1], context_length=window)
    assert len(str(caught.value)) < 300


@pytest.mark.parametrize(
    "version", [2**63, 10**2_000, 10**6_000], ids=["2^63", "2,001 digits", "6,001 digits"]
)
def test_an_expected_version_past_the_stores_range_is_refused_short(version: int) -> None:
    """Session 44 (found by ``test_hostile_quotes``' property): the service compared a
    2,000-digit expected version with the session's and raised ConcurrencyError quoting
    it whole (2,109 characters); past 4,300 digits its message could not be written."""
    import anyio
    from helpers.ledger_helpers import deterministic_ledger

    from ctxledger.runtime.service import ContextService

    ledger = deterministic_ledger()
    service = ContextService(ledger, config=ledger.config)
    sid = ledger.start_session(model="m")
    before = ledger.store.last_seq()
    with pytest.raises(InvalidInput, match=r"^expected_version is out of range: more than 9,22"):
        anyio.run(
            lambda: service.append(
                sid, [{"role": "user", "content": "x"}], expected_version=version
            )
        )
    assert ledger.store.last_seq() == before
    ledger.close()
