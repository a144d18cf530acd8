"""Running code under ``.venv-hermes`` (real hermes-agent; ``$CTXLEDGER_HERMES_PYTHON``)
from the Hermes integration tests: the interpreter, an environment without this run's
``CTXLEDGER_*``, ``HERMES_*`` and ``OPENAI_*`` settings, one checked run."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ctxledger import Ledger
from helpers.frameworks import missing

ROOT = Path(__file__).resolve().parent.parent.parent


def hermes_python() -> Path:
    """The Hermes virtualenv's interpreter; fails or skips (:func:`missing`) without it."""
    python = Path(
        os.environ.get("CTXLEDGER_HERMES_PYTHON", ROOT / ".venv-hermes" / "bin" / "python")
    )
    if not python.exists():
        missing(f"{python} is missing: run `make hermes-venv`")
    return python


def run_hermes(
    args: list[str], workdir: Path, *, timeout: int = 300, **env: str
) -> subprocess.CompletedProcess[str]:
    """``python ARGS`` under the Hermes venv in `workdir`, with `env` added to a clean
    environment; asserts that it exited 0 (the end of its stderr otherwise)."""
    clean = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("CTXLEDGER_", "HERMES_", "OPENAI_"))
    }
    proc = subprocess.run(
        [str(hermes_python()), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**clean, **env},
        cwd=workdir,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    return proc


def run_hermes_script(name: str, workdir: Path, *args: str, timeout: int = 300) -> None:
    """``tests/NAME WORKDIR ARGS`` under the Hermes venv (see :func:`run_hermes`)."""
    run_hermes([str(ROOT / "tests" / name), str(workdir), *args], workdir, timeout=timeout)


def script_ledger(
    tmp_path_factory: Any, name: str, out: str, *args: str, timeout: int = 300
) -> Iterator[tuple[dict[str, Any], Ledger]]:
    """A module fixture's body: run ``tests/NAME`` (:func:`run_hermes_script`) in a fresh
    directory, read the JSON it wrote to `out` there, and yield it with its ledger
    (``result["db"]``), closed after."""
    workdir = tmp_path_factory.mktemp(Path(name).stem)
    run_hermes_script(name, workdir, *args, timeout=timeout)
    result = json.loads((workdir / out).read_text())
    ledger = Ledger.open(result["db"])
    try:
        yield result, ledger
    finally:
        ledger.close()
