"""An upstream answer is bounded in memory (session 32 review).

httpx decoded a compressed chunk at once (64 KiB of gzip became 64 MiB before any cap
looked at it), a non-streamed answer was read whole with no limit, and a stream of
small events grew the face's gathered reply without one. The upstream is now asked
for ``accept-encoding: identity`` (a client's own is not passed on), an answer in any
other encoding is a 502, and an answer, whole or streamed, is cut at
``MAX_REPLY_BYTES`` with a 502 or the face's error event; nothing of it is recorded.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import httpx
import pytest
from test_server_upstream_transport import _FACES, _SSE, REPLY, _answer, _Body, _Chunks, _streamed

pytestmark = pytest.mark.anyio


async def test_the_upstream_is_asked_for_uncompressed_answers_whatever_the_client_accepts(
    tmp_path: Path,
) -> None:
    seen: list[httpx.Request] = []

    def upstream(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json=REPLY)

    response, roles = await _answer(tmp_path, upstream)
    assert response.status_code == 200 and roles == ["user", "assistant"]
    assert seen[0].headers["accept-encoding"] == "identity"


@pytest.mark.parametrize("encoding", ["gzip", "br", "zstd"])
async def test_an_answer_in_an_encoding_not_asked_for_is_a_502(
    tmp_path: Path, encoding: str
) -> None:
    def upstream(request: httpx.Request) -> httpx.Response:
        body = gzip.compress(json.dumps(REPLY).encode())
        return httpx.Response(200, headers={"content-encoding": encoding}, stream=_Body(body))

    response, roles = await _answer(tmp_path, upstream)
    assert response.status_code == 502, response.text
    error = response.json()["error"]
    assert error["code"] == "bad_upstream_reply"
    assert f"content-encoding '{encoding}' though asked for identity" in error["message"]
    assert roles == ["user"]


@pytest.mark.parametrize("face", list(_FACES))
async def test_a_stream_in_an_encoding_not_asked_for_is_a_502(tmp_path: Path, face: str) -> None:
    bomb = gzip.compress(b"data: " + b"x" * (1 << 20))
    response, roles = await _streamed(
        tmp_path,
        face,
        lambda request: httpx.Response(
            200, headers={**_SSE, "content-encoding": "gzip"}, stream=_Body(bomb)
        ),
    )
    assert response.status_code == 502 and "content-encoding 'gzip'" in response.text
    assert roles == ["user"]


async def test_a_whole_answer_over_the_cap_is_a_502_and_not_read_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("ctxledger.server.upstream_reply.MAX_REPLY_BYTES", 64 * 1024)
    chunks = _Chunks(b" " * 16 * 1024, 10_000)  # (blanks: JSON, were it ever read whole)
    response, roles = await _answer(tmp_path, lambda request: httpx.Response(200, stream=chunks))
    assert response.status_code == 502, response.text
    assert "answered over 65,536 bytes" in response.json()["error"]["message"]
    assert chunks.taken <= 6 and roles == ["user"]


async def test_a_stream_of_small_events_over_the_cap_ends_with_the_error_event(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("ctxledger.server.proxy.MAX_REPLY_BYTES", 64 * 1024)
    delta = {"choices": [{"index": 0, "delta": {"content": "y" * 1000}}]}
    chunks = _Chunks(f"data: {json.dumps(delta)}\n\n".encode() * 16, 10_000)
    response, roles = await _streamed(
        tmp_path, "openai", lambda request: httpx.Response(200, headers=_SSE, stream=chunks)
    )
    assert "its stream runs past 65,536 bytes" in response.text
    assert "Nothing of its answer was recorded" in response.text
    assert chunks.taken <= 6 and roles == ["user"]
