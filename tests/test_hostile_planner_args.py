"""The pure planner and ``Ledger.repair_event`` given arguments of the wrong type.

``plan``/``draft``/``apply`` are public: a dict of settings as the config, a count
spelled as text, pins that are not indices, a focus of 5, a force of "yes" were
Python's own errors from deep inside (AttributeError, TypeError), or were taken into
the plan. Session 43: each is an InvalidInput (InvalidConfig for the config) naming
the argument, raised before any work (``compressor.planargs``); an item of the list
that is no message object is InvalidMessage naming its index (``apply`` too, for one it
would carry). What is a number in all but type (an IntEnum, an ``__index__`` object,
``force=1``, a generator of pins) is taken as the number. ``repair_event`` with
garbage (not CallIdRepair objects, an index no message has, a source that is neither
``append`` nor ``import``) was an AttributeError, a KeyError, or an event of another
shape; now InvalidInput, and an append given such repairs appends nothing.
"""

from __future__ import annotations

import enum
import re
from typing import Any

import pytest
from helpers.ledger_helpers import ledger_with_one_call
from hypothesis import given
from hypothesis import strategies as st

from ctxledger import CompressionConfig, apply, plan
from ctxledger.compressor.planner import draft
from ctxledger.errors import InvalidConfig, InvalidInput, InvalidMessage
from ctxledger.messages import CallIdRepair

CONFIG = CompressionConfig(context_length=16_000, threshold_floor_tokens=0)


def chat(n: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"role": "system", "content": "sys"}]
    for i in range(n):
        out.append({"role": "user", "content": f"question {i} " + "word " * 200})
        out.append({"role": "assistant", "content": f"answer {i} " + "word " * 200})
    return out


MESSAGES = chat(12)
COUNTS = [300] * len(MESSAGES)
GOOD: dict[str, Any] = {
    "messages": MESSAGES,
    "config": CONFIG,
    "token_counts": COUNTS,
    "context_length": 16_000,
    "focus": None,
    "pinned": (),
    "compaction_count": 0,
    "force": False,
    "cache": None,
}


def planned(**changes: Any) -> Any:
    args = {**GOOD, **changes}
    return plan(args.pop("messages"), args.pop("config"), args.pop("token_counts"), **args)


#: (argument, a wrong value, the error class, what the message says)
WRONG: list[tuple[str, Any, type[Exception], str]] = [
    ("config", {"threshold": 0.5}, InvalidConfig, "config must be a CompressionConfig"),
    ("config", None, InvalidConfig, "config must be a CompressionConfig, got None"),
    ("config", "default", InvalidConfig, "got str"),
    ("messages", "hello", InvalidInput, "messages must be a list of message objects, got str"),
    ("messages", {"role": "user"}, InvalidInput, "messages must be a list of message objects"),
    ("messages", 5, InvalidInput, "got int"),
    ("messages", [*MESSAGES[:-1], "hi"], InvalidMessage, "message 24: a message must be a JSON"),
    ("messages", [None] * len(MESSAGES), InvalidMessage, "message 0: a message must be a JSON"),
    ("token_counts", "300", InvalidInput, "token_counts must be a list of integers"),
    ("token_counts", 300, InvalidInput, "token_counts must be a list of integers, one per"),
    ("token_counts", ["300"] * len(MESSAGES), InvalidInput, "non-negative integers, got '300'"),
    ("token_counts", [1.5] * len(MESSAGES), InvalidInput, "non-negative integers, got 1.5"),
    ("token_counts", [True] * len(MESSAGES), InvalidInput, "non-negative integers, got True"),
    ("token_counts", [-1] * len(MESSAGES), InvalidInput, "non-negative integers, got -1"),
    ("token_counts", [1, 2], InvalidInput, "token_counts has 2 entries for 25 messages"),
    ("pinned", "3", InvalidInput, "pinned must be a collection of message indices, got str"),
    ("pinned", 3, InvalidInput, "pinned must be a collection of message indices, got int"),
    ("pinned", {3: True}, InvalidInput, "got dict"),
    ("pinned", ["3"], InvalidInput, "pinned must hold message indices (integers), got '3'"),
    ("pinned", [3.0], InvalidInput, "got 3.0"),
    ("pinned", [True], InvalidInput, "got True"),
    ("focus", 5, InvalidInput, "focus must be text or None, got int"),
    ("focus", ["a"], InvalidInput, "focus must be text or None, got list"),
    ("compaction_count", "1", InvalidInput, "compaction_count must be a non-negative integer"),
    ("compaction_count", -1, InvalidInput, "got -1"),
    ("compaction_count", True, InvalidInput, "got True"),
    ("compaction_count", 1.0, InvalidInput, "got 1.0"),
    ("force", "yes", InvalidInput, "force must be True or False, got 'yes'"),
    ("force", 2, InvalidInput, "force must be True or False, got 2"),
    ("force", 1.0, InvalidInput, "got 1.0"),
    ("force", None, InvalidInput, "got None"),
    ("cache", {}, InvalidInput, "cache must be a PlanCache or None, got dict"),
    ("context_length", "16000", InvalidConfig, "context length must be a positive int"),
]


@pytest.mark.parametrize(("name", "value", "error", "says"), WRONG, ids=range(len(WRONG)))
def test_plan_names_an_argument_of_the_wrong_type(
    name: str, value: Any, error: type[Exception], says: str
) -> None:
    with pytest.raises(error, match=re.escape(says)):
        planned(**{name: value})


@pytest.mark.parametrize(("name", "value", "error", "says"), WRONG[::4], ids=range(len(WRONG[::4])))
def test_draft_checks_the_same(name: str, value: Any, error: type[Exception], says: str) -> None:
    args = {**GOOD, name: value}
    with pytest.raises(error, match=re.escape(says)):
        draft(args.pop("messages"), args.pop("config"), args.pop("token_counts"), **args)


OFF = CONFIG.replace(enabled=False)
#: items the planner's scan cannot read: InvalidMessage whatever the config says
JUNK_ITEMS: list[tuple[list[Any], str]] = [
    (["a", "b"], "message 0: a message must be a JSON object, got str"),
    ([*MESSAGES[:-1], None], "message 24: a message must be a JSON object, got NoneType"),
    ([{"role": "tool", "content": "x"}], "needs validated OpenAI messages"),
    ([{"role": "assistant", "content": None, "tool_calls": 5}], "needs validated OpenAI"),
]


@pytest.mark.parametrize(("name", "value", "error", "says"), WRONG, ids=range(len(WRONG)))
def test_a_disabled_config_checks_the_same_before_it_skips(
    name: str, value: Any, error: type[Exception], says: str
) -> None:
    """Session 44: with compression off and not forced, ``plan`` answered "disabled"
    before it scanned the list, so junk items passed there unnamed; every argument is
    checked first now, as on every other path."""
    config = value if name == "config" else OFF
    with pytest.raises(error, match=re.escape(says)):
        planned(**{"config": config, name: value})


@pytest.mark.parametrize(("messages", "says"), JUNK_ITEMS, ids=range(len(JUNK_ITEMS)))
@pytest.mark.parametrize("config", [CONFIG, OFF], ids=["on", "off"])
def test_unreadable_items_are_refused_whether_or_not_compression_is_on(
    config: CompressionConfig, messages: list[Any], says: str
) -> None:
    with pytest.raises(InvalidMessage, match=re.escape(says)):
        planned(config=config, messages=messages, token_counts=[1] * len(messages))


def test_a_disabled_config_still_skips_good_messages() -> None:
    assert planned(config=OFF).skip_reason == "disabled"
    assert planned(config=OFF, messages=[], token_counts=[]).skip_reason == "disabled"
    assert planned(config=OFF, force=True).action == "compress"


def test_good_arguments_of_every_accepted_kind_still_plan() -> None:
    base = planned()
    assert base.action == "compress"
    assert (
        planned(token_counts=tuple(COUNTS), pinned=frozenset({3}), focus="x").action == base.action
    )
    assert (
        planned(messages=tuple(MESSAGES), pinned=range(2), compaction_count=2).action == "compress"
    )
    assert planned(pinned=[999]).action == "compress"  # (out of range: a note, as before)


class Count(enum.IntEnum):
    THREE = 3


class Index:
    """A number in all but type (as a numpy integer is): ``operator.index`` reads it."""

    def __init__(self, value: int) -> None:
        self.value = value

    def __index__(self) -> int:
        return self.value


@pytest.mark.parametrize(
    ("changes", "same_as"),
    [
        ({"pinned": [Count.THREE]}, {"pinned": [3]}),
        ({"pinned": (Index(3), Index(4))}, {"pinned": [3, 4]}),
        ({"pinned": (i for i in (3, 4))}, {"pinned": [3, 4]}),
        ({"pinned": {3: None}.keys()}, {"pinned": [3]}),
        ({"compaction_count": Count.THREE}, {"compaction_count": 3}),
        ({"compaction_count": Index(2)}, {"compaction_count": 2}),
        ({"force": 1}, {"force": True}),
        ({"force": Index(0)}, {"force": False}),
    ],
    ids=range(8),
)
def test_a_number_in_all_but_type_is_taken_as_the_number(
    changes: dict[str, Any], same_as: dict[str, Any]
) -> None:
    """An IntEnum, a numpy-like integer, a generator of pins, ``force=1``: what the
    caller means is plain; the plan is the one the plain values make, holding ints."""
    got, want = planned(**changes), planned(**same_as)
    assert got == want
    assert type(got.compaction_count) is int and type(got.forced) is bool
    assert all(type(i) is int for i in got.pinned)


def _last_is(item: Any) -> list[Any]:
    return [*MESSAGES[:-1], item]


@pytest.mark.parametrize("copy_carried", [True, False])
@pytest.mark.parametrize(
    "item", ["ab", "x", None, 5, [("role", "user"), ("content", "FORGED")]], ids=range(5)
)
def test_apply_names_a_carried_item_that_is_no_message(copy_carried: bool, item: Any) -> None:
    """The tail is carried into the result: an item there that is no message object was
    ``dict("ab")``'s bare ValueError, or (not copied) given back in the result as it was."""
    the_plan = planned()
    assert the_plan.tail_start < len(MESSAGES)
    with pytest.raises(InvalidMessage, match=re.escape(f"message {len(MESSAGES) - 1}: a mes")):
        apply(the_plan, _last_is(item), "the summary", copy_carried=copy_carried)


def test_apply_names_a_system_slot_that_is_no_message() -> None:
    with pytest.raises(InvalidMessage, match=re.escape("message 0: a message must be a JSON")):
        apply(planned(), ["x", *MESSAGES[1:]], "the summary")


@pytest.mark.parametrize(
    ("args", "says"),
    [
        ({"plan": {"action": "compress"}}, "plan must be a CompactionPlan (from plan()), got dict"),
        ({"plan": None}, "plan must be a CompactionPlan (from plan()), got NoneType"),
        ({"messages": "hi"}, "messages must be a list of message objects, got str"),
        ({"messages": [5] * len(MESSAGES)}, "message 0: a message must be a JSON object, got int"),
        ({"summary_text": 5}, "summary_text must be text, got int"),
        ({"summary_text": None}, "summary_text must be text, got NoneType"),
        ({"summary_text": b"x"}, "summary_text must be text, got bytes"),
        ({"copy_carried": "no"}, "copy_carried must be True or False, got 'no'"),
        ({"copy_carried": 2}, "copy_carried must be True or False, got 2"),
    ],
)
def test_apply_names_an_argument_of_the_wrong_type(args: dict[str, Any], says: str) -> None:
    """InvalidInput for each (InvalidMessage, its subclass, for an item)."""
    full = {"plan": planned(), "messages": MESSAGES, "summary_text": "the summary", **args}
    copy_carried = full.pop("copy_carried", True)
    with pytest.raises(InvalidInput, match=re.escape(says)):
        apply(full["plan"], full["messages"], full["summary_text"], copy_carried=copy_carried)


_WRONG_VALUE = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 5),
    st.floats(allow_nan=True),
    st.text(max_size=5),
    st.binary(max_size=3),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
    st.lists(st.one_of(st.text(max_size=2), st.floats(), st.none()), min_size=1, max_size=3),
)


@given(st.sampled_from(sorted(GOOD)), _WRONG_VALUE)
def test_any_value_in_any_argument_plans_or_is_refused_by_name(name: str, value: Any) -> None:
    """Never Python's own error: a plan, or a ctxledger error naming the argument."""
    try:
        planned(**{name: value})
    except InvalidInput as exc:
        said = str(exc)
        assert name.replace("_", " ") in said or name in said, said
        assert len(said) < 300, said


# --- repair_event -------------------------------------------------------------------------

REPAIR = CallIdRepair(index=0, call_index=0, original="c1", replacement="c1_b")


@pytest.mark.parametrize(
    ("repairs", "ids", "source", "says"),
    [
        ([REPAIR], ["m1"], "bogus", "source must be one of append, import, got 'bogus'"),
        ([REPAIR], ["m1"], 5, "source must be one of append, import, got 5"),
        ("c1", ["m1"], "append", "repairs must be a list, got str"),
        (None, ["m1"], "append", "repairs must be a list, got NoneType"),
        ([5], ["m1"], "append", "repairs[0] must be a CallIdRepair, got int"),
        ([{"index": 0}], ["m1"], "append", "repairs[0] must be a CallIdRepair, got dict"),
        ([REPAIR], [], "append", "repairs[0] names message 0, which message_ids does not hold"),
        ([REPAIR], {1: "m1"}, "append", "names message 0, which message_ids does not hold"),
        ([REPAIR], "m1", "append", "message_ids must be a list of message ids or a mapping"),
        ([REPAIR], None, "append", "got NoneType"),
        ([REPAIR], [5], "append", "names message 0, whose id is not text: 5"),
        (
            [CallIdRepair(index="0", call_index=0, original="a", replacement="b")],  # type: ignore[arg-type]
            ["m1"],
            "append",
            "has an index that is not an integer: '0', 0",
        ),
        (
            [CallIdRepair(index=-1, call_index=None, original="a", replacement="b")],
            ["m1"],
            "append",
            "names message -1, which message_ids does not hold",
        ),
        (
            [CallIdRepair(index=0, call_index=None, original=5, replacement="b")],  # type: ignore[arg-type]
            ["m1"],
            "append",
            "has an id that is not text",
        ),
    ],
)
def test_repair_event_refuses_garbage_by_name(
    repairs: Any, ids: Any, source: Any, says: str
) -> None:
    ledger, sid = ledger_with_one_call()
    with pytest.raises(InvalidInput, match=re.escape(says)):
        ledger.repair_event(sid, repairs, ids, source)


def test_an_append_given_garbage_repairs_appends_nothing() -> None:
    ledger, sid = ledger_with_one_call()
    before = ledger.store.last_seq()
    with pytest.raises(InvalidInput, match=re.escape("repairs must be a list of CallIdRepair")):
        ledger.append_messages(sid, [{"role": "user", "content": "x"}], repairs=["junk"])  # type: ignore[list-item]
    assert ledger.store.last_seq() == before


def test_good_repairs_still_make_their_event() -> None:
    ledger, sid = ledger_with_one_call()
    event = ledger.repair_event(sid, [REPAIR], {0: "m1"}, "import")
    assert event.source == "import" and event.repairs[0].message_id == "m1"


_GARBAGE = st.one_of(
    st.none(),
    st.integers(-3, 3),
    st.text(max_size=4),
    st.lists(
        st.one_of(st.none(), st.integers(-2, 2), st.text(max_size=3), st.just(REPAIR)), max_size=3
    ),
    st.dictionaries(st.integers(-2, 2), st.one_of(st.text(max_size=3), st.integers()), max_size=2),
)


@given(_GARBAGE, _GARBAGE, st.one_of(st.sampled_from(["append", "import"]), _GARBAGE))
def test_repair_event_makes_its_event_or_refuses_by_name(
    repairs: Any, ids: Any, source: Any
) -> None:
    ledger, sid = ledger_with_one_call()
    try:
        event = ledger.repair_event(sid, repairs, ids, source)
    except InvalidInput as exc:
        assert len(str(exc)) < 300
        return
    assert event.source in ("append", "import")
    assert all(isinstance(r.message_id, str) for r in event.repairs)
