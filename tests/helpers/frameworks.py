"""The framework packages the integration tests run against (the extras ``agents`` and
``langchain`` in ``.venv``; hermes-agent in ``.venv-hermes``).

``make test`` installs them and sets ``CTXLEDGER_REQUIRE_INTEGRATIONS=1``: there a
missing framework fails the test instead of skipping it, so CI never passes without
running them. A contributor's plain ``pytest`` without the extras skips, with the reason.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

import pytest

REQUIRE = "CTXLEDGER_REQUIRE_INTEGRATIONS"


def required() -> bool:
    return bool(os.environ.get(REQUIRE))


def missing(message: str) -> None:
    """Fail under ``make test`` (the framework must be there), skip the module otherwise."""
    if required():
        pytest.fail(f"{message} ({REQUIRE} is set: make test installs it)", pytrace=False)
    pytest.skip(message, allow_module_level=True)


def require(module: str, extra: str) -> ModuleType:
    """Import `module`, or fail/skip (see :func:`missing`) naming the extra to install."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        missing(f"{module} is not installed ({exc}): pip install -e '.[{extra}]'")
        raise  # unreachable: missing() always raises
