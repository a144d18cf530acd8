"""Recall (FTS5 over every message a chain held) and expand (a summary's originals), as API, CLI and agent tools."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import anyio
import pytest
from click.testing import CliRunner
from helpers.ledger_helpers import SMALL, deterministic_ledger

from ctxledger.analysis.agent_tools import EXPAND_TOOL, RECALL_TOOL, handle_tool_call
from ctxledger.analysis.compactions import chain_compactions
from ctxledger.analysis.recall import (
    MAX_LIMIT,
    MAX_QUERY_TERMS,
    SearchIndex,
    expand,
    fts_terms,
    recall,
)
from ctxledger.analysis.redacted import occurrences
from ctxledger.cli.main import cli
from ctxledger.compressor.redact import redact_message
from ctxledger.compressor.summarizers.offline import OfflineSummarizer
from ctxledger.errors import InvalidInput, UnknownCompaction
from ctxledger.ledger.compaction import compact
from ctxledger.ledger.facade import Ledger
from ctxledger.runtime.service import ContextService

#: the module's recorded chain (the ``chain`` fixture in conftest.py)
CHAIN_SEED = 9


def _first_compacted_ask(ledger: Ledger, tip: str) -> str:
    record = chain_compactions(ledger, tip)[0]
    live = set(ledger.transcript.session(tip).live)
    return next(
        m
        for m in record.summary.input_message_ids
        if m not in live and ledger.transcript.original(m)["role"] == "user"
    )


def test_recall_finds_a_compacted_message_and_names_its_compaction(
    chain: tuple[Ledger, str],
) -> None:
    ledger, tip = chain
    mid = _first_compacted_ask(ledger, tip)
    words = " ".join(w for w in ledger.transcript.original(mid)["content"].split() if w.isalnum())
    result = recall(ledger, tip, words, limit=50)
    hit = next(h for h in result.hits if h.message_id == mid)
    assert hit.compacted_by == chain_compactions(ledger, tip)[0].compaction_id
    assert not hit.live and "«" in hit.snippet
    assert mid in {m.message_id for m in expand(ledger, hit.compacted_by or "").messages}


def test_summaries_are_indexed_too(chain: tuple[Ledger, str]) -> None:
    ledger, tip = chain
    hits = recall(ledger, tip, "Active Task", limit=20).hits
    assert any(h.origin == "summary" for h in hits)


def test_recall_stays_inside_the_chain_and_catches_up_lazily(chain: tuple[Ledger, str]) -> None:
    ledger, tip = chain
    other = ledger.start_session(model="m", context_length=16_000)
    ledger.append_messages(other, [{"role": "user", "content": "zebraquartz in another chain"}])
    assert recall(ledger, tip, "zebraquartz").hits == []
    assert [h.session_id for h in recall(ledger, other, "zebraquartz").hits] == [other]
    anyio.run(
        lambda: ContextService(ledger, config=SMALL).append(
            tip, [{"role": "user", "content": "now zebraquartz here"}]
        )
    )
    found = recall(ledger, tip, "zebraquartz").hits
    assert len(found) == 1 and found[0].live


def test_all_words_first_then_any_word(chain: tuple[Ledger, str]) -> None:
    ledger, tip = chain
    result = recall(ledger, tip, "pytest nonexistentwordxyz")
    assert result.match == "any" and result.hits


@pytest.mark.parametrize(
    "query",
    [
        '"unbalanced',
        "AND OR NOT",
        "src/auth/core.py:12",
        "name*",
        "a:b",
        "(x)",
        "NEAR(pytest",
        "^pytest -x",
        "\x00pytest",  # FTS5 read the query as C text: 'unterminated string'
    ],
)
def test_fts_syntax_in_a_query_never_errors(chain: tuple[Ledger, str], query: str) -> None:
    ledger, tip = chain
    recall(ledger, tip, query)


@pytest.mark.parametrize(
    ("query", "match"), [("", "empty"), ("   ", "empty"), ("?!:", "no words"), ('""', "no words")]
)
def test_an_empty_query_is_a_clear_error_and_appends_nothing(
    chain: tuple[Ledger, str], query: str, match: str
) -> None:
    ledger, tip = chain
    before = ledger.store.last_seq()
    with pytest.raises(InvalidInput, match=match):
        recall(ledger, tip, query)
    assert ledger.store.last_seq() == before


def test_a_word_repeated_counts_once_and_too_many_words_are_refused(
    chain: tuple[Ledger, str],
) -> None:
    """FTS5's cost grows with the square of a repeated term: 1,000 times one common
    word took 16 s, a 100 KB query hours. Repeats (any case) count once; more than
    MAX_QUERY_TERMS different words are refused before the index is asked."""
    ledger, tip = chain
    once = recall(ledger, tip, "pytest")
    assert recall(ledger, tip, "pytest PyTest " * 20_000).hits == once.hits
    before = ledger.store.last_seq()
    many = " ".join(f"w{i}" for i in range(MAX_QUERY_TERMS + 1))
    with pytest.raises(InvalidInput, match=f"65 different words.*at most {MAX_QUERY_TERMS}"):
        recall(ledger, tip, many)
    assert ledger.store.last_seq() == before


def test_a_message_with_thousands_of_matches_gets_its_snippet_without_fts5(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """FTS5's snippet() costs the square of a row's matches: a tool output holding one
    word 40,000 times took 10 s, a million of them hours. Such a hit's snippet is cut
    from the message in Python; a hit with few matches still gets FTS5's."""
    ledger = Ledger.open(tmp_path / "r.db")
    sid = ledger.start_session(model="m", context_length=200_000)
    ledger.append_messages(
        sid,
        [
            {"role": "user", "content": "needle " * 40_000},
            {"role": "user", "content": "x " * 5_000 + "one long needle here"},
            {"role": "user", "content": "only one needle here"},
        ],
    )
    asked: list[int] = []
    fts_snippets = SearchIndex.snippets

    def counted(index: SearchIndex, match: str, rowids: list[int]) -> dict[int, str]:
        asked.extend(rowids)
        return fts_snippets(index, match, rowids)

    monkeypatch.setattr(SearchIndex, "snippets", counted)
    hits = recall(ledger, sid, "needle").hits
    assert [h.snippet.count("«needle»") > 0 for h in hits] == [True, True, True]
    assert hits[0].snippet == "only one «needle» here"  # short: made by the search
    assert hits[1].snippet.endswith("one long «needle» here")  # long, few: FTS5 asked
    assert hits[2].snippet.startswith("«needle» «needle»") and len(hits[2].snippet) < 400
    assert len(asked) == 1  # FTS5 was asked for the long row with few matches only
    ledger.close()


def test_a_long_log_with_a_pieces_letters_everywhere_keeps_its_fts5_snippet(
    tmp_path: Path,
) -> None:
    """Review of session 29: the match count behind the Python cut counted substrings, so
    the ``a`` of ``src/a.py`` counted every letter a of a 25 KB log (over 1,000), and the
    cut started at the first substring, not at the match: the snippet showed none."""
    log = "collecting tests in package alpha ... passed\n" * 500
    log += "FAILED src/a.py::test_login - AssertionError"
    ledger = Ledger.open(tmp_path / "r.db")
    sid = ledger.start_session(model="m", context_length=200_000)
    ledger.append_messages(sid, [{"role": "user", "content": log}])
    (hit,) = recall(ledger, sid, "src/a.py").hits
    assert "FAILED «src/a.py»::test_login" in hit.snippet, hit.snippet
    assert occurrences(log, ["src/a.py"], 1_001) == 3  # src, a, py: once each
    ledger.close()


@pytest.mark.parametrize("limit", [0, 101, True, "5"])
def test_limit_must_be_in_range(chain: tuple[Ledger, str], limit: object) -> None:
    ledger, tip = chain
    with pytest.raises(InvalidInput, match="limit"):
        recall(ledger, tip, "pytest", limit=limit)  # type: ignore[arg-type]


def test_the_index_lives_beside_the_log_and_never_touches_it(chain: tuple[Ledger, str]) -> None:
    ledger, tip = chain
    recall(ledger, tip, "pytest")
    assert ledger.verify().ok
    db = ledger.store.path
    with sqlite3.connect(db) as conn:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        last = conn.execute("SELECT last_seq FROM search_state").fetchone()[0]
        rows = conn.execute(
            "SELECT count(*), count(DISTINCT message_id) FROM search_messages"
        ).fetchone()
    assert {"search_messages", "search_messages_fts", "search_state"} <= tables
    assert last == ledger.store.last_seq()
    assert rows[0] == rows[1]  # nothing indexed twice
    fresh = SearchIndex(ledger.store)  # another process opening the same file: nothing to fold
    assert fresh.catch_up() == 0
    fresh.close()


def test_an_in_memory_ledger_gets_a_private_index() -> None:
    ledger = deterministic_ledger()
    sid = ledger.start_session(model="m", context_length=16_000)
    ledger.append_messages(sid, [{"role": "user", "content": "find the flamingo config"}])
    assert [h.role for h in recall(ledger, sid, "flamingo").hits] == ["user"]


def test_a_persisted_tool_output_is_recalled_and_expanded_in_full(tmp_path: Path) -> None:
    ledger = deterministic_ledger(tmp_path / "p.db")
    svc = ContextService(ledger, config=SMALL)
    sid = ledger.start_session(model="m", context_length=16_000)
    call = {
        "id": "c1",
        "type": "function",
        "function": {"name": "terminal", "arguments": '{"command": "cat big.log"}'},
    }
    big = "line of log output\n" * 800 + "the answer is platypus42\n"
    msgs = [
        {"role": "user", "content": "read it"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": big},
    ]
    ids = anyio.run(lambda: svc.append(sid, msgs)).message_ids
    assert "platypus42" not in str(
        ledger.transcript.stored(ids[2]).message["content"]
    )  # the live view: a preview
    hit = recall(ledger, sid, "platypus42").hits[0]
    assert hit.message_id == ids[2]


def test_expand_returns_the_originals_in_order(chain: tuple[Ledger, str]) -> None:
    ledger, tip = chain
    first, second = chain_compactions(ledger, tip)[:2]
    result = expand(ledger, second.compaction_id)
    assert [m.message_id for m in result.messages] == second.summary.input_message_ids
    summaries = [m for m in result.messages if m.origin == "summary"]
    assert [m.compaction_id for m in summaries] == [first.compaction_id]
    for m in result.messages:  # shown as summaries see them: secrets redacted
        assert m.message == redact_message(ledger.transcript.original(m.message_id))


def test_expand_an_unknown_compaction_is_a_clear_error(chain: tuple[Ledger, str]) -> None:
    ledger, _ = chain
    before = ledger.store.last_seq()
    with pytest.raises(UnknownCompaction, match="no compaction"):
        expand(ledger, "cmp_missing")
    assert ledger.store.last_seq() == before


def test_tool_schemas_name_their_required_arguments() -> None:
    assert RECALL_TOOL["function"]["name"] == "recall"
    assert RECALL_TOOL["function"]["parameters"]["required"] == ["query"]
    assert EXPAND_TOOL["function"]["name"] == "expand_compaction"
    assert EXPAND_TOOL["function"]["parameters"]["required"] == ["compaction_id"]


def test_tool_handler_recalls_and_expands_in_pages(chain: tuple[Ledger, str]) -> None:
    ledger, tip = chain
    found = json.loads(
        handle_tool_call(ledger, tip, "recall", json.dumps({"query": "pytest", "limit": 3}))
    )
    assert len(found["hits"]) == 3
    total = len(recall(ledger, tip, "pytest", 100).hits)
    assert total > 3 and found["more"] is True  # the agent learns it may ask for more
    every = handle_tool_call(ledger, tip, "recall", json.dumps({"query": "pytest", "limit": 50}))
    assert json.loads(every)["more"] is (total > 50)
    cid = chain_compactions(ledger, tip)[0].compaction_id
    page = json.loads(
        handle_tool_call(
            ledger,
            tip,
            "expand_compaction",
            json.dumps({"compaction_id": cid, "limit": 2, "max_chars": 100}),
        )
    )
    assert len(page["messages"]) == 2 and page["next_offset"] == 2 and page["total"] > 2
    assert all(len(str(m["message"].get("content") or "")) < 200 for m in page["messages"])


@pytest.mark.parametrize(
    ("name", "arguments", "match"),
    [
        ("recall", '{"query": ""}', "empty"),
        ("recall", "not json", "not valid JSON"),
        ("recall", "[1]", "JSON object"),
        ("recall", '{"query": "x", "limit": 500}', "limit"),
        ("expand_compaction", '{"compaction_id": "cmp_nope"}', "no compaction"),
        ("delete_everything", "{}", "unknown tool"),
        # not a string: a TypeError traceback out of json.loads / the tools dict
        ("recall", 5, "not valid JSON: expected a JSON string, got int"),
        ("recall", ["x"], "not valid JSON: expected a JSON string, got list"),
        (["recall"], "{}", "unknown tool ['recall']"),
    ],
)
def test_tool_errors_come_back_as_json_for_the_model(
    chain: tuple[Ledger, str], name: str, arguments: str, match: str
) -> None:
    ledger, tip = chain
    before = ledger.store.last_seq()
    out = json.loads(handle_tool_call(ledger, tip, name, arguments))
    assert match in out["error"]
    assert ledger.store.last_seq() == before


def test_arguments_a_framework_already_decoded_are_taken_as_they_are(
    chain: tuple[Ledger, str],
) -> None:
    ledger, tip = chain
    decoded = handle_tool_call(ledger, tip, "recall", {"query": "pytest", "limit": 3})  # type: ignore[arg-type]
    assert decoded == handle_tool_call(ledger, tip, "recall", '{"query": "pytest", "limit": 3}')


def test_an_agent_cannot_expand_another_chains_compaction(chain: tuple[Ledger, str]) -> None:
    ledger, tip = chain
    other = ledger.start_session(model="m", context_length=16_000)
    cid = chain_compactions(ledger, tip)[0].compaction_id
    out = json.loads(
        handle_tool_call(ledger, other, "expand_compaction", json.dumps({"compaction_id": cid}))
    )
    assert "no compaction" in out["error"]


def test_fts_terms_quote_every_word() -> None:
    assert fts_terms('fix "the bug" now') == ['"fix"', '"the bug"', '"now"']


def test_cli_recall_and_expand(chain: tuple[Ledger, str]) -> None:
    ledger, tip = chain
    db = ledger.store.path
    runner = CliRunner()
    out = runner.invoke(cli, ["--db", db, "recall", tip, "pytest", "--json", "--limit", "2"])
    assert out.exit_code == 0 and len(json.loads(out.output)["hits"]) == 2
    assert runner.invoke(cli, ["--db", db, "recall", tip, "pytest"]).exit_code == 0
    cid = chain_compactions(ledger, tip)[0].compaction_id
    expanded = runner.invoke(cli, ["--db", db, "expand", cid, "--json"])
    assert expanded.exit_code == 0 and json.loads(expanded.output)["compaction_id"] == cid
    assert runner.invoke(cli, ["--db", db, "expand", cid]).exit_code == 0
    assert runner.invoke(cli, ["--db", db, "recall", tip, ""]).exit_code == 2
    assert runner.invoke(cli, ["--db", db, "expand", "cmp_nope"]).exit_code == 2


def test_two_indexes_of_one_file_fold_in_turns_without_losing_chains(tmp_path: Path) -> None:
    """Like two processes: each folds what the other has not, and chain roots stay right."""
    ledger = deterministic_ledger(tmp_path / "two.db")
    sid = ledger.start_session(model="m", context_length=16_000, system_prompt="You fix bugs.")
    for i in range(8):
        ledger.append_messages(
            sid,
            [
                {"role": "user", "content": f"fix bug {i} " + "detail " * 200},
                {"role": "assistant", "content": f"fixed bug {i}"},
            ],
        )
    first, second = SearchIndex(ledger.store), SearchIndex(ledger.store)
    first.catch_up()
    outcome = anyio.run(lambda: compact(ledger, sid, OfflineSummarizer()))
    first.catch_up()  # folds the continuation's start; `second` has never seen it
    cont = outcome.new_session_id or ""
    ledger.append_messages(cont, [{"role": "user", "content": "where is the okapi handler"}])
    assert second.catch_up() == 1
    rows = second.search(sid, '"okapi"', 5)
    assert [r[1] for r in rows] == [cont]
    first.close()
    second.close()


def test_nothing_matching_any_word_is_no_hits_with_match_all(chain: tuple[Ledger, str]) -> None:
    ledger, tip = chain
    result = recall(ledger, tip, "nonexistentwordxyz otherabsentwordqq")
    assert result.hits == [] and result.match == "all"
    db = ledger.store.path
    as_json = json.loads(
        CliRunner()
        .invoke(cli, ["--db", db, "recall", tip, "nonexistentwordxyz otherabsentwordqq", "--json"])
        .output
    )
    assert as_json["match"] == "all" and as_json["hits"] == []
    text = CliRunner().invoke(
        cli, ["--db", db, "recall", tip, "nonexistentwordxyz otherabsentwordqq"]
    )
    assert text.exit_code == 0 and "no message of the chain" in text.output
    assert "any of them" not in text.output
    partial = CliRunner().invoke(cli, ["--db", db, "recall", tip, "pytest nonexistentwordxyz"])
    assert "any of them" in partial.output and "no message of the chain" not in partial.output


@pytest.mark.parametrize("max_chars", ["-20", "0"])
def test_cli_expand_max_chars_must_be_positive(chain: tuple[Ledger, str], max_chars: str) -> None:
    ledger, tip = chain
    cid = chain_compactions(ledger, tip)[0].compaction_id
    out = CliRunner().invoke(
        cli, ["--db", ledger.store.path, "expand", cid, "--max-chars", max_chars]
    )
    assert out.exit_code == 2 and "--max-chars" in out.output


def test_the_index_holds_what_a_reader_reads_not_image_data_or_call_ids() -> None:
    ledger = deterministic_ledger()
    sid = ledger.start_session(model="m", context_length=16_000)
    call = {
        "id": "call_zebra1",
        "type": "function",
        "function": {"name": "terminal", "arguments": '{"command": "ls"}'},
    }
    ledger.append_messages(
        sid,
        [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "look at this flamingo"},
                    {
                        "type": "image_url",
                        "image_url": {"url": "data:image/png;base64,okapiBASE64"},
                    },
                ],
            },
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "call_zebra1", "content": "a.py"},
        ],
    )
    assert [h.role for h in recall(ledger, sid, "flamingo").hits] == ["user"]
    assert [h.role for h in recall(ledger, sid, "terminal").hits] == ["assistant"]
    assert recall(ledger, sid, "okapiBASE64").hits == []
    assert recall(ledger, sid, "call_zebra1").hits == []


def test_hits_cut_by_the_limit_are_said_to_be_more(tmp_path: Path) -> None:
    """`recall` printed its newest `--limit` hits (10 by default) and nothing said that
    older messages matched too: 15 matches read as 10."""
    ledger = deterministic_ledger(tmp_path / "l.db")
    sid = ledger.start_session(model="m", context_length=16_000)
    ledger.append_messages(
        sid,
        [{"role": "user" if i % 2 else "assistant", "content": f"zebra {i}"} for i in range(15)],
    )
    ledger.close()
    for limit, more in [(10, True), (14, True), (15, False), (40, False)]:
        with Ledger.open(tmp_path / "l.db") as reader:
            result = recall(reader, sid, "zebra", limit=limit)
        assert (len(result.hits), result.more) == (min(limit, 15), more)
        assert [h.seq for h in result.hits] == sorted((h.seq for h in result.hits), reverse=True)
        args = ["--db", str(tmp_path / "l.db"), "recall", sid, "zebra", "--limit", str(limit)]
        out = CliRunner().invoke(cli, args).output.splitlines()
        said = f"more messages match: the newest {limit} are shown (--limit N)"
        assert (said in out) is more and (out[-1] == said) is more
        as_json = json.loads(CliRunner().invoke(cli, [*args, "--json"]).output)
        assert as_json["more"] is more and len(as_json["hits"]) == min(limit, 15)


def test_the_limit_s_bound_is_in_the_help_and_the_last_line_at_it(tmp_path: Path) -> None:
    """`recall --help` said `x>=1` while the library refuses more than 100, and at 100
    hits with more matching the last line still said `(--limit N)`: a larger N is refused."""
    ledger = deterministic_ledger(tmp_path / "l.db")
    sid = ledger.start_session(model="m", context_length=16_000)
    ledger.append_messages(sid, [{"role": "user", "content": f"zebra {i}"} for i in range(101)])
    ledger.close()
    help_text = " ".join(CliRunner().invoke(cli, ["recall", "--help"]).output.split())
    assert f"1<=x<={MAX_LIMIT}" in help_text and MAX_LIMIT == 100
    args = ["--db", str(tmp_path / "l.db"), "recall", sid, "zebra", "--limit"]
    last = CliRunner().invoke(cli, [*args, "100"]).output.splitlines()[-1]
    assert last == (
        "more messages match: the newest 100 are shown (the most --limit shows: narrow the query)"
    )
    over = CliRunner().invoke(cli, [*args, "101"])
    assert over.exit_code == 2 and "101 is not in the range 1<=x<=100" in over.output


def test_more_counts_the_any_word_hits_when_no_message_holds_every_word(tmp_path: Path) -> None:
    """No message holds both words: the hits are those holding any (5 here), and `more`
    is judged on those, at the limit's boundary."""
    ledger = deterministic_ledger(tmp_path / "l.db")
    sid = ledger.start_session(model="m", context_length=16_000)
    said = [f"zebra {i}" for i in range(3)] + ["lion a", "lion b", "okapi"]
    ledger.append_messages(sid, [{"role": "user", "content": text} for text in said])
    for limit, more in [(4, True), (5, False), (6, False)]:
        result = recall(ledger, sid, "zebra lion", limit=limit)
        assert (result.match, len(result.hits), result.more) == ("any", min(limit, 5), more)
