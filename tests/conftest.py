"""Shared test settings: hypothesis profiles (``ci`` is the default under `make test`), and
a configuration-free environment (no ``CTXLEDGER_<KEY>`` variable, no config file found)
so a developer's own settings never change a test's outcome."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci",
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    derandomize=True,
)
settings.register_profile(
    "dev",
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile(
    "thorough",
    max_examples=1000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))


#: environment variables that are not settings and that tests may rely on
_KEEP = frozenset({"CTXLEDGER_DB"})


@pytest.fixture(autouse=True)
def _no_user_configuration(
    monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[None]:
    for var in list(os.environ):
        if var.startswith("CTXLEDGER_") and var not in _KEEP:
            monkeypatch.delenv(var)
    # a fresh, empty user config directory per test (a test may write a config there)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path_factory.mktemp("xdg-config")))
    yield
