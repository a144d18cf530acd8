"""The package root re-exports the public API, and only names that exist.

As httpx does, the exported list is derived from the module itself: every public
name defined at the root is in ``__all__`` and every name in ``__all__`` exists.
Every subpackage declares ``__all__`` too, and every ``ctxledger`` import in the
README and the docs resolves.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
import re
import sys
import warnings
from pathlib import Path

import pytest

import ctxledger
import ctxledger.errors
from ctxledger._compat import MOVED

ROOT = Path(__file__).resolve().parent.parent


def test_all_names_exist_and_are_sorted_uniquely() -> None:
    assert sorted(set(ctxledger.__all__), key=str.lower) == sorted(ctxledger.__all__, key=str.lower)
    for name in ctxledger.__all__:
        assert getattr(ctxledger, name) is not None, name


def test_every_public_root_member_is_exported() -> None:
    members = {
        name
        for name, value in vars(ctxledger).items()
        if not name.startswith("_") and not isinstance(value, type(ctxledger))
    }
    members -= {"annotations", "warnings", "Any"}
    assert members == set(ctxledger.__all__) - {"__version__"}


def test_every_error_class_is_exported_and_a_ctxledger_error() -> None:
    errors = {
        name
        for name, obj in vars(ctxledger.errors).items()
        if isinstance(obj, type) and issubclass(obj, Exception)
    }
    assert errors <= set(ctxledger.__all__)
    for name in ctxledger.__all__:
        obj = getattr(ctxledger, name)
        if isinstance(obj, type) and issubclass(obj, Exception):
            assert issubclass(obj, ctxledger.CtxLedgerError), name


def test_protocols_users_implement_are_exported() -> None:
    for name in ("Summarizer", "ContextEngine", "EventStore", "EventSource"):
        assert name in ctxledger.__all__


def test_old_error_name_is_a_deprecated_alias() -> None:
    with pytest.warns(DeprecationWarning, match="SessionEndedError"):
        old = ctxledger.SessionEnded  # type: ignore[attr-defined]
    assert old is ctxledger.SessionEndedError
    with pytest.raises(AttributeError):
        _ = ctxledger.NoSuchThing  # type: ignore[attr-defined]


def _subpackages() -> list[str]:
    return sorted(
        info.name
        for info in pkgutil.walk_packages(ctxledger.__path__, "ctxledger.")
        if info.ispkg and not info.name.startswith("ctxledger.integrations")
    )


@pytest.mark.parametrize("name", _subpackages())
def test_every_subpackage_declares_all(name: str) -> None:
    module = importlib.import_module(name)
    exported = getattr(module, "__all__", None)
    assert isinstance(exported, list), f"{name} declares no __all__"
    for member in exported:
        assert hasattr(module, member), f"{name}.__all__ names missing {member}"


def _doc_imports() -> list[tuple[str, str, str]]:
    """(file, module, name) for every ``from ctxledger… import …`` in the README and docs."""
    found = []
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = path.read_text(encoding="utf-8")
        for block in re.findall(r"```python\n(.*?)```", text, re.S):
            for node in ast.walk(ast.parse(block)):
                if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("ctxledger"):
                    found += [(path.name, node.module or "", a.name) for a in node.names]
    return found


def test_readme_imports_use_the_package_root_only() -> None:
    modules = {module for file, module, _ in _doc_imports() if file == "README.md"}
    assert modules <= {"ctxledger"} | {m for m in modules if m.startswith("ctxledger.integrations")}


@pytest.mark.parametrize(("file", "module", "name"), _doc_imports())
def test_every_documented_import_resolves(file: str, module: str, name: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        assert hasattr(importlib.import_module(module), name), f"{file}: {module}.{name}"


@pytest.mark.parametrize("old", sorted(MOVED))
def test_moved_module_paths_still_import_with_a_deprecation_warning(old: str) -> None:
    sys.modules.pop(old, None)
    with pytest.warns(DeprecationWarning, match=MOVED[old].replace(".", r"\.")):
        module = importlib.import_module(old)
    assert module is importlib.import_module(MOVED[old])


@pytest.mark.parametrize("name", ["KEY_KEPT", "digest_key", "keyed_title"])
def test_names_moved_from_limits_to_idkeys_still_import_from_limits(name: str) -> None:
    """Session 34 moved them; ``from ctxledger.limits import keyed_title`` raised
    ImportError (review s34 #7)."""
    import ctxledger.idkeys
    import ctxledger.limits

    with pytest.warns(DeprecationWarning, match=rf"ctxledger\.idkeys\.{name}"):
        value = getattr(ctxledger.limits, name)
    assert value is getattr(ctxledger.idkeys, name)
    with pytest.raises(AttributeError, match="no_such_name"):
        ctxledger.limits.no_such_name  # noqa: B018
