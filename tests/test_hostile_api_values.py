"""Hostile Python values into the public library API: a named error, a short message,
nothing appended (session 41's fuzzing of ``Ledger`` and ``ContextService``).

What the fuzzing found, each a test here: a usage report or a tool that holds itself
was walked without end (memory growing, no answer); one nesting thousands of levels
raised RecursionError; a field holding itself failed the event encoder with a
RecursionError; a value quoted by an error (a session id, a context length) raised
from its own ``repr`` (a deep list) or was quoted whole (2 MB); an int past a float's
range was an OverflowError (``cost_usd``, a float setting); ``append_events(sid, None)``
and ``extra_events=5`` were TypeErrors; a focus of a ``str`` subclass failed the plan's
encoder after the summary was made.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

import anyio
import pytest
from helpers.ledger_helpers import LS_CALL as CALL
from helpers.ledger_helpers import LS_TOOL as TOOL
from helpers.ledger_helpers import deterministic_ledger, ledger_with_one_call
from hypothesis import given
from hypothesis import strategies as st

from ctxledger import (
    CompressionConfig,
    ContextService,
    CtxLedgerError,
    InvalidConfig,
    InvalidInput,
    Ledger,
    NotFound,
    OfflineSummarizer,
    compact,
    normalize_usage,
)
from ctxledger.events import CompressionSkipped
from ctxledger.integers import shown


def _selfish_list() -> list[Any]:
    items: list[Any] = []
    items.append(items)
    return items


def _selfish_dict() -> dict[str, Any]:
    block: dict[str, Any] = {}
    block["a"] = block
    return block


def _deep(levels: int) -> Any:
    value: Any = "x"
    for _ in range(levels):
        value = [value]
    return value


class _Text(str):
    """A str subclass (an enum-less one: msgspec encodes none)."""


@pytest.fixture
def ledger() -> Iterator[tuple[Ledger, str]]:
    led, sid = ledger_with_one_call()
    yield led, sid
    led.close()


def _refused(led: Ledger, call: Callable[[], Any], error: type[Exception] = InvalidInput) -> str:
    """`call` raises `error` (a CtxLedgerError), its message short; the log is unchanged."""
    before = [(r.seq, r.event.event_id) for r in led.store.read_all()]
    with pytest.raises(error) as caught:
        call()
    assert isinstance(caught.value, CtxLedgerError)
    assert len(str(caught.value)) < 600, str(caught.value)[:200]
    assert [(r.seq, r.event.event_id) for r in led.store.read_all()] == before
    return str(caught.value)


# --------------------------------------------------------------- values that hold themselves


@pytest.mark.parametrize("maker", [_selfish_list, _selfish_dict], ids=["list", "dict"])
def test_a_usage_report_holding_itself_is_refused_not_walked_forever(
    ledger: tuple[Ledger, str], maker: Callable[[], Any]
) -> None:
    led, sid = ledger
    for raw in ({"prompt_tokens": 5, "extra": maker()}, {"input_tokens": maker()}, maker()):
        if isinstance(raw, list):  # a list is no usage report: refused by its type
            continue
        text = _refused(led, lambda raw=raw: led.report_usage(sid, raw))
        assert "deeper than 100 levels" in text or "must be a number" in text, text


def test_a_usage_report_nesting_thousands_of_levels_is_refused(ledger: tuple[Ledger, str]) -> None:
    led, sid = ledger
    text = _refused(led, lambda: led.report_usage(sid, {"prompt_tokens": 5, "x": _deep(5000)}))
    assert text.startswith("usage nests deeper than 100 levels"), text


def _nest(levels: int) -> Any:
    """A dict nesting `levels` levels (itself level 1, as a message counts)."""
    value: Any = None
    for _ in range(levels):
        value = {"n": value}
    return value


@pytest.mark.parametrize("levels", [100, 101])
def test_the_nesting_limit_counts_tools_and_usage_as_it_counts_messages(
    ledger: tuple[Ledger, str], levels: int
) -> None:
    """At exactly the limit (100) a tool, a usage block and a message are taken; one
    level more and each is refused (review M2)."""
    led, sid = ledger
    cases: list[Callable[[], Any]] = [
        lambda: led.report_usage(sid, {"prompt_tokens": 5, "x": _nest(levels - 1)}),
        lambda: led.start_session(
            model="m",
            tools=[
                {"type": "function", "function": {"name": "a", "parameters": _nest(levels - 2)}}
            ],
        ),
        lambda: led.append_messages(
            sid, [{"role": "user", "content": "x", "x": _nest(levels - 1)}]
        ),
    ]
    for index, call in enumerate(cases):
        if levels == 100:
            call()
            continue
        text = _refused(led, call, CtxLedgerError)
        assert "nests deeper than 100 levels" in text, (index, text)


@pytest.mark.parametrize(
    "raw", [_selfish_dict(), {"a": _deep(5000)}, {"input_tokens": _selfish_dict()}]
)
def test_normalize_usage_refuses_a_block_holding_itself_or_nesting_deep(raw: Any) -> None:
    with pytest.raises(InvalidInput):
        normalize_usage(raw)


@pytest.mark.parametrize(
    "tools",
    [[_selfish_dict()], [{"type": "function", "function": _selfish_dict()}], [_deep(3000)]],
    ids=["tool", "function", "deep"],
)
def test_a_tool_holding_itself_is_refused_at_start(
    ledger: tuple[Ledger, str], tools: list[Any]
) -> None:
    led, _ = ledger
    _refused(led, lambda: led.start_session(model="m", tools=tools))


@pytest.mark.parametrize("field", ["reason", "source", "title"])
def test_a_session_field_holding_itself_is_refused_not_a_recursion_error(
    ledger: tuple[Ledger, str], field: str
) -> None:
    led, _ = ledger
    _refused(led, lambda: led.start_session(model="m", **{field: _selfish_list()}))


def test_a_provider_error_body_holding_itself_is_read_not_a_recursion_error(
    ledger: tuple[Ledger, str],
) -> None:
    led, sid = ledger

    async def run() -> str:
        service = ContextService(led)
        recovery = await service.handle_provider_error(sid, 400, _selfish_list())
        return recovery.action

    assert anyio.run(run) == "fail"


# ------------------------------------------------------------------- errors quote values short


@pytest.mark.parametrize(
    "value",
    [_deep(5000), _selfish_list(), "x" * 2_000_000, 10**5000],
    ids=["deep", "selfish", "2MB", "5000 digits"],
)
def test_an_error_quotes_a_hostile_value_short(ledger: tuple[Ledger, str], value: Any) -> None:
    led, sid = ledger
    cases: list[tuple[Callable[[], Any], type[Exception]]] = [
        (lambda: led.api_messages(value), NotFound),
        (lambda: led.end_session(value), NotFound),
        (lambda: led.pin(sid, value), NotFound),
        (lambda: led.resolve_message(sid, value), CtxLedgerError),
        (lambda: led.start_session(model="m", context_length=value), InvalidInput),
        (lambda: led.start_session(model="m", parent_session_id=value, reason="branch"), NotFound),
        (lambda: led.report_usage(sid, {"prompt_tokens": 5}, purpose=value), InvalidInput),
        (lambda: led.report_usage(sid, {"prompt_tokens": 5}, shape=value), InvalidInput),
        (lambda: led.report_usage(sid, {"prompt_tokens": 5}, cost_usd=value), InvalidInput),
        (lambda: led.switch_model(sid, "m2", value), InvalidInput),
        (lambda: led.projector_at(value), InvalidInput),
        (lambda: led.start_session(model="m", system_prompt="s", system_role=value), InvalidInput),
    ]
    if isinstance(value, str | int) and not isinstance(value, bool):
        cases = [c for c in cases if c[1] is not NotFound or isinstance(value, str)]
    for call, error in cases:
        try:
            _refused(led, call, error)
        except BaseException as exc:  # name the case that failed
            raise AssertionError(f"case {cases.index((call, error))}: {exc!r:.300}") from exc


def test_shown_is_short_and_never_raises() -> None:
    class Rude:
        def __repr__(self) -> str:
            raise RuntimeError("no")

    for value in (_deep(5000), _selfish_dict(), "x" * 10**6, 10**5000, Rude(), b"\xff" * 10**5):
        assert len(shown(value)) < 200
    assert shown("ab") == "'ab'" and shown(12) == "12" and shown(None) == "None"


def test_shown_counts_digits_exactly_and_says_a_cut_string_s_length() -> None:
    """ "about N digits" rounded down (2**128 + 1 has 39, was "about 38"); a string cut
    short did not say how long it was (review L8)."""
    assert shown(2**128 + 1) == "an integer of 39 digits"
    assert shown(-(10**5000)) == "an integer of 5,001 digits"
    assert shown(10**4000 - 1) == "an integer of 4,000 digits"
    assert shown("x" * 100) == repr("x" * 40) + "… (100 characters)"
    assert shown(_Text("ab")) == "'ab'"


def _deep_tuple(levels: int) -> Any:
    value: Any = ()
    for _ in range(levels):
        value = (value,)
    return value


@pytest.mark.parametrize("key", [10**5000, _deep_tuple(5000)], ids=["5000 digits", "deep tuple"])
def test_a_key_that_is_not_text_is_quoted_short(ledger: tuple[Ledger, str], key: Any) -> None:
    """A non-text dict key was quoted with repr: ValueError for a 5,000-digit int,
    RecursionError for a tuple nesting 5,000 levels (review HIGH)."""
    led, sid = ledger
    cases: list[Callable[[], Any]] = [
        lambda: led.report_usage(sid, {"prompt_tokens": 5, "x": {key: 1}}),
        lambda: led.start_session(model="m", tools=[{"type": "function", key: 1}]),
        lambda: led.append_messages(sid, [{"role": "user", "content": "x", key: 1}]),
        lambda: led.append_messages(
            sid, [{"role": "user", "content": [{"type": "text", "text": "x", key: 1}]}]
        ),
    ]
    for index, call in enumerate(cases):
        try:
            text = _refused(led, call, CtxLedgerError)
        except BaseException as exc:  # name the case that failed
            raise AssertionError(f"case {index}: {exc!r:.300}") from exc
        assert "key that is not text" in text, (index, text)


# ------------------------------------------------------------------------ numbers and types


def test_an_int_past_a_float_is_refused_as_a_cost_and_a_float_setting(
    ledger: tuple[Ledger, str],
) -> None:
    led, sid = ledger
    text = _refused(led, lambda: led.report_usage(sid, {"prompt_tokens": 5}, cost_usd=10**400))
    assert "cost_usd must be a finite number" in text and "401 digits" in text
    for name in ("threshold", "target_ratio", "summary_timeout", "pressure_level"):
        with pytest.raises(InvalidConfig, match=f"{name}: expected float, got an integer"):
            CompressionConfig(**{name: 10**400})


@pytest.mark.parametrize("value", [None, 5, 1.5, "x", b"x", {"a": 1}, object()])
def test_event_lists_of_the_wrong_type_are_refused(ledger: tuple[Ledger, str], value: Any) -> None:
    led, sid = ledger
    message = [{"role": "user", "content": "x"}]
    _refused(led, lambda: led.append_events(sid, value))
    _refused(led, lambda: led.append_messages(sid, message, extra_events=value))
    _refused(led, lambda: led.append_messages(sid, message, repairs=value))
    _refused(led, lambda: led.append_messages(sid, message, repairs=[{"old": "a"}]))


def test_event_lists_are_any_sequence(ledger: tuple[Ledger, str]) -> None:
    """The arguments are typed Sequence: a deque or a tuple was refused as "not a list"
    (review L11)."""
    led, sid = ledger

    def skip() -> CompressionSkipped:
        fields = led.event_fields(sid)
        return CompressionSkipped(**fields, trigger="preflight", reason="too_few_messages")

    before = led.version(sid)
    led.append_events(sid, deque([skip()]))
    led.append_events(sid, (skip(),))
    message = [{"role": "user", "content": "x"}]
    led.append_messages(sid, message, extra_events=deque([skip()]), repairs=deque())
    assert led.version(sid) == before + 4


def test_a_focus_given_as_a_str_subclass_compacts(ledger: tuple[Ledger, str]) -> None:
    led, sid = ledger
    for i in range(8):
        led.append_messages(
            sid,
            [{"role": "user", "content": f"q{i} " * 40}, {"role": "assistant", "content": "a"}],
        )

    async def run() -> Any:
        return await compact(led, sid, OfflineSummarizer(), focus=_Text("the tests"))

    outcome = anyio.run(run)
    assert outcome.action == "compressed", outcome.skip_reason


# ------------------------------------------------------------------ the property: any argument


_NUMBERS = st.one_of(
    st.integers(min_value=-(2**80), max_value=2**80),
    st.floats(),
    st.sampled_from([10**400, -(10**400), 2**63, float("nan"), float("inf")]),
)
_TEXTS = st.one_of(
    st.text(max_size=8),
    st.sampled_from(["", " ", "\x00", "\ud800", "a\u202eb", "x" * 5000, "ses_", "user"]),
)
_LEAVES = st.one_of(st.none(), st.booleans(), _NUMBERS, _TEXTS, st.binary(max_size=4))
_VALUES = st.recursive(
    _LEAVES,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.one_of(_TEXTS, st.integers()), inner, max_size=3),
        st.tuples(inner),
        st.frozensets(st.integers(), max_size=2),
    ),
    max_leaves=6,
)


@st.composite
def _hostile(draw: st.DrawFn) -> Any:
    """A drawn value, sometimes wrapped so it holds itself or nests past every limit."""
    value = draw(_VALUES)
    wrap = draw(st.sampled_from(["as is"] * 6 + ["selfish", "deep"]))
    if wrap == "selfish":
        holder: dict[str, Any] = {"v": value}
        holder["self"] = holder
        return holder
    if wrap == "deep":
        return [_deep(3000), value]
    return value


#: (name, call) for one drawn value `v` in one argument of a public method
_CALLS: list[tuple[str, Callable[[Ledger, str, Any], Any]]] = [
    ("message", lambda led, s, v: led.append_messages(s, [v])),
    ("content", lambda led, s, v: led.append_messages(s, [{"role": "user", "content": v}])),
    ("role", lambda led, s, v: led.append_messages(s, [{"role": v, "content": "x"}])),
    ("extra key", lambda led, s, v: led.append_messages(s, [{"role": "user", "content": "x", "k": v}])),
    ("part", lambda led, s, v: led.append_messages(s, [{"role": "user", "content": [v]}])),
    ("call", lambda led, s, v: led.append_messages(s, [{"role": "assistant", "tool_calls": [v]}])),
    ("call id", lambda led, s, v: led.append_messages(s, [{"role": "assistant", "tool_calls": [{**CALL, "id": v}]}])),
    ("tool_call_id", lambda led, s, v: led.append_messages(s, [{"role": "tool", "tool_call_id": v, "content": "x"}])),
    ("messages", lambda led, s, v: led.append_messages(s, v)),
    ("session", lambda led, s, v: led.append_messages(v, [{"role": "user", "content": "x"}])),
    ("usage", lambda led, s, v: led.report_usage(s, v)),
    ("usage figure", lambda led, s, v: led.report_usage(s, {"prompt_tokens": v})),
    ("usage block", lambda led, s, v: led.report_usage(s, {"input_tokens": 3, "input_tokens_details": v})),
    ("cost", lambda led, s, v: led.report_usage(s, {"prompt_tokens": 3}, cost_usd=v)),
    ("model", lambda led, s, v: led.report_usage(s, {"prompt_tokens": 3}, model=v)),
    ("start model", lambda led, s, v: led.start_session(model=v)),
    ("start window", lambda led, s, v: led.start_session(model="m", context_length=v)),
    ("start title", lambda led, s, v: led.start_session(model="m", title=v)),
    ("start tools", lambda led, s, v: led.start_session(model="m", tools=v)),
    ("start tool", lambda led, s, v: led.start_session(model="m", tools=[v])),
    ("start id", lambda led, s, v: led.start_session(model="m", session_id=v)),
    ("switch", lambda led, s, v: led.switch_model(s, v, 9000)),
    ("learn", lambda led, s, v: led.learn_context_limit(s, v, "too long")),
    ("pin", lambda led, s, v: led.pin(s, v)),
    ("end", lambda led, s, v: led.end_session(s, v)),
    ("events", lambda led, s, v: led.append_events(s, v)),
    ("resolve", lambda led, s, v: led.resolve(v)),
    ("tip", lambda led, s, v: led.tip(v)),
]  # fmt: skip


@given(st.sampled_from(_CALLS), _hostile())
def test_any_hostile_argument_gets_a_named_error_and_appends_nothing(
    case: tuple[str, Callable[[Ledger, str, Any], Any]], value: Any
) -> None:
    _, call = case
    led = deterministic_ledger()
    try:
        sid = led.start_session(model="m", tools=[TOOL])
        before = led.store.last_seq()
        try:
            call(led, sid, value)
        except CtxLedgerError as exc:
            assert len(str(exc)) < 1500, str(exc)[:200]
            assert led.store.last_seq() == before
    finally:
        led.close()
