"""Hostile bytes on every HTTP endpoint, below what a client library would send: never a
server error, a refusal appends nothing and says so in plain one-line text, and no
header answered holds CR, LF or NUL.

Session 45's sweep, kept as a property (bounded examples). Raw ASGI requests to every
route of the app (:func:`test_every_route_is_sent_to_or_named_as_not_sent` holds the list
to ``app.routes``; the event feeds are read with ``follow=false`` so they end), by its
method, by HEAD or sometimes another method, whose body is a valid one, or bytes that
are not UTF-8, a byte-order mark, a NUL, duplicate keys, a lone surrogate, trailing data
or nothing; whose content type is missing, another one, another charset, or holds a
NUL, CR LF or bytes that are not text; with headers doubled or holding CR LF, NUL or
bytes that are not text (the session and context-length headers, ``Idempotency-Key``,
``Content-Length``, ``Last-Event-ID``, the token and the headers passed on); and with a
query that is not UTF-8, doubled or out of range. The sweep's random runs (6,000 such
requests; the feeds probed apart, HEAD not sent) found nothing, nor did 600 examples of
this property with the feeds and HEAD in; this keeps it from coming back. The endpoints
passed on to the upstream answer what the upstream answers: the fake one answers a 400
JSON error to a body that is not JSON, as a provider would.
"""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path

import anyio
from helpers.server_rig import rig, send_raw
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_server_fuzzed_hostile_json import BODIES, TURN, assert_refusal_is_plain, encoded

TOKEN = "fuzzed-raw-bytes-token-0123456789abcdef"
AUTH = (b"authorization", b"Bearer " + TOKEN.encode())
PASSED_ON = ("/v1/embeddings", "/v1/messages/count_tokens", "/v1/models", "/v1/models/{model_id}")
FEEDS = ("/v1/events", "/v1/sessions/{session_id}/events")

ROUTES = [
    ("GET", "/healthz"),
    ("GET", "/openapi.json"),
    ("POST", "/v1/sessions"),
    ("GET", "/v1/sessions"),
    ("GET", "/v1/sessions/{session_id}"),
    *[
        ("POST", f"/v1/sessions/{{session_id}}/{name}")
        for name in (
            "messages",
            "usage",
            "preflight",
            "system-prompt",
            "hygiene",
            "compress",
            "provider-error",
            "end",
        )
    ],
    *[
        ("GET", f"/v1/sessions/{{session_id}}/{name}")
        for name in (
            "api-messages",
            "persisted/{ref}",
            "chain",
            "usage",
            "replay",
            "audit",
            "trace",
            "recall",
        )
    ],
    ("GET", "/v1/compactions/{compaction_id}/expand"),
    ("GET", "/v1/compactions/{compaction_id}/audit"),
    ("GET", "/v1/diff"),
    *[("GET", path) for path in FEEDS],
    ("POST", "/v1/chat/completions"),
    ("POST", "/v1/messages"),
    ("POST", "/v1/responses"),
    *[("GET", path) for path in PASSED_ON[2:]],
    *[("POST", path) for path in PASSED_ON[:2]],
]
#: the app's routes this property sends nothing to, each with why (none today)
NOT_SENT: dict[tuple[str, str], str] = {}
#: what a route's path parameters are filled with (session "s" is the one started)
FILLED = {"session_id": "s", "ref": "r", "compaction_id": "c", "model_id": "m"}
GOOD = {path: encoded(body) for _, path, body in BODIES}
RAW_BODIES = [
    b"",
    b"\xff\xfe\x00",
    b"\xef\xbb\xbf{}",
    b"\x00",
    b"{",
    b"null",
    b"[]",
    b"1e99999",
    b'{"a":1,"a":2}',
    b'{"messages":[],"messages":[{"role":"user","content":"x"}]}',
    b"\xc0\xaf",
    b'{"\xff":1}',
    b'{"model":"m","messages":[{"role":"user","content":"hi","role":"system"}]}',
    b'{"model":"m\xed\xa0\x80"}',
    b"{}          {}",
    b'{"model":"m"}\x00',
    b'{"model":"m","messages":[{"role":"user","content":"hi"}],"model":5}',
]
CONTENT_TYPES = [
    b"application/json",
    b"text/plain",
    b"application/x-www-form-urlencoded",
    b"multipart/form-data; boundary=x",
    b"application/json; charset=utf-16",
    b"application/json; charset=latin-1",
    b"application/json\x00",
    b"\xff\xfe",
    b"application/json\r\nX-Evil: 1",
    b"a" * 10_000,
]
HEADERS = [
    (b"x-ctxledger-session", b"a\r\nb"),
    (b"x-ctxledger-session", b"\x1b[31m"),
    (b"x-ctxledger-session", b"\xff\xfe"),
    (b"x-ctxledger-session", b""),
    (b"x-ctxledger-session", b"s"),
    (b"x-ctxledger-context-length", b"-1"),
    (b"x-ctxledger-context-length", b"9" * 5000),
    (b"x-ctxledger-context-length", "\u0663".encode()),
    (b"content-length", b"-1"),
    (b"content-length", b"abc"),
    (b"content-length", b"9" * 30),
    (b"idempotency-key", b"\x00"),
    (b"idempotency-key", b"\xff" * 300),
    (b"idempotency-key", b"a"),
    (b"last-event-id", b"\xff"),
    (b"x-ctxledger-token", b"\xff"),
    (b"authorization", b"Bearer \xff"),
    (b"openai-organization", b"\xff\r\n"),
    (b"anthropic-version", b"\x00"),
    (b"user-agent", b"\x1b[31m"),
]
QUERIES = [
    b"",
    b"a=\xff",
    b"limit=1&limit=2",
    b"limit=-1",
    b"limit=" + b"9" * 5000,
    b"query=%00",
    b"query=%ff%fe",
    b"verify=maybe",
    b"a=%",
    b"%%%",
    b"fact=" + b"x" * 100_000,
    b"offset=1e3",
    b"after=-1",
    b"after=" + b"9" * 5000,
]


def test_every_route_is_sent_to_or_named_as_not_sent(tmp_path: Path) -> None:
    async def main() -> set[tuple[str, str]]:
        async with rig(tmp_path, token=TOKEN) as r:
            return {
                (method, route.path)
                for route in r.app.routes
                for method in getattr(route, "methods", None) or ()
                if method != "HEAD"  # (every GET route answers HEAD: sent below)
            }

    assert set(ROUTES) | set(NOT_SENT) == anyio.run(main)


@st.composite
def raw_requests(draw: st.DrawFn) -> tuple[str, str, bytes, list[tuple[bytes, bytes]], bytes]:
    method, route = draw(st.sampled_from(ROUTES))
    path = route.format(**FILLED)
    if method == "GET" and draw(st.integers(0, 4)) == 0:
        method = "HEAD"
    if draw(st.integers(0, 9)) == 0:
        method = draw(st.sampled_from(["PUT", "DELETE", "PATCH", "OPTIONS", "HEAD", "POST"]))
    body = GOOD.get(path, b"{}") if draw(st.booleans()) else draw(st.sampled_from(RAW_BODIES))
    headers = [AUTH] if draw(st.integers(0, 9)) else []
    if draw(st.integers(0, 5)):
        headers.append((b"content-type", draw(st.sampled_from(CONTENT_TYPES))))
    headers += draw(st.lists(st.sampled_from(HEADERS), max_size=3))
    query = draw(st.sampled_from(QUERIES))
    if route in FEEDS:  # (a feed follows the log until the client goes: this one ends)
        query = b"&".join(q for q in (query, b"follow=false") if q)
    return method, path, query, headers, body


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(raw_requests())
def test_hostile_bytes_are_no_server_error_and_a_refusal_appends_nothing(
    case: tuple[str, str, bytes, list[tuple[bytes, bytes]], bytes],
) -> None:
    method, path, query, headers, body = case

    async def main() -> tuple[int, list[tuple[bytes, bytes]], bytes, int]:
        with tempfile.TemporaryDirectory(prefix="ctxledger-raw-bytes-") as folder:
            async with rig(Path(folder), token=TOKEN) as r:
                start = {"model": "m", "session_id": "s", "context_length": 8192}
                auth = {"Authorization": f"Bearer {TOKEN}"}
                await r.http.post("/v1/sessions", headers=auth, json=start)
                await r.http.post("/v1/sessions/s/messages", headers=auth, json={"messages": TURN})
                before = r.last_seq()
                status, answered, raw = await send_raw(r.app, method, path, query, headers, body)
                return status, answered, raw, r.last_seq() - before

    status, answered, raw, appended = anyio.run(main)
    for name, value in answered:  # (a header answered never carries a line break or a NUL)
        assert not re.search(rb"[\r\n\x00]", name + value), (name, value)
    head = method == "HEAD"  # (answered without a body: the status alone is checked)
    text = raw.decode("utf-8", "replace")
    assert_refusal_is_plain(status, "{}" if head else text)
    recovery = path.endswith("/provider-error") and '"context_overflow"' in text
    if status >= 400 and not recovery:
        assert appended == 0, (status, text[:2000])
        if not head:
            json.loads(raw)  # a refusal is a JSON error body
