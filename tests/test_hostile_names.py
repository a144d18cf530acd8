"""Model names, titles and session ids a caller chooses are bounded and hold no controls.

Session 32 left it: a 10 MB model name, or a title, model or session id holding NUL,
a newline or a bidi override, was recorded through ``POST /v1/sessions``, the library,
``ctxledger import`` and the proxy. Session 33: each face refuses it with the same
message (``ctxledger.limits.check_name``, applied where the ledger builds its events)
and nothing is appended; a ledger that already holds such a value still opens,
verifies, lists and replays.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest
from click.testing import CliRunner
from helpers.server_rig import rig

from ctxledger import Ledger
from ctxledger.cli.main import cli
from ctxledger.errors import InvalidInput
from ctxledger.eventstore.base import AppendRequest
from ctxledger.integrations.common import host_title
from ctxledger.ledger.spec import SessionSpec, check_title
from ctxledger.limits import MAX_MODEL_CHARS, MAX_TITLE_CHARS

TOKEN = "hostile-names-token-0123456789abcdef"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
USER = {"role": "user", "content": "hello"}
CONTROL = "holds the control character"
SID = "old\n\u202eid"
HUGE = "m" * (10 * 1024 * 1024)

#: (start_session keywords past a valid model, what the error says)
BAD_STARTS: list[tuple[dict[str, Any], str]] = [
    ({"model": HUGE}, "model is too long: 10,485,760 characters (at most 2,048)"),
    ({"model": "gpt\x00-4"}, f"model {CONTROL} U+0000 at character 4"),
    ({"model": "gpt\n4"}, f"model {CONTROL} U+000A"),
    ({"model": "gpt-\u202e4"}, f"model {CONTROL} U+202E"),
    ({"title": "a\u2066b"}, f"title {CONTROL} U+2066"),
    ({"title": "a\tb"}, f"title {CONTROL} U+0009"),
    ({"title": "t" * (MAX_TITLE_CHARS + 1)}, "title is too long: 4,097 characters"),
    ({"title": 5}, "title must be a string or None, got int"),
]


@pytest.fixture
def ledger(tmp_path: Path) -> Ledger:
    return Ledger.open(tmp_path / "l.db")


@pytest.mark.parametrize(("extra", "says"), BAD_STARTS, ids=range(len(BAD_STARTS)))
def test_the_library_refuses_a_bad_name_and_appends_nothing(
    ledger: Ledger, extra: dict[str, Any], says: str
) -> None:
    with pytest.raises(InvalidInput, match=re.escape(says)):
        ledger.start_session(**{"model": "m", "context_length": 8192, **extra})
    assert ledger.store.last_seq() == 0


@pytest.mark.parametrize(
    ("sid", "says"),
    [
        ("s\x00", f"session_id {CONTROL} U+0000"),
        ("a\u200fb", f"session_id {CONTROL} U+200F"),
        ("s" * 1025, "session_id is too long: 1,025 characters (at most 1,024)"),
    ],
)
def test_the_library_refuses_a_bad_session_id(ledger: Ledger, sid: str, says: str) -> None:
    with pytest.raises(InvalidInput, match=re.escape(says)):
        ledger.start_session(model="m", context_length=8192, session_id=sid)
    assert ledger.store.last_seq() == 0


def test_a_long_value_is_never_echoed_whole(ledger: Ledger) -> None:
    with pytest.raises(InvalidInput) as caught:
        ledger.start_session(model=HUGE, context_length=8192)
    assert len(str(caught.value)) < 200


def test_usage_and_model_switches_refuse_a_bad_model(ledger: Ledger) -> None:
    sid = ledger.start_session(model="m", context_length=8192)
    before = ledger.store.last_seq()
    usage = {"prompt_tokens": 5, "completion_tokens": 1}
    with pytest.raises(InvalidInput, match=re.escape(f"model {CONTROL} U+0000")):
        ledger.report_usage(sid, usage, model="m\x00")
    with pytest.raises(InvalidInput, match="model is too long"):
        ledger.switch_model(sid, "m" * (MAX_MODEL_CHARS + 1), 8192)
    assert ledger.store.last_seq() == before


def test_good_names_still_go_through(ledger: Ledger) -> None:
    arn = "arn:aws:bedrock:us-east-1:123456789012:inference-profile/" + "x" * 1900
    sid = ledger.start_session(
        model=arn, context_length=8192, title="Zürich 👨\u200d👩\u200d👧 — plan", session_id="ü s/1"
    )
    assert ledger.transcript.session(sid).model == arn
    assert check_title(None) is None


@pytest.mark.parametrize(("extra", "says"), BAD_STARTS[:7], ids=range(7))
def test_the_state_api_refuses_a_bad_name_with_a_422(
    tmp_path: Path, extra: dict[str, Any], says: str
) -> None:
    async def main() -> tuple[int, str, int]:
        async with rig(tmp_path, token=TOKEN) as r:
            body = {"model": "m", **extra}
            response = await r.http.post("/v1/sessions", headers=AUTH, json=body)
            return response.status_code, response.text, r.last_seq()

    status, text, seq = anyio.run(main)
    assert status == 422 and json.loads(text)["error"]["message"].startswith(says[:20]), text
    assert says.split(" (")[0].replace("\\", "") in json.loads(text)["error"]["message"]
    assert seq == 0


@pytest.mark.parametrize(
    ("path", "model", "says"),
    [
        ("/v1/chat/completions", "gpt\x00", f"'model' {CONTROL} U+0000"),
        ("/v1/chat/completions", HUGE, "'model' is too long: 10,485,760 characters"),
        ("/v1/responses", "gpt\u202e", f"'model' {CONTROL} U+202E"),
        ("/v1/messages", "claude\r", f"'model' {CONTROL} U+000D"),
    ],
)
def test_the_proxy_refuses_a_bad_model_before_forwarding_or_recording(
    tmp_path: Path, path: str, model: str, says: str
) -> None:
    body: dict[str, Any] = {"model": model, "messages": [USER], "max_tokens": 64}
    if path == "/v1/responses":
        body = {"model": model, "input": "hello"}

    async def main() -> tuple[int, str, int, int]:
        async with rig(tmp_path, api="anthropic" if path == "/v1/messages" else "openai") as r:
            response = await r.http.post(path, json=body)
            return response.status_code, response.text, r.last_seq(), len(r.upstream.requests)

    status, text, seq, sent = anyio.run(main)
    assert status == 422 and says in json.loads(text)["error"]["message"], text[:300]
    assert seq == 0 and sent == 0


def _import(tmp_path: Path, doc: dict[str, Any], *args: str) -> tuple[int, str, int]:
    db, source = tmp_path / "l.db", tmp_path / "chat.json"
    source.write_text(json.dumps(doc), encoding="utf-8")
    result = CliRunner().invoke(cli, ["--db", str(db), "import", str(source), *args])
    seq = Ledger.open(db).store.last_seq() if db.exists() else 0
    return result.exit_code, result.output, seq


@pytest.mark.parametrize(
    ("doc", "args", "says"),
    [
        ({"model": "gpt\x00"}, (), f"model {CONTROL} U+0000"),
        ({"model": HUGE}, (), "model is too long: 10,485,760 characters"),
        ({"title": "bad \u202e title"}, (), f"title {CONTROL} U+202E"),
        ({}, ("--model", "m\x1b[31m"), f"model {CONTROL} U+001B"),
    ],
)
def test_import_refuses_a_bad_name_and_appends_nothing(
    tmp_path: Path, doc: dict[str, Any], args: tuple[str, ...], says: str
) -> None:
    code, output, seq = _import(tmp_path, {"messages": [USER], **doc}, *args)
    assert code == 2 and says in output, output[:300]
    assert "Traceback" not in output and len(output) < 1000
    assert seq == 0


def test_import_takes_good_names(tmp_path: Path) -> None:
    code, output, seq = _import(tmp_path, {"model": "gpt-4o", "title": "t", "messages": [USER]})
    assert code == 0, output
    assert seq > 0


def test_a_ledger_already_holding_such_values_still_reads(tmp_path: Path) -> None:
    # written as a ledger made before the check holds them (the events built, then changed)
    db = tmp_path / "old.db"
    with Ledger.open(db) as ledger:
        spec = SessionSpec(model="m", context_length=8192)
        events = ledger.start_events(SID, spec)
        events[0] = msgspec.structs.replace(
            events[0], model="gpt\x00\u202e" + "m" * 5000, title="t\n\u2066itle"
        )
        ledger.append([AppendRequest(SID, events, 0)])
        ledger.append_messages(SID, [USER])
    runner = CliRunner()
    for args in (["verify"], ["sessions"], ["sessions", "--json"], ["replay", SID], ["show", SID]):
        result = runner.invoke(cli, ["--db", str(db), *args])
        assert result.exit_code == 0, (args, result.output[:500])
        assert "\x00" not in result.output and "\u202e" not in result.output
    listed = json.loads(runner.invoke(cli, ["--db", str(db), "sessions", "--json"]).output)
    assert listed[0]["session_id"] == SID
    with Ledger.open(db) as again:
        assert again.transcript.session(SID).model.startswith("gpt\x00")


@pytest.mark.parametrize("host_id", ["h\nid", "h" * 5000, "\u202eevil", "ok-id"])
def test_an_integration_title_for_any_host_id_is_one_the_ledger_takes(host_id: str) -> None:
    title = host_title("langchain thread", host_id)
    assert check_title(title) == title
    assert host_title("langchain thread", host_id) == title  # the same id, the same title
    if host_id == "ok-id":
        assert title == "langchain thread ok-id"
    else:
        assert title.startswith("langchain thread ") and ".h" in title


@pytest.mark.parametrize("host_id", ["h\nid", "h" * 5000, "ok-id"])
def test_a_hermes_chains_title_is_one_the_ledger_takes(host_id: str) -> None:
    from ctxledger.integrations import hermes_host

    assert hermes_host.title(host_id) == host_title("hermes session", host_id)
    assert check_title(hermes_host.title(host_id)) == hermes_host.title(host_id)


@pytest.mark.parametrize("prompt", [None, "be brief"])
def test_an_unknown_tokenizer_encoding_is_refused_not_recorded(
    ledger: Ledger, prompt: str | None
) -> None:
    # it was recorded (no system prompt: the first append then raised tiktoken's
    # ValueError) or raised that ValueError at the start
    with pytest.raises(InvalidInput, match="encoding 'nope' is no tokenizer encoding"):
        ledger.start_session(model="m", context_length=8192, encoding="nope", system_prompt=prompt)
    with pytest.raises(InvalidInput, match="encoding must be a tiktoken encoding name, got 5"):
        ledger.start_session(model="m", context_length=8192, encoding=5)  # type: ignore[arg-type]
    assert ledger.store.last_seq() == 0


@pytest.mark.parametrize(
    ("reason", "says"),
    [
        ("done\n(forged row)", f"reason {CONTROL} U+000A"),
        ("r" * 1001, "reason is too long: 1,001 characters (at most 1,000)"),
        ("", "reason must be a non-empty string"),
    ],
)
def test_an_end_reason_is_bounded_like_a_title(ledger: Ledger, reason: str, says: str) -> None:
    sid = ledger.start_session(model="m", context_length=8192)
    before = ledger.store.last_seq()
    with pytest.raises(InvalidInput, match=re.escape(says)):
        ledger.end_session(sid, reason)
    assert ledger.store.last_seq() == before
    assert not ledger.transcript.session(sid).ended


def test_the_state_api_refuses_a_bad_end_reason_and_ends_nothing(tmp_path: Path) -> None:
    async def main() -> tuple[int, str, int, int]:
        async with rig(tmp_path, token=TOKEN) as r:
            await r.http.post("/v1/sessions", headers=AUTH, json={"model": "m", "session_id": "s"})
            before = r.last_seq()
            body = {"reason": "bye\u202e" + "x" * 100}
            response = await r.http.post("/v1/sessions/s/end", headers=AUTH, json=body)
            return response.status_code, response.text, before, r.last_seq()

    status, text, before, after = anyio.run(main)
    assert status == 422 and f"reason {CONTROL} U+202E" in text, text
    assert after == before
