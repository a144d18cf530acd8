"""Deterministic synthetic agent sessions: realistic coding-agent traffic from a seed.

Used by the demo, the benchmarks and tests (which must not depend on real
transcripts). A session is a list of turns; each turn is one user ask followed by
assistant tool calls, their (sometimes large) outputs, test failures, fixes and a
final reply. Everything derives from ``random.Random(seed)``.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterator
from typing import ClassVar

from ctxledger.messages import JSON

#: a small technical vocabulary for generated prose (tests, benchmarks)
VOCABULARY: tuple[str, ...] = tuple(
    [
        "the",
        "test",
        "suite",
        "failed",
        "on",
        "assertion",
        "error",
        "in",
        "module",
        "config",
        "path",
        "value",
        "returned",
        "none",
        "expected",
        "list",
        "got",
        "dict",
        "traceback",
        "line",
        "file",
        "src",
        "api",
        "handler",
        "request",
        "response",
        "session",
        "token",
        "budget",
        "cache",
        "migrate",
        "database",
        "schema",
        "column",
        "index",
        "commit",
        "branch",
        "merge",
        "deploy",
        "fix",
        "query",
    ]
)

MODULES = [
    "auth",
    "billing",
    "search",
    "storage",
    "scheduler",
    "api",
    "cli",
    "metrics",
    "cache",
    "mailer",
]
FUNCS = [
    "parse_token",
    "refresh_session",
    "compute_total",
    "apply_discount",
    "build_index",
    "rank_results",
    "flush_queue",
    "retry_backoff",
    "render_report",
    "validate_payload",
    "open_bucket",
    "sign_url",
]
ERRORS = [
    "KeyError: 'user_id'",
    "AssertionError: expected 200, got 500",
    "TypeError: 'NoneType' object is not subscriptable",
    "ValueError: invalid literal for int() with base 10: 'abc'",
    "TimeoutError: connect timed out after 30s",
    "sqlite3.OperationalError: database is locked",
    "ImportError: cannot import name 'Config' from 'app.settings'",
]
ASKS = [
    "The {mod} tests are failing since yesterday's merge. Can you find out why and fix {func}?",
    "Please add retry logic with exponential backoff to {func} in src/{mod}/core.py, max 5 attempts.",
    "Refactor src/{mod}/core.py so {func} no longer reads the config file on every call.",
    "Why does `make test` hang on the {mod} suite? Port 8{n:03d} seems to be involved.",
    "Bump the {mod} client to version 2.{n}.1 and make sure nothing else breaks.",
    "Write unit tests for {func} covering the empty-input case and the error path.",
    "Can you document how {func} handles timeouts? Put it in docs/{mod}.md.",
    "The CI job for {mod} fails with exit code 2; look at the log and fix it.",
]


def _code_file(rng: random.Random, mod: str, lines: int) -> str:
    out = [f'"""The {mod} module."""', "", "import logging", "from app.settings import Config", ""]
    for i in range(lines // 6):
        fn = rng.choice(FUNCS)
        out += [
            f"def {fn}_{i}(value, *, retries={rng.randint(1, 9)}):",
            f"    log = logging.getLogger('{mod}.{fn}')",
            "    if value is None:",
            f"        raise ValueError('{fn}: value is required')",
            f"    return value * {rng.randint(2, 99)}",
            "",
        ]
    return "\n".join(out)


def _pytest_output(
    rng: random.Random, mod: str, func: str, failing: bool, n_tests: int
) -> tuple[str, int]:
    lines = [
        "============================= test session starts ==============================",
        "platform linux -- Python 3.11.7, pytest-8.3.2",
        f"collected {n_tests} items",
        "",
    ]
    for i in range(n_tests):
        lines.append(
            f"tests/{mod}/test_{func}.py::test_case_{i} {'FAILED' if failing and i % 7 == 3 else 'PASSED'}"
        )
    if failing:
        err = rng.choice(ERRORS)
        lines += [
            "",
            "=================================== FAILURES ===================================",
            "___________________________ test_case_3 ___________________________",
            "    def test_case_3():",
            f">       assert {func}(payload) == expected",
            f"E       {err}",
            f"src/{mod}/core.py:{rng.randint(20, 400)}: {err.split(':')[0]}",
            f"========================= 1 failed, {n_tests - 1} passed in 3.21s =========================",
        ]
        return "\n".join(lines), 1
    lines.append(
        f"============================== {n_tests} passed in 2.87s =============================="
    )
    return "\n".join(lines), 0


def _call(cid: str, name: str, args: JSON) -> JSON:
    return {
        "id": cid,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(args)},
    }


class SessionSynth:
    """Generates turns of a coding-agent session. Deterministic for a given seed."""

    def __init__(self, seed: int = 7, *, big_outputs: bool = True, id_prefix: str = "call") -> None:
        self.rng = random.Random(seed)
        self.big_outputs = big_outputs
        self.id_prefix = id_prefix
        self._call_n = 0

    def _cid(self) -> str:
        self._call_n += 1
        return f"{self.id_prefix}_{self._call_n:05d}"

    def system_prompt(self) -> str:
        return (
            "You are a coding agent working in the repository /work/app. Use the terminal, read_file, "
            "write_file, patch and search_files tools. Run the tests before you say something is fixed."
        )

    def tools(self) -> list[JSON]:
        def tool(name: str, props: dict[str, str]) -> JSON:
            return {
                "type": "function",
                "function": {
                    "name": name,
                    "description": f"The {name} tool.",
                    "parameters": {
                        "type": "object",
                        "properties": {k: {"type": v} for k, v in props.items()},
                    },
                },
            }

        return [
            tool("terminal", {"command": "string"}),
            tool("read_file", {"path": "string", "offset": "integer"}),
            tool("write_file", {"path": "string", "content": "string"}),
            tool("patch", {"path": "string", "old": "string", "new": "string"}),
            tool("search_files", {"pattern": "string", "path": "string"}),
        ]

    def turn(self, index: int) -> list[JSON]:
        """One user ask and the agent's work on it (valid OpenAI message sequence)."""
        rng = self.rng
        mod, func = rng.choice(MODULES), rng.choice(FUNCS)
        ask = rng.choice(ASKS).format(mod=mod, func=func, n=rng.randint(0, 999))
        msgs: list[JSON] = [{"role": "user", "content": ask}]
        path = f"src/{mod}/core.py"
        steps = rng.randint(2, 5)
        for step in range(steps):
            kinds = ["read", "test", "search", "patch", "test"] + (
                ["log"] if self.big_outputs else []
            )
            kind = rng.choice(kinds) if step < steps - 1 else "test"
            cid = self._cid()
            if kind == "test":
                call, content = self._test_step(cid, mod, func, failable=step < steps - 1)
            else:
                call, content = self._STEPS[kind](self, cid, mod, func, path)
            msgs += [call, {"role": "tool", "tool_call_id": cid, "content": content}]
        msgs.append(
            {
                "role": "assistant",
                "content": f"Done: {func} in {path} is fixed and the {mod} tests pass (turn {index}).",
            }
        )
        return msgs

    # each step: the assistant's call and the tool's output (random draws in a fixed order)

    def _read_step(self, cid: str, mod: str, func: str, path: str) -> tuple[JSON, str]:
        rng = self.rng
        content = _code_file(rng, mod, rng.randint(60, 900 if self.big_outputs else 120))
        call = _call(cid, "read_file", {"path": path, "offset": 1})
        return {"role": "assistant", "content": f"Let me look at {path}.", "tool_calls": [call]}, (
            content
        )

    def _log_step(self, cid: str, mod: str, func: str, path: str) -> tuple[JSON, str]:
        """An occasional huge output (a full CI log): exercises the tool-output budget."""
        rng = self.rng
        lines = [
            f"{i:06d} [{rng.choice(['INFO', 'DEBUG', 'WARN'])}] {mod}.{func}: step {i} ok"
            for i in range(rng.randint(2500, 4000))
        ]
        call = _call(cid, "terminal", {"command": f"cat logs/ci-{mod}.log"})
        msg = {"role": "assistant", "content": "Let me read the CI log.", "tool_calls": [call]}
        return msg, "\n".join(lines) + "\n[exit code 0]"

    def _search_step(self, cid: str, mod: str, func: str, path: str) -> tuple[JSON, str]:
        rng = self.rng
        hits = "\n".join(
            f"src/{rng.choice(MODULES)}/core.py:{rng.randint(1, 500)}: {func}(value)"
            for _ in range(rng.randint(3, 40))
        )
        call = _call(cid, "search_files", {"pattern": func, "path": "src"})
        return {"role": "assistant", "content": None, "tool_calls": [call]}, hits

    def _patch_step(self, cid: str, mod: str, func: str, path: str) -> tuple[JSON, str]:
        rng = self.rng
        old = f"return value * {rng.randint(2, 9)}"
        new = f"return (value or 0) * {rng.randint(2, 9)}"
        call = _call(cid, "patch", {"path": path, "old": old, "new": new})
        text = f"I'll fix {func} because it does not handle None."
        msg = {"role": "assistant", "content": text, "tool_calls": [call]}
        return msg, f"Patched {path}: 1 replacement."

    def _test_step(self, cid: str, mod: str, func: str, *, failable: bool) -> tuple[JSON, str]:
        rng = self.rng
        failing = failable and rng.random() < 0.6
        out, code = _pytest_output(
            rng, mod, func, failing, rng.randint(5, 300 if self.big_outputs else 30)
        )
        call = _call(cid, "terminal", {"command": f"python -m pytest tests/{mod} -x -q"})
        return {"role": "assistant", "content": None, "tool_calls": [call]}, (
            out + f"\n[exit code {code}]"
        )

    _STEPS: ClassVar[dict[str, Callable[[SessionSynth, str, str, str, str], tuple[JSON, str]]]] = {
        "read": _read_step,
        "log": _log_step,
        "search": _search_step,
        "patch": _patch_step,
    }

    def turns(self, n: int) -> Iterator[list[JSON]]:
        for i in range(n):
            yield self.turn(i)

    def messages(self, n_messages: int) -> list[JSON]:
        """At least `n_messages` messages of whole turns."""
        out: list[JSON] = []
        i = 0
        while len(out) < n_messages:
            out.extend(self.turn(i))
            i += 1
        return out
