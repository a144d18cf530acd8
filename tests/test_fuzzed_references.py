"""Session 37's fuzzing of what a user or a library caller names, kept as properties:
a ``SESSION@SEQ`` reference, a query parameter's integer, and the object handed to
``Ledger()`` / ``ContextService()``. Each input is one answer or one ``InvalidInput``,
never another exception."""

from __future__ import annotations

import string
from typing import Any
from urllib.parse import quote

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from starlette.requests import Request

from ctxledger import ContextService, Ledger
from ctxledger.analysis.diff import parse_ref
from ctxledger.errors import InvalidInput
from ctxledger.server.routing import SESSION_ID, query_int

_IDS = st.text(
    alphabet=string.ascii_letters + string.digits + "._:@-", min_size=1, max_size=12
).filter(SESSION_ID.fullmatch)
#: text that looks like a number to someone: digits of every script, signs, blanks, "_"
_NUMBERISH = st.text(alphabet=string.digits + "+-_ .e\u0661\u00b2\u2007\uff11", max_size=8)


def _is_seq(text: str) -> bool:
    return text.isascii() and text.isdigit() and int(text) >= 1


@settings(max_examples=100, deadline=None)
@given(name=_IDS, seq=st.one_of(_NUMBERISH, st.text(max_size=6)))
def test_a_reference_is_a_session_and_an_ascii_seq_or_one_invalid_input(
    name: str, seq: str
) -> None:
    ref = f"{name}@{seq}"
    if ref.strip() != ref:
        return  # (blanks around a whole reference are stripped: another rule)
    try:
        got = parse_ref(ref)
    except InvalidInput:
        assert not _is_seq(seq)
    else:
        assert _is_seq(seq) and got == (name, int(seq))
    assert parse_ref(ref, {ref}) == (ref, None)  # a whole id is that session, "@" or not


def _request(query: str) -> Request:
    return Request({"type": "http", "method": "GET", "query_string": query.encode(), "headers": []})


@settings(max_examples=200, deadline=None)
@given(raw=st.one_of(_NUMBERISH, st.text(max_size=6), st.just("9" * 5000)))
def test_a_query_integer_is_ascii_digits_or_one_short_invalid_input(raw: str) -> None:
    request = _request(f"limit={quote(raw)}")
    try:
        value = query_int(request, "limit", None, minimum=1)
    except InvalidInput as exc:
        assert "\n" not in str(exc) and len(str(exc)) < 200
        assert not (raw.isascii() and raw.isdigit() and len(raw) < 4300 and int(raw) >= 1)
    else:
        assert value == (int(raw) if raw else None) and (
            raw == "" or (raw.isascii() and raw.isdigit())
        )


_NOT_A_STORE = st.one_of(
    st.none(), st.integers(), st.text(max_size=8), st.binary(max_size=4), st.lists(st.integers())
)


@settings(max_examples=30, deadline=None)
@given(given_value=_NOT_A_STORE)
def test_ledger_and_service_take_only_what_they_name(given_value: Any) -> None:
    with pytest.raises(InvalidInput, match=r"Ledger\.open\(path\)"):
        Ledger(given_value)
    with pytest.raises(InvalidInput, match=r"ContextService\.open\(path\)"):
        ContextService(given_value)
