"""The client side of the differential parity tests against the real hermes-agent.

``tests/hermes_oracle.py`` runs under ``.venv-hermes``'s python and answers with
Hermes's own functions; :class:`Hermes` talks to it (one process per test module,
inputs batched) and :func:`oracle` is the body of a module-scoped fixture. Under
``make test`` (``CTXLEDGER_REQUIRE_INTEGRATIONS=1``) a missing ``.venv-hermes`` fails.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from hypothesis import given, settings
from hypothesis.strategies import SearchStrategy

from helpers.frameworks import missing

T = TypeVar("T")

ROOT = Path(__file__).resolve().parents[2]
HERMES_PYTHON = Path(
    os.environ.get("CTXLEDGER_HERMES_PYTHON", ROOT / ".venv-hermes" / "bin" / "python")
)


class Hermes:
    """The oracle process: ``ask(op, inputs)`` returns Hermes's answer for each input."""

    def __init__(self) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("HERMES_", "OPENAI_"))}
        self.proc = subprocess.Popen(
            [str(HERMES_PYTHON), str(ROOT / "tests" / "hermes_oracle.py")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=env,
        )

    def ask(self, op: str, inputs: list[Any]) -> list[Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps({"op": op, "inputs": inputs}) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        assert line, f"the Hermes oracle exited (code {self.proc.poll()})"
        outputs: list[Any] = json.loads(line)["outputs"]
        return outputs

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


def oracle() -> Iterator[Hermes]:
    """Start the oracle, check it answers, yield it, stop it."""
    if not HERMES_PYTHON.exists():
        missing(f"{HERMES_PYTHON} is missing: run `make hermes-venv`")
    process = Hermes()
    try:
        probe = process.ask("strip", ["<think>x</think>ok"])
    except (AssertionError, BrokenPipeError) as exc:
        missing(f"hermes-agent does not answer in {HERMES_PYTHON}: {exc}")
        raise
    assert probe == ["ok"]
    yield process
    process.close()


def mismatches(pairs: list[tuple[Any, Any, Any]]) -> list[str]:
    """``(input, hermes, ctxledger)`` triples that differ, as readable lines."""
    return [f"input {i!r}\n  hermes    {h!r}\n  ctxledger {c!r}" for i, h, c in pairs if h != c]


def drawn(strategy: SearchStrategy[T], count: int, *, derandomize: bool = False) -> list[T]:
    """Up to `count` examples of `strategy`, drawn first so that one oracle call answers
    them all. ``derandomize``: the same examples every run, whatever the profile (else
    the profile decides, as for any property)."""
    items: list[T] = []
    chosen: dict[str, Any] = {"derandomize": True} if derandomize else {}

    @settings(max_examples=count, deadline=None, database=None, **chosen)
    @given(strategy)
    def collect(item: T) -> None:
        items.append(item)

    with _no_local_constants():
        collect()
    return items


@contextmanager
def _no_local_constants() -> Iterator[None]:
    """Draw without Hypothesis's pool of "local constants": now and then it draws a
    literal found in the project's modules imported so far (``ctxledger/``, never test
    files). Which modules those are depends on what else the run collected, so the
    same derandomized draw differed between a full run and this file alone (session
    38: ``test_parity_orphans`` met a session it never meets alone), and a literal
    added anywhere in ``ctxledger/`` would change every oracle batch. Hypothesis
    versions without the pool draw as before."""
    from hypothesis.internal.conjecture import providers

    original = getattr(providers, "_get_local_constants", None)
    constants = getattr(providers, "Constants", None)
    cache = getattr(getattr(providers, "CONSTANTS_CACHE", None), "cache", None)
    if original is None or constants is None or not hasattr(cache, "clear"):
        yield  # (another Hypothesis: constraints.txt pins the one this was written for)
        return
    empty = constants()
    providers.CONSTANTS_CACHE.cache.clear()  # it holds the pool's values per draw kind
    providers._get_local_constants = lambda: empty
    try:
        yield
    finally:
        providers._get_local_constants = original
        providers.CONSTANTS_CACHE.cache.clear()
