"""Mutated import files: never a traceback, and a refusal appends nothing (session 39).

Each supported text format's valid fixture (OpenAI JSON, Anthropic JSON, ShareGPT,
Claude Code and Codex JSONL) with a value set, removed or added at a random place,
imported with its format named or detected. The mutations hold hostile values: lone
surrogates, NUL, huge integers, wrong types, the formats' own type names. 1,500 such
files found nothing in session 39; this keeps the property (derandomized: the same
examples every run). A random draw can miss a crash (review 1 found an injected one
missed by three runs out of three), so every object and list of every fixture is also
replaced, in turn, by a text and by null: the shapes that crash a reader expecting an
object (``raw.get`` of a text), each parsed and appended to one shared ledger.
"""

from __future__ import annotations

import contextlib
import copy
import json
import sqlite3
import tempfile
from pathlib import Path
from typing import Any

from click.testing import CliRunner
from helpers.import_fixtures import (
    anthropic_conversation,
    claude_code_lines,
    codex_lines,
    openai_conversation,
    sharegpt_record,
)
from helpers.strategies import json_places, mutate_once
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxledger import Ledger
from ctxledger.cli.main import cli
from ctxledger.errors import CtxLedgerError
from ctxledger.importers.detect import load
from ctxledger.ledger.importing import import_sessions

FIXTURES: dict[str, Any] = {
    "openai": openai_conversation(),
    "anthropic": anthropic_conversation(),
    "sharegpt": [sharegpt_record()],
    "claude-code": claude_code_lines(),
    "codex": codex_lines(),
}
_NAMES = ["user", "assistant", "tool", "system", "text", "tool_use", "tool_result", "message"]
_NAMES += ["function_call", "response_item", "event_msg", "compacted", "token_count"]
_VALUE = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=8),
    st.sampled_from(["\ud800", "\x00", "a\x00b", "", "\ufeff", *_NAMES]),
    st.sampled_from([[], {}, [[[]]], {"type": "text", "text": 5}, [{"type": None}]]),
)


def _add_inside(draw: st.DrawFn, parent: Any, key: Any) -> None:
    """An "add" puts a value into the object or list at the place."""
    if isinstance(parent[key], dict):
        parent[key][draw(st.sampled_from(["type", "role", "content", "id", "x"]))] = draw(_VALUE)
    elif isinstance(parent[key], list):
        parent[key].append(draw(_VALUE))


@st.composite
def mutated(draw: st.DrawFn) -> tuple[str, bytes]:
    fmt = draw(st.sampled_from(sorted(FIXTURES)))
    doc = copy.deepcopy(FIXTURES[fmt])
    mutate_once(draw, doc, _VALUE, _add_inside)
    lines = [doc] if fmt in ("openai", "anthropic") else doc
    text = "\n".join(json.dumps(line) for line in lines)
    return fmt, text.encode("utf-8", "surrogatepass")


def _events(db: Path) -> int:
    if not db.exists() or db.stat().st_size == 0:
        return 0
    conn = sqlite3.connect(db)
    try:
        return int(conn.execute("SELECT count(*) FROM events").fetchone()[0])
    finally:
        conn.close()


@settings(derandomize=True, max_examples=20)
@given(mutated(), st.booleans())
def test_a_mutated_import_file_is_no_traceback_and_a_refusal_appends_nothing(
    case: tuple[str, bytes], named: bool
) -> None:
    fmt, payload = case
    with tempfile.TemporaryDirectory(prefix="ctxledger-fuzz-") as folder:
        db, source = Path(folder) / "l.db", Path(folder) / "in.jsonl"
        source.write_bytes(payload)
        args = ["--db", str(db), "import", str(source), *(["--format", fmt] if named else [])]
        result = CliRunner().invoke(cli, args)
        assert isinstance(result.exception, SystemExit | None), repr(result.exception)
        appended = _events(db)
    if result.exit_code == 0:
        assert appended > 0, result.output
    else:
        said = [line for line in result.output.splitlines() if line.startswith("error:")]
        assert len(said) == 1 and appended == 0, (result.output[-500:], appended)


def _encoded(fmt: str, doc: Any) -> str:
    lines = [doc] if fmt in ("openai", "anthropic") else doc
    return "\n".join(json.dumps(line) for line in lines)


def _shapes() -> list[tuple[str, str]]:
    """Every fixture with one of its objects or lists replaced by a text or by null."""
    out: list[tuple[str, str]] = []
    for fmt, fixture in FIXTURES.items():
        for at in json_places(fixture)[1:]:
            doc = copy.deepcopy(fixture)
            parent = doc
            for key in at[:-1]:
                parent = parent[key]
            if not isinstance(parent[at[-1]], dict | list):
                continue
            for value in ("x", None):
                parent[at[-1]] = value
                out.append((fmt, _encoded(fmt, doc)))
    return out


def test_every_object_of_every_fixture_replaced_by_a_text_or_null_is_no_crash() -> None:
    shapes = _shapes()
    assert len(shapes) > 250  # (every format's objects: 304 when written)
    with Ledger.open(":memory:") as ledger:
        for fmt, text in shapes:
            for named in (fmt, None):
                before = ledger.store.last_seq()
                try:
                    import_sessions(ledger, load(None, named, text=text))
                except CtxLedgerError:
                    assert ledger.store.last_seq() == before, (fmt, text)


#: fields the readers look up by name, given to every object of every fixture (session 45:
#: a ShareGPT human turn holding a ``tool_calls`` of text was a TypeError)
_READ_FIELDS = ["tool_calls", "tool_call_id", "role", "content", "type", "id", "name", "usage"]


def _added_fields() -> list[tuple[str, str]]:
    """Every fixture with one of its objects given one of :data:`_READ_FIELDS` (a field it
    already holds is replaced) holding a text or a number."""
    out: list[tuple[str, str]] = []
    for fmt, fixture in FIXTURES.items():
        for at in json_places(fixture):
            for field in _READ_FIELDS:
                for value in ("x", 5):
                    doc = copy.deepcopy(fixture)
                    target = doc
                    for key in at:
                        target = target[key]
                    if isinstance(target, dict):
                        target[field] = value
                        out.append((fmt, _encoded(fmt, doc)))
    return out


def test_every_object_of_every_fixture_given_a_read_field_of_the_wrong_type_is_no_crash() -> None:
    shapes = _added_fields()
    assert len(shapes) > 1000
    for fmt, text in shapes:
        for named in (fmt, None):
            with contextlib.suppress(CtxLedgerError):
                load(None, named, text=text)
