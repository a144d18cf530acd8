"""The ``ctxledger`` command (click + rich). Each command module registers on ``cli``."""

from __future__ import annotations

from ctxledger.cli import analysis as _analysis  # noqa: F401  (registers commands)
from ctxledger.cli import compress as _compress  # noqa: F401
from ctxledger.cli import config_command as _config_command  # noqa: F401
from ctxledger.cli import demo as _demo  # noqa: F401
from ctxledger.cli import export_commands as _export_commands  # noqa: F401
from ctxledger.cli import ledger_commands as _ledger_commands  # noqa: F401
from ctxledger.cli import migrate as _migrate  # noqa: F401
from ctxledger.cli import serve as _serve  # noqa: F401
from ctxledger.cli.app import cli


def main() -> None:
    cli(prog_name="ctxledger")


__all__ = ["cli", "main"]

if __name__ == "__main__":  # `python -m ctxledger.cli.main` (`python -m ctxledger` is quieter)
    main()
