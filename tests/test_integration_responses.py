"""The Responses items <-> chat messages converter: lossless round trips and the chat
shape the ledger's planner expects."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxledger.errors import InvalidInput
from ctxledger.integrations.responses import STUBS, items_to_messages, messages_to_items
from ctxledger.messages import validate_messages

RUN_ITEMS = [
    {"role": "user", "content": "read src/app.py"},
    {
        "type": "reasoning",
        "id": "rs_1",
        "summary": [{"type": "summary_text", "text": "need the file"}],
        "encrypted_content": "gAAAA",
    },
    {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [
            {"type": "output_text", "text": "Reading it.", "annotations": [], "logprobs": []}
        ],
    },
    {
        "id": "fc_1",
        "type": "function_call",
        "call_id": "call_a",
        "name": "read_file",
        "arguments": '{"path":"src/app.py"}',
        "status": "completed",
    },
    {
        "id": "fc_2",
        "type": "function_call",
        "call_id": "call_b",
        "name": "read_file",
        "arguments": '{"path":"README.md"}',
    },
    {"type": "function_call_output", "call_id": "call_a", "output": "print('hi')"},
    {
        "type": "function_call_output",
        "call_id": "call_b",
        "output": [{"type": "input_text", "text": "# readme"}],
    },
    {
        "id": "msg_2",
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [
            {"type": "output_text", "text": "Both read.", "annotations": [], "logprobs": []}
        ],
    },
    {
        "type": "message",
        "role": "developer",
        "content": [{"type": "input_text", "text": "be terse"}],
    },
    {
        "role": "user",
        "content": [
            {"type": "input_text", "text": "look"},
            {"type": "input_image", "image_url": "data:image/png;base64,AAAA", "detail": "auto"},
        ],
    },
]


def test_a_run_round_trips_exactly():
    messages = items_to_messages(RUN_ITEMS)
    assert messages_to_items(messages) == RUN_ITEMS


def test_parallel_calls_become_one_assistant_turn_with_its_results_after_it():
    messages = items_to_messages(RUN_ITEMS)
    assert [m["role"] for m in messages] == [
        "user",
        "assistant",
        "tool",
        "tool",
        "assistant",
        "developer",  # recorded with its own role since session 38 (was "system")
        "user",
    ]
    turn = messages[1]
    assert turn["content"] == "Reading it."
    assert [c["id"] for c in turn["tool_calls"]] == ["call_a", "call_b"]
    validate_messages(messages)  # the ledger accepts the sequence as it is


def test_ledger_rewrites_come_back_applied():
    messages = items_to_messages(RUN_ITEMS[:7])
    pruned = [dict(m) for m in messages]
    pruned[2] = {**pruned[2], "content": "[read_file] read src/app.py (11 chars)"}
    # an orphaned call stripped by the planner: call_b and its result are gone
    pruned[1] = {**pruned[1], "tool_calls": pruned[1]["tool_calls"][:1]}
    del pruned[3]
    items = messages_to_items(pruned)
    assert [i.get("call_id") for i in items if i.get("type") == "function_call"] == ["call_a"]
    assert items[-1] == {
        "type": "function_call_output",
        "call_id": "call_a",
        "output": "[read_file] read src/app.py (11 chars)",
    }


def test_a_summary_written_by_the_ledger_is_a_plain_user_message():
    assert messages_to_items([{"role": "user", "content": "[summary] earlier turns"}]) == [
        {"role": "user", "content": "[summary] earlier turns"}
    ]


def test_stubs_are_extra_keys_not_content():
    msg = items_to_messages([RUN_ITEMS[2]])[0]
    assert msg["content"] == "Reading it." and STUBS in msg


@pytest.mark.parametrize(
    ("item", "error"),
    [
        ("text", "must be an object"),
        ({"type": "function_call", "name": "x", "arguments": "{}"}, "call_id"),
        ({"type": "function_call_output", "output": "x"}, "call_id"),
        ({"role": "robot", "content": "x"}, "unknown message role"),
        ({"content": "x"}, "no 'type'"),
    ],
)
def test_bad_items_are_named(item, error):
    with pytest.raises(InvalidInput, match=error):
        items_to_messages([item])


texts = st.text(st.characters(codec="utf-8"), max_size=20)


@st.composite
def runs(draw):
    items: list[dict] = []
    for n in range(draw(st.integers(0, 6))):
        items.append({"role": "user", "content": draw(texts) or "q"})
        calls = [f"c{n}_{k}" for k in range(draw(st.integers(0, 3)))]
        if draw(st.booleans()):
            items.append({"type": "reasoning", "id": f"rs{n}", "summary": []})
        if draw(st.booleans()) or not calls:
            parts = [
                {"type": "output_text", "text": draw(texts), "annotations": []}
                for _ in range(draw(st.integers(1, 2)))
            ]
            items.append(
                {
                    "id": f"m{n}",
                    "type": "message",
                    "role": "assistant",
                    "status": "completed",
                    "content": parts,
                }
            )
        for c in calls:
            items.append(
                {"type": "function_call", "call_id": c, "name": "tool", "arguments": draw(texts)}
            )
        for c in calls:
            items.append({"type": "function_call_output", "call_id": c, "output": draw(texts)})
    return items


@given(runs())
def test_any_run_round_trips(items):
    assert messages_to_items(items_to_messages(items)) == items
