"""``drawn`` (tests/helpers/hermes_differential.py), which every differential parity
test uses to draw one batch for the Hermes oracle: a derandomized batch is the same
whatever else the run has imported (session 38: a full run drew a session that
``test_parity_orphans`` alone never drew, because Hypothesis also draws literals of the
project's imported modules)."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest
from helpers.hermes_differential import drawn
from hypothesis import strategies as st

#: integers no module of the project writes, so that only the module below adds them
LITERALS = range(7_770_001, 7_770_061)


def test_a_derandomized_batch_does_not_depend_on_the_modules_imported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    strategy = st.lists(st.integers(0, 10**7), min_size=20, max_size=20)
    before = drawn(strategy, 40, derandomize=True)
    (tmp_path / "s38_literals.py").write_text(f"VALUES = {list(LITERALS)!r}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "s38_literals", raising=False)
    importlib.import_module("s38_literals")
    after = drawn(strategy, 40, derandomize=True)
    assert after == before
    assert not set(LITERALS) & {n for item in after for n in item}
