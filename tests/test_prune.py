"""Phase 1: tool-result one-liners, duplicate markers, JSON-valid argument truncation."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxledger.compressor.prune import (
    call_index,
    call_info,
    describe_tool_result,
    duplicate_marker,
    newest_copies,
    prune_messages,
    prune_tool_result,
    truncate_arguments,
    truncate_call_arguments,
)

Message = dict[str, Any]


def _args(**kwargs: Any) -> str:
    return json.dumps(kwargs)


def _call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def _lines(n: int, width: int = 30) -> str:
    return "\n".join(f"line {i} " + "x" * width for i in range(n))


# --- one-liners --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        "terminal", "bash", "execute_bash", "run_command", "shell", "functions.bash",
        # names the offline summarizer and fact extraction knew but phase 1 did not
        "zsh", "run_shell", "exec", "mcp__devbox__exec_command",
    ],
)  # fmt: skip
def test_terminal_one_liner_names_command_exit_code_and_line_count(name: str) -> None:
    output = "<returncode>1</returncode>\n<output>\n" + _lines(47) + "\n</output>"
    text = describe_tool_result(name, _args(command="npm test"), output)
    assert text == f"[{name}] ran `npm test`: exited 1, 47 lines of output ({len(output):,} chars)"


@pytest.mark.parametrize(
    ("output", "code", "lines"),
    [
        (json.dumps({"output": _lines(5), "exit_code": 0}), "0", 5),  # Hermes: lines of "output"
        (_lines(5) + "\nexit code: 2", "2", 6),
        (_lines(5) + "\nProcess exited with code 137", "137", 6),
        ("returncode=3\n" + _lines(5), "3", 6),
    ],
)
def test_terminal_exit_code_is_recognised_in_common_shapes(
    output: str, code: str, lines: int
) -> None:
    text = describe_tool_result("terminal", _args(command="make"), output)
    assert f"exited {code}, {lines} lines of output" in text


@pytest.mark.parametrize(
    ("arguments", "shown"),
    [
        (_args(shell_command="make all"), "make all"),
        (_args(input="git diff"), "git diff"),
        ("ls -la /tmp", "ls -la /tmp"),  # not JSON: the raw text is the command
        ('"ls -la /tmp"', "ls -la /tmp"),  # a JSON string
    ],
)
def test_terminal_command_is_found_wherever_the_tool_puts_it(arguments: str, shown: str) -> None:
    text = describe_tool_result("exec_command", arguments, "<returncode>0</returncode>")
    assert text.startswith(f"[exec_command] ran `{shown}`: exited 0")


def test_terminal_with_no_usable_command_says_a_command() -> None:
    for arguments in ("", "{}", "[1, 2]", "   "):
        assert describe_tool_result("bash", arguments, "x").startswith("[bash] ran a command:")


def test_unknown_tool_with_non_object_arguments_shows_no_pairs() -> None:
    assert describe_tool_result("lookup", "not json", "q" * 300) == "[lookup] (300-char result)"


def test_terminal_without_recognisable_exit_code_still_reports_lines() -> None:
    text = describe_tool_result("bash", _args(command="ls\n  -la"), _lines(12))
    assert text == f"[bash] ran `ls -la`: finished, 12 lines of output ({len(_lines(12)):,} chars)"


def test_long_commands_are_shortened_in_the_one_liner() -> None:
    text = describe_tool_result("bash", _args(command="echo " + "a" * 500), _lines(3))
    assert "…`" in text
    assert len(text) < 200


@pytest.mark.parametrize("name", ["read_file", "read", "view"])
def test_read_file_one_liner_names_path_offset_and_size(name: str) -> None:
    content = "x" * 3400
    text = describe_tool_result(name, _args(path="config.py", offset=40), content)
    assert text == f"[{name}] read config.py from line 40 (3,400 chars)"


def test_counts_are_singular_when_one() -> None:
    assert ": exited 0, 1 line of output" in describe_tool_result(
        "bash", _args(command="pwd"), "<returncode>0</returncode>\n<output>\n/repo\n</output>"
    )
    assert describe_tool_result("grep", _args(pattern="x"), "a.py:1: x").endswith(": 1 match")


def test_read_file_defaults_to_line_one() -> None:
    assert "from line 1 " in describe_tool_result("read_file", _args(path="a.py"), "x" * 300)


@pytest.mark.parametrize("name", ["search_files", "grep", "search"])
def test_search_one_liner_counts_matches(name: str) -> None:
    output = "\n".join(f"src/m{i}.py:{i}: auth" for i in range(12))
    text = describe_tool_result(name, _args(pattern="auth", path="src"), output)
    assert text == f"[{name}] content search for 'auth' in src: 12 matches"


@pytest.mark.parametrize(
    ("output", "count"),
    [
        (json.dumps({"total_count": 7, "matches": []}), 7),
        (json.dumps({"matches": [{"file": "a"}, {"file": "b"}]}), 2),
        ('Found 31 matches for "auth" in /repo:\n' + _lines(10), 31),
        ('No matches found for "auth"' + " " * 300, 0),
    ],
)
def test_search_match_count_reads_structured_outputs(output: str, count: int) -> None:
    assert describe_tool_result("search_files", _args(pattern="auth"), output).endswith(
        f": {count} matches"
    )


def test_file_search_is_labelled_as_such() -> None:
    text = describe_tool_result("search_files", _args(pattern="*.py", target="files"), _lines(4))
    assert text.startswith("[search_files] files search for '*.py'")


def test_write_file_one_liner_counts_written_lines() -> None:
    text = describe_tool_result(
        "write_file", _args(path="main.py", content=_lines(120)), "ok " * 100
    )
    assert text == "[write_file] wrote main.py (120 lines)"


@pytest.mark.parametrize("name", ["patch", "edit_file", "str_replace_editor"])
def test_patch_one_liner_names_file_and_result_size(name: str) -> None:
    mode = "str_replace" if name == "str_replace_editor" else "replace"
    key = "command" if name == "str_replace_editor" else "mode"
    text = describe_tool_result(name, _args(path="api.py", **{key: mode}), "y" * 812)
    assert text == f"[{name}] {mode} in api.py (812-char result)"


def test_str_replace_editor_view_and_create_read_like_read_and_write() -> None:
    view = describe_tool_result("str_replace_editor", _args(command="view", path="a.py"), "z" * 500)
    create = describe_tool_result(
        "str_replace_editor", _args(command="create", path="b.py", file_text="1\n2\n3"), "z" * 500
    )
    assert view == "[str_replace_editor] read a.py from line 1 (500 chars)"
    assert create == "[str_replace_editor] wrote b.py (3 lines)"


def test_apply_patch_takes_the_path_from_the_patch_text() -> None:
    patch = "*** Begin Patch\n*** Update File: src/app.py\n@@\n-a\n+b\n*** End Patch"
    text = describe_tool_result("apply_patch", _args(input=patch), "Done! " * 60)
    assert "in src/app.py" in text


def test_web_search_one_liner_quotes_the_query() -> None:
    text = describe_tool_result("web_search", _args(query="hermes agent compaction"), "r" * 5120)
    assert text == "[web_search] web search for 'hermes agent compaction' (5,120-char result)"


def test_unknown_tool_shows_first_two_arguments_cut_to_40_chars() -> None:
    args = _args(reservation_id="ABC123", note="n" * 100, third="never shown")
    text = describe_tool_result("get_reservation_details", args, "q" * 900)
    assert text.startswith("[get_reservation_details] reservation_id=ABC123 note=" + "n" * 39 + "…")
    assert "third" not in text
    assert text.endswith("(900-char result)")


@given(
    name=st.one_of(
        st.text(max_size=30), st.sampled_from(["bash", "read_file", "search_files", "patch", ""])
    ),
    arguments=st.one_of(
        st.text(max_size=200),
        st.just("[1, 2]"),
        st.just('"just a string"'),
        st.just('{"command": 5}'),
    ),
    content=st.text(max_size=500),
)
def test_one_liners_never_raise(name: str, arguments: str, content: str) -> None:
    text = describe_tool_result(name, arguments, content)
    assert text.startswith("[") and "\n" not in text.split("]", 1)[0]


def test_odd_argument_types_fall_back_gracefully() -> None:
    assert describe_tool_result("bash", None, "x" * 300).startswith("[bash] ran a command")
    assert describe_tool_result("bash", {"command": "ls"}, "x" * 300).startswith("[bash] ran `ls`")


# --- prune_tool_result / prune_messages ----------------------------------------------------


def test_short_results_are_left_alone() -> None:
    msg = {"role": "tool", "tool_call_id": "c1", "content": "x" * 200}
    assert prune_tool_result(0, msg, ("bash", _args(command="ls"))) is None


def test_long_result_becomes_a_full_replacement_message() -> None:
    msg = {"role": "tool", "tool_call_id": "c1", "content": _lines(40), "name": "bash"}
    prune = prune_tool_result(3, msg, ("bash", _args(command="pytest")))
    assert prune is not None and prune.kind == "tool_result" and prune.index == 3
    assert prune.replacement["tool_call_id"] == "c1" and prune.replacement["name"] == "bash"
    assert prune.replacement["content"].startswith("[bash] ran `pytest`")
    assert msg["content"] == _lines(40)


def test_a_stand_in_longer_than_the_original_is_not_used() -> None:
    msg = {"role": "tool", "tool_call_id": "c1", "content": "y" * 210}
    long_keys = json.dumps({"k" * 90: 1, "j" * 90: 2})  # argument names are shown in full
    assert prune_tool_result(0, msg, ("lookup", long_keys)) is None
    assert prune_tool_result(0, msg, ("lookup", _args(id=1))) is not None


def _session_with_repeated_reads() -> list[Message]:
    same = _lines(30)
    return [
        {"role": "user", "content": "read it three times"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [_call("c1", "read_file", _args(path="a.py"))],
        },
        {"role": "tool", "tool_call_id": "c1", "content": same},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [_call("c2", "read_file", _args(path="a.py"))],
        },
        {"role": "tool", "tool_call_id": "c2", "content": same},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [_call("c3", "read_file", _args(path="a.py"))],
        },
        {"role": "tool", "tool_call_id": "c3", "content": same},
        {"role": "assistant", "content": "done"},
    ]


def test_duplicates_keep_the_newest_copy_and_name_it() -> None:
    messages = _session_with_repeated_reads()
    assert newest_copies(messages) == {2: 6, 4: 6}
    prunes = {p.index: p for p in prune_messages(messages, [2, 4])}
    assert prunes[2].kind == prunes[4].kind == "duplicate"
    assert "c3" in prunes[2].replacement["content"]
    assert prunes[2].replacement["content"] == duplicate_marker(
        "read_file", "c3", len(messages[2]["content"])
    )


def test_newest_copy_in_the_middle_gets_a_one_liner_not_a_duplicate_marker() -> None:
    prunes = {p.index: p for p in prune_messages(_session_with_repeated_reads(), [2, 4, 6])}
    assert prunes[6].kind == "tool_result"


def test_identical_short_results_are_not_duplicates() -> None:
    messages = _session_with_repeated_reads()
    for i in (2, 4, 6):
        messages[i]["content"] = "same but short"
    assert newest_copies(messages) == {}


def test_call_index_maps_call_ids_to_their_call_objects() -> None:
    messages = _session_with_repeated_reads()
    calls = call_index(messages)
    assert list(calls) == ["c1", "c2", "c3"]
    assert calls["c2"] is messages[3]["tool_calls"][0]
    assert call_info(calls["c2"]) == ("read_file", _args(path="a.py"))


@pytest.mark.parametrize(
    "call",
    [None, "x", {}, {"function": "nope"}, {"function": {"name": None, "arguments": {"a": 1}}}],
)
def test_call_info_of_odd_shapes(call: Any) -> None:
    assert call_info(call) == ("tool", "")


def test_prune_messages_uses_the_given_call_and_duplicate_maps() -> None:
    # the planner passes its layout's maps instead of having them rebuilt
    messages = _session_with_repeated_reads()
    own = prune_messages(messages, [2, 4, 6])
    given = prune_messages(
        messages, [2, 4, 6], calls=call_index(messages), newest=newest_copies(messages)
    )
    assert given == own
    # the maps are what decides: no duplicates known, and a call under another name
    renamed = {"c2": _call("c2", "cat", _args(path="a.py"))}
    (prune,) = prune_messages(messages, [4], calls=renamed, newest={})
    assert prune.kind == "tool_result"
    assert prune.replacement["content"].startswith("[cat] read a.py")


def test_prune_messages_skips_messages_that_cannot_be_rewritten() -> None:
    messages = _session_with_repeated_reads()
    assert prune_messages(messages, [0, 7, 1]) == []  # a user ask, a reply, a small call


def test_prune_messages_touches_only_the_given_indices_and_never_mutates() -> None:
    messages = _session_with_repeated_reads()
    before = copy.deepcopy(messages)
    prunes = prune_messages(messages, [4])
    assert [p.index for p in prunes] == [4]
    assert messages == before


# --- argument truncation -------------------------------------------------------------------


def test_truncation_shortens_every_long_leaf_and_stays_valid_json() -> None:
    args = json.dumps(
        {
            "path": "a.py",
            "content": "c" * 900,
            "edits": [{"old": "o" * 300, "new": "short"}],
            "n": 3,
        }
    )
    out = json.loads(truncate_arguments(args, 200))
    assert out["path"] == "a.py" and out["n"] == 3 and out["edits"][0]["new"] == "short"
    assert out["content"].startswith("c" * 200) and "700 chars truncated" in out["content"]
    assert out["edits"][0]["old"].startswith("o" * 200) and len(out["edits"][0]["old"]) < 250


def test_truncation_of_invalid_json_yields_a_json_string() -> None:
    raw = "{broken " + "b" * 800
    out = truncate_arguments(raw, 200)
    assert isinstance(json.loads(out), str)
    assert json.loads(out).startswith(raw[:200])


def test_truncation_keeps_unchanged_arguments_byte_identical() -> None:
    args = '{"a":  "short"}'
    assert truncate_arguments(args, 200) is args


@given(
    st.recursive(
        st.one_of(
            st.text(max_size=400),
            st.integers(),
            st.floats(allow_nan=False),
            st.booleans(),
            st.none(),
        ),
        lambda inner: st.one_of(
            st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=10), inner, max_size=4)
        ),
        max_leaves=12,
    )
)
def test_truncated_arguments_always_parse(value: Any) -> None:
    out = json.loads(truncate_arguments(json.dumps(value), 50))
    assert isinstance(out, type(value)) or value is None


def test_only_oversized_calls_are_truncated_in_an_assistant_message() -> None:
    small = _call("a", "read_file", _args(path="x.py"))
    big = _call("b", "write_file", _args(path="y.py", content="w" * 800))
    msg = {"role": "assistant", "content": "writing", "tool_calls": [small, big]}
    before = copy.deepcopy(msg)
    out = truncate_call_arguments(msg, over=500, leaf_keep=200)
    assert out is not None
    assert out["tool_calls"][0] is small
    assert len(out["tool_calls"][1]["function"]["arguments"]) < 300
    json.loads(out["tool_calls"][1]["function"]["arguments"])
    assert msg == before


def test_messages_without_oversized_arguments_are_not_rewritten() -> None:
    msg = {
        "role": "assistant",
        "content": None,
        "tool_calls": [_call("a", "bash", _args(command="ls"))],
    }
    assert truncate_call_arguments(msg) is None
    assert truncate_call_arguments({"role": "user", "content": "x" * 900}) is None


def test_prune_messages_reports_argument_truncation() -> None:
    messages = [
        {"role": "user", "content": "write it"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [_call("w", "write_file", _args(path="a", content="q" * 700))],
        },
        {"role": "tool", "tool_call_id": "w", "content": "ok"},
    ]
    (prune,) = prune_messages(messages, [1, 2])
    assert prune.kind == "args_truncated" and prune.index == 1
