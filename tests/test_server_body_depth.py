"""The request body's depth rule (``routing.decode_object``): the decoder runs first and a
valid body's depth is read from its value; the text scan decides only for bodies that
do not decode. These pin down that both paths give the same answers."""

from __future__ import annotations

import pytest

from ctxledger.server.errors import HTTPError
from ctxledger.server.routing import decode_object

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
