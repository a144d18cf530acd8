"""What ``ctxledger serve`` hands its workers' app factory through the environment."""

from __future__ import annotations

#: every setting serve exports as ``CTXLEDGER_SERVE_<KEY>`` (``cli.serve``): a test
#: that runs serve in-process deletes them all through monkeypatch, so what serve sets
#: is undone after it
SERVE_ENV_KEYS = (
    "db",
    "config",
    "token_file",
    "guard_proxy",
    "upstream",
    "api",
    "context_length",
    "summarizer",
    "durability",
    "stall_timeout",
    "turn_timeout",
)
