"""Session 37's fuzzing of what a user or a library caller names, kept as properties:
a ``SESSION@SEQ`` reference, a query parameter's integer (and every integer a user
spells: one rule), and the object handed to ``Ledger()`` / ``ContextService()``. Each input is one answer or one ``InvalidInput``,
never another exception."""

from __future__ import annotations

import string
from pathlib import Path
from typing import Any
from urllib.parse import quote

import anyio
import click
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from starlette.requests import Request

from ctxledger import ContextService, Ledger
from ctxledger.analysis.diff import parse_ref
from ctxledger.cli.app import ASCII_INT, CONTEXT_LENGTH, NON_NEGATIVE, POSITIVE, SECONDS
from ctxledger.errors import CtxLedgerError, InvalidInput
from ctxledger.integers import ascii_int
from ctxledger.server.routing import SESSION_ID, decimal, query_int

_IDS = st.text(
    alphabet=string.ascii_letters + string.digits + "._:@-", min_size=1, max_size=12
).filter(SESSION_ID.fullmatch)
#: text that looks like a number to someone: digits of every script, signs, blanks, "_"
_NUMBERISH = st.text(alphabet=string.digits + "+-_ .e\u0661\u00b2\u2007\uff11", max_size=8)


def _spelled(text: str, *, signed: bool = False, most: int = 4300) -> int | None:
    """The one rule, written plainly: ASCII digits (a "-" first when signed), spaces and
    tabs around allowed."""
    body = text.strip(" \t")
    digits = body[1:] if signed and body.startswith("-") else body
    ok = digits.isascii() and digits.isdigit() and len(digits) <= most
    return int(body) if ok else None


def _is_seq(text: str) -> bool:
    return (_spelled(text) or 0) >= 1


@settings(max_examples=100, deadline=None)
@given(name=_IDS, seq=st.one_of(_NUMBERISH, st.text(max_size=6)).filter(lambda t: "@" not in t))
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
        assert _is_seq(seq) and got == (name, _spelled(seq))
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
        assert not _is_seq(raw)
    else:
        assert value == (_spelled(raw) if raw else None)


@settings(max_examples=200, deadline=None)
@given(raw=st.one_of(_NUMBERISH, st.text(max_size=6), st.just("9" * 19)))
def test_refs_queries_headers_and_options_read_an_integer_by_one_rule(raw: str) -> None:
    """``SESSION@SEQ``, a query integer, ``Last-Event-ID`` and the CLI's integer options
    each had their own rule (blanks, signs, digits of other scripts, lengths)."""
    signed = _spelled(raw, signed=True)
    assert ascii_int(raw) == _spelled(raw) and decimal(raw) == _spelled(raw, most=18)
    try:
        assert query_int(_request(f"after={quote(raw)}"), "after", 0, minimum=-(10**30)) == (
            signed if raw else 0
        )
    except InvalidInput:
        assert signed is None
    try:
        assert ASCII_INT.convert(raw, None, None) == signed
    except click.BadParameter:
        assert signed is None


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


@pytest.mark.parametrize("kind", [POSITIVE, NON_NEGATIVE, CONTEXT_LENGTH, ASCII_INT])
@pytest.mark.parametrize(
    ("raw", "says"),
    [
        ("1_0", "is not an integer in ASCII digits."),
        ("\u0661\u0660\u0662\u0664", "is not an integer in ASCII digits."),
        ("+2048", "is not an integer in ASCII digits."),
        # 5,000 ASCII digits are digits: too many of them, and quoted short
        ("9" * 5000, "has over 4,300 digits."),
    ],
)
def test_every_integer_option_type_reads_ascii_digits_and_quotes_short(
    kind: click.ParamType[Any, Any], raw: str, says: str
) -> None:
    """The ranged option types (``--port``, ``--turns``, ``--context-length`` …) had no
    test of the ASCII rule; a 5,000-digit value was called "not ASCII digits" and quoted
    whole (5,100 bytes)."""
    with pytest.raises(click.BadParameter) as caught:
        kind.convert(raw, None, None)
    message = caught.value.format_message()
    assert message.endswith(says) and len(message) < 120, message


@pytest.mark.parametrize("raw", ["1_0", "\u0661", "\uff11", "9" * 5000 + "x"])
def test_a_seconds_option_reads_ascii_and_quotes_short(raw: str) -> None:
    """``float()`` took "1_0" as 10.0 and "١" as 1.0 (``serve --stall-timeout``,
    ``trajectories compress --timeout``), and a 5,000-character value was quoted whole."""
    with pytest.raises(click.BadParameter) as caught:
        SECONDS.convert(raw, None, None)
    assert len(caught.value.format_message()) < 120


def test_service_open_takes_the_ledger_s_opening_options(tmp_path: Path) -> None:
    """``ContextService.open(path, existing=True)`` (and ``read_only=``) was a TypeError
    that left the ledger it had just opened unclosed."""
    missing = tmp_path / "none.db"
    with pytest.raises(CtxLedgerError):
        ContextService.open(missing, existing=True)
    assert not missing.exists()
    made = tmp_path / "made.db"
    anyio.run(ContextService.open(made).aclose)
    service = ContextService.open(made, read_only=True)
    assert service.ledger.store.read_only
    anyio.run(service.aclose)
    with pytest.raises(TypeError):
        ContextService.open(made, no_such_option=1)
