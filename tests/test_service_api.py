"""The service's surface: the API view (prompt-cache markers, immutability, the live cache),
sessions and their lineage, and bad inputs (each a clear error with nothing appended)."""

from __future__ import annotations

import copy
import math
from collections.abc import AsyncIterator, Callable, Coroutine
from pathlib import Path
from typing import Any

import msgspec
import pytest

from ctxledger.clock import SequentialIds, StepClock
from ctxledger.compressor.config import CompressionConfig
from ctxledger.compressor.summarizers.offline import OfflineSummarizer
from ctxledger.errors import InvalidInput, InvalidMessage, SessionEndedError, UnknownSession
from ctxledger.events import Trigger, UsageReported
from ctxledger.ledger.compaction import CompactionOutcome, compact
from ctxledger.ledger.facade import Ledger
from ctxledger.projections import Projector
from ctxledger.runtime.caching import count_cache_markers
from ctxledger.runtime.engine import BuiltinEngine, RuntimeState, RuntimeTracker
from ctxledger.runtime.service import ContextEngine, ContextService

pytestmark = pytest.mark.anyio

CONFIG = CompressionConfig(threshold_floor_tokens=0)
CLAUDE = "claude-sonnet-4-5"


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
async def svc(tmp_path: Path) -> AsyncIterator[ContextService]:
    ledger = Ledger.open(
        tmp_path / "ledger.db",
        clock=StepClock(),
        ids=SequentialIds(),
        config=CONFIG,
        durability="normal",
    )
    async with ContextService(ledger, config=CONFIG) as service:
        yield service


def exchange(i: int) -> list[dict[str, Any]]:
    call = {
        "id": f"call_{i}",
        "type": "function",
        "function": {"name": "terminal", "arguments": '{"command": "make test"}'},
    }
    return [
        {"role": "user", "content": f"step {i}: run the tests " + "and report " * 40},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": f"call_{i}", "content": f"{i} passed " * 60},
        {"role": "assistant", "content": [{"type": "text", "text": f"step {i} done"}]},
    ]


async def claude_session(svc: ContextService, steps: int = 3) -> str:
    sid = await svc.start_session(
        model=CLAUDE, context_length=16_384, system_prompt="You are a coding agent."
    )
    for i in range(steps):
        await svc.append(sid, exchange(i))
    # end on plain text, so every one of the last three messages can carry a breakpoint
    await svc.append(
        sid,
        [
            {"role": "user", "content": "thanks"},
            {"role": "assistant", "content": "you are welcome"},
        ],
    )
    return sid


# --- the API view -----------------------------------------------------------------------------


async def test_system_and_3_markers_on_copies(svc: ContextService) -> None:
    sid = await claude_session(svc)
    stored = copy.deepcopy(svc.api_messages(sid, cache=False))
    marked = svc.api_messages(sid)
    assert count_cache_markers(marked) == 4
    assert marked[0]["content"][0]["cache_control"] == {"type": "ephemeral"}
    assert marked[-1]["content"] == [
        {"type": "text", "text": "you are welcome", "cache_control": {"type": "ephemeral"}}
    ]
    assert marked[-3]["content"][-1]["cache_control"] == {
        "type": "ephemeral"
    }  # a list: on its last part
    assert count_cache_markers(svc.api_messages(sid, cache=False)) == 0
    assert svc.api_messages(sid, cache=False) == stored  # nothing stored was touched
    marked[-1]["content"][0]["text"] = "edited by the caller"
    marked.append({"role": "user", "content": "also by the caller"})
    assert svc.api_messages(sid, cache=False) == stored


async def test_one_hour_ttl_and_native_anthropic_tool_markers(tmp_path: Path) -> None:
    config = CONFIG.replace(cache_ttl="1h")
    ledger = Ledger.open(tmp_path / "l.db", ids=SequentialIds(), config=config, durability="normal")
    async with ContextService(ledger, config=config, provider="anthropic") as svc:
        sid = await claude_session(svc, steps=1)
        await svc.append(
            sid,
            [
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "last",
                            "type": "function",
                            "function": {"name": "terminal", "arguments": "{}"},
                        }
                    ],
                },
                {"role": "tool", "tool_call_id": "last", "content": "ok"},
            ],
        )
        marked = svc.api_messages(sid)
        assert marked[-1]["cache_control"] == {
            "type": "ephemeral",
            "ttl": "1h",
        }  # on the tool message itself
        assert marked[-2]["cache_control"] == {
            "type": "ephemeral",
            "ttl": "1h",
        }  # and on the empty call message
        assert count_cache_markers(marked) == 4
        assert "cache_control" not in svc.ledger.transcript.api_view(sid)[-1]


@pytest.mark.parametrize(
    ("model", "provider", "expected"),
    [
        # the exchange is ask, call (no content), tool, reply: on OpenAI-compatible routes
        # the call cannot carry a breakpoint and is passed over, so the system prompt, the
        # ask, the tool result (on a text part) and the reply take one each (Hermes 0.19)
        ("gpt-4o", None, 0),
        (CLAUDE, "openai", 0),
        ("anthropic/claude-sonnet-4-5", "openrouter", 4),
        (CLAUDE, None, 4),
        (CLAUDE, "anthropic", 4),
    ],
)
async def test_markers_only_where_the_route_supports_them(
    tmp_path: Path, model: str, provider: str | None, expected: int
) -> None:
    ledger = Ledger.open(tmp_path / "l.db", ids=SequentialIds(), config=CONFIG, durability="normal")
    async with ContextService(ledger, config=CONFIG, provider=provider) as svc:
        sid = await svc.start_session(model=model, context_length=16_384, system_prompt="sys")
        await svc.append(sid, exchange(0))
        assert count_cache_markers(svc.api_messages(sid)) == expected


@pytest.mark.parametrize(
    ("model", "provider", "native"),
    [
        (CLAUDE, "anthropic", True),
        ("anthropic.claude-3-5-sonnet-20240620-v1:0", "bedrock", True),
        ("us.anthropic.claude-sonnet-4-20250514-v1:0", "bedrock", True),
        # no provider: the route is unknown, the envelope layout stays (final review F2)
        ("us.anthropic.claude-sonnet-4-20250514-v1:0", None, False),
        (CLAUDE, None, False),
        ("anthropic/claude-sonnet-4-5", "openrouter", False),
    ],
)
async def test_bedrock_takes_the_native_marker_layout_as_hermes_does(
    tmp_path: Path, model: str, provider: str | None, native: bool
) -> None:
    """Hermes 0.19 runs Claude on Bedrock over the Anthropic Messages wire: a tool result
    carries its marker itself and the content-less call turn takes one (native layout);
    on OpenRouter the result's marker goes on a text part and the call is passed over."""
    ledger = Ledger.open(tmp_path / "l.db", ids=SequentialIds(), config=CONFIG, durability="normal")
    async with ContextService(ledger, config=CONFIG, provider=provider) as svc:
        sid = await svc.start_session(model=model, context_length=16_384, system_prompt="sys")
        await svc.append(sid, exchange(0))
        marked = svc.api_messages(sid)
        tool = next(m for m in marked if m["role"] == "tool")
        call = next(m for m in marked if m.get("tool_calls"))
        assert ("cache_control" in tool) is native
        assert ("cache_control" in call) is native
        assert count_cache_markers(marked) == 4


async def test_caching_can_be_disabled_in_the_config(tmp_path: Path) -> None:
    config = CONFIG.replace(prompt_caching=False)
    ledger = Ledger.open(tmp_path / "l.db", ids=SequentialIds(), config=config, durability="normal")
    async with ContextService(ledger, config=config) as svc:
        sid = await claude_session(svc, steps=1)
        assert count_cache_markers(svc.api_messages(sid)) == 0
        assert count_cache_markers(svc.api_messages(sid, cache=True)) == 4


async def test_the_live_view_stays_equal_to_a_rebuild(svc: ContextService) -> None:
    sid = await claude_session(svc, steps=2)
    view = svc.ledger.transcript.api_view(sid)
    await svc.append(sid, exchange(5))
    assert svc.ledger.transcript.api_view(sid) is view  # extended in place, not rebuilt
    result = await svc.compress(sid)
    await svc.append(result.session_id, exchange(6))
    fresh = Projector.rebuild(svc.ledger.store, use_checkpoint=False)
    for session_id in (sid, result.session_id):
        assert svc.api_messages(session_id, cache=False) == fresh.transcript.api_messages(
            svc.tip(session_id)
        )
    assert fresh.fingerprint() == svc.ledger.projector.fingerprint()


async def test_an_old_session_id_reads_and_appends_on_the_tip(svc: ContextService) -> None:
    sid = await claude_session(svc, steps=4)
    new = (await svc.compress(sid)).session_id
    assert svc.api_messages(sid, cache=False) == svc.api_messages(new, cache=False)
    result = await svc.append(sid, [{"role": "user", "content": "continue"}])
    assert (
        result.session_id == new
        and svc.ledger.transcript.live_ids(new)[-1] == result.message_ids[0]
    )


async def test_sessions_branches_and_their_end(svc: ContextService) -> None:
    root = await claude_session(svc, steps=1)
    branch = await svc.start_session(
        model=CLAUDE, parent_session_id=root, reason="branch", context_length=16_384
    )
    delegate = await svc.start_session(
        model="gpt-4o", parent_session_id=root, reason="delegate", context_length=16_384
    )
    assert (
        svc.ledger.chains.kind(branch) == "branch"
        and svc.ledger.chains.kind(delegate) == "delegate"
    )
    assert svc.tip(root) == root  # a branch is not a continuation
    await svc.end_session(branch)
    with pytest.raises(SessionEndedError):
        await svc.append(branch, [{"role": "user", "content": "late"}])
    status = svc.status(root)
    assert (status["session_id"], status["engine"], status["compactions"]) == (root, "ctxledger", 0)


# --- another context engine ------------------------------------------------------------------------


class FixedRuleEngine:
    """A plug-in engine: compacts past a fixed 1,000 real prompt tokens, offers a tool, keeps a log."""

    name = "fixed-rule"

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger
        self.seen: list[tuple[str, object]] = []

    def update_from_response(self, session_id: str, event: UsageReported) -> None:
        self.seen.append(("usage", event.usage.prompt))

    def should_compress(
        self, session_id: str, prompt_tokens: int | None = None
    ) -> tuple[bool, str]:
        return (prompt_tokens or 0) >= 1_000, "the fixed 1,000-token rule"

    async def compress(
        self, session_id: str, *, trigger: Trigger, focus: str | None = None
    ) -> CompactionOutcome:
        self.seen.append(("compress", trigger))
        return await compact(
            self.ledger, session_id, OfflineSummarizer(), trigger=trigger, focus=focus
        )

    def on_session_start(self, session_id: str) -> None:
        self.seen.append(("start", session_id))

    def on_session_end(self, session_id: str) -> None:
        self.seen.append(("end", session_id))

    def on_session_reset(self, session_id: str) -> None:
        self.seen.append(("reset", session_id))

    def update_model(self, session_id: str, model: str, context_length: int) -> None:
        self.seen.append(("model", context_length))

    def tools(self) -> list[dict[str, Any]]:
        return [
            {"type": "function", "function": {"name": "recall", "parameters": {"type": "object"}}}
        ]

    def status(self, session_id: str) -> dict[str, Any]:
        return {"rule_tokens": 1_000, "engine": "overridden?"}


async def test_another_engine_plugs_in(tmp_path: Path) -> None:
    ledger = Ledger.open(tmp_path / "l.db", ids=SequentialIds(), config=CONFIG, durability="normal")
    engine = FixedRuleEngine(ledger)
    assert isinstance(engine, ContextEngine)
    async with ContextService(ledger, config=CONFIG, engine=engine) as svc:
        sid = await claude_session(svc, steps=16)
        quiet = await svc.report_usage(sid, {"prompt_tokens": 900})
        assert not quiet.compactions
        fired = await svc.report_usage(
            sid, {"prompt_tokens": 1_200}
        )  # far below the config threshold
        assert fired.compressed
        rechecked = await svc.switch_model(
            fired.session_id, CLAUDE, 32_768
        )  # preflight asks the engine too
        new = rechecked.session_id
        await svc.reset_session(new)
        await svc.end_session(new)
        assert engine.seen[:5] == [
            ("start", sid),
            ("usage", 900),
            ("usage", 1_200),
            ("compress", "in_loop"),
            ("model", 32_768),
        ]
        assert engine.seen[5:-2] == [("compress", "preflight")] * len(rechecked.compactions)
        assert engine.seen[-2:] == [("reset", new), ("end", new)]
        assert [t["function"]["name"] for t in svc.tools()] == ["read_persisted", "recall"]
        status = svc.status(new)
        assert status["engine"] == "fixed-rule" and status["rule_tokens"] == 1_000
        assert status["compactions"] == 1 + sum(
            c.action == "compressed" for c in rechecked.compactions
        )


async def test_the_builtin_engine_reports_only_its_name(svc: ContextService) -> None:
    sid = await claude_session(svc, steps=1)
    assert isinstance(svc.engine, BuiltinEngine)
    assert svc.engine.status(sid) == {
        "engine": "ctxledger"
    }  # the runtime numbers are the service's
    assert "compactions" not in msgspec.structs.asdict(RuntimeState())
    status = svc.status(sid)
    assert status["engine"] == "ctxledger" and status["compactions"] == 0 and status["strikes"] == 0


async def test_the_tracker_rides_on_the_ledgers_fold(
    svc: ContextService, monkeypatch: pytest.MonkeyPatch
) -> None:
    sid = await claude_session(svc, steps=2)
    assert svc.tracker._on_record in svc.ledger.projector.listeners
    assert (
        svc.tracker.state(sid).context_length == 16_384
    )  # the first fold reads the chain's streams
    await svc.append(sid, exchange(5))
    await svc.report_usage(
        sid, {"prompt_tokens": 11_000, "completion_tokens": 5}
    )  # over the pressure level
    svc.ledger.switch_model(sid, CLAUDE, 20_000)

    def no_reads(*args: object, **kwargs: object) -> None:
        raise AssertionError("the tracker read the store again")

    with monkeypatch.context() as patch:
        patch.setattr(svc.ledger.store, "read_all", no_reads)
        patch.setattr(svc.ledger.store, "read_stream", no_reads)
        state = svc.tracker.state(sid)  # the events since came from the ledger's fold
    assert (state.warned, state.context_length) == (True, 20_000)
    assert RuntimeTracker(svc.ledger, CONFIG).state(sid) == state  # a fresh fold agrees


async def test_the_tracker_sees_another_writers_events_after_a_refresh(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"
    first = ContextService(
        Ledger.open(path, clock=StepClock(), ids=SequentialIds("a"), config=CONFIG), config=CONFIG
    )
    sid = await claude_session(first, steps=1)
    assert not first.tracker.state(sid).warned
    other = Ledger.open(path, clock=StepClock(), ids=SequentialIds("b"), config=CONFIG)
    other.switch_model(sid, CLAUDE, 24_000)
    other.close()
    assert first.tracker.state(sid).context_length == 16_384  # not folded yet
    first.tip(sid)  # reads the new events
    assert first.tracker.state(sid).context_length == 24_000
    await first.aclose()


# --- bad inputs: a clear error and nothing appended ------------------------------------------------

Call = Callable[[ContextService, str], Coroutine[Any, Any, object]]

BAD_CALLS: list[tuple[str, Call, type[Exception], str]] = [
    (
        "messages_not_a_list",
        lambda s, sid: s.append(sid, {"role": "user", "content": "x"}),
        InvalidInput,
        "list",
    ),
    ("messages_a_string", lambda s, sid: s.append(sid, "hello"), InvalidInput, "list"),  # type: ignore[arg-type]
    ("message_not_an_object", lambda s, sid: s.append(sid, [1]), InvalidMessage, "JSON object"),  # type: ignore[list-item]
    (
        "unknown_role",
        lambda s, sid: s.append(sid, [{"role": "robot", "content": "x"}]),
        InvalidMessage,
        "role",
    ),
    (
        "orphan_result",
        lambda s, sid: s.append(sid, [{"role": "tool", "tool_call_id": "zz", "content": "x"}]),
        InvalidMessage,
        "no earlier",
    ),
    (
        "second_result",
        lambda s, sid: s.append(
            sid, [{"role": "tool", "tool_call_id": "call_0", "content": "again"}]
        ),
        InvalidMessage,
        "second",
    ),
    (
        "not_json",
        lambda s, sid: s.append(sid, [{"role": "user", "content": "x", "meta": object()}]),
        InvalidInput,
        "JSON",
    ),
    (
        "half_bad_batch",
        lambda s, sid: s.append(sid, [{"role": "user", "content": "fine"}, {"role": "user"}]),
        InvalidMessage,
        "message 1",
    ),
    ("usage_not_a_dict", lambda s, sid: s.report_usage(sid, "100 tokens"), InvalidInput, "usage"),  # type: ignore[arg-type]
    (
        "usage_negative",
        lambda s, sid: s.report_usage(sid, {"prompt_tokens": -1}),
        InvalidInput,
        "negative",
    ),
    (
        "usage_unknown_shape",
        lambda s, sid: s.report_usage(sid, {"tokens": 5}),
        InvalidInput,
        "shape",
    ),
    (
        "usage_cache_over_prompt",
        lambda s, sid: s.report_usage(
            sid, {"prompt_tokens": 5, "prompt_tokens_details": {"cached_tokens": 9}}
        ),
        InvalidInput,
        "exceed",
    ),
    (
        "usage_not_json",
        lambda s, sid: s.report_usage(sid, {"prompt_tokens": 5, "x": object()}),
        InvalidInput,
        "JSON",
    ),
    (
        "usage_bad_cost",
        lambda s, sid: s.report_usage(sid, {"prompt_tokens": 5}, cost_usd=math.nan),
        InvalidInput,
        "cost_usd",
    ),
    (
        "usage_bad_model",
        lambda s, sid: s.report_usage(sid, {"prompt_tokens": 5}, model=5),
        InvalidInput,
        "model",
    ),  # type: ignore[arg-type]
    ("switch_small_window", lambda s, sid: s.switch_model(sid, "m", 512), InvalidInput, "1024"),
    (
        "switch_bool_window",
        lambda s, sid: s.switch_model(sid, "m", True),
        InvalidInput,
        "context_length",
    ),
    ("switch_empty_model", lambda s, sid: s.switch_model(sid, " ", 8_192), InvalidInput, "model"),
    ("focus_not_a_string", lambda s, sid: s.compress(sid, focus=["tests"]), InvalidInput, "focus"),  # type: ignore[arg-type]
    (
        "unknown_session_append",
        lambda s, sid: s.append("ses_missing", [{"role": "user", "content": "x"}]),
        UnknownSession,
        "ses_missing",
    ),
    (
        "unknown_session_usage",
        lambda s, sid: s.report_usage("ses_missing", {"prompt_tokens": 1}),
        UnknownSession,
        "ses_missing",
    ),
    (
        "unknown_session_preflight",
        lambda s, sid: s.preflight("ses_missing"),
        UnknownSession,
        "ses_missing",
    ),
    (
        "start_tiny_window",
        lambda s, sid: s.start_session(model="m", context_length=100),
        InvalidInput,
        "1024",
    ),
    ("start_empty_model", lambda s, sid: s.start_session(model=""), InvalidInput, "model"),
    # list(0) was a TypeError before the ledger's own check could name it
    (
        "start_tools_not_a_list",
        lambda s, sid: s.start_session(model="m", tools=0),
        InvalidInput,
        "tools must be a list of tool schemas, got int",
    ),  # type: ignore[arg-type]
    (
        "start_session_id_a_list",
        lambda s, sid: s.start_session(model="m", session_id=["x"]),
        InvalidInput,
        "session_id must be a non-blank string",
    ),  # type: ignore[arg-type]
    (
        "start_unknown_parent",
        lambda s, sid: s.start_session(
            model="m", context_length=8_192, parent_session_id="ses_nope"
        ),
        UnknownSession,
        "ses_nope",
    ),
    (
        "start_continuation",
        lambda s, sid: s.start_session(model="m", context_length=8_192, reason="compression"),
        InvalidInput,
        "compaction",
    ),
    (
        "start_existing_id",
        lambda s, sid: s.start_session(model="m", context_length=8_192, session_id=sid),
        InvalidInput,
        "already exists",
    ),
    (
        "start_tools_not_json",
        lambda s, sid: s.start_session(model="m", context_length=8_192, tools=[{"f": object()}]),
        InvalidInput,
        "JSON",
    ),
    ("end_reason_empty", lambda s, sid: s.end_session(sid, ""), InvalidInput, "reason"),
]


@pytest.mark.parametrize(
    ("name", "bad", "error", "words"), BAD_CALLS, ids=[c[0] for c in BAD_CALLS]
)
async def test_bad_input_is_a_clear_error_with_nothing_appended(
    svc: ContextService, name: str, bad: Call, error: type[Exception], words: str
) -> None:
    sid = await claude_session(svc, steps=1)
    last = svc.ledger.store.last_seq()
    with pytest.raises(error, match=words):
        await bad(svc, sid)
    assert svc.ledger.store.last_seq() == last
    assert svc.api_messages(sid, cache=False) == Projector.rebuild(
        svc.ledger.store, use_checkpoint=False
    ).transcript.api_messages(sid)


async def test_an_ended_session_refuses_everything(svc: ContextService) -> None:
    sid = await claude_session(svc, steps=1)
    await svc.end_session(sid, "user closed it")
    last = svc.ledger.store.last_seq()
    for call in (
        svc.append(sid, [{"role": "user", "content": "x"}]),
        svc.report_usage(sid, {"prompt_tokens": 1}),
        svc.preflight(sid),
        svc.hygiene(sid),
        svc.compress(sid),
        svc.switch_model(sid, "m", 8_192),
        svc.handle_provider_error(sid, 400, "prompt is too long"),
        svc.end_session(sid),
    ):
        with pytest.raises(SessionEndedError, match="user closed it"):
            await call
    assert svc.ledger.store.last_seq() == last
