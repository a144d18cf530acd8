"""Tool families, shared argument keys and the one argument parser (ctxledger.compressor.toolcalls)."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxledger.compressor.facts import extract_facts
from ctxledger.compressor.prune import describe_tool_result
from ctxledger.compressor.summarizers.analysis import analyse, call_arguments
from ctxledger.compressor.toolcalls import (
    COMMAND_KEYS,
    DIR_KEYS,
    EDITOR_TOOLS,
    FAMILIES,
    FILE_SEARCH_TOOLS,
    PATH_KEYS,
    RAW_KEY,
    TERMINAL_COMMAND_KEYS,
    bare_tool_name,
    call_name_and_args,
    call_parts,
    parse_arguments,
    tool_family,
)


def _call(name: str, arguments: Any, call_id: str = "c1") -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


# --- families ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "family"),
    [
        # every terminal name any of prune / analysis / facts knew before they shared this list
        *((n, "terminal") for n in (
            "terminal", "bash", "shell", "sh", "zsh", "powershell", "cmd", "command", "exec",
            "execute", "run", "run_shell", "execute_bash", "execute_command", "exec_command",
            "run_command", "run_shell_command", "run_terminal_cmd", "run_terminal_command",
            "local_shell",
        )),
        ("read_file", "read"), ("view", "read"), ("cat", "read"),
        ("write_file", "write"), ("create_file", "write"),
        ("patch", "patch"), ("apply_patch", "patch"), ("str_replace_editor", "patch"),
        ("search_files", "search"), ("grep", "search"), ("glob", "search"),
        ("web_search", "web_search"), ("search_web", "web_search"), ("brave_search", "web_search"),
        ("get_weather", "other"), ("think", "other"), ("", "other"), ("search_flights", "other"),
    ],
)  # fmt: skip
def test_tool_family(name: str, family: str) -> None:
    assert tool_family(name) == family


@pytest.mark.parametrize(
    "name",
    ["functions.bash", "mcp__devbox__bash", "default_api.bash", " Bash ", "BASH", "a.b.bash"],
)
def test_namespaces_and_case_are_dropped(name: str) -> None:
    assert bare_tool_name(name) == "bash"
    assert tool_family(name) == "terminal"


def test_a_non_string_name_is_other() -> None:
    assert tool_family(None) == "other"
    assert tool_family(["bash"]) == "other"  # unhashable: must not reach the cache


def test_families_are_disjoint_and_refinements_belong_to_their_family() -> None:
    for (_, a), (_, b) in itertools.combinations(FAMILIES.items(), 2):
        assert not a & b
    assert FILE_SEARCH_TOOLS.issubset(FAMILIES["search"])
    assert EDITOR_TOOLS.issubset(FAMILIES["patch"])


def test_key_lists() -> None:
    assert TERMINAL_COMMAND_KEYS[: len(COMMAND_KEYS)] == COMMAND_KEYS
    assert RAW_KEY in TERMINAL_COMMAND_KEYS and RAW_KEY not in COMMAND_KEYS
    assert not set(PATH_KEYS) & set(DIR_KEYS)
    assert "target" not in PATH_KEYS  # Hermes search_files: target is "content" or "files"


# --- arguments -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("arguments", "parsed"),
    [
        ('{"command": "ls", "n": 2}', {"command": "ls", "n": 2}),
        (b'{"a": [1, {"b": null}]}', {"a": [1, {"b": None}]}),
        ("", {}),
        (None, {}),
        ("{}", {}),
        ("ls -la", {RAW_KEY: "ls -la"}),  # not JSON: kept whole
        ('{"broken": ', {RAW_KEY: '{"broken": '}),
        ('"just a string"', {RAW_KEY: "just a string"}),  # JSON, but not an object
        ("[1, 2]", {RAW_KEY: [1, 2]}),
        ("3", {RAW_KEY: 3}),
        ("null", {RAW_KEY: None}),
        ({"command": "ls"}, {"command": "ls"}),  # already a mapping
        (["a"], {RAW_KEY: ["a"]}),
    ],
)
def test_parse_arguments(arguments: Any, parsed: dict[str, Any]) -> None:
    assert parse_arguments(arguments) == parsed


def test_parse_arguments_copies_a_mapping() -> None:
    given = {"path": "a.py"}
    out = parse_arguments(given)
    out["path"] = "b.py"
    assert given == {"path": "a.py"}


def test_parse_arguments_survives_deep_nesting() -> None:
    deep = "[" * 100_000 + "]" * 100_000
    assert parse_arguments(deep) == {RAW_KEY: deep}


@given(st.one_of(st.text(max_size=80), st.binary(max_size=40), st.none(), st.integers()))
def test_parse_arguments_never_raises_and_always_gives_a_dict(arguments: Any) -> None:
    assert isinstance(parse_arguments(arguments), dict)


@given(st.dictionaries(st.text(max_size=8), st.text(max_size=20), max_size=4))
def test_a_json_object_round_trips(value: dict[str, str]) -> None:
    assert parse_arguments(json.dumps(value)) == value


def test_call_parts_and_call_name_and_args() -> None:
    call = _call("functions.bash", '{"command": "make"}')
    assert call_parts(call) == ("functions.bash", '{"command": "make"}')
    assert call_name_and_args(call) == ("functions.bash", {"command": "make"})


@pytest.mark.parametrize(
    "call", [None, "bash", {}, {"function": "bash"}, {"function": None}, ["function"]]
)
def test_odd_call_shapes(call: Any) -> None:
    assert call_parts(call) == ("", None)
    assert call_name_and_args(call) == ("", {})


def test_a_missing_or_odd_name_is_empty() -> None:
    assert call_parts({"function": {"name": 5, "arguments": "{}"}}) == ("", "{}")
    assert call_parts({"function": {"arguments": "{}"}}) == ("", "{}")


# --- the three users agree -----------------------------------------------------------------


@pytest.mark.parametrize("name", ["exec_command", "mcp__box__zsh", "functions.run_shell"])
def test_prune_analysis_and_facts_agree_on_a_terminal_command(name: str) -> None:
    call = _call(name, json.dumps({"shell_command": "pytest -x tests/unit"}))
    one_liner = describe_tool_result(name, call["function"]["arguments"], "x" * 300)
    assert one_liner.startswith(f"[{name}] ran `pytest -x tests/unit`")
    (action,) = analyse([{"role": "assistant", "content": None, "tool_calls": [call]}], 0).actions
    assert action.verb == "RAN" and action.command == "pytest -x tests/unit"
    facts = extract_facts([{"role": "assistant", "content": None, "tool_calls": [call]}])
    assert ("command", "pytest -x tests/unit") in [(f.kind, f.value) for f in facts]


def test_analysis_call_arguments_keeps_its_shape() -> None:
    assert call_arguments(_call("bash", '{"command": "ls"}')) == (
        "bash",
        {"command": "ls"},
        '{"command": "ls"}',
    )
    assert call_arguments(_call("bash", "ls -la")) == ("bash", {RAW_KEY: "ls -la"}, "ls -la")
    assert call_arguments({"id": "x"}) == ("?", {}, "")


def test_analysis_reads_the_shared_path_keys() -> None:
    calls = [
        _call("open_thing", json.dumps({"absolute_path": "/repo/a.py"}), "c1"),
        _call("search_files", json.dumps({"pattern": "auth", "target": "files"}), "c2"),
    ]
    actions = analyse([{"role": "assistant", "content": None, "tool_calls": calls}], 0).actions
    assert actions[0].path == "/repo/a.py"
    assert actions[1].path == ""  # "target" names what to search, not a path
    assert "target=files" in actions[1].target
