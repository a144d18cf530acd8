"""`integrations.common.finite_schema`: a derived tool schema without the NaN and
infinities JSON cannot hold, everything else kept in order, whatever the nesting."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxledger.integrations.common import finite_schema

_LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=5),
)
_JSON = st.recursive(
    _LEAVES,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4)
    ),
    max_leaves=30,
)


def _reference(value: Any) -> Any:
    """The same copy, said recursively (small inputs only)."""
    if isinstance(value, dict):
        return {k: _reference(v) for k, v in value.items() if not _bad(v)}
    if isinstance(value, list | tuple):
        return [_reference(v) for v in value if not _bad(v)]
    return value


def _bad(value: Any) -> bool:
    return isinstance(value, float) and not math.isfinite(value)


@settings(max_examples=200)
@given(st.dictionaries(st.text(max_size=4), _JSON, max_size=4))
def test_the_copy_drops_only_non_finite_numbers_and_keeps_the_order(schema: dict[str, Any]) -> None:
    clean = finite_schema(schema, "tool")
    expected = _reference(schema)
    assert clean == expected
    assert list(clean) == list(expected)  # key order kept


def test_a_deeply_nested_schema_is_copied_without_recursion(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A dict tool nested 5,000 deep raised RecursionError here (the ledger then refuses
    the depth itself, naming the tool)."""
    schema: dict[str, Any] = {"type": "object"}
    inner = schema
    for _ in range(5_000):
        inner["items"] = {"default": math.inf, "type": "array"}
        inner = inner["items"]
    clean = finite_schema(schema, "deep")
    depth = 0
    while "items" in clean:
        assert "default" not in clean["items"]
        clean, depth = clean["items"], depth + 1
    assert depth == 5_000
    # the warning names the first eight paths, then a count (not 5,000 paths of up to
    # 30,000 characters each)
    (warning,) = [r.getMessage() for r in caplog.records if "left out" in r.getMessage()]
    assert "deep.items.default" in warning
    assert warning.endswith("and 4992 more")
    assert len(warning) < 2_000
