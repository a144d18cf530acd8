"""Hostile input at the door: nesting, non-regular files, sizes, out-of-range numbers.

Each bad input gets one ``error:`` line, exit 2 and nothing appended; the same
number rule holds in the library, the CLI and the service. Data stored before the
limits existed is read without recursing into it.
"""

from __future__ import annotations

import collections
import enum
import json
import os
import sys
import threading
import types
from pathlib import Path

import anyio
import click
import msgspec
import pytest
from click.testing import CliRunner
from helpers.fifo import fifo_with_writer
from hypothesis import given
from hypothesis import strategies as st

from ctxledger import ContextService, InvalidInput, InvalidMessage, Ledger
from ctxledger.cli.main import cli
from ctxledger.limits import (
    MAX_JSON_DEPTH,
    check_context_length,
    check_token_count,
    json_depth,
    json_text_depth,
    not_json,
    value_depth,
)


def run(db: Path, *args: str, input: str | bytes | None = None) -> click.testing.Result:
    return CliRunner().invoke(cli, ["--db", str(db), *args], input=input)


def assert_refused(result: click.testing.Result, *needles: str) -> str:
    assert result.exit_code == 2, result.output
    err = result.output.strip()
    assert err.startswith("error: ") and len(err.splitlines()) == 1, err
    for needle in needles:
        assert needle in err, err
    return err


def nothing_appended(db: Path) -> bool:
    if not db.exists():
        return True
    ledger = Ledger.open(db)
    try:
        return ledger.store.last_seq() == 0
    finally:
        ledger.close()


def deep(n: int) -> str:
    return "[" * n + "]" * n


def conversation(**extra: object) -> list[dict[str, object]]:
    return [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello", **extra},
    ]


# --------------------------------------------------------------------------- nesting


def test_depth_helpers_are_iterative_and_stop_early() -> None:
    assert json_text_depth('{"a": "[[[[", "b": [1, {"c": []}]}') == 4
    assert json_text_depth(deep(200_000), stop_above=10) == 11
    nested: list[object] = []
    cur = nested
    for _ in range(50_000):  # far deeper than Python's recursion limit
        nxt: list[object] = []
        cur.append(nxt)
        cur = nxt
    assert value_depth(nested, stop_above=MAX_JSON_DEPTH) == MAX_JSON_DEPTH + 1


_JSON_VALUES = st.recursive(
    st.none() | st.integers() | st.text(alphabet='ab"\\[]{}\n', max_size=6),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text('k["', max_size=3), inner, max_size=3)
    ),
    max_leaves=12,
)


@given(_JSON_VALUES)
def test_the_text_scan_reads_the_values_depth(value: object) -> None:
    assert json_text_depth(json.dumps(value)) == value_depth(value)


class _List(list):  # a list subclass (ruamel's CommentedSeq): JSON, stored as a list
    pass


class _Float(float):  # a float subclass (numpy.float64): msgspec refuses it
    pass


class _Int(int):
    pass


class _Level(enum.IntEnum):
    LOW = 1


class _Color(enum.StrEnum):
    RED = "red"


_Pair = collections.namedtuple("_Pair", "a b")

#: anything a Python caller may put in a message: JSON leaves and what JSON cannot hold
#: as it is (NaN, infinities, sets, bytes, keys that are not text, subclasses of float
#: and int that are no enum), and containers of every kind msgspec writes as JSON
_PYTHON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    # around what msgspec reads back: 4,300 characters, a minus sign included
    | st.sampled_from([(1, 4300), (1, 4301), (-1, 4299), (-1, 4300)]).map(
        lambda sign_digits: sign_digits[0] * (10 ** sign_digits[1] - 1)  # that many digits
    )
    | st.floats()
    | st.text(max_size=3)
    | st.binary(max_size=2)
    | st.frozensets(st.integers(), max_size=2)
    | st.sampled_from([_Level.LOW, _Color.RED, _Float(1.5), _Int(2)]),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.lists(inner, max_size=3).map(_List)
        | st.tuples(inner, inner)
        | st.builds(_Pair, inner, inner)
        | st.dictionaries(st.text(max_size=2) | st.integers() | st.none(), inner, max_size=3)
        | st.dictionaries(st.text(max_size=2), inner, max_size=3).map(collections.OrderedDict)
        | st.dictionaries(st.text(max_size=2), inner, max_size=3).map(types.MappingProxyType)
    ),
    max_leaves=12,
)


@given(_PYTHON_VALUES)
def test_the_fast_json_walk_agrees_with_the_named_one_and_with_the_depth(value: object) -> None:
    # json_depth judges at C speed; not_json names the part; both say the same thing, and
    # a value judged JSON encodes and decodes back equal (tuples as lists); the walk stops
    # at the first part that is not JSON
    depth, is_json = json_depth(value)
    assert is_json == (not_json(value) is None)
    assert depth == value_depth(value) if is_json else depth <= value_depth(value)
    if is_json:
        if isinstance(value, types.MappingProxyType):  # the whole value: callers copy it
            value = dict(value)
        encoded = msgspec.json.encode(value)
        assert json.loads(json.dumps(value, allow_nan=False)) == json.loads(encoded)
        msgspec.json.decode(encoded)  # and it is read back


@given(st.lists(st.sampled_from(['"', "\\", "[", "{", "]", "x"]), max_size=40).map("".join))
def test_a_string_token_started_at_a_quote_never_fails(text: str) -> None:
    """Linear by construction (review, session 27): an unterminated string is one token
    to the end of the text, so no later quote starts another scan to the end (20 KB of
    \\" after one quote took 6 s in a tool call's arguments). Counted, not timed."""
    from ctxledger import limits

    pos = 0
    while (start := text.find('"', pos)) >= 0:
        match = limits._JSON_TOKENS.match(text, start)
        assert match is not None and match.group().startswith('"'), (text, start)
        pos = match.end()


@pytest.mark.parametrize(
    "text",
    [
        '[{"role": "user", "content": [{"type": "text", "text": "hi", "x": '
        + deep(10_000)
        + "}]}]",
        deep(100_000),
        "\n".join(['{"role": "user", "content": "hi"}', '{"x": ' + deep(10_000) + "}"]),
    ],
    ids=["in-a-message", "top-level", "jsonl-line"],
)
def test_json_deeper_than_python_can_decode_is_one_clear_error(tmp_path: Path, text: str) -> None:
    src = tmp_path / "deep.json"
    src.write_text(text)
    db = tmp_path / "l.db"
    assert_refused(run(db, "import", str(src)), "nests deeper")
    assert_refused(run(db, "import", str(src), "--format", "openai"), "nests deeper")
    assert nothing_appended(db)


def test_a_message_nested_past_the_limit_is_refused_naming_it(tmp_path: Path) -> None:
    msgs = conversation()
    msgs[1]["content"] = [{"type": "text", "text": "x", "extra": json.loads(deep(150))}]
    src = tmp_path / "c.jsonl"
    src.write_text("\n".join(json.dumps(m) for m in msgs))
    db = tmp_path / "l.db"
    assert_refused(run(db, "import", str(src)), "c.jsonl:2:", "deeper than 100 levels")
    assert nothing_appended(db)


def test_tool_arguments_nested_past_the_limit_are_refused_naming_the_call(tmp_path: Path) -> None:
    call = {"id": "call_deep", "type": "function", "function": {"name": "f", "arguments": ""}}
    call["function"]["arguments"] = '{"a": ' + deep(900) + "}"  # type: ignore[index]
    msgs = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_deep", "content": "ok"},
    ]
    src = tmp_path / "c.json"
    src.write_text(json.dumps(msgs))
    db = tmp_path / "l.db"
    assert_refused(run(db, "import", str(src)), "'call_deep'", "arguments nest deeper")
    with Ledger.open(tmp_path / "api.db") as ledger:
        sid = ledger.start_session(model="m", context_length=8000)
        with pytest.raises(InvalidMessage, match="arguments nest deeper"):
            ledger.append_messages(sid, msgs)
        assert ledger.api_messages(sid) == []


def test_the_depth_limit_is_configurable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    msgs = conversation()
    msgs[1]["meta"] = json.loads(deep(30))
    src = tmp_path / "c.json"
    src.write_text(json.dumps(msgs))
    monkeypatch.setenv("CTXLEDGER_MAX_JSON_DEPTH", "10")
    assert_refused(run(tmp_path / "a.db", "import", str(src)), "deeper than 10 levels")
    monkeypatch.setenv("CTXLEDGER_MAX_JSON_DEPTH", "40")
    assert run(tmp_path / "b.db", "import", str(src)).exit_code == 0


def _deep_args_session(tmp_path: Path, depth: int, turns: int = 30) -> tuple[Path, str]:
    """A session whose tool arguments nest `depth` deep, stored as an old ledger would hold it."""
    args = '{"a": ' + deep(depth) + ', "pad": "' + "p" * 600 + '"}'
    msgs: list[dict[str, object]] = [{"role": "system", "content": "s"}]
    for i in range(turns):
        call = {"id": f"c{i}", "type": "function", "function": {"name": "f", "arguments": args}}
        msgs += [
            {"role": "user", "content": f"do thing {i} " + "word " * 150},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"c{i}", "content": "out " * 300},
            {"role": "assistant", "content": "ok " * 40},
        ]
    src = tmp_path / "deep_args.json"
    src.write_text(json.dumps(msgs))
    db = tmp_path / "old.db"
    env = {"CTXLEDGER_MAX_JSON_DEPTH": str(depth + 10)}
    result = CliRunner(env=env).invoke(
        cli, ["--db", str(db), "import", str(src), "--context-length", "8000"]
    )
    assert result.exit_code == 0, result.output
    return db, result.output.strip().splitlines()[-1]


@pytest.mark.parametrize("depth", [900, 10_000])
def test_stored_deep_arguments_never_crash_a_command(tmp_path: Path, depth: int) -> None:
    db, sid = _deep_args_session(tmp_path, depth)
    for args in (
        ["compress", sid, "--dry-run"],
        ["export", sid, "--format", "anthropic"],
        ["export", sid, "--format", "sharegpt"],
        ["show", sid],
        ["recall", sid, "thing"],
    ):
        result = run(db, *args)
        assert result.exit_code == 0, (args, result.output[-500:])
    done = run(db, "compress", sid, "--json")
    assert done.exit_code == 0, done.output[-500:]
    # (stdout: stderr warns that the continuation, 32,976 tokens at depth 10,000, is still
    # over the 8,000-token window)
    tip = json.loads(done.stdout)["new_session_id"]
    for args in (["audit", tip], ["replay", tip, "--verify"], ["show", tip]):
        result = run(db, *args)
        assert result.exit_code == 0, (args, result.output[-500:])
    exported = json.loads(run(db, "export", sid, "--format", "anthropic").output)
    tool_use = next(
        b
        for m in exported["messages"]
        if isinstance(m["content"], list)
        for b in m["content"]
        if b.get("type") == "tool_use"
    )
    assert "_raw_arguments" in tool_use["input"]  # carried as text, not walked


# --------------------------------------------------------------------------- files and sizes


def test_a_directory_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "l.db"
    assert_refused(run(db, "import", str(tmp_path)), "not a regular file (a directory)")
    assert nothing_appended(db)


def test_dev_zero_is_refused_without_reading_it(tmp_path: Path) -> None:
    assert_refused(run(tmp_path / "l.db", "import", "/dev/zero"), "a character device")
    assert_refused(
        run(tmp_path / "l.db", "import", "/dev/zero", "--format", "openai"), "a character device"
    )


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="POSIX FIFOs")
def test_a_fifo_with_no_writer_is_not_waited_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Waited for WRITER_WAIT seconds, then refused naming the wait (nothing appended)."""
    from ctxledger import inputfile

    monkeypatch.setattr(inputfile, "WRITER_WAIT", 0.2)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    outcome: list[click.testing.Result] = []
    worker = threading.Thread(
        target=lambda: outcome.append(run(tmp_path / "l.db", "import", str(fifo)))
    )
    worker.start()
    worker.join(timeout=20)
    if worker.is_alive():  # unblock the open so the thread can end, then fail
        with open(fifo, "w"):
            pass
        pytest.fail("import blocked on a FIFO with no writer")
    assert_refused(outcome[0], "no program opened for writing within 0.2 s")
    assert nothing_appended(tmp_path / "l.db")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="POSIX FIFOs")
def test_a_pipe_is_imported_but_not_as_a_database(tmp_path: Path) -> None:
    """`import <(cat chat.jsonl)` is read as a file is (review R4: the same rule as a
    config file); a SQLite database is opened again by name, so it must be a file."""
    chat = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]}
    with fifo_with_writer(tmp_path / "chat", (json.dumps(chat) + "\n").encode()) as fifo:
        result = run(tmp_path / "l.db", "import", "--context-length", "16000", str(fifo))
    assert result.exit_code == 0, result.output
    with fifo_with_writer(tmp_path / "db", b"SQLite format 3\x00" + bytes(100)) as fifo:
        assert_refused(run(tmp_path / "m.db", "import", str(fifo)), "not a regular file (a FIFO)")


def test_input_larger_than_the_cap_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    src = tmp_path / "c.json"
    src.write_text(json.dumps(conversation()) + " " * 5000)
    db = tmp_path / "l.db"
    assert_refused(run(db, "import", str(src), "--max-bytes", "1000"), "1,000-byte limit")
    assert_refused(
        run(db, "import", "-", "--max-bytes", "1000", input=src.read_text()), "1,000-byte limit"
    )
    monkeypatch.setenv("CTXLEDGER_MAX_INPUT_BYTES", "2000")
    assert_refused(run(db, "import", str(src)), "2,000-byte limit", "CTXLEDGER_MAX_INPUT_BYTES")
    assert nothing_appended(db)
    monkeypatch.delenv("CTXLEDGER_MAX_INPUT_BYTES")
    assert run(db, "import", str(src)).exit_code == 0


@pytest.mark.parametrize("cap", [str(10**12), str(10**20)])
def test_a_cap_larger_than_memory_reads_the_input_as_it_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cap: str
) -> None:
    # session 29: the input was read with read(cap + 1), which allocates that much
    # first: a MemoryError or an OverflowError traceback for a cap far above the file
    src = tmp_path / "c.json"
    src.write_text(json.dumps(conversation()))
    db = tmp_path / "l.db"
    assert run(db, "import", "--again", str(src), "--max-bytes", cap).exit_code == 0
    assert (
        run(db, "import", "--again", "-", "--max-bytes", cap, input=src.read_text()).exit_code == 0
    )
    monkeypatch.setenv("CTXLEDGER_MAX_INPUT_BYTES", cap)
    assert run(db, "import", "--again", str(src)).exit_code == 0


# --------------------------------------------------------------------------- numbers

BAD_COUNTS = [10**30, 2**63, 12.7, float("inf"), float("nan"), -1, True, "12"]


@pytest.mark.parametrize("value", BAD_COUNTS, ids=repr)
def test_one_rule_for_token_counts(value: object) -> None:
    with pytest.raises(InvalidInput):
        check_token_count(value, "n")
    assert check_token_count(12.0, "n") == 12
    assert check_token_count(10**12, "n") == 10**12


@pytest.mark.parametrize("value", [10**30, 2**63, 12.7, 1023, -5, None, "8000"], ids=repr)
def test_one_rule_for_context_lengths(value: object) -> None:
    with pytest.raises(InvalidInput):
        check_context_length(value)
    assert check_context_length(200_000) == 200_000


@pytest.mark.parametrize("value", [10**30, 2**63, 12.7], ids=repr)
def test_out_of_range_usage_is_refused_by_api_cli_and_service(
    tmp_path: Path, value: object
) -> None:
    usage = {"prompt_tokens": value, "completion_tokens": 1}
    with Ledger.open(tmp_path / "api.db") as ledger:
        sid = ledger.start_session(model="m", context_length=8000)
        ledger.append_messages(sid, conversation())
        before = ledger.store.last_seq()
        with pytest.raises(InvalidInput, match="prompt_tokens"):
            ledger.report_usage(sid, usage)
        assert ledger.store.last_seq() == before

    msgs = conversation(usage=usage)
    src = tmp_path / "c.json"
    src.write_text(json.dumps(msgs))
    assert_refused(run(tmp_path / "cli.db", "import", str(src)), "prompt_tokens")
    assert nothing_appended(tmp_path / "cli.db")

    async def service() -> None:
        svc = ContextService.open(tmp_path / "svc.db")
        try:
            sid = await svc.start_session(model="m", context_length=8000)
            await svc.append(sid, conversation())
            with pytest.raises(InvalidInput, match="prompt_tokens"):
                await svc.report_usage(sid, usage)
        finally:
            await svc.aclose()

    anyio.run(service)


def test_out_of_range_context_length_is_refused_everywhere(tmp_path: Path) -> None:
    huge = 10**30
    src = tmp_path / "c.json"
    src.write_text(json.dumps({"context_length": huge, "messages": conversation()}))
    assert_refused(run(tmp_path / "a.db", "import", str(src)), "context_length is out of range")
    src.write_text(json.dumps(conversation()))
    assert_refused(
        run(tmp_path / "b.db", "import", str(src), "--context-length", str(huge)), "out of range"
    )
    with Ledger.open(tmp_path / "api.db") as ledger:
        with pytest.raises(InvalidInput, match="out of range"):
            ledger.start_session(model="m", context_length=huge)
        sid = ledger.start_session(model="m", context_length=8000)
        with pytest.raises(InvalidInput, match="out of range"):
            ledger.switch_model(sid, "m2", huge)


def test_a_number_json_cannot_hold_is_named_not_a_format_guess(tmp_path: Path) -> None:
    src = tmp_path / "c.json"
    src.write_text('{"messages": [{"role": "user", "content": "hi"}], "usage": {"x": 1e400}}')
    assert_refused(run(tmp_path / "l.db", "import", str(src)), "Number out of range")


def test_limits_are_stated_in_the_readme() -> None:
    readme = (Path(__file__).parent.parent / "README.md").read_text()
    for needle in ("CTXLEDGER_MAX_INPUT_BYTES", "CTXLEDGER_MAX_JSON_DEPTH", "--max-bytes"):
        assert needle in readme, needle
    assert sys.getrecursionlimit() > MAX_JSON_DEPTH  # the default stays decodable
