"""Requests a client can send that used to end in a 500 (or after a partial write).

Review (session 26), each now a 422 with nothing appended: non-object messages;
``stream_options`` that is not an object (the request was recorded, then the upstream
payload failed to build, at every retry); a ``stream`` that is not a boolean; a
non-ASCII value in a header the proxy forwards (recorded, then the upstream call
failed); superscript digits in a numeric header (``str.isdigit`` takes "²", ``int``
does not); a session id the state API's own routes could not name again.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from helpers.server_rig import rig

TOKEN = "hostile-test-token-0123456789abcdef"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
USER = {"role": "user", "content": "hello"}


def _proxied(
    tmp_path: Path, body: dict[str, Any], headers: list[tuple[bytes, bytes]]
) -> tuple[int, str, int, int]:
    async def main() -> tuple[int, str, int, int]:
        async with rig(tmp_path) as r:
            before = r.last_seq()
            response = await r.http.post("/v1/chat/completions", json=body, headers=headers)
            return (
                response.status_code,
                response.text,
                r.last_seq() - before,
                len(r.upstream.requests),
            )

    return anyio.run(main)


@pytest.mark.parametrize(
    ("extra", "headers", "says"),
    [
        ({"messages": [1, 2]}, [], "messages[0] must be a JSON object"),
        ({"messages": [USER, None]}, [], "messages[1] must be a JSON object"),
        ({"stream": True, "stream_options": 5}, [], "'stream_options' must be an object"),
        ({"stream": "yes"}, [], "'stream' must be true or false"),
        ({}, [(b"authorization", b"Bearer \xc3\xa9")], "authorization header must be ASCII"),
        ({}, [(b"x-ctxledger-context-length", b"2048\xc2\xb3")], "must be an integer"),
    ],
)
def test_a_bad_proxy_request_is_refused_before_anything_is_recorded(
    tmp_path: Path, extra: dict[str, Any], headers: list[tuple[bytes, bytes]], says: str
) -> None:
    body = {"model": "m", "messages": [USER], **extra}
    status, text, appended, sent = _proxied(tmp_path, body, headers)
    assert status == 422 and says in text, text
    assert appended == 0 and sent == 0


def test_a_good_proxy_request_still_goes_through(tmp_path: Path) -> None:
    body = {"model": "m", "messages": [USER], "stream": False, "stream_options": None}
    status, text, appended, sent = _proxied(tmp_path, body, [(b"authorization", b"Bearer sk-x")])
    assert status == 200, text
    assert appended > 0 and sent == 1


def test_superscript_digits_in_last_event_id_are_a_clear_error(tmp_path: Path) -> None:
    async def main() -> tuple[int, str]:
        async with rig(tmp_path, token=TOKEN) as r:
            response = await r.http.get(
                "/v1/events?follow=false",
                headers=[
                    *[(k.encode(), v.encode()) for k, v in AUTH.items()],
                    (b"last-event-id", b"1\xb2"),
                ],
            )
            return response.status_code, response.text

    status, text = anyio.run(main)
    assert status == 422 and "Last-Event-ID" in text


@pytest.mark.parametrize(
    "sid", [" ", " pad ", "a/b", "../../etc/passwd", "a\nb", "é", "s" * 201, 5]
)
def test_the_state_api_refuses_a_session_id_its_routes_cannot_name(
    tmp_path: Path, sid: object
) -> None:
    async def main() -> tuple[int, str, int]:
        async with rig(tmp_path, token=TOKEN) as r:
            response = await r.http.post(
                "/v1/sessions", headers=AUTH, json={"model": "m", "session_id": sid}
            )
            return response.status_code, response.text, r.last_seq()

    status, text, seq = anyio.run(main)
    assert status == 422 and "session_id" in text, text
    assert seq == 0


def test_the_state_api_takes_a_well_formed_session_id(tmp_path: Path) -> None:
    async def main() -> tuple[int, int]:
        async with rig(tmp_path, token=TOKEN) as r:
            made = await r.http.post(
                "/v1/sessions", headers=AUTH, json={"model": "m", "session_id": "team.a:run-1@x"}
            )
            read = await r.http.get("/v1/sessions/team.a:run-1@x", headers=AUTH)
            return made.status_code, read.status_code

    assert anyio.run(main) == (201, 200)


def test_responses_parts_and_stubs_of_odd_shapes_do_not_fail() -> None:
    # review (session 26): an unhashable part type was a 500; a chat client's own
    # ``responses_items`` key was stored and failed every later Responses turn
    from ctxledger.importers.responses import STUBS, items_to_messages, message_to_items
    from ctxledger.server.formats import openai_turn

    odd = {"type": "message", "role": "user", "content": [{"type": ["x"], "text": "a"}]}
    (message,) = items_to_messages([odd])
    assert message["role"] == "user"
    poisoned = {"role": "user", "content": "x", STUBS: [5]}
    assert message_to_items(poisoned) == message_to_items({"role": "user", "content": "x"})
    turn = openai_turn({"model": "m", "messages": [dict(poisoned)]})
    assert turn.messages == [{"role": "user", "content": "x"}]
