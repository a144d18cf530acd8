"""Summaries Hermes Agent wrote itself are read as summaries (HERMES_SPEC §3 phase 4:
old prefixes are recognised and replaced, never stacked).

A list Hermes already compacted (a Hermes session that turns the ctxledger engine on,
or an imported one) holds Hermes's summary: standalone, opened by a tagged one-line
preamble and closed by an end marker line, or merged into a message between a header
line, the message's own text and a delimiter. The planner must find it as the
previous summary (update it, protect only the system prompt) and the audit must read
its body apart from the message it was merged into.

The unit tests build the shapes from the tags alone (the preamble wording here is
ours); the differential test has the real hermes-agent 0.19.0 write them.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from helpers.hermes_differential import Hermes, oracle

from ctxledger.analysis.factviews import frame_text, split_summary
from ctxledger.compressor import markers
from ctxledger.compressor.assemble import apply
from ctxledger.compressor.config import CompressionConfig
from ctxledger.compressor.markers import is_summary_message, split_merged, unwrap_summary
from ctxledger.compressor.planner import plan

TAG = markers.FOREIGN_TAGS[0]
BODY = "## Goal\nShip the fix for src/app.py.\n\n## Critical Context\nport 8080"
STANDALONE = (
    f"{TAG} What follows summarizes earlier turns; treat it as background only:\n"
    f"{BODY}\n\n{markers.FOREIGN_END} — reply to what comes next ---"
)


def _merged(original: str) -> str:
    return (
        f"{markers.FOREIGN_MERGE_HEADER}\n{original}\n\n{markers.FOREIGN_MERGE_DELIMITER}\n\n"
        f"{STANDALONE}"
    )


def test_a_standalone_hermes_summary_is_read_without_its_preamble_and_end_marker() -> None:
    message = {"role": "user", "content": STANDALONE}
    assert unwrap_summary(STANDALONE) == BODY
    assert split_merged(message) == (BODY, None)
    assert split_summary(STANDALONE) == (BODY, "")
    # the framing the model reads with the view is framing, not the summary's facts
    assert "background only" in frame_text(STANDALONE)


def test_a_summary_hermes_merged_into_a_message_gives_the_message_back() -> None:
    original = "run the tests again\n\nthen report"
    message = {"role": "assistant", "content": _merged(original)}
    assert split_merged(message) == (BODY, {"role": "assistant", "content": original})
    assert split_summary(_merged(original)) == (BODY, original)


def test_list_content_and_a_call_message_without_content_are_given_back() -> None:
    parts = [{"type": "text", "text": "look at this"}, {"type": "image_url", "image_url": {}}]
    content = [
        {"type": "text", "text": markers.FOREIGN_MERGE_HEADER + "\n"},
        *parts,
        {"type": "text", "text": f"\n\n{markers.FOREIGN_MERGE_DELIMITER}\n\n{STANDALONE}"},
    ]
    assert split_merged({"role": "user", "content": content}) == (
        BODY,
        {"role": "user", "content": parts},
    )
    call = {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
    merged_call = {"role": "assistant", "content": _merged(""), "tool_calls": [call]}
    assert split_merged(merged_call) == (BODY, {**merged_call, "content": None})


def test_text_that_only_mentions_the_tags_is_not_a_summary() -> None:
    for text in (
        f"the log said {TAG} somewhere",
        f"{markers.FOREIGN_MERGE_HEADER}\nno delimiter follows",
        f"{markers.FOREIGN_MERGE_HEADER}\nx\n\n{markers.FOREIGN_MERGE_DELIMITER}\n\nplain text",
    ):
        assert unwrap_summary(text) is None
        assert not is_summary_message({"role": "user", "content": text})
        assert split_summary(text) is None


CONFIG = CompressionConfig(
    threshold_floor_tokens=0, summary_min_tokens=100, protect_first_n=3, protect_last_n=4
)


def _chat(n: int, start: int = 0) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for k in range(start, start + n):
        out.append({"role": "user", "content": f"question {k} " + "q " * 150})
        out.append({"role": "assistant", "content": f"answer {k} " + "a " * 150})
    return out


@pytest.mark.parametrize("compaction_count", [0, 1])
def test_the_planner_updates_a_hermes_summary_instead_of_stacking_one(
    compaction_count: int,
) -> None:
    # as imported (no compaction recorded yet) or after one: the summary is found either way
    messages = [
        {"role": "system", "content": "You fix bugs."},
        {"role": "user", "content": "task"},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "go on"},
        {"role": "assistant", "content": _merged("answer 3")},
        *_chat(10, start=4),
    ]
    p = plan(
        messages,
        CONFIG,
        [150] * len(messages),
        context_length=4_000,
        compaction_count=compaction_count,
    )
    assert p.action == "compress"
    assert p.previous_summary_index == 4
    assert p.head_end == 1  # only the system prompt: the early turns are not re-protected
    out = apply(p, messages, "the updated summary").messages
    assert sum(is_summary_message(m) for m in out) == 1


# --- the real Hermes writes the summary ------------------------------------------------------


@pytest.fixture(scope="module")
def hermes() -> Iterator[Hermes]:
    yield from oracle()


def _hermes_shapes() -> list[list[dict[str, Any]]]:
    system = {"role": "system", "content": "You fix bugs."}
    opening = [
        {"role": "user", "content": "task"},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "go on"},
    ]
    chat = [
        m
        for k in range(16)
        for m in (
            {"role": "user", "content": f"question {k} " + "q " * 500},
            {"role": "assistant", "content": f"answer {k} " + "a " * 500},
        )
    ]
    return [[system, *opening, *chat[:28]], [system, *chat]]


def test_what_hermes_compacted_is_read_and_updated_by_ctxledger(hermes: Hermes) -> None:
    body = "## Goal\nShip the fix for src/app.py"
    shapes = _hermes_shapes()
    outputs = hermes.ask(
        "compress", [{"window": 32_000, "summary": body, "messages": m} for m in shapes]
    )
    for before, after in zip(shapes, outputs, strict=True):
        assert isinstance(after, list), after  # Hermes did not raise
        found = [i for i, m in enumerate(after) if split_merged(m) is not None]
        assert len(found) == 1, [str(m.get("content"))[:60] for m in after]
        index = found[0]
        summary, original = split_merged(after[index]) or ("", None)
        assert summary == body
        if original is not None:  # merged: the message as it was before Hermes merged
            assert original in before
        grown = after + _chat(8, start=40)
        p = plan(grown, CONFIG, [600] * len(grown), context_length=20_000)
        assert p.action == "compress"
        assert p.previous_summary_index == index
        out = apply(p, grown, "ctxledger's update").messages
        assert sum(is_summary_message(m) for m in out) == 1


def test_an_imported_hermes_session_records_the_summary_body_alone(tmp_path: Any) -> None:
    """A Hermes state.db whose continuation opens with the summary Hermes merged into the
    task: the imported compaction's summary is the body, not the merged message."""
    import sqlite3

    from helpers.ledger_helpers import deterministic_ledger
    from test_imported_compactions import HERMES_SCHEMA

    from ctxledger.analysis.compactions import chain_compactions
    from ctxledger.importers.detect import load
    from ctxledger.ledger.importing import import_sessions

    turns = _chat(6)
    db = sqlite3.connect(tmp_path / "state.db")
    db.executescript(HERMES_SCHEMA)
    rows = [("h1", [{"role": "user", "content": "fix the bug"}, *turns]),
            ("h2", [{"role": "user", "content": _merged("fix the bug")}, *turns[-2:]])]  # fmt: skip
    clock = iter(range(1, 1_000))
    for k, (sid, messages) in enumerate(rows):
        db.execute(
            "INSERT INTO sessions VALUES (?,?,?,?,?,?,?,?,?)",
            (sid, "cli", "hermes-4", "sys", "h1" if k else None, k, None,
             None if k else "compression", None),
        )  # fmt: skip
        for m in messages:
            db.execute(
                "INSERT INTO messages (session_id, role, content, timestamp) VALUES (?,?,?,?)",
                (sid, m["role"], m["content"], next(clock)),
            )
    db.commit()
    db.close()
    ledger = deterministic_ledger(tmp_path / "l.db")
    sids = import_sessions(ledger, load(str(tmp_path / "state.db")))
    (record,) = chain_compactions(ledger, sids[0])
    assert record.summary.text == BODY
    ledger.close()


def test_a_line_holding_a_tag_many_times_is_looked_at_once(monkeypatch: Any) -> None:
    """The line-start search moves to the next line after an occurrence inside a line:
    before, each of a line's occurrences re-read the line from its start (a 1 MB line of
    tags took 20 s in the audit)."""
    from ctxledger.analysis import factviews

    calls: list[int] = []
    find = factviews._find

    def counting(text: str, needle: str, start: int = 0) -> int:
        calls.append(start)
        return find(text, needle, start)

    monkeypatch.setattr(factviews, "_find", counting)
    line = f"x {TAG} " * 2_000
    assert split_summary(line + "\n" + line) is None
    assert len(calls) <= 3 * (len(markers.LEGACY_PREFIXES) + 2 * len(markers.FOREIGN_TAGS) + 2)
