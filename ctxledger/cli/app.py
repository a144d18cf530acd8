"""Shared CLI plumbing: the root group, global options, output and error handling."""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import math
import os
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import click
import msgspec

from ctxledger.cli.interrupt import (
    ignoring_interrupts,
    interrupted,
    raw_interrupts,
    restored_interrupts,
)
from ctxledger.compressor.config import CompressionConfig
from ctxledger.compressor.redact import redact
from ctxledger.compressor.settings import CLI_DEFAULTS, ResolvedConfig, resolve_config
from ctxledger.errors import (
    CtxLedgerError,
    InvalidEvent,
    InvalidInput,
    LedgerChanged,
    NotFound,
    described,
)
from ctxledger.eventstore.base import EventStore
from ctxledger.eventstore.leftovers import lock_to_make, remove_made_lock
from ctxledger.eventstore.opening import (
    default_db_path,
    open_for_reading,
    open_store,
    require_ledger_file,
    target_text,
)
from ctxledger.inputfile import path_text, shown_path
from ctxledger.integers import MAX_DIGITS, all_digits, ascii_int, quoted_short
from ctxledger.ledger.facade import Ledger
from ctxledger.limits import MIN_CONTEXT_LENGTH
from ctxledger.terminal import BIDI_CONTROLS, PlainConsole, inline, plain

F = TypeVar("F", bound=Callable[..., Any])

console = PlainConsole(highlight=False, soft_wrap=True, markup=False)


def echo(text: object = "", *, err: bool = False, lines: bool = False) -> None:
    """``click.echo`` of data (ids, warnings, notes) as one line (:func:`inline`); with
    `lines`, multi-line data (a message's text) keeps its line breaks (:func:`plain`).
    Control and bidi characters are shown escaped either way."""
    click.echo(plain(text) if lines else inline(text), err=err)


class State:
    """Per-invocation state: where the ledger lives, the settings; both resolved lazily."""

    def __init__(self, db: str | None, explicit: bool = False, quiet: bool = False) -> None:
        self._db = db
        #: whether --db was given (batch commands record events only then)
        self.explicit = explicit
        #: no progress spinners (--quiet)
        self.quiet = quiet
        self._ledger: Ledger | None = None
        #: the command failed and said why (handle_errors): close adds no second line
        self.failed = False
        #: the command ended in failure (an error, an interrupt, an exit status not 0):
        #: close removes the ``.lock`` its open made beside a ledger (:mod:`.leftovers`)
        self.aborted = False
        self._made_lock: str | None = None
        self._settings: ResolvedConfig | None = None

    @property
    def db(self) -> str:
        """--db, else the default (``$CTXLEDGER_DB``, checked when a command needs it:
        ``--help`` and the commands that open no ledger work whatever it holds)."""
        return self._db if self._db is not None else default_db_path()

    def settings(
        self,
        path: Path | None = None,
        overrides: dict[str, Any] | None = None,
        base: CompressionConfig | None = None,
    ) -> ResolvedConfig:
        """The one precedence: CLI defaults < config file < CTXLEDGER_<KEY> < flags.

        `path` is a ``--config FILE`` (else the file is found); `overrides` are flags;
        `base` replaces the defaults (a what-if starts from the recorded settings).
        """
        overrides = {k: v for k, v in (overrides or {}).items() if v is not None}
        defaults = base.to_snapshot() if base is not None else CLI_DEFAULTS
        if path is None and not overrides and base is None:
            if self._settings is None:
                self._settings = resolve_config(defaults=defaults)
            return self._settings
        return resolve_config(
            path, defaults=defaults, overrides=overrides, recorded=base is not None
        )

    def config(
        self,
        path: Path | None = None,
        overrides: dict[str, Any] | None = None,
        base: CompressionConfig | None = None,
    ) -> CompressionConfig:
        return self.settings(path, overrides, base).config

    def ledger(self, *, existing: bool = False, reads: bool = False) -> Ledger:
        """The ledger, opened once. With `existing` (a command that only reads, or names
        something already recorded) a missing SQLite file is refused, not created. With
        `reads` (a command that never appends) an empty file, or one this process cannot
        write, is opened read-only: nothing is written to it or beside it."""
        if self._ledger is None:
            if existing or reads:
                require_ledger_file(self.db)
            must = existing or reads  # (a URL holding no ledger: refused at the open)
            self._made_lock = lock_to_make(self.db)  # (removed if it fails: .leftovers)
            try:
                if reads:
                    opened = open_for_reading(self.db, lambda ro: self._open(ro, must), note)
                    self._ledger = opened[0]
                else:  # an empty file names nothing recorded: read, not made a ledger
                    self._ledger = self._open(existing and _empty_file(self.db), must)
            except BaseException:
                remove_made_lock(self._made_lock)
                raise
        return self._ledger

    def _open(self, read_only: bool, existing: bool) -> Ledger:
        config = self.config()
        return Ledger.open(self.db, config=config, read_only=read_only, existing=existing)

    def changed_instead(self, exc: CtxLedgerError) -> CtxLedgerError:
        """The ledger's change (LedgerChanged) when `exc` may come of a torn lock-free
        read of it (:func:`changed_instead`), else `exc`."""
        return exc if self._ledger is None else changed_instead(exc, self._ledger.store)

    def close(self) -> None:
        """Close the ledger; a read-only (lock-free) read whose file changed meanwhile
        says so and exits 1: what it printed may be torn. A command that already failed
        (its one error line printed, its exit code set) keeps that line and code."""
        if self._ledger is None:
            return
        with ignoring_interrupts():  # (a Ctrl-C now is dropped: the close, its seal, ends)
            try:
                self._ledger.store.check_unchanged()
            except CtxLedgerError as exc:
                if not self.failed:
                    click.echo(f"error: {_one_line(exc)}", err=True)
                    sys.exit(1)
            finally:
                self._close_tidily(self._ledger)

    def _close_tidily(self, ledger: Ledger) -> None:
        """Close `ledger`; after a failure, remove the ``.lock`` its open made beside a
        ledger that had none (:mod:`.leftovers`). A ledger it made stays."""
        ledger.close()
        if self.aborted:
            remove_made_lock(self._made_lock)


class _WarningLines(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        echo(f"warning: {record.getMessage()}", err=True)


@contextlib.contextmanager
def warnings_printed() -> Iterator[None]:
    """Warnings the library logs on the ``ctxledger`` logger (an import's repaired
    tool-call ids) printed as the CLI prints its own: ``warning: ...`` on stderr, one
    line each (they reached Python's last-resort handler, which printed them bare)."""
    handler = _WarningLines(logging.WARNING)
    log = logging.getLogger("ctxledger")
    log.addHandler(handler)
    try:
        yield
    finally:
        log.removeHandler(handler)


def note(line: str) -> None:
    """Tell the user `line` on stderr, as a note (one line)."""
    echo(f"note: {line}", err=True)


def _empty_file(target: str) -> bool:
    try:
        return os.path.getsize(target) == 0 and os.path.isfile(target)
    except OSError:  # (not there, or a URL)
        return False


def changed_instead(exc: CtxLedgerError, store: EventStore) -> CtxLedgerError:
    """`store`'s LedgerChanged when its lock-free read changed meanwhile and `exc` may
    come of that torn read (a hash that did not compare, a payload that did not decode,
    any store error), else `exc`. Input refused for itself (InvalidInput other than an
    undecodable event, NotFound) stays what it is, as does a change already said."""
    if isinstance(exc, LedgerChanged) or (
        isinstance(exc, InvalidInput | NotFound) and not isinstance(exc, InvalidEvent)
    ):
        return exc
    try:
        store.check_unchanged()
    except LedgerChanged as changed:
        return changed
    return exc


@contextlib.contextmanager
def _checked(store: EventStore) -> Iterator[None]:
    """Reads of `store`, checked for a change when done; an error of a torn read is the
    change (:func:`changed_instead`)."""
    try:
        yield
    except CtxLedgerError as exc:
        changed = changed_instead(exc, store)
        if changed is exc:
            raise
        raise changed from exc
    store.check_unchanged()


@contextlib.contextmanager
def reading_store(target: str, option: str) -> Iterator[EventStore]:
    """The store of a second ledger a command only reads (`option`: ``diff --b-db``,
    ``migrate --from``), which must exist: opened as :func:`open_for_reading` says, its
    reads checked for a change (:func:`_checked`)."""
    require_ledger_file(target, option)
    made_lock = lock_to_make(target)  # (a failure leaves no .lock it made: .leftovers)
    try:
        opened, _ = open_for_reading(
            target, lambda ro: open_store(target, read_only=ro, existing=option), note
        )
        with opened as store, _checked(store):
            yield store
    except BaseException:
        remove_made_lock(made_lock)
        raise


@contextlib.contextmanager
def reading_ledger(target: str, option: str) -> Iterator[Ledger]:
    """:func:`reading_store` folded into a Ledger (``diff --b-db``): the fold's reads are
    checked too. Nothing is appended, so there is no head to seal on leaving."""
    with reading_store(target, option) as store:
        yield Ledger(store, config=resolve_config().config)


class FilePath(click.Path):
    """click's ``Path`` whose refusal shows a long name cut (:func:`shown_path`): a
    5000-character name was printed whole (session 39); an empty one is refused (it
    was taken as ``.``, the working directory: session 41)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str | bytes) and not value:  # ("" was ".": "cannot write .")
            dash = " (or - for stdin)" if self.allow_dash and self.readable else ""
            self.fail(f"the path is empty: give a file's path{dash}", param, ctx)
        try:  # (a NUL was os.stat's ValueError: a traceback)
            path_text(value, "the path")  # (quoted as the ledger paths are: shown)
            return super().convert(value, param, ctx)
        except InvalidInput as exc:
            self.fail(str(exc), param, ctx)
        except click.BadParameter as exc:
            text = os.fsdecode(value) if isinstance(value, str | bytes) else str(value)
            shown = shown_path(text)  # (click quotes the name with repr: cut that form too)
            message = exc.message.replace(repr(text), repr(shown)).replace(text, shown)
            self.fail(message, param, ctx)


class LedgerTargetType(click.ParamType[str, Any]):
    """A ledger (``--db``, ``--from``, ``--to``): a SQLite path or a postgresql:// URL.

    An empty one is refused here: it would otherwise fall back to the default ledger
    (or open a file named by nothing) without a word.
    """

    name = "PATH|URL"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        text = str(value)
        if not text.strip():
            self.fail("the ledger path is empty: give a SQLite file path or a postgresql:// URL")
        try:  # checked, then "~/x.db" expanded: "~\x00" was expanduser's ValueError traceback
            return target_text(text)
        except InvalidInput as exc:
            self.fail(str(exc), param, ctx)


class SecondsType(click.ParamType[float, Any]):
    """A duration in seconds: a finite number > 0 (``nan``, ``inf``, 0 and less refused)."""

    name = "SECONDS"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        # float() alone took "1_0" (10.0) and digits of other scripts ("١" as 1.0)
        if isinstance(value, str) and (not value.isascii() or "_" in value):
            self.fail(f"{quoted_short(value)} is not a number of seconds in ASCII digits.")
        try:
            seconds = float(value)
        except (TypeError, ValueError):
            self.fail(f"{quoted_short(str(value))} is not a number of seconds")
        if not math.isfinite(seconds) or seconds <= 0:
            self.fail(f"must be a finite number of seconds > 0, got {quoted_short(str(value))}")
        return seconds


def _ascii_digits(kind: click.ParamType[Any, Any], value: Any, param: Any, ctx: Any) -> None:
    """Fail unless a text `value` is an integer in ASCII digits (:func:`ascii_int`)."""
    if not isinstance(value, str) or ascii_int(value, signed=True) is not None:
        return
    if all_digits(value.strip(" \t").removeprefix("-")):
        kind.fail(f"{quoted_short(value)} has over {MAX_DIGITS:,} digits.", param, ctx)
    kind.fail(f"{quoted_short(value)} is not an integer in ASCII digits.", param, ctx)


class AsciiInt(click.types.IntParamType):
    """click's INTEGER, read as the server and SESSION@SEQ read one: click calls int(),
    which took "1_0", "+1" and "١" (Arabic-Indic 1)."""

    def convert(self, value: Any, param: Any, ctx: Any) -> Any:
        _ascii_digits(self, value, param, ctx)
        return super().convert(value, param, ctx)


class AsciiIntRange(AsciiInt, click.IntRange):
    """click's IntRange, in ASCII digits (:class:`AsciiInt`'s check, then the range)."""


#: the option types every command shares, so one kind of value is checked one way
LEDGER_TARGET = LedgerTargetType()
SECONDS = SecondsType()
#: a context window in tokens: at least MIN_CONTEXT_LENGTH here; the upper bound is the
#: library's own check (its message names the range)
CONTEXT_LENGTH = AsciiIntRange(min=MIN_CONTEXT_LENGTH)
#: a count that must be at least 1 (turns, tokens, workers, batch sizes)
POSITIVE = AsciiIntRange(min=1)
#: a count that may be 0 (retries, turns kept)
NON_NEGATIVE = AsciiIntRange(min=0)
#: any integer (a seed, an event sequence number that the command checks itself)
ASCII_INT = AsciiInt()


class _UsageLine(click.ClickException):
    """A usage error (unknown option, missing argument, out-of-range value) shown as the
    one ``error:`` line every other bad input gets, exit 2, instead of click's block."""

    exit_code = 2

    def show(self, file: Any = None) -> None:
        click.echo(f"error: {plain(self.format_message())}", err=True)


def _usage_line(exc: click.UsageError) -> _UsageLine:
    hint = f" (see `{exc.ctx.command_path} --help`)" if exc.ctx is not None else ""
    return _UsageLine(_cut_middle(" ".join(exc.format_message().split()) + hint))


class LedgerGroup(click.Group):
    """The root group: usage errors of it and of every command under it are one line."""

    def make_context(
        self,
        info_name: str | None,
        args: list[str],
        parent: click.Context | None = None,
        **extra: Any,
    ) -> click.Context:
        try:
            return super().make_context(info_name, args, parent, **extra)
        except click.exceptions.NoArgsIsHelpError:
            raise  # `ctxledger` alone prints its help
        except click.UsageError as exc:
            raise _usage_line(exc) from exc

    def main(self, *args: Any, **kwargs: Any) -> Any:
        with restored_interrupts():  # (an in-process host keeps its own SIGINT handler)
            return super().main(*args, **kwargs)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.exceptions.NoArgsIsHelpError:
            raise
        except click.UsageError as exc:
            raise _usage_line(exc) from exc
        except KeyboardInterrupt:  # (outside a command's handle_errors; click said "Aborted!", 1)
            state = ctx.find_object(State)
            if state is not None:
                state.aborted = True
            interrupted()


@click.group(cls=LedgerGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--db",
    type=LEDGER_TARGET,
    default=None,
    help="Ledger: a SQLite file or a postgresql://user@host/db URL. "
    "Default: $CTXLEDGER_DB, else ctxledger.db in the user data dir.",
)
@click.option(
    "-q",
    "--quiet",
    is_flag=True,
    help="No progress spinners (they are drawn on stderr, and only on a terminal).",
)
@click.version_option(package_name="ctxledger")
@click.pass_context
def cli(ctx: click.Context, db: str | None, quiet: bool) -> None:
    """ctxledger: Hermes-style context compression as an event-sourced ledger."""
    state = State(db, explicit=db is not None, quiet=quiet)
    ctx.obj = state
    ctx.call_on_close(state.close)


def json_option(fn: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")(
        fn
    )


def config_file_option(help: str) -> Callable[[F], F]:
    """``--config FILE`` (an existing TOML file of settings), passed as ``config_path``."""
    return click.option(
        "--config",
        "config_path",
        type=FilePath(exists=True, dir_okay=False, path_type=Path),
        default=None,
        help=help,
    )


def summarizer_option(default: str | None = "offline", help: str | None = None) -> Callable[[F], F]:
    """``--summarizer offline|llm``, passed as ``summarizer_kind``."""
    return click.option(
        "--summarizer",
        "summarizer_kind",
        type=click.Choice(["offline", "llm"]),
        default=default,
        show_default=default is not None,
        help=help,
    )


def quiet_option(fn: F) -> F:
    """``--quiet`` on a command that shows progress (the same as ``ctxledger --quiet``)."""

    def set_quiet(ctx: click.Context, _param: click.Parameter, value: bool) -> bool:
        if value:
            state_of(ctx).quiet = True
        return value

    return click.option(
        "-q",
        "--quiet",
        is_flag=True,
        expose_value=False,
        callback=set_quiet,
        help="No progress spinner.",
    )(fn)


#: DEL, C1, line separators, bidi controls and lone surrogates (an argument or path that
#: was not UTF-8 holds one: byte 0x9b arrives as U+DC9B)
_JSON_UNSAFE = re.compile(f"[\\x7f-\\x9f\\u2028\\u2029{BIDI_CONTROLS}\\ud800-\\udfff]")


def json_text(text: str) -> str:
    """JSON text with the characters a JSON encoder leaves raw (DEL, C1, bidi controls) escaped.

    They only ever occur inside strings, where ``\\u00XX`` means the same character, so
    the document decodes to the same data and a terminal sees no control sequence.
    """
    return _JSON_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def emit_json(data: Any) -> None:
    try:
        text = msgspec.json.format(msgspec.json.encode(data), indent=2).decode()
    except UnicodeEncodeError:  # a lone surrogate (see _JSON_UNSAFE), which msgspec refuses
        finite = _finite(msgspec.to_builtins(data))  # NaN is null, as msgspec writes it
        text = json.dumps(finite, indent=2, ensure_ascii=False, allow_nan=False)
    click.echo(json_text(text))


def _finite(value: Any) -> Any:
    """`value` (builtins) with each NaN or infinity as None, which JSON can hold."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def handle_errors(fn: F) -> F:
    """One-line errors and non-zero exits: 2 for bad input, 1 for other failures."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            with raw_interrupts():
                return fn(*args, **kwargs)
        except CtxLedgerError as exc:
            state = _current_state()
            if state is not None:
                state.failed = state.aborted = True
                exc = state.changed_instead(exc)
            click.echo(f"error: {_one_line(exc)}", err=True)
            sys.exit(2 if isinstance(exc, InvalidInput | NotFound) else 1)
        except BaseException as exc:  # (Ctrl-C, an exit status, a bug: a .lock made goes)
            state = _current_state()
            ok = getattr(exc, "code", getattr(exc, "exit_code", 1)) in (0, None)
            if state is not None and not ok:
                state.aborted = True
            if isinstance(exc, KeyboardInterrupt):
                if state is not None:
                    state.failed = True  # (its one line is the interrupt's)
                interrupted()
            raise

    return wrapper  # type: ignore[return-value]


def _current_state() -> State | None:
    ctx = click.get_current_context(silent=True)
    return ctx.find_object(State) if ctx is not None else None


def _one_line(exc: Exception) -> str:
    # line breaks (and the blanks around them) join the lines; any other control
    # character is data a user gave (a CR in a path) and is shown escaped, not blanked.
    # (Split, not a regex: "[ \t]*\n" retried a long run of blanks from each of its
    # positions, quadratic: 30,000 spaces in an argument took 10 s.)
    text = redact(described(exc)).strip()  # an error can quote a secret (an HTTP reply, a URL)
    if "\n" in text:
        lines = (line.removesuffix("\r").strip(" \t") for line in text.split("\n"))
        text = " ".join(line for line in lines if line)
    return inline(_cut_middle(text))  # (cut first: a cut could split an escape like \x1b)


#: the longest error line printed whole; a longer one keeps its start and its end
ERROR_LINE_MAX = 2_000


def _cut_middle(text: str) -> str:
    """`text` cut in the middle past :data:`ERROR_LINE_MAX` characters, saying how much
    was cut: a 100,000-character argument was quoted whole by every "no session …"
    (session 41). The start says what failed, the end what to do."""
    if len(text) <= ERROR_LINE_MAX:
        return text
    head = _escape_start(text, ERROR_LINE_MAX * 2 // 3)
    tail = _escape_start(text, len(text) - ERROR_LINE_MAX // 4)
    return f"{text[:head]}… [{tail - head:,} characters cut] …{text[tail:]}"


def _escape_start(text: str, at: int) -> int:
    """`at`, moved back to the start of a run of backslashes that ends within the 9
    characters before it: an error quoting a ref with ``!r`` holds escapes (``\\x1b``,
    ``\\U0001f600``), and a cut there left half of one (review of session 41)."""
    near = text.rfind("\\", max(at - 9, 0), at)
    if near < 0:
        return at
    while near > 0 and text[near - 1] == "\\":
        near -= 1
    return near


def state_of(ctx: click.Context) -> State:
    obj = ctx.find_object(State)
    assert obj is not None
    return obj


class RefType(click.ParamType[str, Any]):
    """A session, compaction or message reference: surrounding whitespace is dropped.

    The one place references are stripped; the library resolves them as given
    (``Ledger.resolve`` rejects an empty one with a clear error).
    """

    name = "ref"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        return str(value).strip()


REF = RefType()
