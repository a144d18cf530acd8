"""Shared test settings: hypothesis profiles (``ci`` is the default under `make test`)."""

from __future__ import annotations

import os

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


def pytest_configure(config: object) -> None:
    """Keep the head-anchor sealing key out of the user's data directory during tests."""
    if "CTXLEDGER_ANCHOR_KEY_FILE" not in os.environ:
        import tempfile

        key_dir = tempfile.mkdtemp(prefix="ctxledger-test-key-")
        os.environ["CTXLEDGER_ANCHOR_KEY_FILE"] = os.path.join(key_dir, "anchor.key")
