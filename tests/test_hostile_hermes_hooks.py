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
from ctxledger.integrations.hermes_host import session_name, unmarked
from ctxledger.tokens import rough_message_tokens

HUGE = 10**5000


@pytest.mark.parametrize("messages", [5.0, None, "text", {"role": "user"}, True])
def test_messages_that_are_no_list_are_named(messages: object) -> None:
    with pytest.raises(InvalidMessage, match="messages must be a list of message objects, got"):
        unmarked(messages)  # type: ignore[arg-type]


def test_a_session_id_that_is_no_text_is_none() -> None:
    assert session_name({"a": 1}) is None and session_name(["s"]) is None
    assert session_name("s1") == "s1"


@pytest.mark.parametrize(
    "message",
    [
        {"role": "assistant", "content": "x", "tool_calls": 5.0},
        {"role": "assistant", "content": "x", "tool_calls": [{"function": "f"}]},
        {"role": "user", "content": "x", "extra": HUGE},
        {"role": "user", "content": "x", "extra": [HUGE]},
    ],
)
def test_the_rough_estimate_reads_any_message(message: dict[str, object]) -> None:
    assert rough_message_tokens(message) > 0


_SCRIPT = """
import json, sys
from pathlib import Path
from ctxledger.integrations.hermes import CtxLedgerEngine

HUGE = 10**5000
engine = CtxLedgerEngine(db_path=Path(sys.argv[1]))
engine.update_model("m", 16_000)
engine.on_session_start("s1", platform="cli")
good = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]
engine.on_session_end("s1", good)
def count():
    return engine._shared.run(lambda svc: len(list(svc.ledger.store.read_all())))
before = count()
out = {
    "should": [engine.should_compress(v) for v in ({"a": 1}, "9", [1], None, HUGE)],
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
    assert out["should"] == [False] * 4 + [True]  # (a count of another type: none)
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
