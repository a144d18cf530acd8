"""Old import paths of the modules the 0.1 restructuring moved, kept for one release.

``import ctxledger.service`` (and the other root modules that now live in
subpackages) still works: a meta-path finder loads the new module under the old
name and warns with a ``DeprecationWarning`` naming the new path. Import from the
package root (``from ctxledger import ContextService``) instead.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings
from collections.abc import Sequence
from types import ModuleType

__all__ = ["MOVED", "install"]

#: old module path -> new module path
MOVED: dict[str, str] = {
    "ctxledger.service": "ctxledger.runtime.service",
    "ctxledger.compaction": "ctxledger.ledger.compaction",
    "ctxledger.importing": "ctxledger.ledger.importing",
    "ctxledger.facts": "ctxledger.compressor.facts",
    "ctxledger.factmatch": "ctxledger.compressor.factmatch",
    "ctxledger.toolcalls": "ctxledger.compressor.toolcalls",
    "ctxledger.redact": "ctxledger.compressor.redact",
    "ctxledger.synth": "ctxledger.demo.synth",
    "ctxledger.compressor.engine": "ctxledger.compressor.recording",
    **{
        f"ctxledger.{name}": f"ctxledger.analysis.{name}"
        for name in ("audit", "diff", "recall", "replay", "history", "whatif", "undo")
    },
}


class _MovedLoader(importlib.abc.Loader):
    def __init__(self, new: str) -> None:
        self.new = new

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        warnings.warn(
            f"{spec.name} moved to {self.new}; import from `ctxledger` (the public API) instead",
            DeprecationWarning,
            stacklevel=2,
        )
        return importlib.import_module(self.new)

    def exec_module(self, module: ModuleType) -> None:
        return None


class _MovedFinder(importlib.abc.MetaPathFinder):
    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        new = MOVED.get(fullname)
        if new is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, _MovedLoader(new))


def install() -> None:
    """Register the finder once (the package root calls it)."""
    if not any(isinstance(f, _MovedFinder) for f in sys.meta_path):
        sys.meta_path.append(_MovedFinder())
