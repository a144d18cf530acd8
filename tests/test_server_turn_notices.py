"""What a proxied turn notices reaches the client and the operator (session 45): each
notice is logged (``ctxledger.server``, plain text, with the session's id) and sent back
as ``X-Ctxledger-Notice`` headers (ASCII, percent-encoded), the answer's body untouched;
chat and Responses faces, JSON and streamed, answers and forwarded errors."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from helpers.fake_upstream import Error, Say
from helpers.server_rig import ask, rig
from hypothesis import given
from hypothesis import strategies as st

from ctxledger.errors import StoreBusy
from ctxledger.server.notices import (
    MAX_NOTICE_BYTES,
    MAX_NOTICES_BYTES,
    NOTICE_HEADER,
    TurnNotices,
    notice_value,
    read_notice_headers,
)

pytestmark = pytest.mark.anyio

SYSTEM = "You are terse."


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _notices(response: Any) -> list[str]:
    return read_notice_headers(response.headers.get_list(NOTICE_HEADER))


def _chat(messages: list[Any], stream: bool) -> dict[str, Any]:
    return {"model": "gpt-4.1", "messages": messages, "stream": stream}


@pytest.mark.parametrize("stream", [False, True])
async def test_a_branch_is_told_in_a_header_and_the_log(
    tmp_path: Path, stream: bool, caplog: pytest.LogCaptureFixture
) -> None:
    async with rig(tmp_path) as r:
        r.upstream.queue(Say("A."), Say("B."))
        headers = {"X-Ctxledger-Session": "n1"}
        first = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "a"}]
        answer = await r.http.post(
            "/v1/chat/completions", json=_chat(first, stream), headers=headers
        )
        assert answer.status_code == 200 and _notices(answer) == []
        other = [
            *first,
            {"role": "assistant", "content": "not A"},
            {"role": "user", "content": "b"},
        ]
        with caplog.at_level(logging.INFO, logger="ctxledger.server"):
            answer = await r.http.post(
                "/v1/chat/completions", json=_chat(other, stream), headers=headers
            )
        assert answer.status_code == 200 and "B." in answer.text  # the body as the upstream's
        (told,) = _notices(answer)
        branch = [s for s in r.service.ledger.sessions() if s.session_id != "n1"]
        assert (
            told
            == f"history diverges from the ledger after 1 messages: branched as {branch[0].session_id}"
        )
        assert f"session n1: {told}" in caplog.text


@pytest.mark.parametrize("stream", [False, True])
async def test_a_repeat_on_the_responses_face_is_told(tmp_path: Path, stream: bool) -> None:
    async with rig(tmp_path) as r:
        r.upstream.queue(Say("Hello."), Say("Hello again."))
        body = {"model": "gpt-4.1", "instructions": SYSTEM, "input": "hi", "stream": stream}
        headers = {"X-Ctxledger-Session": "rep"}
        first = await r.http.post("/v1/responses", json=body, headers=headers)
        again = await r.http.post("/v1/responses", json=body, headers=headers)
        assert first.status_code == again.status_code == 200
        assert _notices(first) == []
        assert _notices(again) == ["session rep already answered this history"]


@pytest.mark.parametrize("stream", [False, True])
async def test_an_upstreams_own_ctxledger_headers_are_not_passed_on(
    tmp_path: Path, stream: bool
) -> None:
    """Only the proxy speaks in ``x-ctxledger-*`` headers: an upstream's (another proxy in
    front of the model, a hostile one) are dropped, on answers and forwarded errors."""
    forged = [
        (b"x-ctxledger-notice", b"forged by the upstream"),
        (b"X-Ctxledger-Session", b"other"),
        (b"x-upstream-own", b"kept"),
    ]
    async with rig(tmp_path) as r:
        r.upstream.extra_headers = forged
        r.upstream.queue(Say("Hello."), Say("Hello again."), Error(429, {"error": {}}))
        body = {"model": "gpt-4.1", "instructions": SYSTEM, "input": "hi", "stream": stream}
        headers = {"X-Ctxledger-Session": "fg"}
        first = await r.http.post("/v1/responses", json=body, headers=headers)
        again = await r.http.post("/v1/responses", json=body, headers=headers)
        error = await r.http.post("/v1/responses", json={**body, "input": "b"}, headers=headers)
        assert [first.status_code, again.status_code, error.status_code] == [200, 200, 429]
        assert _notices(first) == []
        assert _notices(again) == ["session fg already answered this history"]
        assert _notices(error)[0].startswith("history diverges")  # (input "b": a branch)
        for answer in (first, again, error):
            assert not any("forged" in told for told in _notices(answer))
            assert answer.headers["x-upstream-own"] == "kept"
            assert "x-ctxledger-session" not in answer.headers


async def test_a_notice_before_an_error_is_told_on_the_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A turn that branched, then met a busy store (its preflight), answers 503 with
    the branch told: the branch is in the ledger either way."""
    async with rig(tmp_path) as r:
        r.upstream.queue(Say("A."))
        headers = {"X-Ctxledger-Session": "busy"}
        first = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "a"}]
        await r.http.post("/v1/chat/completions", json=_chat(first, False), headers=headers)

        async def busy(*_: Any, **__: Any) -> Any:
            raise StoreBusy("the ledger is busy (a lock held too long)")

        monkeypatch.setattr(r.service, "preflight", busy)
        other = [
            *first,
            {"role": "assistant", "content": "not A"},
            {"role": "user", "content": "b"},
        ]
        answer = await r.http.post(
            "/v1/chat/completions", json=_chat(other, False), headers=headers
        )
        assert answer.status_code == 503 and answer.json()["error"]["code"] == "store_busy"
        (told,) = _notices(answer)
        assert told.startswith("history diverges from the ledger after 1 messages: branched as")


async def test_overflow_retries_are_told_on_the_forwarded_error(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    too_long = {
        "error": {
            "message": "prompt is too long",
            "type": "invalid_request_error",
            "code": "context_length_exceeded",
        }
    }
    async with rig(tmp_path) as r:
        r.upstream.queue(*[Error(400, too_long)] * 10)
        messages: list[Any] = [{"role": "system", "content": SYSTEM}]
        for i in range(12):
            messages += [
                {"role": "user", "content": ask(i, 80)},
                {"role": "assistant", "content": f"done with step {i}. " * 20},
            ]
        messages.append({"role": "user", "content": "what next?"})
        headers = {"X-Ctxledger-Session": "stuck", "X-Ctxledger-Context-Length": "8192"}
        with caplog.at_level(logging.INFO, logger="ctxledger.server"):
            answer = await r.http.post(
                "/v1/chat/completions", json=_chat(messages, False), headers=headers
            )
        assert answer.status_code == 400
        assert answer.json()["error"]["code"] == "context_length_exceeded"  # the upstream's
        retries = [n for n in _notices(answer) if n.startswith("upstream 400")]
        assert len(retries) == r.service.config.max_compression_attempts
        assert all(n.endswith("; retrying") for n in retries)
        assert caplog.text.count("; retrying") == len(retries)


def _header_bytes(headers: list[tuple[bytes, bytes]]) -> int:
    return sum(len(name) + len(value) + 4 for name, value in headers)


@pytest.mark.parametrize(("count", "size"), [(40, 10), (9, 500), (5, 400), (3, 600), (1, 900)])
def test_many_notices_end_with_how_many_more(count: int, size: int) -> None:
    """The notice headers stay within one budget (not 8 of 512 bytes: a proxy in front
    must not overflow); the last one sent says how many more the log holds."""
    texts = [f"notice {i} " + "x" * size for i in range(count)]
    notices = TurnNotices()
    notices.add("s", *texts)
    headers = notices.headers()
    assert _header_bytes(headers) <= MAX_NOTICES_BYTES
    values = read_notice_headers(v.decode("ascii") for _, v in headers)
    assert notices.said == texts  # (the log has them all)
    told = [v for v in values if v.startswith("notice")]
    assert all(v == t or v.endswith("...") for v, t in zip(told, texts, strict=False))
    if len(told) == count:
        assert len(values) == count
    else:
        more = count - len(told)
        assert values == [
            *told,
            f"{more} more {'notice' if more == 1 else 'notices'} (the server's log)",
        ]
    assert len(told) >= min(count, MAX_NOTICES_BYTES // (min(size, MAX_NOTICE_BYTES) + 40) - 1)


def test_a_notice_from_outside_is_logged_as_plain_text(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="ctxledger.server"):
        TurnNotices().add("s\x1b[2J", "upstream said \x1b]0;owned\x07 and\nmore")
    assert "\x1b" not in caplog.text and "\x07" not in caplog.text
    assert "session s\\x1b[2J: upstream said \\x1b]0;owned\\x07 and\\nmore" in caplog.text


_HEADER_BYTES = {*range(0x20, 0x7F)} - {ord(",")}


#: 40 characters of at most 12 bytes once encoded: never cut
@given(st.lists(st.text(max_size=40), min_size=1, max_size=5))
def test_notice_values_are_header_safe_and_read_back(texts: list[str]) -> None:
    values = [notice_value(t) for t in texts]
    for value in values:
        assert set(value) <= _HEADER_BYTES and len(value) <= MAX_NOTICE_BYTES
        assert value[:1] != b" " and value[-1:] != b" "  # (a header's edges are dropped)
    read = [v.decode("ascii") for v in values]
    assert read_notice_headers(read) == texts  # one header each
    assert read_notice_headers([", ".join(read)]) == texts  # joined, as HTTP allows


def test_a_long_notice_is_cut_between_escapes() -> None:
    for pad in range(4):
        value = notice_value("x" * pad + "é" * 400)
        assert len(value) <= MAX_NOTICE_BYTES and value.endswith(b"...")
        body = value[:-3].decode("ascii")
        assert read_notice_headers([body]) == ["x" * pad + "é" * ((len(body) - pad) // 6)]


@pytest.mark.parametrize("size", [509, 510, 511, 512, 513])
@pytest.mark.parametrize(("before", "after"), [(" ", " "), (" ", ""), ("", " "), ("", "")])
def test_edge_spaces_count_once_encoded(size: int, before: str, after: str) -> None:
    """An edge space is encoded ("%20") before the value is measured: never more than
    :data:`MAX_NOTICE_BYTES` (the review found 515)."""
    text = before + "a" * (size - len(before) - len(after)) + after
    value = notice_value(text)
    assert len(value) <= MAX_NOTICE_BYTES and value[:1] != b" " and value[-1:] != b" "
    whole = len(text) + 2 * (len(before) + len(after)) <= MAX_NOTICE_BYTES
    assert (
        read_notice_headers([value.decode("ascii")]) == [text] if whole else value.endswith(b"...")
    )


def test_a_lone_surrogate_is_written_out() -> None:
    assert notice_value("bad \udcff byte") == b"bad \\udcff byte"


@pytest.fixture
def logging_restored() -> Any:
    names = ["ctxledger", "uvicorn", "uvicorn.error", "uvicorn.access", "uvicorn.asgi"]
    kept = [
        (lg, lg.handlers[:], lg.level, lg.propagate, lg.disabled)
        for lg in map(logging.getLogger, names)
    ]
    yield
    for lg, handlers, level, propagate, disabled in kept:
        lg.handlers[:], lg.level, lg.propagate, lg.disabled = handlers, level, propagate, disabled


@pytest.mark.parametrize(("level", "shown"), [("info", True), ("warning", False)])
def test_serve_shows_a_notice_at_its_log_level(
    logging_restored: None, capsys: pytest.CaptureFixture[str], level: str, shown: bool
) -> None:
    """``serve`` sets up the ``ctxledger`` loggers with uvicorn's (a notice was logged
    to no handler before: not shown under ``--log-level info``)."""
    import uvicorn

    from ctxledger.cli.serve import APP_FACTORY, log_config

    config = uvicorn.Config(
        APP_FACTORY, factory=True, log_level=level, log_config=log_config(level)
    )
    config.configure_logging()
    TurnNotices().add("s1", "the client went on without reply m-1")
    logging.getLogger("ctxledger.server").warning("a warning")
    err = capsys.readouterr().err
    assert ("session s1: the client went on without reply m-1" in err) is shown
    assert "a warning" in err
