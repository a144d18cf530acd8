"""The Hermes engine's hooks given values of the wrong type (session 46, hostile11).

A generated sweep of the hooks (``update_model``, ``update_from_response``,
``should_compress``, ``should_compress_preflight``, ``compress``, ``on_session_start``,
``on_session_end``, ``handle_tool_call``) found Python errors raised into the host's
loop: a ``prompt_tokens`` that is no number (``'<=' not supported``), messages that are
no list (``'float' object is not iterable``, in ``compress`` and in the preflight's
estimate of a message whose ``tool_calls`` is a number), a tool name that is a list
(unhashable), a session id that is a dict (unhashable at the next ``update_model``),
an int of 5,000 digits in a message's field (``_as_json`` fell back to ``str``, which
cannot write it); and "--- Logging error ---" tracebacks from the warnings quoting such
an int with ``%r``. Each is now the engine's usual answer (a count of another type is
no count; ``compress`` warns and hands the messages back; an unknown tool's error
JSON), and nothing is appended. The host-side helpers are tested without Hermes; the
hooks under ``.venv-hermes``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.hermes_run import run_hermes

from ctxledger.errors import InvalidMessage
from ctxledger.integrations.common import prompt_count, session_name
from ctxledger.integrations.hermes_host import unmarked
from ctxledger.tokens import rough_message_tokens

HUGE = 10**5000


@pytest.mark.parametrize("messages", [5.0, None, "text", {"role": "user"}, True])
def test_messages_that_are_no_list_are_named(messages: object) -> None:
    with pytest.raises(InvalidMessage, match="messages must be a list of message objects, got"):
        unmarked(messages)  # type: ignore[arg-type]


def test_a_session_id_that_is_no_text_is_none_and_warned(caplog: pytest.LogCaptureFixture) -> None:
    assert session_name({"a": 1}) is None and session_name(["s"]) is None
    assert session_name(HUGE) is None
    warned = [r.getMessage() for r in caplog.records]
    assert warned == [
        "ctxledger: a session id that is no text is taken as none: {'a': 1}",
        "ctxledger: a session id that is no text is taken as none: ['s']",
        "ctxledger: a session id that is no text is taken as none: an integer of 5,001 digits",
    ]
    caplog.clear()
    assert session_name("s1") == "s1" and not caplog.records


class _NumpyLike:
    """Stands for ``numpy.int64`` (no int, an ``__index__``): numpy is in neither venv."""

    def __index__(self) -> int:
        return 9000


class _BadIndex:
    def __index__(self) -> str:
        return "9000"


def test_a_prompt_count_is_a_number_of_any_int_type(caplog: pytest.LogCaptureFixture) -> None:
    # (one of another type was no count, silently: text turned compaction off unsaid,
    # and numpy's ints, which are no int, were no count either)
    assert prompt_count(_NumpyLike()) == 9000 and prompt_count(7) == 7
    assert prompt_count(2.5) == 2.5 and prompt_count(True) == 1 and prompt_count(HUGE) == HUGE
    assert prompt_count(None) is None and not caplog.records
    for value in ("9000", {"a": 1}, [1], _BadIndex()):
        assert prompt_count(value) is None
    warned = [r.getMessage() for r in caplog.records]
    assert len(warned) == 4 and warned[0] == (
        "ctxledger: a prompt count that is no number is taken as none: '9000'"
    )


@pytest.mark.parametrize(
    ("message", "odd", "more"),
    [
        ({"role": "assistant", "content": "x", "tool_calls": 5.0}, "tool_calls", 0),
        ({"role": "assistant", "content": "x", "tool_calls": [{"function": "f"}]}, "tool_calls", 0),
        # (counted as the text shown for it: "an integer of 5,001 digits", "a list")
        ({"role": "user", "content": "x", "extra": HUGE}, "extra", 6),
        ({"role": "user", "content": "x", "extra": [HUGE]}, "extra", 1),
    ],
)
def test_the_rough_estimate_reads_any_message(
    message: dict[str, object], odd: str, more: int
) -> None:
    without = {key: value for key, value in message.items() if key != odd}
    assert rough_message_tokens(message) == rough_message_tokens(without) + more


_SCRIPT = """
import json, sys
from pathlib import Path
from ctxledger.integrations.hermes import CtxLedgerEngine

HUGE = 10**5000
class Index:  # (numpy.int64's way: no int, an __index__)
    def __index__(self):
        return 15_000
engine = CtxLedgerEngine(db_path=Path(sys.argv[1]))
engine.update_model("m", 16_000)
engine.on_session_start("s1", platform="cli")
good = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]
engine.on_session_end("s1", good)
def count():
    return engine._shared.run(lambda svc: len(list(svc.ledger.store.read_all())))
before = count()
out = {
    "should": [engine.should_compress(v) for v in ({"a": 1}, "9", [1], None, HUGE, Index())],
    "preflight": [
        engine.should_compress_preflight(v)
        for v in (5.0, [{"role": "assistant", "content": "x", "tool_calls": 5.0}],
                  [{"role": "user", "content": "x", "extra": HUGE}])
    ],
    "compress": [repr(engine.compress(v))[:20] for v in (5.0, None, "text")],
    "tool": [json.loads(engine.handle_tool_call(v, {})) for v in (["a"], {"b": 1}, HUGE)],
}
engine.update_model(HUGE, HUGE)
engine.update_from_response({"prompt_tokens": HUGE, "completion_tokens": 1})
engine.on_session_start({"not": "an id"})
engine.update_model("m", 16_000)
out["appended"] = count() - before
print(json.dumps(out))
"""


def test_the_hooks_given_wrong_types_answer_and_append_nothing(tmp_path: Path) -> None:
    proc = run_hermes(["-c", _SCRIPT, str(tmp_path / "l.db")], tmp_path, timeout=120)
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["should"] == [False] * 4 + [True, True]  # (a count of another type: none)
    assert out["preflight"] == [False, False, False]
    assert out["compress"] == ["5.0", "None", "'text'"]  # handed back, with a warning
    assert [t["error"] for t in out["tool"]] == [
        "Unknown context engine tool: ['a']",
        "Unknown context engine tool: {'b': 1}",
        "Unknown context engine tool: an integer of 5,001 digits",
    ]
    assert out["appended"] == 0
    assert "Logging error" not in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert "messages must be a list of message objects, got a number" in proc.stderr
    for said in (
        "a prompt count that is no number is taken as none: '9'",
        "a session id that is no text is taken as none: {'not': 'an id'}",
    ):
        assert said in proc.stderr
