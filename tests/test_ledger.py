"""The ledger facade: every bad input is a clear error and appends nothing."""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from helpers.ledger_helpers import compact_now, make_ledger, session_with_turns

from ctxledger.errors import (
    CtxLedgerError,
    InvalidInput,
    InvalidMessage,
    SessionEndedError,
    StoreError,
    UnknownMessage,
    UnknownSession,
)
from ctxledger.ledger.facade import Ledger
from ctxledger.runtime.service import ContextService


@pytest.fixture
def ledger(tmp_path: Path) -> Ledger:
    lg = make_ledger(tmp_path / "l.db")
    yield lg  # type: ignore[misc]
    lg.close()


def _call(cid: str, args: Any = '{"command": "ls"}') -> dict[str, Any]:
    return {"id": cid, "type": "function", "function": {"name": "terminal", "arguments": args}}


BAD_APPENDS: list[tuple[str, list[Any], type[Exception], str]] = [
    ("unknown role", [{"role": "wizard", "content": "x"}], InvalidMessage, "unknown role"),
    (
        "orphan tool result",
        [{"role": "tool", "tool_call_id": "nope", "content": "r"}],
        InvalidMessage,
        "no earlier assistant",
    ),
    # re-used tool-call ids are repaired, not rejected: tests/test_validation_policy.py
    (
        "non-string arguments",
        [{"role": "assistant", "content": None, "tool_calls": [_call("a", {"command": "ls"})]}],
        InvalidMessage,
        "must be a JSON string",
    ),
    (
        "a good message before a bad one",
        [{"role": "user", "content": "fine"}, {"role": "user", "content": 3}],
        InvalidMessage,
        "message 1:",
    ),
]


@pytest.mark.parametrize(
    ("name", "messages", "error", "fragment"), BAD_APPENDS, ids=[b[0] for b in BAD_APPENDS]
)
def test_bad_messages_append_nothing(
    ledger: Ledger, name: str, messages: list[Any], error: type[Exception], fragment: str
) -> None:
    sid = ledger.start_session(model="m", context_length=32_000)
    before = ledger.store.last_seq()
    with pytest.raises(error) as info:
        ledger.append_messages(sid, messages)
    assert fragment in str(info.value)
    assert ledger.store.last_seq() == before
    assert ledger.api_messages(sid) == []


BAD_CALLS: list[tuple[str, Callable[[Ledger, str], object], type[Exception], str]] = [
    (
        "messages not a list",
        lambda lg, s: lg.append_messages(s, {"role": "user", "content": "x"}),
        InvalidInput,
        "must be a list",
    ),  # type: ignore[arg-type]
    (
        "unknown session",
        lambda lg, s: lg.append_messages("ses_missing", []),
        UnknownSession,
        "no session",
    ),
    (
        "usage of unknown shape",
        lambda lg, s: lg.report_usage(s, {"tokens": 5}),
        InvalidInput,
        "unrecognised usage shape",
    ),
    (
        "usage purpose",
        lambda lg, s: lg.report_usage(s, {"input_tokens": 1, "output_tokens": 1}, purpose="x"),
        InvalidInput,
        "purpose",
    ),
    ("tiny window", lambda lg, s: lg.switch_model(s, "m", 10), InvalidInput, "≥ 1024"),
    (
        "pin unknown message",
        lambda lg, s: lg.pin(s, "msg_nope"),
        UnknownMessage,
        "not in the live view",
    ),
    (
        "no context length",
        lambda lg, s: lg.start_session(model="m", context_length=None),
        InvalidInput,
        "context_length",
    ),
    (
        "empty model",
        lambda lg, s: lg.start_session(model="", context_length=9000),
        InvalidInput,
        "model",
    ),
    (
        "branch without parent",
        lambda lg, s: lg.start_session(model="m", context_length=9000, reason="branch"),
        InvalidInput,
        "parent",
    ),
    (
        "continuation by hand",
        lambda lg, s: lg.start_session(model="m", context_length=9000, reason="compression"),
        InvalidInput,
        "compaction",
    ),
    (
        "duplicate session id",
        lambda lg, s: lg.start_session(model="m", context_length=9000, session_id=s),
        InvalidInput,
        "already exists",
    ),
    ("negative seq", lambda lg, s: lg.projector_at(-1), InvalidInput, "≥ 0"),
    ("seq as a string", lambda lg, s: lg.projector_at("5"), InvalidInput, "integer ≥ 0, got '5'"),
    ("seq as a bool", lambda lg, s: lg.projector_at(True), InvalidInput, "integer ≥ 0"),
    ("seq as a float", lambda lg, s: lg.projector_at(2.5), InvalidInput, "integer ≥ 0"),
    (
        "learned limit without evidence",
        lambda lg, s: lg.learn_context_limit(s, 8000, None),
        InvalidInput,
        "evidence (the provider's error text) must be a string, got NoneType",
    ),
    (
        "learned limit, not smaller, without evidence",
        lambda lg, s: lg.learn_context_limit(s, 64_000, None),
        InvalidInput,
        "evidence",
    ),
    # text UTF-8 cannot encode was "SessionStarted has a field of the wrong type or value"
    ("model with a lone surrogate", lambda lg, s: lg.start_session(model="m\udcff",
     context_length=9000), InvalidInput, "model holds bytes that are not UTF-8 (0xff)"),
    ("system prompt with a lone surrogate", lambda lg, s: lg.start_session(model="m",
     context_length=9000, system_prompt="\ud800"), InvalidInput,
     "system_prompt holds text that is not valid Unicode"),
    ("switch to a model with a lone surrogate", lambda lg, s: lg.switch_model(s, "\udc9b",
     16_000), InvalidInput, "model holds bytes that are not UTF-8 (0x9b)"),
    # a str or a dict was walked as its characters or keys: "tool 0 must be a JSON object"
    ("tools as a string", lambda lg, s: lg.start_session(model="m", context_length=9000,
     tools="abc"), InvalidInput, "tools must be a list of tool schemas, got str"),
    ("tools as one object", lambda lg, s: lg.start_session(model="m", context_length=9000,
     tools={"type": "function"}), InvalidInput, "tools must be a list of tool schemas, got dict"),
    # start_session refused an empty model; a switch to one was appended
    ("switch to an empty model", lambda lg, s: lg.switch_model(s, "", 16_000), InvalidInput,
     "model must be a non-empty string"),
    ("switch to no model", lambda lg, s: lg.switch_model(s, None, 16_000), InvalidInput,
     "model must be a non-empty string"),
    ("a blank model", lambda lg, s: lg.start_session(model=" \t", context_length=9000),
     InvalidInput, "model must be a non-empty string, got ' \\t'"),
    # the service refused these; the ledger recorded an empty model, a NaN cost (stored as
    # null), a negative one, and a NaN or an int key inside the raw report (null, "1")
    ("usage for an empty model", lambda lg, s: lg.report_usage(s, {"prompt_tokens": 5},
     model=""), InvalidInput, "model must be None or a non-empty string, got ''"),
    ("usage for a blank model", lambda lg, s: lg.report_usage(s, {"prompt_tokens": 5},
     model="  "), InvalidInput, "model must be None or a non-empty string"),
    ("usage for a model that is not text", lambda lg, s: lg.report_usage(s, {"prompt_tokens":
     5}, model=5), InvalidInput, "model must be None or a non-empty string, got 5"),
    ("usage with a NaN cost", lambda lg, s: lg.report_usage(s, {"prompt_tokens": 5},
     cost_usd=math.nan), InvalidInput, "cost_usd must be a finite number ≥ 0, got nan"),
    ("usage with a negative cost", lambda lg, s: lg.report_usage(s, {"prompt_tokens": 5},
     cost_usd=-0.5), InvalidInput, "cost_usd must be a finite number ≥ 0"),
    ("usage holding a NaN", lambda lg, s: lg.report_usage(s, {"prompt_tokens": 5,
     "prompt_tokens_details": {"audio": math.nan}}), InvalidInput,
     "usage.prompt_tokens_details.audio is nan: JSON has no NaN or infinity"),
    ("usage with a key that is not text", lambda lg, s: lg.report_usage(s, {"prompt_tokens": 5,
     7: 1}), InvalidInput, "usage has a key that is not text: 7"),
    # a list as a chosen session id was a TypeError (unhashable); "" was silently replaced
    # by a generated id
    ("a session id that is a list", lambda lg, s: lg.start_session(model="m",
     context_length=9000, session_id=["a"]), InvalidInput,
     "session_id must be a non-blank string (or None for a new id), got ['a']"),
    ("an empty session id", lambda lg, s: lg.start_session(model="m", context_length=9000,
     session_id=""), InvalidInput, "session_id must be a non-blank string"),
    ("a blank session id", lambda lg, s: lg.start_session(model="m", context_length=9000,
     session_id="  "), InvalidInput, "session_id must be a non-blank string"),
    # SQLite cannot bind it: OverflowError
    ("a seq past 2^63", lambda lg, s: lg.projector_at(10**30), InvalidInput,
     "sequence is out of range"),
    # unhashable: TypeError
    ("a usage shape that is a list", lambda lg, s: lg.report_usage(s, {"prompt_tokens": 5},
     shape=["openai"]), InvalidInput, "shape must be a usage shape's name or None"),
    # a tool schema holding a NaN default was stored with null
    ("a tool holding an infinity", lambda lg, s: lg.start_session(model="m",
     context_length=9000, tools=[{"type": "function", "function": {"name": "f", "parameters":
     {"maximum": math.inf}}}]), InvalidInput,
     "tool 0.function.parameters.maximum is inf: JSON has no NaN or infinity"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("focus", "fragment"),
    [(5, "focus must be a string, got int"), (["a"], "focus must be a string, got list"),
     ("a\ud800", "focus holds text that is not valid Unicode ('\\ud800'")],
)  # fmt: skip
def test_a_focus_that_is_not_text_is_a_clear_error_and_appends_nothing(
    ledger: Ledger, focus: Any, fragment: str
) -> None:
    """A number or a lone surrogate as focus failed deep in the summarizer
    (AttributeError, UnicodeEncodeError) instead of naming the argument."""
    from functools import partial

    import anyio

    from ctxledger.compressor.summarizers.offline import OfflineSummarizer
    from ctxledger.ledger.compaction import compact

    sid = session_with_turns(ledger, 12)
    before = ledger.store.last_seq()
    for dry_run in (True, False):
        run = partial(compact, ledger, sid, OfflineSummarizer(), focus=focus, dry_run=dry_run)
        with pytest.raises(InvalidInput) as info:
            anyio.run(run)
        assert fragment in str(info.value)
    assert ledger.store.last_seq() == before


@pytest.mark.parametrize(
    ("name", "call", "error", "fragment"), BAD_CALLS, ids=[b[0] for b in BAD_CALLS]
)
def test_bad_calls_are_clear_errors_and_append_nothing(
    tmp_path: Path,
    name: str,
    call: Callable[[Ledger, str], object],
    error: type[Exception],
    fragment: str,
) -> None:
    from ctxledger.compressor.config import CompressionConfig

    ledger = make_ledger(tmp_path / "l.db", config=CompressionConfig())
    sid = ledger.start_session(model="m", context_length=32_000)
    before = ledger.store.last_seq()
    with pytest.raises(error) as info:
        call(ledger, sid)
    assert fragment in str(info.value)
    assert ledger.store.last_seq() == before
    ledger.close()


def test_appending_to_a_compressed_session_names_the_tip(ledger: Ledger) -> None:
    sid = session_with_turns(ledger, 12)
    new = compact_now(ledger, sid).new_session_id
    before = ledger.store.last_seq()
    with pytest.raises(SessionEndedError, match=f"continuation is {new!r}"):
        ledger.append_messages(sid, [{"role": "user", "content": "more"}])
    assert ledger.store.last_seq() == before


def test_appending_to_a_chain_whose_tip_ended_branched_names_the_branch_s_tip(
    ledger: Ledger,
) -> None:
    """Session 39, review 1: a branch is a chain of its own, which the compression tip
    never reaches; the error named nothing (or the ended tip) before. A branch started
    from an earlier session of the chain counts (the Hermes engine's, from the view its
    host held), the latest wins, and a branch's own compactions are followed."""
    sid = session_with_turns(ledger, 12)
    tip = compact_now(ledger, sid).new_session_id
    superseded = ledger.start_session(model="m", parent_session_id=tip, reason="branch")
    branch = ledger.start_session(model="m", parent_session_id=sid, reason="branch")
    ledger.end_session(tip, "branched")
    for i in range(12):
        ledger.append_messages(branch, [{"role": "user", "content": f"q{i} " + "w " * 300}])
        ledger.append_messages(branch, [{"role": "assistant", "content": f"a{i}"}])
    new = compact_now(ledger, branch).new_session_id
    for ended in (sid, tip):
        with pytest.raises(SessionEndedError, match=f"continuation is {new!r}"):
            ledger.append_messages(ended, [{"role": "user", "content": "more"}])
    service = ContextService(ledger)  # (its own check: it names the branch, or says none)
    with pytest.raises(SessionEndedError, match=f"continuation is {new!r}"):
        anyio.run(lambda: service.append(sid, [{"role": "user", "content": "more"}]))
    ledger.end_session(new, "closed")
    # session 40 (the lead's decision): the latest branch closed, nothing is live; the
    # superseded earlier branch (never ended) is not named. Before, the ledger named the
    # closed tip `new` as the live continuation where the service said none was live
    for write in (ledger.append_messages, service_append(service)):
        with pytest.raises(SessionEndedError, match=r"; start a new session$") as info:
            write(sid, [{"role": "user", "content": "more"}])
        assert superseded not in str(info.value)


def service_append(service: ContextService) -> Callable[[str, list[Any]], object]:
    """`service.append` run to its end, as a plain call."""
    return lambda sid, messages: anyio.run(lambda: service.append(sid, messages))


def test_only_the_latest_branch_is_followed_to_the_live_continuation(ledger: Ledger) -> None:
    """Session 40: the live continuation is followed along the latest branch only. While
    it (or its own latest branch, when it ended ``branched``) is live it is named, by the
    ledger and the service alike; once it ended another way none is live, and an earlier
    branch, superseded, is never named (the ledger named the closed branch before)."""
    sid = session_with_turns(ledger, 4)
    earlier = ledger.start_session(model="m", parent_session_id=sid, reason="branch")
    latest = ledger.start_session(model="m", parent_session_id=sid, reason="branch")
    ledger.end_session(sid, "branched")
    inner = ledger.start_session(model="m", parent_session_id=latest, reason="branch")
    ledger.end_session(latest, "branched")
    assert ledger.chains.live_end(sid) == inner
    ledger.end_session(inner, "closed")
    assert ledger.chains.live_end(sid) is None
    assert ledger.chains.live_end(earlier) == earlier  # its own chain: live
    said = f"session {sid!r} has ended (branched); start a new session"
    for write in (ledger.append_messages, service_append(ContextService(ledger))):
        with pytest.raises(SessionEndedError) as info:
            write(sid, [{"role": "user", "content": "more"}])
        assert str(info.value) == said


def test_a_10mb_message_is_accepted_and_stored_once(ledger: Ledger, tmp_path: Path) -> None:
    sid = ledger.start_session(model="m", context_length=32_000)
    big = "0123456789abcdef" * (10 * 1024 * 1024 // 16)
    ids = ledger.append_messages(
        sid, [{"role": "user", "content": big}, {"role": "user", "content": big}]
    )
    assert [m["content"] for m in ledger.api_messages(sid)] == [big, big]
    assert ledger.transcript.original(ids[0])["content"] == big
    assert ledger.verify().ok
    # both events reference one content-addressed blob
    with sqlite3.connect(tmp_path / "l.db") as raw:
        assert raw.execute("SELECT count(*), sum(length(data)) FROM blobs").fetchone() == (
            1,
            len(big),
        )


def test_invalid_utf8_in_an_import_file_is_a_clear_error(tmp_path: Path) -> None:
    from ctxledger.importers.detect import load

    path = tmp_path / "bad.jsonl"
    path.write_bytes(
        b'{"role": "user", "content": "ok"}\n{"role": "user", "content": "\xff\xfe"}\n'
    )
    with pytest.raises(CtxLedgerError):
        load(path, "openai")


def test_tool_call_issued_before_a_compaction_can_still_be_answered(ledger: Ledger) -> None:
    sid = session_with_turns(ledger, 12)
    ledger.append_messages(
        sid,
        [
            {"role": "user", "content": "run it"},
            {"role": "assistant", "content": None, "tool_calls": [_call("late_1")]},
        ],
    )
    new = compact_now(ledger, sid).new_session_id
    assert new is not None
    ledger.append_messages(new, [{"role": "tool", "tool_call_id": "late_1", "content": "done"}])
    assert ledger.api_messages(new)[-1]["content"] == "done"


def test_an_empty_session_reference_is_rejected(ledger: Ledger) -> None:
    ledger.start_session(model="m", context_length=32_000)
    with pytest.raises(InvalidInput, match="session id"):
        ledger.resolve("")


def test_events_naming_an_unknown_session_or_message_are_refused_and_append_nothing(
    ledger: Ledger,
) -> None:
    from ctxledger.events import NoticeIssued, ToolOutputPersisted
    from ctxledger.events import SessionEnded as SessionEndedEvent

    sid = ledger.start_session(model="m", context_length=32_000)
    before = ledger.store.last_seq()
    notice = NoticeIssued(event_id="e1", session_id="ses_nope", at=0.0, code="x", text="x")
    with pytest.raises(UnknownSession, match="must begin with SessionStarted"):
        ledger.append_events("ses_nope", [notice])
    with pytest.raises(InvalidInput, match="decision events only"):
        ledger.append_events(sid, [SessionEndedEvent(event_id="e2", session_id=sid, at=0.0)])
    ghost = ToolOutputPersisted(
        event_id="e3",
        session_id=sid,
        at=0.0,
        message_id="msg_ghost",
        tool_call_id="c",
        tool_name="t",
        blob_ref="0" * 64,
        chars=1,
        replacement="r",
        replacement_tokens=1,
    )
    with pytest.raises(UnknownMessage, match="msg_ghost"):
        ledger.append_messages(sid, [{"role": "user", "content": "x"}], extra_events=[ghost])
    assert ledger.store.last_seq() == before


def test_a_log_with_events_of_unknown_sessions_still_opens(tmp_path: Path) -> None:
    """The fold never fails on a stored event, whoever wrote it."""
    from ctxledger.events import SessionEnded as SessionEndedEvent
    from ctxledger.events import ToolOutputPersisted

    path = tmp_path / "l.db"
    ledger = make_ledger(path)
    sid = ledger.start_session(model="m", context_length=32_000)
    # written around the ledger's checks, as another tool might
    ledger.store.append(
        "ses_orphan", [SessionEndedEvent(event_id="x1", session_id="ses_orphan", at=0.0)], None
    )
    ledger.store.append(
        sid,
        [
            ToolOutputPersisted(
                event_id="x2",
                session_id=sid,
                at=0.0,
                message_id="msg_ghost",
                tool_call_id="c",
                tool_name="t",
                blob_ref="0" * 64,
                chars=1,
                replacement="r",
                replacement_tokens=1,
            )
        ],
        None,
    )
    ledger.close()
    again = make_ledger(path, namespace="u")
    assert again.api_messages(sid) == []
    again.append_messages(sid, [{"role": "user", "content": "still works"}])
    again.close()


def test_import_checks_sessions_like_start_session_and_names_the_bad_one(ledger: Ledger) -> None:
    from ctxledger.importers.model import ImportedSession
    from ctxledger.ledger.importing import import_sessions

    good = ImportedSession(
        key="a", source_format="openai", messages=[{"role": "user", "content": "hi"}]
    )
    tiny = ImportedSession(
        key="b",
        source_format="openai",
        messages=[{"role": "user", "content": "hi"}],
        context_length=-5,
    )
    bad = ImportedSession(key="c", source_format="openai", messages=[{"role": "user"}])
    with pytest.raises(InvalidInput, match="session 'b': context_length must be an integer"):
        import_sessions(ledger, [good, tiny])
    with pytest.raises(InvalidMessage, match="session 'c': message 0"):
        import_sessions(ledger, [good, bad])
    assert ledger.store.last_seq() == 0


@pytest.mark.parametrize("tools", [["abc"], [1]])
def test_tools_that_are_not_objects_are_a_clear_error(ledger: Ledger, tools: list[object]) -> None:
    with pytest.raises(InvalidInput, match="tool 0 must be a JSON object"):
        ledger.start_session(model="m", context_length=32_000, tools=tools)  # type: ignore[arg-type]
    assert ledger.store.last_seq() == 0


def test_a_learned_context_limit_must_be_a_real_window(ledger: Ledger) -> None:
    sid = ledger.start_session(model="m", context_length=32_000)
    with pytest.raises(InvalidInput, match="≥ 1024"):
        ledger.learn_context_limit(sid, -5, "evidence")
    assert ledger.transcript.session(sid).context_length == 32_000


def test_the_ledger_folder_is_created_private(tmp_path: Path) -> None:
    import stat

    lg = Ledger.open(tmp_path / "new" / "dir" / "l.db")
    lg.close()
    assert stat.S_IMODE((tmp_path / "new" / "dir").stat().st_mode) == 0o700


@pytest.mark.parametrize("bad", [["ses_x"], {"id": "ses_x"}], ids=["list", "dict"])
@pytest.mark.parametrize(
    "call",
    [
        lambda lg, s: lg.api_messages(s),
        lambda lg, s: lg.tip(s),
        lambda lg, s: lg.live_session(s),
        lambda lg, s: lg.chain_usage(s),
        lambda lg, s: lg.append_messages(s, [{"role": "user", "content": "x"}]),
        lambda lg, s: lg.report_usage(s, {"prompt_tokens": 1}),
    ],
    ids=["api_messages", "tip", "live_session", "chain_usage", "append", "report_usage"],
)
def test_a_session_id_that_is_not_text_is_unknown_not_a_type_error(
    ledger: Ledger, call: Callable[[Ledger, object], object], bad: object
) -> None:
    """A list or a dict as a session id was a TypeError ('unhashable type') out of the
    projections' dicts; it is an UnknownSession naming it, and nothing is appended."""
    ledger.start_session(model="m", context_length=9000)
    before = ledger.store.last_seq()
    with pytest.raises(UnknownSession, match=f"no session {bad!r}".replace("[", r"\[")):
        call(ledger, bad)
    assert ledger.store.last_seq() == before
    assert ledger.version(bad) == 0  # type: ignore[arg-type]


def test_tools_may_be_any_sequence_of_schemas_but_not_text_or_one_object(tmp_path: Path) -> None:
    # review of session 29: the not-a-list check refused a UserList (a Sequence)
    from collections import UserList

    tool = {"type": "function", "function": {"name": "ls", "parameters": {}}}
    with Ledger.open(tmp_path / "t.db") as ledger:
        sid = ledger.start_session(model="m", context_length=9000, tools=UserList([tool]))
        assert ledger.transcript.session(sid).tools == [tool]
        for bad in ("ls", tool, b"ls"):
            with pytest.raises(InvalidInput, match="tools must be a list of tool schemas"):
                ledger.start_session(model="m", context_length=9000, tools=bad)


@pytest.mark.parametrize("config", [{"threshold": 0.6}, 5])
def test_a_config_that_is_not_a_compression_config_is_named_and_creates_nothing(
    tmp_path: Path, config: Any
) -> None:
    """A dict of settings was taken, then an AttributeError ('to_snapshot') at the first
    session; ContextService.open took anything at all."""
    from ctxledger import ContextService
    from ctxledger.errors import InvalidConfig

    for open_ in (Ledger.open, ContextService.open):
        with pytest.raises(InvalidConfig, match="config must be a CompressionConfig"):
            open_(tmp_path / "l.db", config=config)
    assert list(tmp_path.iterdir()) == []


def test_an_append_cut_off_reports_its_own_error_not_the_refresh_after_it(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Session 36: with the server gone, the refresh after a failed append fails too; its
    "could not read the log" hid the append's error and its "re-send the same events"."""
    sid = ledger.start_session(model="m", context_length=16_000)
    refreshes: list[int] = []

    def append_many(*args: object, **kwargs: object) -> None:
        raise StoreError("could not append: gone; re-send the same events")

    def change_token() -> None:
        refreshes.append(1)
        raise StoreError("could not read the log: gone")

    monkeypatch.setattr(ledger.store, "append_many", append_many)
    monkeypatch.setattr(ledger.store, "change_token", change_token)
    with pytest.raises(StoreError, match="could not append") as caught:
        ledger.append_messages(sid, [{"role": "user", "content": "hi"}])
    assert "re-send the same events" in str(caught.value) and refreshes == [1]
    # the re-read's own error is not lost: it may be the cause (review 2)
    assert caught.value.__notes__ == [
        "the re-read after it failed too: could not read the log: gone"
    ]


def test_a_note_on_an_error_is_shown_by_the_cli_and_the_state_api() -> None:
    """The final review of session 36: the CLI and the state API printed ``str(exc)``,
    which leaves out the re-read's note, so nobody saw it."""
    from ctxledger.cli.app import _one_line
    from ctxledger.server.errors import message_of

    err = StoreError("could not append: gone; re-send the same events")
    err.add_note("the re-read after it failed too: could not read the log: gone")
    for shown in (_one_line(err), message_of(err)):
        assert shown.startswith("could not append: gone; re-send the same events; ")
        assert shown.endswith("the re-read after it failed too: could not read the log: gone")
