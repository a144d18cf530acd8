"""ctxledger's ``schema`` parameter is cut out of a PostgreSQL URL byte for byte.

Everything else in the URL reaches libpq exactly as the user wrote it (no ``+`` for a
space, no lost empty host), and a URL that cannot be parsed is a one-line usage error.
No server is needed: :mod:`ctxledger.eventstore.postgres_url` is plain string work.
"""

from __future__ import annotations

import urllib.parse

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from ctxledger.cli.main import cli
from ctxledger.errors import InvalidInput
from ctxledger.eventstore.postgres_url import split_schema


@pytest.mark.parametrize(
    ("url", "conninfo", "schema"),
    [
        ("postgresql:///db?schema=x", "postgresql:///db", "x"),
        ("postgresql://h/db?application_name=a%20b&schema=x", "postgresql://h/db?application_name=a%20b", "x"),
        ("postgresql://h/db?application_name=a b&schema=x&sslmode=disable",
         "postgresql://h/db?application_name=a b&sslmode=disable", "x"),
        ("postgresql://h/db?options=-c%20a%3Db+c&schema=s", "postgresql://h/db?options=-c%20a%3Db+c", "s"),
        ("postgresql://h1:1,h2:2/db?schema=a&x=1", "postgresql://h1:1,h2:2/db?x=1", "a"),
        ("postgres://u:p%40ss@[::1]:5432/db?schema=a&schema=b", "postgres://u:p%40ss@[::1]:5432/db", "b"),
        ("postgresql://h/db", "postgresql://h/db", None),
        ("postgresql://h/db?sslmode=disable", "postgresql://h/db?sslmode=disable", None),
        ("postgresql://h/db?sch%65ma=t", "postgresql://h/db", "t"),
    ],
)  # fmt: skip
def test_only_the_schema_parameter_is_cut_out(url: str, conninfo: str, schema: str | None) -> None:
    assert split_schema(url) == (conninfo, schema)


@pytest.mark.parametrize("url", ["postgresql://[bad", "postgresql://[::1/db", "postgresql://h]/db"])
def test_an_unparsable_url_is_invalid_input(url: str) -> None:
    with pytest.raises(InvalidInput, match="cannot parse the PostgreSQL URL"):
        split_schema(url)


def test_the_cli_reports_an_unparsable_url_as_a_usage_error() -> None:
    result = CliRunner().invoke(cli, ["--db", "postgresql://[bad", "sessions"])
    assert result.exit_code == 2, result.output
    assert result.output.startswith("error: cannot parse the PostgreSQL URL")
    assert "Traceback" not in result.output


#: characters a user may write in a URL piece (raw or percent-encoded), but no separator
_PIECE = st.text(
    alphabet=st.sampled_from("abcXYZ019-._~+ %2F%20%3D%26é:/,="),
    max_size=12,
)
_KEY = st.text(alphabet=st.sampled_from("abcdehmsx_%20+"), min_size=1, max_size=8).filter(
    lambda k: urllib.parse.unquote(k) != "schema"
)
_VALUE = _PIECE.map(lambda v: v.replace("&", "").replace("#", ""))
_SCHEMA = st.text(alphabet=st.sampled_from("abc_01%41"), max_size=8)


@st.composite
def _url_parts(draw: st.DrawFn) -> tuple[str, list[str], list[tuple[int, str]]]:
    scheme = draw(st.sampled_from(["postgresql", "postgres"]))
    user = draw(st.sampled_from(["", "u@", "u:p%40w@", "me:@"]))
    host = draw(st.sampled_from(["", "h", "db.example", "[::1]", "h1:1,h2:2", "%2Ftmp"]))
    port = draw(st.sampled_from(["", ":5432"])) if host and "," not in host else ""
    db = draw(st.sampled_from(["", "/", "/db", "/my%20db"]))
    base = f"{scheme}://{user}{host}{port}{db}"
    others = [f"{k}={v}" for k, v in draw(st.lists(st.tuples(_KEY, _VALUE), max_size=4))]
    schemas = draw(st.lists(st.tuples(st.integers(0, len(others)), _SCHEMA), max_size=3))
    return base, others, schemas


@given(_url_parts())
def test_the_url_without_schema_is_the_input_less_its_schema_pieces(
    parts: tuple[str, list[str], list[tuple[int, str]]],
) -> None:
    base, others, schemas = parts
    pieces = list(others)
    for offset, (at, value) in enumerate(schemas):
        pieces.insert(min(at + offset, len(pieces)), f"schema={value}")
    url = base + ("?" + "&".join(pieces) if pieces else "")
    conninfo, schema = split_schema(url)
    assert conninfo == base + ("?" + "&".join(others) if others else "")
    last = [p for p in pieces if p.startswith("schema=")]
    assert schema == (urllib.parse.unquote(last[-1].removeprefix("schema=")) if last else None)
