"""The architecture document and the module docstrings stay in step."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _tool():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location(
        "architecture", ROOT / "tools" / "architecture.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_module_table_is_generated_from_the_docstrings() -> None:
    tool = _tool()
    doc = (ROOT / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    assert tool.render(doc) == doc, "run `python tools/architecture.py --write`"


def test_every_module_says_what_it_owns() -> None:
    tool = _tool()
    for path in (ROOT / "ctxledger").rglob("*.py"):
        assert tool.summary(path), f"{path} has no module docstring"
