"""An error quotes a caller's value short and as plain text (session 42).

About 230 error messages quoted a value with ``!r``: a 2 MB session id, role, limit,
durability or reference made a 2 MB message, and an object whose own ``repr`` holds
terminal control bytes put them into the message as they were. Every quote that can
see a caller's or a file's value goes through ``integers.shown`` (a string cut at 40
characters, a container three levels deep, a character a terminal acts on escaped);
paths through ``inputfile.shown_path``. The property drives a drawn hostile value into
one of many public entry points: a named error, under 600 characters, printable, and
nothing appended.

Also here (session 41's "left" list): ``diff`` of a reference that is no text,
``SQLiteEventStore`` given a NUL, a lone surrogate or a number, ``load_config`` of a
number, ``RecordedSummarizer`` / ``LLMSummarizer`` of values of the wrong type: each
refused by name, not with Python's own TypeError / ValueError / AttributeError.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers.ledger_helpers import ledger_with_one_call
from hypothesis import given
from hypothesis import strategies as st

from ctxledger import (
    CompressionConfig,
    ContextService,
    CtxLedgerError,
    InvalidConfig,
    InvalidInput,
    Ledger,
    LLMSummarizer,
    OfflineSummarizer,
    RecordedSummarizer,
    SessionSpec,
    SQLiteEventStore,
    audit_chain,
    audit_compaction,
    compact,
    diff,
    expand,
    handle_tool_call,
    load_config,
    normalize_usage,
    plan,
    recall,
    trace,
    undo,
    whatif,
)
from ctxledger.integers import NOT_PRINTED_IN_LINE, printable, shown

MAX_MESSAGE = 600


class _Loud:
    """An object whose own ``repr`` is long and holds terminal control bytes."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text

    __str__ = __repr__


def _plain(text: str) -> bool:
    """No character the terminal would escape on one line (the one set, in integers)."""
    return NOT_PRINTED_IN_LINE.search(text) is None


@st.composite
def _hostile(draw: st.DrawFn) -> Any:
    """A long text, a text of control characters, an object whose repr is loud, a long
    list or a huge int (each sized so a quote of it whole is far over the limit)."""
    control = draw(
        st.text(st.characters(categories=["Cc", "Cf", "Zl", "Zp"]), min_size=1, max_size=8)
    )
    size = draw(st.sampled_from([41, 2_000, 200_000, 2_000_000]))
    kind = draw(st.sampled_from(["long", "control", "long control", "loud", "list", "int"]))
    if kind == "long":
        return draw(st.sampled_from("ab7 _")) * size
    if kind == "control":
        return control
    if kind == "long control":
        return (control * (size // len(control) + 1))[:size]
    if kind == "loud":
        return _Loud(control + "x" * size)
    if kind == "list":
        return [control] * (size // 10)
    return 10 ** (size // 100) + 1


def _svc(led: Ledger) -> ContextService:
    return ContextService(led, summarizer=OfflineSummarizer())


def _run(coro: Any) -> Any:
    return asyncio.run(coro)


#: (name, call) for one drawn value `v` in one argument of a public entry point
_CALLS: list[tuple[str, Callable[[Ledger, str, Any], Any]]] = [
    ("resolve", lambda led, s, v: led.resolve(v)),
    ("tip", lambda led, s, v: led.tip(v)),
    ("pin message", lambda led, s, v: led.pin(s, v)),
    ("end reason", lambda led, s, v: led.end_session(s, v)),
    ("resolve_message", lambda led, s, v: led.resolve_message(s, v)),
    ("usage shape", lambda led, s, v: led.report_usage(s, {"prompt_tokens": 1}, shape=v)),
    ("usage purpose", lambda led, s, v: led.report_usage(s, {"prompt_tokens": 1}, purpose=v)),
    ("start reason", lambda led, s, v: led.start_session(model="m", reason=v)),
    ("start encoding", lambda led, s, v: led.start_session(model="m", encoding=v)),
    ("start role", lambda led, s, v: led.start_session(model="m", system_role=v)),
    ("start parent", lambda led, s, v: led.start_session(model="m", parent_session_id=v)),
    ("spec loop", lambda led, s, v: led.start(SessionSpec(model="m", loop=v))),
    ("role", lambda led, s, v: led.append_messages(s, [{"role": v, "content": "x"}])),
    ("tool_call_id", lambda led, s, v: led.append_messages(s, [{"role": "tool", "tool_call_id": v, "content": "x"}])),
    ("call id", lambda led, s, v: led.append_messages(s, [{"role": "assistant", "tool_calls": [{"id": v, "type": "function"}]}])),
    ("message id", lambda led, s, v: led.append_messages(s, [{"role": "user", "content": "x"}], message_ids=[v])),
    ("append session", lambda led, s, v: led.append_messages(v, [{"role": "user", "content": "x"}])),
    ("audit_chain", lambda led, s, v: audit_chain(led, v)),
    ("audit_compaction", lambda led, s, v: audit_compaction(led, v)),
    ("trace", lambda led, s, v: trace(led, v, "x")),
    ("diff a", lambda led, s, v: diff(led, v, s)),
    ("diff b", lambda led, s, v: diff(led, s, v)),
    ("recall session", lambda led, s, v: recall(led, v, "hi")),
    ("recall limit", lambda led, s, v: recall(led, s, "hi", v)),
    ("expand", lambda led, s, v: expand(led, v)),
    ("undo", lambda led, s, v: undo(led, v)),
    ("tool name", lambda led, s, v: handle_tool_call(led, s, v, "{}")),
    ("tool expand", lambda led, s, v: handle_tool_call(led, s, "expand", json.dumps({"compaction_id": shown(v)}))),
    ("whatif loop", lambda led, s, v: whatif(led, s, loop=v)),
    ("normalize shape", lambda led, s, v: normalize_usage({"prompt_tokens": 1}, v)),
    ("config float", lambda led, s, v: CompressionConfig(threshold=v)),
    ("config choice", lambda led, s, v: CompressionConfig(orphan_policy=v)),
    ("plan window", lambda led, s, v: plan([{"role": "user", "content": "x"}], CompressionConfig(), [1], context_length=v)),
    ("durability", lambda led, s, v: SQLiteEventStore(":memory:", durability=v)),
    ("open durability", lambda led, s, v: Ledger.open(":memory:", durability=v)),
    ("ledger path", lambda led, s, v: SQLiteEventStore(v) if not isinstance(v, str) else None),
    ("config path", lambda led, s, v: load_config(v, env={}) if not isinstance(v, str) else None),
    ("config variable", lambda led, s, v: load_config(None, env={"CTXLEDGER_THRESHOLD": v}) if isinstance(v, str) else None),
    ("summary api", lambda led, s, v: LLMSummarizer(api=v, env={})),
    ("summary temperature", lambda led, s, v: LLMSummarizer(temperature=v, env={})),
    ("summary timeout", lambda led, s, v: LLMSummarizer(timeout=v, env={})),
    ("recorded", lambda led, s, v: RecordedSummarizer(v)),
    ("service version", lambda led, s, v: _run(_svc(led).append(s, [{"role": "user", "content": "x"}], expected_version=v))),
    ("service agent", lambda led, s, v: _run(_svc(led).host_compress(s, "hermes", agent=v))),
    ("service beyond", lambda led, s, v: _run(_svc(led).host_compress(s, "hermes", beyond=v))),
    ("service hard limit", lambda led, s, v: _run(_svc(led).host_compress(s, "hermes", hard_limit=v))),
    ("service stored ref", lambda led, s, v: _run(_svc(led).read_persisted(s, v))),
    ("service status", lambda led, s, v: _run(_svc(led).handle_provider_error(s, v, "x"))),
]  # fmt: skip


@given(st.sampled_from(_CALLS), _hostile())
def test_a_hostile_value_is_quoted_short_and_plain_and_nothing_is_appended(
    case: tuple[str, Callable[[Ledger, str, Any], Any]], value: Any
) -> None:
    name, call = case
    led, sid = ledger_with_one_call()
    try:
        before = [(r.seq, r.event.event_id) for r in led.store.read_all()]
        try:
            call(led, sid, value)
        except CtxLedgerError as exc:
            text = str(exc)
            assert len(text) < MAX_MESSAGE, (name, text[:200])
            assert _plain(text), (name, text[:200])
            assert [(r.seq, r.event.event_id) for r in led.store.read_all()] == before, name
    finally:
        led.close()


# ------------------------------------------------------------------- the quoting helpers


def test_shown_escapes_what_an_objects_own_repr_holds() -> None:
    loud = _Loud("\x1b[2J\x07" + "x" * 5_000)
    text = shown(loud)
    assert text.isprintable() and len(text) < 100
    assert text.startswith("\\x1b[2J\\x07")


def test_printable_leaves_plain_text_alone_and_escapes_the_rest() -> None:
    assert printable("a path/é ü") == "a path/é ü"
    assert printable("a\x1bb\u2028c\ud800\t\r") == "a\\x1bb\\u2028c\\ud800\\t\\x0d"


def test_a_path_holding_control_bytes_is_shown_escaped(tmp_path: Path) -> None:
    missing = tmp_path / "\x1b[31mred.toml"
    with pytest.raises(InvalidConfig) as caught:
        load_config(missing, env={})
    assert "\\x1b[31mred.toml does not exist" in str(caught.value)
    assert _plain(str(caught.value))


# ------------------------------------------------ Python's own errors, now refused by name


@pytest.mark.parametrize("ref", [None, 5, ["s"], b"ses"], ids=["None", "int", "list", "bytes"])
def test_diff_of_a_reference_that_is_no_text_is_refused(ref: Any) -> None:
    led, sid = ledger_with_one_call()
    try:
        before = led.store.last_seq()
        with pytest.raises(InvalidInput, match=r"a reference is (text|required)"):
            diff(led, ref, sid)
        if ref is not None:  # (a b_ref of None is one reference: a compaction's diff)
            with pytest.raises(InvalidInput, match=r"a reference is text: .* got "):
                diff(led, sid, ref)
        assert led.store.last_seq() == before
    finally:
        led.close()


@pytest.mark.parametrize(
    ("path", "words"),
    [
        ("led\x00ger.db", "holds a NUL character"),
        ("led\udc00\ud800.db", "holds a lone surrogate"),
        (5, "must be text or a path, got int"),
        (["x.db"], "must be text or a path, got list"),
    ],
    ids=["nul", "surrogate", "int", "list"],
)
def test_a_store_built_directly_refuses_a_path_no_file_can_have(
    path: Any, words: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InvalidInput, match=words):
        SQLiteEventStore(path)
    assert list(tmp_path.iterdir()) == []  # nothing created


@pytest.mark.parametrize(
    ("path", "words"),
    [
        (5, "the config file must be text or a path, got int"),
        (object(), "the config file must be text or a path, got object"),
        ("a\x00.toml", "holds a NUL character"),
        ("a\ud800.toml", "holds a lone surrogate"),
    ],
    ids=["int", "object", "nul", "surrogate"],
)
def test_load_config_of_a_path_no_file_can_have_is_refused(path: Any, words: str) -> None:
    with pytest.raises(InvalidConfig, match=words):
        load_config(path, env={})


@pytest.mark.parametrize(
    ("records", "words"),
    [
        (5, "got int"),
        (["a summary"], "got list"),
        ({"key": 5}, "'key': int"),
        ({7: "a summary"}, "7: str"),
    ],
    ids=["int", "list", "record", "key"],
)
def test_recorded_summarizer_of_the_wrong_shape_is_refused(records: Any, words: str) -> None:
    with pytest.raises(InvalidConfig, match=words):
        RecordedSummarizer(records)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"api": ["openai"]},
        {"base_url": 5},
        {"model": object()},
        {"api_key": b"k"},
        {"timeout": "10"},
        {"timeout": math.nan},
        {"timeout": math.inf},
        {"timeout": True},
    ],
    ids=["api", "base_url", "model", "key", "timeout text", "timeout nan", "timeout inf", "bool"],
)
def test_llm_summarizer_settings_of_the_wrong_type_are_refused(kwargs: dict[str, Any]) -> None:
    with pytest.raises(InvalidConfig, match=r"summary (api|base_url|model|api_key|timeout)"):
        LLMSummarizer(env={}, **kwargs)


def test_an_api_key_of_the_wrong_type_is_not_quoted() -> None:
    with pytest.raises(InvalidConfig) as caught:
        LLMSummarizer(env={}, api_key=["sk-secret"])
    assert "sk-secret" not in str(caught.value)


@pytest.mark.parametrize(
    "options",
    [
        {"busy_timeout_ms": "5000"},
        {"busy_timeout_ms": 2**70},
        {"blob_threshold": 1.5},
        {"blob_threshold": 0},
        {"max_page_count": "48"},
        {"max_page_count": True},
    ],
    ids=["busy text", "busy huge", "blob float", "blob zero", "pages text", "pages bool"],
)
def test_a_store_option_out_of_range_or_of_the_wrong_type_is_refused(
    options: dict[str, Any],
) -> None:
    name = next(iter(options))
    with pytest.raises(InvalidConfig, match=f"{name} must be an integer from"):
        SQLiteEventStore(":memory:", **options)


def test_compact_and_whatif_refuse_a_config_that_is_no_compression_config() -> None:
    led, sid = ledger_with_one_call()
    try:
        before = led.store.last_seq()
        with pytest.raises(InvalidConfig, match="config must be a CompressionConfig"):
            _run(compact(led, sid, OfflineSummarizer(), config={"threshold": 0.6}))  # type: ignore[arg-type]
        with pytest.raises(InvalidConfig, match="config must be a CompressionConfig"):
            whatif(led, sid, config={"threshold": 0.6})  # type: ignore[arg-type]
        with pytest.raises(InvalidInput, match="out must be text or a path, got int"):
            whatif(led, sid, out=5)  # type: ignore[arg-type]
        assert led.store.last_seq() == before
    finally:
        led.close()
