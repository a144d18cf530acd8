"""Pathological inputs (issue 14): one huge string must not cost more than its length.

A 200-message coding session, and the same session holding one 20 KB non-JSON tool
argument (a single 20,000-character word: the shape that was quadratic); and the same
session holding one 10 MB user message, or one 1 MB user message of RST titles
underlined ever shorter, or of two long runs of backticks (session 34's reviews: both
were quadratic in the fence reader), or one 4 MB user message dense in pytest node ids
(session 43). Each figure is the time of the operation on the
session with the odd message, beside the same operation on the plain session (the
baseline), in this process (no CLI start-up) but for ``whatif_cli``. Goal: ratio <= 2.

Each line also carries the CPU time (``cpu_ms``, ``baseline_cpu_ms``, ``cpu_ratio``:
the machine is shared, wall time is noisy). The what-if is measured twice: ``whatif``
is the best of repeated runs in one process (its fact and token caches warm, as in a
server), ``whatif_cold`` clears the process caches before each run (as a fresh
``ctxledger replay`` process finds them). ``whatif_cli`` is what a user runs: the two
sessions, compacted, written to ledger files, and ``ctxledger --db F replay SID
--summarizer offline -q`` run as a new interpreter per run (the child's CPU from
``RUSAGE_CHILDREN``). Both of its sides pay the interpreter's start-up and imports, which
``whatif_cold`` leaves out: that row is the stricter measure.

    python bench/pathological_bench.py [--runs 3] [--big-mb 10] [--only pytest_ids]
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

if __package__ in (None, ""):  # run as a script: make the checkout importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import anyio

from ctxledger import CompressionConfig, Ledger, OfflineSummarizer, compact
from ctxledger.analysis.audit import audit_chain
from ctxledger.analysis.whatif import whatif
from ctxledger.clock import SequentialIds, StepClock

WINDOW = 16_000
Row = dict[str, Any]
_WORDS = [
    "alpha",
    "beta",
    "gamma",
    "delta",
    "file",
    "test",
    "error",
    "path",
    "token",
    "src/app.py",
    "retry",
]


def session(odd: str | None, big_chars: int) -> list[dict[str, Any]]:
    """200 messages: an ask, then tool loops; `odd` adds a 20 KB argument or a big user message."""
    rng = random.Random(3)
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "fix it " + " ".join(rng.choices(_WORDS, k=50))}
    ]
    call = 0
    while len(messages) < 199:
        call += 1
        args = json.dumps({"command": f"ls -la src/m{call}"})
        if odd == "argument" and call == 5:
            args = "a" * 20_000
        messages.append(
            {
                "role": "assistant",
                "content": " ".join(rng.choices(_WORDS, k=20)),
                "tool_calls": [
                    {"id": f"call_{call}", "type": "function",
                     "function": {"name": "bash", "arguments": args}}
                ],
            }
        )  # fmt: skip
        messages.append(
            {
                "role": "tool",
                "tool_call_id": f"call_{call}",
                "content": " ".join(rng.choices(_WORDS, k=rng.randint(10, 400))),
            }
        )
    if odd in ("user", "underlines", "fence_runs", "pytest_ids"):
        if odd == "underlines":
            big = underlines(1_000)
        elif odd == "pytest_ids":
            big = pytest_ids(PYTEST_IDS_CHARS)
        elif odd == "fence_runs":
            big = fence_runs(1_000_000)
        else:
            big = (" ".join(rng.choices(_WORDS, k=big_chars // 4)) + " é")[-big_chars:]
        messages[101:101] = [
            {"role": "user", "content": big},
            {"role": "assistant", "content": "noted"},
        ]
    return messages


def underlines(titles: int) -> str:
    """RST titles each underlined with ``~`` and shorter than the one before (session
    34's review: 1 MB for 1,000; each underline, read as a fence first, read on to the
    text's end)."""
    return "".join(
        f"\n{'T' * size}\n{'~' * size}\nYou must keep the tests green.\n"
        for size in range(titles, 0, -1)
    )


#: session 43: the size of the message dense in pytest node ids
PYTEST_IDS_CHARS = 4_000_000


def pytest_ids(chars: int) -> str:
    """A test run's output, `chars` long: one parametrized case a line, a path with
    folders as its first parameter id (session 43's review: every bracket is read for
    the ``-`` that ends the path; ~6 us a bracket)."""
    lines = (
        f"tests/unit/test_read.py::TestRead::test_case[data/fixtures/c{n}/in-{n}.sql"
        f"-utf-8-{n % 2 == 0}] PASSED\n"
        for n in range(chars // 60 + 1)
    )
    return "".join(lines)[:chars]


def fence_runs(chars: int) -> str:
    """A fence of a run of backticks half `chars` long, then a run one shorter, which
    closes nothing (session 34's review 2: the block pattern matched the opening run
    again at each position of the second run; 1 MB took 32 s)."""
    size = chars // 2
    return f"You must keep the tests green.\n{'`' * (size + 1)}\n{'`' * size}\n"


def _ledger(tmp: str, name: str, messages: list[dict[str, Any]]) -> tuple[Ledger, str]:
    config = CompressionConfig(context_length=WINDOW)
    ledger = Ledger.open(
        os.path.join(tmp, name), clock=StepClock(), ids=SequentialIds(), config=config,
        durability="normal",
    )  # fmt: skip
    sid = ledger.start_session(model="m", context_length=WINDOW, system_prompt="You code.")
    ledger.append_messages(sid, messages)
    return ledger, sid


def _seconds(fn: Callable[[], object], runs: int, out: dict[str, float], op: str) -> None:
    """Best wall and CPU seconds of `runs` calls into ``out[op]`` / ``out[op + "_cpu"]``."""
    for _ in range(runs):
        start, cpu = time.perf_counter(), time.process_time()
        fn()
        wall, cpu = time.perf_counter() - start, time.process_time() - cpu
        out[op] = min(out.get(op, 1e9), wall)
        out[op + "_cpu"] = min(out.get(op + "_cpu", 1e9), cpu)


def _cold() -> None:
    """Forget what a process remembers of texts (facts, prepared haystacks, token counts)
    and what a derived-value lookup asks once per process. Not the code fingerprints
    (session 39): taken when their modules are imported, an import cost like a compiled
    regex, paid by every process alike."""
    from ctxledger import tokens
    from ctxledger.analysis import factviews
    from ctxledger.compressor import factmatch

    factviews.FACTS.clear()
    digests = getattr(factviews, "_DIGESTS", None)  # long contents' fact-cache digests
    if digests is not None:
        digests.clear()
    long_haystacks = getattr(factmatch, "LONG_HAYSTACKS", None)  # absent before issue 14's
    if long_haystacks is not None:
        long_haystacks.clear()
    tokens._count_long.cache_clear()
    try:  # (session 39: tiktoken's versions, asked by the first derived-value lookup)
        from ctxledger.eventstore import fingerprints
    except ImportError:
        return
    fingerprints._tiktoken_versions.cache_clear()


def _whatif_cold(ledger: Ledger, sid: str) -> None:
    _cold()
    whatif(ledger, sid, summarizer=OfflineSummarizer())


def measure(odd: str | None, runs: int, big_chars: int) -> dict[str, float]:
    """Seconds of compress (fresh ledger each run), audit and what-if on one session."""
    out: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        messages = session(odd, big_chars)
        n = 0

        def compress_once() -> None:
            nonlocal n
            n += 1
            ledger, sid = _ledger(tmp, f"c{n}.db", messages)
            _seconds(
                lambda: anyio.run(compact, ledger, sid, OfflineSummarizer()), 1, out, "compress"
            )
            ledger.close()

        for _ in range(runs):
            compress_once()
        ledger, sid = _ledger(tmp, "a.db", messages)
        anyio.run(compact, ledger, sid, OfflineSummarizer())
        _seconds(lambda: audit_chain(ledger, sid), runs, out, "audit")
        _seconds(lambda: _whatif_cold(ledger, sid), runs, out, "whatif_cold")
        _seconds(lambda: whatif(ledger, sid, summarizer=OfflineSummarizer()), runs, out, "whatif")
        ledger.close()
    return out


#: the console script ``ctxledger`` (pyproject: ``ctxledger.cli.main:main``) as a new
#: interpreter runs it; its first argument is the checkout it must import ctxledger from
_CLI = (
    "import os, sys, ctxledger; tree = sys.argv.pop(1); "
    "assert os.path.dirname(os.path.dirname(ctxledger.__file__)) == tree, ctxledger.__file__; "
    "from ctxledger.cli.main import main; main()"
)


def _tree() -> str:
    """The checkout whose ``ctxledger`` this process runs (the one under test)."""
    import ctxledger

    return os.path.dirname(os.path.dirname(os.path.abspath(ctxledger.__file__)))


def _written(tmp: str, name: str, messages: list[dict[str, Any]]) -> tuple[str, str]:
    """A ledger file holding the session compacted as :func:`measure` compacts it."""
    ledger, sid = _ledger(tmp, name, messages)
    anyio.run(compact, ledger, sid, OfflineSummarizer())
    ledger.close()
    return os.path.join(tmp, name), sid


def _cli_once(db: str, sid: str, cwd: str, out: dict[str, float], op: str) -> None:
    """One ``ctxledger replay --summarizer offline`` in a new interpreter; best wall and CPU."""
    tree = _tree()
    path = os.pathsep.join(filter(None, (tree, os.environ.get("PYTHONPATH"))))
    env = dict(os.environ, PYTHONPATH=path)  # the child imports the tree under test first
    argv = [sys.executable, "-c", _CLI, tree, "--db", db, "replay", sid]
    argv += ["--summarizer", "offline", "-q"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise RuntimeError(
            f"ctxledger replay failed: {done.stderr.decode(errors='replace')[-2000:]}"
        )
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    out[op] = min(out.get(op, 1e9), wall)
    out[op + "_cpu"] = min(out.get(op + "_cpu", 1e9), cpu)


def measure_cli(runs: int, big_chars: int) -> tuple[dict[str, float], dict[str, float]]:
    """Best seconds of the CLI what-if on the plain session and on the big-message one,
    a new process per run, the two sides interleaved."""
    plain: dict[str, float] = {}
    big: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        sides = [(*_written(tmp, "plain.db", session(None, big_chars)), plain),
                 (*_written(tmp, "big.db", session("user", big_chars)), big)]  # fmt: skip
        for n in range(runs):
            for db, sid, out in sides[:: 1 if n % 2 == 0 else -1]:
                _cli_once(db, sid, tmp, out, "whatif_cli")
    return plain, big


def append_row(odd: str, label: str, runs: int, big_chars: int) -> Row:
    """The append of the odd message to the other 199 (caches cleared), against the same
    append without the derived values (session 39) stored after it: what main's append
    costs. The cost a cold what-if no longer pays moves here."""
    from ctxledger.ledger import facade

    messages = session(odd, big_chars)
    big = [m for m in messages if len(str(m.get("content"))) >= 500_000]
    rest = [m for m in messages if m not in big]
    real = facade.store_quietly  # (what the append calls after its commit)
    timed: dict[str, dict[str, float]] = {"on": {}, "off": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for n in range(runs):
            for side in ("on", "off")[:: 1 if n % 2 == 0 else -1]:
                ledger, sid = _ledger(tmp, f"{side}{n}.db", rest)
                if side == "off":
                    facade.store_quietly = lambda *_: 0
                _cold()
                try:
                    append = functools.partial(ledger.append_messages, sid, big)
                    _seconds(append, 1, timed[side], "append")
                finally:
                    facade.store_quietly = real
                    ledger.close()
    line = row(odd, "append", label, timed["on"], timed["off"])
    return {**line, "baseline_is": "the same append without derived values (main's)",
            "goal": "reported (the cost moved from a cold what-if)"}  # fmt: skip


#: how an operation is named in the ``what`` of its line
_OPS = {
    "whatif_cold": "whatif in a fresh process (caches cleared)",
    "append": "appending the message (caches cleared)",
    "whatif_cli": "what-if by the CLI, a new process per run "
    "(`ctxledger replay --summarizer offline`)",
}


def row(odd: str, op: str, label: str, timed: dict[str, float], plain: dict[str, float]) -> Row:
    """One JSON line: ``op`` on the session holding ``label`` against the plain session."""
    return {
        "bench": f"pathological_{odd}_{op}",
        "what": f"{_OPS.get(op, op)} of a 200-message session holding one {label}",
        "value": round(timed[op] * 1000, 1),
        "unit": "ms",
        "baseline": round(plain[op] * 1000, 1),
        "baseline_is": "the same session without that message",
        "ratio": round(timed[op] / plain[op], 3),
        "cpu_ms": round(timed[op + "_cpu"] * 1000, 1),
        "baseline_cpu_ms": round(plain[op + "_cpu"] * 1000, 1),
        "cpu_ratio": round(timed[op + "_cpu"] / plain[op + "_cpu"], 3),
        "load_average": round(os.getloadavg()[0], 2),
        "goal": "ratio <= 2",
    }


def cli_row(runs: int, big_mb: float) -> Row:
    """The ``whatif_cli`` line (its ``met`` judged here: the table's other rows judge theirs)."""
    plain, big = measure_cli(runs, int(big_mb * 1_000_000))
    line = row("user", "whatif_cli", f"{big_mb:g} MB user message", big, plain)
    return {**line, "met": line["ratio"] <= 2, "runs": runs}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--big-mb", type=float, default=10.0)
    parser.add_argument("--only", help="one case (e.g. pytest_ids), no CLI row")
    args = parser.parse_args(argv)
    big_chars = int(args.big_mb * 1_000_000)
    plain = measure(None, args.runs, big_chars)
    cases = (("argument", "20 KB non-JSON tool argument", ("compress", "audit", "whatif")),
             ("user", f"{args.big_mb:g} MB user message", ("whatif", "whatif_cold")),
             ("underlines", "1 MB user message of ever shorter RST titles", ("whatif_cold",)),
             ("fence_runs", "1 MB user message of two runs of backticks", ("whatif_cold",)),
             ("pytest_ids", "4 MB user message dense in pytest node ids", ("whatif_cold",)))  # fmt: skip
    if args.only:
        cases = tuple(case for case in cases if case[0] == args.only)
    for odd, label, ops in cases:
        timed = measure(odd, args.runs, big_chars)
        for op in ops:
            print(json.dumps(row(odd, op, label, timed, plain)), flush=True)
        if odd in ("user", "fence_runs"):
            print(json.dumps(append_row(odd, label, args.runs, big_chars)), flush=True)
    if not args.only:
        print(json.dumps(cli_row(args.runs, args.big_mb)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
