"""The request body's depth rule (``routing.decode_object``): the depth is read from the
bytes before anything is decoded (``routing.bracket_depth``, exact for valid JSON, and
an invalid body cut short while too deep is still too deep)."""

from __future__ import annotations

import json
import threading
from typing import Any

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxledger.limits import value_depth
from ctxledger.server.errors import HTTPError
from ctxledger.server.routing import bracket_depth, decode_object

LIMIT = 100 + 8  # the default message depth plus the envelope


def _nested(levels: int, tail: str = "") -> bytes:
    return ('{"a": ' + "[" * (levels - 1) + tail + "]" * (levels - 1) + "}").encode()


def _code(raw: bytes) -> str:
    with pytest.raises(HTTPError) as err:
        decode_object(raw)
    return err.value.code


def test_a_body_exactly_at_the_limit_decodes() -> None:
    assert decode_object(_nested(LIMIT))["a"]


def test_a_valid_body_one_level_deeper_is_too_deep() -> None:
    assert _code(_nested(LIMIT + 1)) == "too_deep"


def test_an_invalid_body_too_deep_is_too_deep_not_bad_json() -> None:
    assert _code(_nested(LIMIT + 1)[:-1]) == "too_deep"
    assert _code(b"[" * 200) == "too_deep"


def test_a_body_beyond_the_decoders_own_recursion_limit_is_too_deep() -> None:
    assert _code(b"[" * 50_000 + b"]" * 50_000) == "too_deep"


def test_brackets_inside_strings_do_not_count() -> None:
    assert decode_object(b'{"a": "' + b"[" * 500 + b'"}') == {"a": "[" * 500}


def test_shallow_bad_bodies_are_bad_json() -> None:
    assert _code(b'{"a": 1') == "bad_json"
    assert _code(b"[1, 2]") == "bad_json"  # not an object
    assert decode_object(b"  ") == {}


# Review (session 26): a 16 MiB body of tiny nested arrays ({"x": [[[]], [[]], ...]})
# took ~5.5 s of the event loop and ~850 MiB (decode, then a walk of 3.3 million
# lists for the depth). The depth is now read from the bytes before decoding (~0.15 s,
# no objects) and a large body is decoded on a worker thread.


def _tiny_arrays(size: int) -> bytes:
    unit = b"[[]],"
    return b'{"messages": [], "x": [' + unit * (size // len(unit)) + b"[[]]]}"


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(alphabet='[]{}"\\ab\n'),
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=3), inner),
        max_leaves=30,
    )
)
def test_the_byte_scan_reads_the_decoded_values_depth(value: object) -> None:
    raw = json.dumps(value).encode()
    assert bracket_depth(raw, 10_000) == value_depth(value)


def test_the_byte_scan_skips_strings_with_escaped_quotes() -> None:
    raw = b'{"a\\"[[[": "\\\\", "b": "]]]\\"{{", "c": [[1]]}'
    assert json.loads(raw)["c"] == [[1]]
    assert bracket_depth(raw, 100) == 3


def test_a_large_body_of_tiny_arrays_decodes_on_a_worker_thread(monkeypatch: Any) -> None:
    from ctxledger.server import routing

    threads: list[str] = []
    decode = routing.decode_object

    def spy(raw: bytes) -> dict[str, Any]:
        threads.append(threading.current_thread().name)
        return decode(raw)

    monkeypatch.setattr(routing, "decode_object", spy)
    raw = _tiny_arrays(2 * routing.THREAD_DECODE_BYTES)
    body = anyio.run(routing.decode_body, raw)
    assert body["messages"] == [] and len(body["x"]) == 2 * routing.THREAD_DECODE_BYTES // 5 + 1
    assert anyio.run(routing.decode_body, b'{"small": 1}') == {"small": 1}
    assert threads[0] != threading.main_thread().name
    assert threads[1] == threading.main_thread().name


def test_a_large_body_too_deep_is_refused_before_it_is_decoded(monkeypatch: Any) -> None:
    from ctxledger.server import routing

    def no_decode(raw: bytes) -> None:
        raise AssertionError("decoded")

    monkeypatch.setattr(routing.msgspec.json, "decode", no_decode)
    raw = _tiny_arrays(2 * 1024 * 1024)[:-2] + b"[" * 200 + b"]" * 200 + b"]}"
    with pytest.raises(HTTPError) as err:
        anyio.run(routing.decode_body, raw)
    assert err.value.code == "too_deep"


@given(st.lists(st.sampled_from([b'"', b"\\", b"[", b"]", b"x", b"\n"]), max_size=40).map(b"".join))
def test_a_string_match_started_at_a_quote_never_fails(body: bytes) -> None:
    """Linear by construction (review, session 27): a string that runs to the end of the
    body is one match, so no quote inside it starts another scan to the end (a 40 KB
    body of \\" after one quote took 6 s). Counted, not timed: every quote the scan
    reaches starts a match, and a match ends at a closing quote or at the body's end."""
    from ctxledger.server import routing

    pos = 0
    while (start := body.find(b'"', pos)) >= 0:
        match = routing._STRING.match(body, start)
        assert match is not None, (body, start)
        assert match.end() == len(body) or body[match.end() - 1 : match.end()] == b'"'
        pos = match.end()


def test_an_unterminated_string_of_escaped_quotes_is_bad_json() -> None:
    with pytest.raises(HTTPError) as caught:
        decode_object(b'{"a":"' + b'\\"' * 200_000)
    assert caught.value.code == "bad_json"


@pytest.mark.parametrize("padding", [0, 200_000])
@pytest.mark.parametrize("siblings", [0, 60_000])
def test_every_way_to_measure_a_body_finds_its_depth(padding: int, siblings: int) -> None:
    """A body is scanned as bytes (a dense start), walked once decoded (a sparse one),
    or walked until it holds too many containers and then scanned: at the limit it
    decodes, one level deeper it is too deep, in each of the three ways."""
    pad = '"pad": "' + "p" * padding + '", '
    many = '"many": [' + ",".join(["[]"] * siblings) + "], " if siblings else ""
    for levels, ok in ((LIMIT, True), (LIMIT + 1, False)):
        nest = "[" * (levels - 1) + "]" * (levels - 1)
        # "a" first: the walk (last key first) meets "many" before it
        raw = ("{" + pad + '"a": ' + nest + ", " + many + '"z": 0}').encode()
        if ok:
            assert len(decode_object(raw)["a"]) == 1
        else:
            assert _code(raw) == "too_deep"
