"""Batch files of trajectories: concurrent workers, retries, resumable output, reports.

See :mod:`ctxledger.trajectories.core` for the per-trajectory algorithm (HERMES_SPEC §8).
"""

from __future__ import annotations

import hashlib
import os
import random
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import msgspec

from ctxledger.compressor.summarizers.base import Summarizer, SummaryRequest, SummaryResult
from ctxledger.errors import ImportFormatError, InvalidInput, SummarizerError
from ctxledger.importers.detect import open_regular_file
from ctxledger.inputfile import NotAFile, is_stream, open_input, path_exists, shown_path
from ctxledger.integers import printable
from ctxledger.trajectories.core import (
    FATAL_FAILURES,
    TrajectoryConfig,
    TrajectoryMetrics,
    check_turns,
    compress_trajectory,
)


def _beside(out_path: str | os.PathLike[str], suffix: str) -> Path:
    out = Path(out_path)
    return out.with_name(out.name.removesuffix(".jsonl") + suffix)


def metrics_path_for(out_path: str | os.PathLike[str]) -> Path:
    """``out.jsonl`` -> ``out.metrics.jsonl`` (one TrajectoryMetrics per written record)."""
    return _beside(out_path, ".metrics.jsonl")


def report_path_for(out_path: str | os.PathLike[str]) -> Path:
    """``out.jsonl`` -> ``out.report.json`` (the AggregateReport)."""
    return _beside(out_path, ".report.json")


class InputRecord(msgspec.Struct, frozen=True, kw_only=True):
    key: str
    line: int
    record: dict[str, Any]


def read_records(in_path: str | os.PathLike[str]) -> list[InputRecord]:
    """Every record of a trajectory JSONL, checked before any work starts (ImportFormatError)."""
    name = os.fspath(in_path)
    out: list[InputRecord] = []
    seen: dict[str, int] = {}
    with open_regular_file(name) as fh:  # /dev/zero was read as one endless line
        for lineno, raw in enumerate(fh, 1):
            if not raw.strip():
                continue
            try:
                rec = msgspec.json.decode(raw)
            except msgspec.DecodeError as err:
                raise ImportFormatError(f"invalid JSON: {err}", line=lineno, path=name) from None
            if not isinstance(rec, dict) or "conversations" not in rec:
                raise ImportFormatError(
                    "expected a trajectory object with 'conversations'", line=lineno, path=name
                )
            try:
                check_turns(rec["conversations"])
            except InvalidInput as err:
                raise ImportFormatError(str(err), line=lineno, path=name) from None
            rid = rec.get("id")
            if isinstance(rid, str | int) and not isinstance(rid, bool):
                key = f"id:{rid}"
            else:
                key = "sha1:" + hashlib.sha1(raw.strip()).hexdigest()
            seen[key] = seen.get(key, 0) + 1
            if seen[key] > 1:
                key = f"{key}#{seen[key]}"
            out.append(InputRecord(key=key, line=lineno, record=rec))
    return out


def complete_lines(path: Path) -> list[bytes]:
    """The newline-terminated lines of a file, each JSON (a torn last line is dropped; a
    line not JSON before others is InvalidInput).
    An output that exists is read back to resume when it is a regular file; a FIFO or
    /dev/null is not read (it waited for a writer); anything else is refused (/dev/zero
    was read until memory ran out)."""
    if not path_exists(path, "OUT_PATH") or is_stream(path):
        return []  # a FIFO or /dev/null is written to, never read back
    try:
        with open_input(path, pipes=False) as fh:
            data = fh.read()
    except NotAFile as exc:
        raise InvalidInput(
            f"{shown_path(path)} is {exc.strerror}: the output must be a file, a FIFO or /dev/null"
        ) from None
    *lines, tail = data.split(b"\n")
    for lineno, raw in enumerate(lines, 1):
        try:
            msgspec.json.decode(raw)
        except msgspec.DecodeError as exc:
            if lineno == len(lines) and not tail:  # the last line: a crash tore it
                return lines[:-1]
            raise InvalidInput(  # (a line edited in the middle: dropping it dropped the rest)
                f"{shown_path(path)}:{lineno} is not JSON ({printable(str(exc)[:200])}) and "
                "lines follow it: only a last line a crash tore is dropped; restore the file, "
                "or remove OUT and its metrics file to start over; nothing was changed"
            ) from None
    return lines


def metrics_line(line: bytes, path: str | os.PathLike[str], lineno: int) -> TrajectoryMetrics:
    """One line of a metrics file as written, else InvalidInput naming the file and line:
    one edited by hand into JSON of another shape was a ValidationError traceback, and
    one without a key (``{}``) read as a record of key "" (its record was done again)."""
    try:
        metrics = msgspec.json.decode(line, type=TrajectoryMetrics)
    except msgspec.DecodeError as exc:
        problem = printable(str(exc)[:200])
    else:
        if metrics.key:
            return metrics
        problem = "it has no key"
    raise InvalidInput(
        f"{shown_path(path)}:{lineno} is no metrics record this command wrote ({problem}): "
        "restore the file, or remove OUT and it to start over; nothing was changed"
    )


def resume_state(out_path: Path, metrics_path: Path) -> list[TrajectoryMetrics]:
    """Metrics of the records already written; both files are trimmed to the same complete prefix."""
    out_lines = complete_lines(out_path)
    if out_lines and not metrics_path.exists():
        raise InvalidInput(
            f"{shown_path(out_path)} exists without its metrics file {shown_path(metrics_path)}; "
            "cannot tell which records it holds: remove it or restore the metrics file"
        )
    metric_lines = complete_lines(metrics_path)
    count = min(len(out_lines), len(metric_lines))
    # every line read before either file is trimmed: a refusal changes nothing
    metrics = [metrics_line(x, metrics_path, i) for i, x in enumerate(metric_lines[:count], 1)]
    for path, lines in ((out_path, out_lines), (metrics_path, metric_lines)):
        if path.exists() and path.stat().st_size != sum(len(x) + 1 for x in lines[:count]):
            path.write_bytes(b"".join(x + b"\n" for x in lines[:count]))
    return metrics


class AggregateReport(msgspec.Struct, kw_only=True):
    """The whole output file's figures (records resumed from an earlier run included)."""

    input_path: str
    output_path: str
    #: None when the output is a FIFO or /dev/null: no side file is written beside it
    metrics_path: str | None
    total_records: int = 0
    processed: int = 0
    resumed: int = 0
    compressed: int = 0
    skipped_under_target: int = 0
    still_over_limit: int = 0
    failed: int = 0
    tokens_before: int = 0
    tokens_after: int = 0
    ratio: float = 1.0
    mean_ratio_compressed: float | None = None
    seconds: float = 0.0
    failures: list[dict[str, Any]] = msgspec.field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = msgspec.to_builtins(self)
        return out

    def tally(self, metrics: Sequence[TrajectoryMetrics]) -> None:
        """Sum the figures of every written record."""
        ratios = [m.compression_ratio for m in metrics if m.was_compressed]
        for m in metrics:
            self.compressed += m.was_compressed
            self.skipped_under_target += m.skipped_under_target
            self.still_over_limit += m.still_over_limit
            self.tokens_before += m.original_tokens
            self.tokens_after += m.compressed_tokens
        self.ratio = round(self.tokens_after / self.tokens_before, 6) if self.tokens_before else 1.0
        self.mean_ratio_compressed = round(sum(ratios) / len(ratios), 6) if ratios else None


class _LimitedSummarizer:
    """A summarizer whose requests share one CapacityLimiter (bounded model requests)."""

    def __init__(self, inner: Summarizer, limiter: anyio.CapacityLimiter) -> None:
        self.inner = inner
        self.limiter = limiter
        self.kind = inner.kind

    async def summarize(self, request: SummaryRequest) -> SummaryResult:
        async with self.limiter:
            return await self.inner.summarize(request)


class _Failed(Exception):
    def __init__(self, error: BaseException, attempts: int) -> None:
        self.error = error
        self.attempts = attempts
        super().__init__(str(error))


def backoff_delay(attempt: int, config: TrajectoryConfig, rng: random.Random) -> float:
    """Exponential backoff with jitter: between half and the whole of min(max, base * 2**attempt)."""
    cap = min(config.backoff_max, config.backoff_base * 2.0**attempt)
    return cap * (0.5 + 0.5 * rng.random())


class _Batch:
    """Workers over the records still to do; results are written in input order."""

    def __init__(
        self,
        todo: list[InputRecord],
        config: TrajectoryConfig,
        summarizer: Summarizer,
        files: tuple[Any, Any],
        rng: random.Random,
        sleep: Callable[[float], Awaitable[None]],
        advance: Callable[[], None],
    ) -> None:
        self.todo, self.config, self.summarizer = todo, config, summarizer
        self.out_fh, self.metrics_fh = files
        self.rng, self.sleep, self.advance = rng, sleep, advance
        self.ready: dict[int, tuple[dict[str, Any] | None, TrajectoryMetrics]] = {}
        self.next_to_write = 0
        self.written: list[TrajectoryMetrics] = []
        self.failures: list[dict[str, Any]] = []

    async def run(self) -> None:
        indices = iter(range(len(self.todo)))
        try:
            async with anyio.create_task_group() as tg:
                for _ in range(min(self.config.concurrency, len(self.todo))):
                    tg.start_soon(self._worker, indices)
        except BaseExceptionGroup as group:  # a fatal summarizer failure stops every worker
            found = group.subgroup(SummarizerError)
            if found is None:
                raise
            fatal: BaseException = found
            while isinstance(fatal, BaseExceptionGroup):
                fatal = fatal.exceptions[0]
            raise fatal from None

    async def _worker(self, indices: Any) -> None:
        for idx in indices:
            item = self.todo[idx]
            started = time.perf_counter()
            try:
                (record, metrics), attempts = await self._attempts(item)
            except _Failed as failed:
                error = f"{type(failed.error).__name__}: {failed.error}"
                record, metrics = (
                    None,
                    TrajectoryMetrics(key=item.key, error=error, attempts=failed.attempts),
                )
            else:
                metrics.attempts = attempts
            metrics.line = item.line
            metrics.seconds = round(time.perf_counter() - started, 4)
            self._finish(idx, record, metrics)

    async def _attempts(
        self, item: InputRecord
    ) -> tuple[tuple[dict[str, Any], TrajectoryMetrics], int]:
        last: BaseException | None = None
        for attempt in range(self.config.retries + 1):
            if attempt:
                await self.sleep(backoff_delay(attempt - 1, self.config, self.rng))
            try:
                with anyio.fail_after(self.config.per_trajectory_timeout):
                    return await compress_trajectory(
                        item.record, self.config, self.summarizer, key=item.key
                    ), attempt + 1
            except SummarizerError as err:
                if err.failure_class in FATAL_FAILURES:
                    raise
                last = err
            except (TimeoutError, OSError) as err:
                last = err
            except Exception as err:  # a bad record or a summarizer bug: retrying cannot help
                raise _Failed(err, attempt + 1) from None
        assert last is not None
        raise _Failed(last, self.config.retries + 1)

    def _finish(self, idx: int, record: dict[str, Any] | None, metrics: TrajectoryMetrics) -> None:
        self.ready[idx] = (record, metrics)
        while self.next_to_write in self.ready:
            rec, m = self.ready.pop(self.next_to_write)
            self.next_to_write += 1
            if rec is None:
                self.failures.append(
                    {"key": m.key, "line": m.line, "error": m.error, "attempts": m.attempts}
                )
            else:
                self.out_fh.write(msgspec.json.encode(rec) + b"\n")
                self.metrics_fh.write(msgspec.json.encode(m) + b"\n")
                self.out_fh.flush()
                self.metrics_fh.flush()
                self.written.append(m)
        self.advance()


def _progress(enabled: bool, total: int) -> tuple[Any, Callable[[], None]]:
    if not enabled:
        return None, lambda: None
    import rich.console as rc
    import rich.progress as rp

    console = rc.Console(stderr=True)
    if not console.is_terminal:  # a log or a pipe: rich would write the finished bar into it
        return None, lambda: None
    columns = (rp.TextColumn("compressing trajectories"), rp.BarColumn(), rp.MofNCompleteColumn())
    bar = rp.Progress(*columns, rp.TimeElapsedColumn(), rp.TimeRemainingColumn(), console=console)
    task = bar.add_task("compress", total=total)
    return bar, lambda: bar.advance(task)


async def compress_file(
    in_path: str | os.PathLike[str],
    out_path: str | os.PathLike[str],
    config: TrajectoryConfig,
    summarizer: Summarizer,
    *,
    progress: bool = True,
    rng: random.Random | None = None,
    sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
) -> AggregateReport:
    """Compress every trajectory of `in_path` into `out_path` (resumable; see the module docs).

    Writes ``<out>.metrics.jsonl`` (one :class:`TrajectoryMetrics` per written record)
    and ``<out>.report.json`` (the :class:`AggregateReport`), unless `out_path` is a
    FIFO or /dev/null (then only the returned report has them). A malformed input line
    raises :class:`ImportFormatError` before anything is written; an auth or
    not-configured summarizer failure stops the batch (what was written stays, and a
    rerun resumes). Other failures are retried, then reported in ``failures`` and left
    out of the output, so a rerun tries them again.
    """
    started = time.perf_counter()
    records = read_records(in_path)
    out, metrics_path = Path(out_path), metrics_path_for(out_path)
    # a FIFO or /dev/null is not read back, so nothing beside it could be resumed from
    # (and ``/dev/null.metrics.jsonl`` was written into /dev): no side files for it
    stream = is_stream(out)
    previous = [] if stream else resume_state(out, metrics_path)
    done = {m.key for m in previous}
    todo = [r for r in records if r.key not in done]
    limited = _LimitedSummarizer(summarizer, anyio.CapacityLimiter(config.max_concurrent_requests))
    bar, advance = _progress(progress and bool(todo), len(todo))
    metrics_target = os.devnull if stream else metrics_path
    with open(out, "ab") as out_fh, open(metrics_target, "ab") as metrics_fh:
        batch = _Batch(
            todo, config, limited, (out_fh, metrics_fh), rng or random.Random(), sleep, advance
        )
        if bar is not None:
            with bar:
                await batch.run()
        else:
            await batch.run()
    report = AggregateReport(
        input_path=os.fspath(in_path),
        output_path=str(out),
        metrics_path=None if stream else str(metrics_path),
        total_records=len(records),
        processed=len(todo),
        resumed=len(records) - len(todo),
        failed=len(batch.failures),
        failures=batch.failures,
    )
    report.tally([*previous, *batch.written])
    report.seconds = round(time.perf_counter() - started, 3)
    if not stream:
        report_path_for(out).write_bytes(
            msgspec.json.format(msgspec.json.encode(report), indent=2) + b"\n"
        )
    return report


def compress_file_sync(
    in_path: str | os.PathLike[str],
    out_path: str | os.PathLike[str],
    config: TrajectoryConfig,
    summarizer: Summarizer,
    *,
    progress: bool = True,
) -> AggregateReport:
    """:func:`compress_file` for synchronous callers (runs its own event loop)."""

    async def main() -> AggregateReport:
        return await compress_file(in_path, out_path, config, summarizer, progress=progress)

    return anyio.run(main)
