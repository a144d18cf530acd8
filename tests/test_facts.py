"""Salient-fact extraction and normalized matching."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ctxledger.compressor.facts import (
    FACT_KINDS,
    Fact,
    error_lines,
    exit_code,
    extract_facts,
    fact_in_text,
    find_paths,
    normalize,
    retention,
)
from ctxledger.compressor.markers import wrap_summary


def call(call_id: str, name: str, **args: Any) -> dict[str, Any]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(args)},
    }


def values(facts: list[Fact], kind: str) -> list[str]:
    return [f.value for f in facts if f.kind == kind]


SESSION: list[dict[str, Any]] = [
    {
        "role": "user",
        "content": "Please   fix the failing test in src/app/server.py — it should listen on port 8080.",
    },
    {
        "role": "assistant",
        "content": "I'll run the tests first. The handler is `handle_request` and the config lives at ./config/settings.toml.",
        "tool_calls": [call("c1", "terminal", command="pytest tests/test_server.py -x\necho done")],
    },
    {
        "role": "tool",
        "tool_call_id": "c1",
        "content": (
            "Traceback (most recent call last):\n"
            '  File "/repo/src/app/server.py", line 42, in handle_request\n'
            "    raise KeyError(name)\n"
            "KeyError: 'session_id'\n"
            "error: build failed\n"
            "=== 3 failed, 47 passed in 1.20s ===\n"
            "exit code 1"
        ),
    },
    {
        "role": "assistant",
        "content": 'Upgrading to v1.2.3 and setting "strict mode" fixes it; docs at https://example.com/docs/server.',
        "tool_calls": [
            call(
                "c2",
                "patch",
                path="src/app/server.py",
                old_str="x",
                new_str="y",
                reservation_id="8JX2WO",
            )
        ],
    },
    {
        "role": "tool",
        "tool_call_id": "c2",
        "content": "patched\ndef handle_request(req):\nclass SessionStore(Base):",
    },
    {"role": "assistant", "content": "Run it yourself:\n$ make test PORT=8080\nThat was line 42."},
]


@pytest.fixture(scope="module")
def facts() -> list[Fact]:
    return extract_facts(SESSION, ids=[f"msg_{i}" for i in range(len(SESSION))])


def test_user_messages_are_asks_whitespace_collapsed(facts: list[Fact]) -> None:
    asks = [f for f in facts if f.kind == "ask"]
    assert [a.value for a in asks] == [
        "Please fix the failing test in src/app/server.py — it should listen on port 8080."
    ]
    assert asks[0].message_index == 0 and asks[0].message_id == "msg_0" and asks[0].role == "user"


def test_paths_urls_and_commands(facts: list[Fact]) -> None:
    paths = values(facts, "path")
    assert "src/app/server.py" in paths
    assert "./config/settings.toml" in paths
    assert "tests/test_server.py" in paths
    assert values(facts, "url") == ["https://example.com/docs/server"]
    commands = values(facts, "command")
    assert "pytest tests/test_server.py -x" in commands  # first line of a terminal call
    assert "make test PORT=8080" in commands  # a `$ ` line


def test_errors_traceback_last_line_error_lines_and_nonzero_exit(facts: list[Fact]) -> None:
    errors = values(facts, "error")
    assert "KeyError: 'session_id'" in errors
    assert "error: build failed" in errors
    assert "exit code 1" in errors


def test_zero_exit_codes_are_not_errors() -> None:
    facts = extract_facts(
        [{"role": "tool", "tool_call_id": "x", "content": "<returncode>0</returncode>\nok"}]
    )
    assert values(facts, "error") == []
    assert exit_code("<returncode>0</returncode>") == 0
    assert exit_code("Exit code: 2\nlater exit code 3") == 3
    assert exit_code("nothing here") is None


def test_identifiers_from_definitions_backticks_and_tool_arguments(facts: list[Fact]) -> None:
    identifiers = values(facts, "identifier")
    assert "handle_request" in identifiers
    assert "SessionStore" in identifiers
    assert "8JX2WO" in identifiers  # a short structured argument value


def test_numbers_keep_their_context(facts: list[Fact]) -> None:
    numbers = values(facts, "number")
    assert "port 8080" in numbers
    assert "3 failed" in numbers and "47 passed" in numbers
    assert "v1.2.3" in numbers
    assert "line 42" in numbers  # from prose; traceback frame line numbers are skipped


def test_quoted_values_from_prose(facts: list[Fact]) -> None:
    assert "strict mode" in values(facts, "quoted")


def test_each_normalized_value_is_reported_once_at_its_first_occurrence(facts: list[Fact]) -> None:
    normalized = [f.normalized for f in facts]
    assert len(normalized) == len(set(normalized))
    server = next(f for f in facts if f.normalized == "src/app/server.py")
    assert server.message_index == 0  # mentioned in the ask before the patch call


def test_order_is_message_then_kind_and_deterministic(facts: list[Fact]) -> None:
    assert extract_facts(SESSION, ids=[f"msg_{i}" for i in range(len(SESSION))]) == facts
    keys = [(f.message_index, FACT_KINDS.index(f.kind)) for f in facts]
    assert keys == sorted(keys)


def test_summary_messages_are_not_asks() -> None:
    summary = {"role": "user", "content": wrap_summary("## Goal\nship it from deploy/run.sh")}
    facts = extract_facts([summary])
    assert values(facts, "ask") == []
    assert "deploy/run.sh" in values(facts, "path")


def test_ids_must_parallel_messages() -> None:
    with pytest.raises(ValueError):
        extract_facts(SESSION, ids=["only-one"])


@pytest.mark.parametrize(
    ("kind", "value", "text", "expected"),
    [
        ("path", "./src/App.py", "edited SRC/app.py today", True),
        ("path", "src\\app.py", "see src/app.py", True),
        ("quoted", "strict mode", "use “Strict   Mode” please", True),
        ("identifier", "foo", "foobar and barfoo", False),
        ("identifier", "foo", "call foo() now", True),
        ("error", "KeyError: 'id'", "raised KeyError:  ‘id’ twice", True),
        ("number", "port 8080", "port 80800", False),
    ],
)
def test_fact_in_text_normalizes_case_space_quotes_paths_and_word_bounds(
    kind: str, value: str, text: str, expected: bool
) -> None:
    from ctxledger.compressor.facts import normalize_fact

    fact = Fact(kind=kind, value=value, normalized=normalize_fact(kind, value), message_index=0)
    assert fact_in_text(fact, text) is expected


def test_retention_partitions_facts_in_order(facts: list[Fact]) -> None:
    text = "We changed src/app/server.py; KeyError: 'session_id' remains. port 8080"
    kept, lost = retention(facts, text)
    assert [f.value for f in kept] == ["src/app/server.py", "port 8080", "KeyError: 'session_id'"]
    assert len(kept) + len(lost) == len(facts)
    assert [f for f in facts if f in lost] == lost


def test_helpers_for_summarizers() -> None:
    assert find_paths("see ./a/b.py and https://x.org/c/d.py then docs/") == ["./a/b.py", "docs/"]
    assert error_lines("ValueError: bad\nexit status 2") == ["ValueError: bad", "exit code 2"]
    assert normalize("  A\u00a0B\n c ") == "a b c"


def test_library_frames_and_attribute_access_are_not_paths() -> None:
    text = (
        'File "/usr/lib/python3.11/site-packages/django/db/utils.py", line 84\n'
        "self.log(x) and mock.patch are attributes; notes.txt is a file"
    )
    assert find_paths(text) == ["notes.txt"]


def test_an_exit_code_of_thousands_of_digits_is_no_exit_code() -> None:
    # "exit code " and 5,000 digits: int() raised ValueError out of the fact scan, and so
    # out of a compaction whose middle held that tool output
    digits = "9" * 5000
    from ctxledger.compressor.factkinds import error_lines, exit_code

    for text in (f"Exit code: {digits}", f"<returncode>{digits}</returncode>",
                 f'{{"exit_code": {digits}}}', f"non-zero exit status {digits}"):  # fmt: skip
        assert exit_code(text) is None
        assert not any("exit code" in line for line in error_lines(text))
    assert exit_code("Exit code: 2") == 2 and error_lines("exit status 3") == ["exit code 3"]
