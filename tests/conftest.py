"""Shared test settings and fixtures: hypothesis profiles (``ci`` is the default under
`make test`), a configuration-free environment (no ``CTXLEDGER_<KEY>`` variable, no config
file found) so a developer's own settings never change a test's outcome, a fresh
``ledger`` and a recorded multi-compaction ``chain``."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from helpers.ledger_helpers import deterministic_ledger
from hypothesis import HealthCheck, settings

from ctxledger.analysis.compactions import chain_compactions
from ctxledger.demo.record import record_generated
from ctxledger.ledger.facade import Ledger

Chain = tuple[Ledger, str]

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


# --------------------------------------------------------------------------- fixtures


@pytest.fixture
def ledger() -> Iterator[Ledger]:
    """A fresh in-memory ledger: step clock, sequential ids, the small 16K config."""
    opened = deterministic_ledger()
    yield opened
    opened.close()


@pytest.fixture(scope="module")
def chain(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Chain:
    """A generated session recorded through the service into a chain of ≥ 2 compactions.

    ``(ledger, tip)``, shared by a module's tests. A module picks its session with
    ``CHAIN_SEED`` / ``CHAIN_TURNS`` / ``CHAIN_FOCUS_AT`` (defaults: 5, 12, none).
    """
    module = request.module
    path = tmp_path_factory.mktemp(module.__name__.rsplit(".", 1)[-1]) / "chain.db"
    opened = deterministic_ledger(path)
    tip = record_generated(
        opened,
        seed=getattr(module, "CHAIN_SEED", 5),
        turns=getattr(module, "CHAIN_TURNS", 12),
        focus_at=getattr(module, "CHAIN_FOCUS_AT", None),
    )
    assert len(chain_compactions(opened, tip)) >= 2
    return opened, tip
