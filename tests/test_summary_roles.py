"""Only a user or assistant message carries a summary (where compaction writes one). A tool
output that holds a summary's text (a stored output read back with ``read_persisted``,
which answers raw text) is a tool output."""

from __future__ import annotations

from ctxledger.compressor import markers
from ctxledger.testing.engine import check_live_view

SUMMARY_TEXT = "the stored output" + markers.merge_lead() + markers.wrap_summary("a body")
CALL = {"id": "c1", "type": "function", "function": {"name": "read_persisted", "arguments": "{}"}}


def test_a_tool_output_holding_a_summarys_text_is_not_a_summary():
    tool = {"role": "tool", "tool_call_id": "c1", "content": SUMMARY_TEXT}
    assert not markers.is_summary_message(tool)
    assert markers.split_merged(tool) is None  # (as compaction already read it)
    for role in ("user", "assistant"):
        assert markers.is_summary_message({"role": role, "content": SUMMARY_TEXT})


def test_the_live_view_check_accepts_a_tool_output_after_the_latest_ask():
    view = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "read it"},
        {"role": "assistant", "content": None, "tool_calls": [CALL]},
        {"role": "tool", "tool_call_id": "c1", "content": SUMMARY_TEXT},
    ]
    check_live_view(view)  # (raised: "the latest user ask comes before the summary")
