"""Raw ASGI requests a real HTTP server passes on as they came: bytes that are not UTF-8
in the query, a NUL or a space in it, a query too long for a URL, a content type that
is not ASCII (session 41's fuzzing of headers and queries).

What it found: an unknown route or a wrong method with a non-UTF-8 query raised out of
the app (the 404/405 handler read ``request.url``, which decodes the query as UTF-8:
uvicorn answers a bare 500 and logs a traceback), and the same on a handler's own error
(its log line read the path the same way); the endpoints passed on to the upstream
(``/v1/models``, ``/v1/embeddings``, ``/v1/messages/count_tokens``) answered a 500 for
such a query and for a content type httpx cannot send. Each is now a 4xx in the
provider's error shape, nothing recorded, nothing sent upstream.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from helpers.server_rig import rig, send_raw

TOKEN = "raw-requests-token-0123456789abcdef"
AUTH = (b"authorization", b"Bearer " + TOKEN.encode())


async def _send(
    app: Any, method: str, path: str, query: bytes, headers: list[tuple[bytes, bytes]], body: bytes
) -> tuple[int, dict[str, Any]]:
    """One request straight into the ASGI app (no client library to clean it first)."""
    status, _, raw = await send_raw(app, method, path, query, [AUTH, *headers], body)
    return status, json.loads(raw)


def _run(
    tmp_path: Path, *requests: tuple[str, str, bytes, list[tuple[bytes, bytes]], bytes]
) -> Any:
    async def main() -> tuple[list[tuple[int, dict[str, Any]]], int, int]:
        async with rig(tmp_path, token=TOKEN) as r:
            before = r.last_seq()
            answers = [await _send(r.app, *request) for request in requests]
            return answers, r.last_seq() - before, len(r.upstream.requests)

    return anyio.run(main)


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [("GET", "/v1/nowhere", 404), ("DELETE", "/v1/chat/completions", 405)],
)
def test_an_unknown_route_with_a_query_that_is_not_utf8_is_a_json_error(
    tmp_path: Path, method: str, path: str, status: int
) -> None:
    (answer,), appended, _ = _run(tmp_path, (method, path, b"a=\xff\xfe", [], b""))
    assert answer[0] == status
    assert answer[1]["error"]["message"] == f"no route {method} {path}"
    assert appended == 0


@pytest.mark.parametrize(
    ("query", "headers"),
    [
        (b"a=\xff", []),
        (b"a=\x00", []),
        (b"a=b c", []),
        (b"a=" + b"x" * 70_000, []),
        (b"", [(b"content-type", b"application/json\xff")]),
        (b"", [(b"content-type", b"application/json\x01")]),
    ],
    ids=["not utf-8", "nul", "space", "70 KB", "content type not ascii", "content type control"],
)
def test_a_passed_on_request_that_no_url_or_header_can_carry_is_a_400(
    tmp_path: Path, query: bytes, headers: list[tuple[bytes, bytes]]
) -> None:
    requests = [
        ("POST", "/v1/embeddings", query, headers, b'{"model": "e", "input": "hi"}'),
        ("GET", "/v1/models", query, headers, b""),
        ("GET", "/v1/models/m1", query, headers, b""),
    ]
    if headers:  # (a GET passes no content type on)
        requests = requests[:1]
    answers, appended, upstream_calls = _run(tmp_path, *requests)
    for status, body in answers:
        assert status == 400, body
        assert body["error"]["code"] in ("bad_query", "bad_header"), body
        assert body["error"]["type"] == "invalid_request_error"
    assert appended == 0 and upstream_calls == 0


def test_a_passed_on_request_with_a_plain_query_still_reaches_the_upstream(
    tmp_path: Path,
) -> None:
    (answer,), appended, upstream_calls = _run(
        tmp_path, ("GET", "/v1/models", b"limit=5&after=m%20x", [], b"")
    )
    assert answer[0] < 400 and upstream_calls == 1 and appended == 0


def test_a_content_type_holding_a_tab_is_passed_on(tmp_path: Path) -> None:
    """HTTP allows a tab in a header value; the check for printable text refused it
    (review L5)."""
    headers = [(b"content-type", b"application/json;\tcharset=utf-8")]
    (answer,), appended, upstream_calls = _run(
        tmp_path, ("POST", "/v1/embeddings", b"", headers, b'{"model": "e", "input": "hi"}')
    )
    assert answer[0] != 400 and upstream_calls == 1 and appended == 0, answer
