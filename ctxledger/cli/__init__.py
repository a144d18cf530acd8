"""The ``ctxledger`` command line (click; data printed as plain text through rich).

``main`` is the console entry point; each command module registers on ``cli``.
"""

from ctxledger.cli.main import cli, main

__all__ = ["cli", "main"]
