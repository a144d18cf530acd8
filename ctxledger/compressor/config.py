"""Compression settings (HERMES_SPEC §1 plus ctxledger's hardening knobs) and derived budgets.

`CompressionConfig` is immutable and validated when built: out-of-range values raise
:class:`~ctxledger.errors.InvalidConfig` naming the setting, except ``target_ratio``,
which Hermes clamps to 0.10-0.80 rather than rejects. Budgets that depend on the
model's window (threshold, tail budget, summary budget) are methods taking the
context length, because the window can change mid-session (model switch, a limit
learned from a provider error) while the settings do not.

`load_config` reads flat TOML keys named as in the spec, then ``CTXLEDGER_<KEY>``
environment overrides. `to_snapshot` / `from_snapshot` give the plain dict recorded in
events so a replay re-plans with exactly the settings that were in force.
"""

from __future__ import annotations

import contextvars
import difflib
import functools
import math
import os
import sys
import tomllib
import types
import typing
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal

import msgspec

from ctxledger.errors import FailureClass, InvalidConfig, InvalidInput
from ctxledger.inputfile import NotAFile, open_input, path_text, read_capped, shown_path
from ctxledger.integers import printable, shown
from ctxledger.limits import (
    MAX_CONTEXT_LENGTH,
    MAX_MODEL_CHARS,
    MAX_TOKEN_COUNT,
    check_context_length,
    check_name,
    decimal_digits,
)

__all__ = [
    "ENV_PREFIX",
    "CompressionConfig",
    "build_config",
    "checked_config",
    "env_settings",
    "load_config",
    "read_config_file",
    "setting_from_text",
]

#: environment variables named ``CTXLEDGER_<UPPER_KEY>`` override file settings
ENV_PREFIX = "CTXLEDGER_"

#: when the threshold floor reaches the window, the floor becomes this share of it (#14690)
_FLOOR_WINDOW_SHARE = 0.85
#: the summary may use at most this share of the window (before the absolute cap)
_SUMMARY_WINDOW_SHARE = 0.05
#: Hermes's tail always keeps at least this many messages, whatever protect_last_n says
_TAIL_HARD_MIN = 3
_TARGET_RATIO_RANGE = (0.10, 0.80)

_FRACTIONS = ("threshold", "hygiene_threshold", "pressure_level", "summary_ratio")

#: no session holds more messages; a count above this reads as "all" or "never" already
_MAX_MESSAGES = 10**9
#: the largest value of each integer setting that still means something (a window holds
#: at most MAX_CONTEXT_LENGTH tokens; a message a trillion characters): 10**30 was taken
#: as "all" without a word. Not checked on a recorded snapshot (an old log replays).
_INT_MAXIMUM = {
    "protect_first_n": _MAX_MESSAGES,
    "protect_last_n": _MAX_MESSAGES,
    "hygiene_min_messages": _MAX_MESSAGES,
    "hygiene_hard_message_limit": _MAX_MESSAGES,
    "tail_min_messages": _MAX_MESSAGES,
    "anti_thrash_strikes": _MAX_MESSAGES,
    # each attempt is a compaction and a model call, and must make progress to go on:
    # a few hundred is a choice (100 was the first cap, review R5), 10**6 is not
    "max_compression_attempts": 1000,
    "max_summary_tokens_cap": MAX_CONTEXT_LENGTH,
    "summary_min_tokens": MAX_CONTEXT_LENGTH,
    "threshold_floor_tokens": MAX_CONTEXT_LENGTH,
    "prune_min_chars": MAX_TOKEN_COUNT,
    "args_truncate_over": MAX_TOKEN_COUNT,
    "args_leaf_keep": MAX_TOKEN_COUNT,
}
#: seconds: a summary request or a cooldown longer than a year is no setting
_MAX_SECONDS = 366 * 24 * 3600.0
_SECONDS = ("summary_timeout", "cooldown_no_summarizer", "cooldown_generic", "cooldown_malformed")
#: the settings whose range is not checked, as they hold recorded values (None: all of
#: them, while a recorded snapshot is rebuilt)
_RECORDED: contextvars.ContextVar[frozenset[str] | None] = contextvars.ContextVar(
    "_RECORDED", default=frozenset()
)


class CompressionConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Every compression setting with its default. Build it with keywords; it validates itself."""

    # --- HERMES_SPEC §1 -------------------------------------------------------------
    enabled: bool = True
    threshold: float = 0.50
    target_ratio: float = 0.20
    protect_first_n: int = 3
    protect_last_n: int = 20
    summary_model: str | None = None
    hygiene_threshold: float = 0.85
    hygiene_min_messages: int = 4
    hygiene_hard_message_limit: int = 5000
    max_compression_attempts: int = 3
    # --- budgets ----------------------------------------------------------------------
    #: overrides the model's window when set (per-model overrides are configuration)
    context_length: int | None = None
    max_summary_tokens_cap: int = 10_000
    summary_min_tokens: int = 2_000
    summary_ratio: float = 0.20
    #: seconds an LLM summarizer may take for one request (the CLI's default is shorter)
    summary_timeout: float = 120.0
    threshold_floor_tokens: int = 64_000
    tail_min_messages: int = 8
    tail_soft_ceiling: float = 1.5
    # --- prune pass -------------------------------------------------------------------
    prune_min_chars: int = 200
    args_truncate_over: int = 500
    args_leaf_keep: int = 200
    # --- assembly, estimation ---------------------------------------------------------
    orphan_policy: Literal["strip", "stub"] = "strip"
    estimator: Literal["exact", "rough"] = "exact"
    # --- runtime guards ---------------------------------------------------------------
    pressure_level: float = 0.85
    anti_thrash_min_saving: float = 0.10
    anti_thrash_strikes: int = 2
    cooldown_no_summarizer: float = 600.0
    cooldown_generic: float = 60.0
    cooldown_malformed: float = 30.0
    # --- prompt caching ---------------------------------------------------------------
    cache_ttl: Literal["5m", "1h"] = "5m"
    prompt_caching: bool = True

    def __post_init__(self) -> None:
        _check_types(self)
        for name in _FRACTIONS:
            value = getattr(self, name)
            if not 0.0 < value <= 1.0:
                raise InvalidConfig(f"{name} must be in (0, 1], got {shown(value)}")
        low, high = _TARGET_RATIO_RANGE
        if not math.isfinite(self.target_ratio):
            raise InvalidConfig(
                f"target_ratio must be a finite number, got {shown(self.target_ratio)}"
            )
        # Hermes clamps rather than rejects: a ratio outside the range is a tuning slip.
        msgspec.structs.force_setattr(self, "target_ratio", min(high, max(low, self.target_ratio)))
        for name, value in msgspec.structs.asdict(self).items():
            if isinstance(value, int) and not isinstance(value, bool) and value < 0:
                raise InvalidConfig(f"{name} must be >= 0, got {value}")
        if self.max_compression_attempts < 1:
            raise InvalidConfig("max_compression_attempts must be >= 1")
        if self.context_length is not None and self.context_length < 1:
            raise InvalidConfig(
                f"context_length must be a positive number of tokens, got {self.context_length}"
            )
        if not 1.0 <= self.tail_soft_ceiling <= 10.0:
            raise InvalidConfig(
                f"tail_soft_ceiling must be in [1, 10], got {shown(self.tail_soft_ceiling)}"
            )
        if not 0.0 <= self.anti_thrash_min_saving < 1.0:
            raise InvalidConfig(
                f"anti_thrash_min_saving must be in [0, 1), got {shown(self.anti_thrash_min_saving)}"
            )
        if not (math.isfinite(self.summary_timeout) and self.summary_timeout > 0):
            raise InvalidConfig(
                f"summary_timeout must be a number of seconds > 0, got {shown(self.summary_timeout)}"
            )
        for name in ("cooldown_no_summarizer", "cooldown_generic", "cooldown_malformed"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise InvalidConfig(f"{name} must be a number of seconds >= 0, got {shown(value)}")
        if self.args_leaf_keep < 1:
            raise InvalidConfig("args_leaf_keep must be >= 1")
        recorded = _RECORDED.get()
        if recorded is not None:
            _check_ranges(self, recorded)

    # --- derived budgets ----------------------------------------------------------------

    def threshold_tokens(self, context_length: int) -> int:
        """Tokens at which compression fires, with the small-window floor (#14690).

        The floor keeps a 50 % threshold from firing too late on small windows; a floor
        that reaches the window itself would never fire, so 85 % of the window is used.
        """
        window = _window(context_length)
        base = int(window * self.threshold)
        floor = self.threshold_floor_tokens
        if floor >= window:
            floor = int(window * _FLOOR_WINDOW_SHARE)
        return max(base, floor)

    def tail_token_budget(self, context_length: int) -> int:
        """Tokens of recent messages kept verbatim: threshold_tokens x target_ratio."""
        return int(self.threshold_tokens(context_length) * self.target_ratio)

    def tail_min_count(self) -> int:
        """Messages the tail keeps at minimum: min(tail_min_messages, protect_last_n), at least 3."""
        return max(_TAIL_HARD_MIN, min(self.tail_min_messages, self.protect_last_n))

    def max_summary_tokens(self, context_length: int) -> int:
        """The longest summary allowed: 5 % of the window, capped."""
        return min(
            int(_window(context_length) * _SUMMARY_WINDOW_SHARE), self.max_summary_tokens_cap
        )

    def summary_budget(self, tokens_summarized: int, context_length: int) -> int:
        """Target summary length: summary_ratio x tokens summarized, clamped to [min, max].

        On windows so small that the maximum is below the minimum, the maximum wins:
        a summary must never crowd out the tail it precedes.
        """
        high = self.max_summary_tokens(context_length)
        low = min(self.summary_min_tokens, high)
        return max(low, min(high, int(max(0, tokens_summarized) * self.summary_ratio)))

    def hygiene_threshold_tokens(self, context_length: int) -> int:
        """Tokens at which the gateway hygiene check fires (a share of the window)."""
        return _share(_window(context_length), self.hygiene_threshold)

    def pressure_tokens(self, context_length: int) -> int:
        """Usage at which the context-pressure warning fires (a share of the threshold)."""
        return _share(self.threshold_tokens(context_length), self.pressure_level)

    def cooldown_for(self, failure_class: FailureClass | None) -> float:
        """Seconds automatic compression pauses after a summary failure of this class.

        HERMES_SPEC §2: ``cooldown_no_summarizer`` when no summarizer is configured
        (class ``not_configured``), ``cooldown_malformed`` after malformed output or a
        dropped connection (class ``network``, a stream closed mid-body included),
        ``cooldown_generic`` for every other failure (an empty summary too, as in
        hermes-agent 0.19).
        """
        if failure_class == "not_configured":
            return self.cooldown_no_summarizer
        if failure_class in ("malformed", "network"):
            return self.cooldown_malformed
        return self.cooldown_generic

    # --- snapshots ------------------------------------------------------------------

    def to_snapshot(self) -> dict[str, Any]:
        """Plain JSON-compatible dict of every setting, as recorded in events."""
        return msgspec.structs.asdict(self)

    @classmethod
    def from_snapshot(cls, snapshot: Mapping[str, Any]) -> CompressionConfig:
        """Rebuild from `to_snapshot` output.

        Keys this version does not know are ignored (a snapshot written by a newer
        version must still replay); known keys are validated as usual.
        """
        known = {f.name for f in msgspec.structs.fields(cls)}
        recorded = _RECORDED.set(None)  # recorded before the range checks: it replays
        try:
            return _convert({k: v for k, v in snapshot.items() if k in known}, "snapshot")
        finally:
            _RECORDED.reset(recorded)

    def replace(self, **changes: Any) -> CompressionConfig:
        """A copy with some settings changed (validated like a new config)."""
        return _convert({**self.to_snapshot(), **changes}, "replace()")


def checked_config(config: object) -> CompressionConfig | None:
    """`config` when it is a CompressionConfig or None, else InvalidConfig (a dict of
    settings was taken, then an AttributeError on first use)."""
    if config is None or isinstance(config, CompressionConfig):
        return config
    raise InvalidConfig(
        f"config must be a CompressionConfig (CompressionConfig(**settings) builds one from "
        f"a dict of settings), got {type(config).__name__}"
    )


def _share(total: int, fraction: float) -> int:
    """``fraction`` of ``total`` in whole tokens, rounded down once float noise is removed
    (0.85 x 50,000 is 42,500, not 42,499): the one rounding every share-of limit uses."""
    return int(round(total * fraction, 6))


def _window(context_length: int) -> int:
    if (
        isinstance(context_length, bool)
        or not isinstance(context_length, int)
        or not 1 <= context_length <= MAX_CONTEXT_LENGTH
    ):
        raise InvalidConfig(
            f"context length must be a positive int up to {MAX_CONTEXT_LENGTH:,},"
            f" got {shown(context_length)}"
        )
    return context_length


@functools.cache
def _field_types() -> dict[str, Any]:
    return typing.get_type_hints(CompressionConfig)


def _accepts(tp: Any, value: Any) -> bool:
    if tp is Any:
        return True
    origin = typing.get_origin(tp)
    if origin is Literal:
        return value in typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        return any(_accepts(arg, value) for arg in typing.get_args(tp))
    if tp is type(None):
        return value is None
    if tp is bool:
        return isinstance(value, bool)
    if tp is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if tp is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    return isinstance(value, tp)


def _check_types(config: CompressionConfig) -> None:
    for name, tp in _field_types().items():
        value = getattr(config, name)
        huge = tp is float and isinstance(value, int) and abs(value) > sys.float_info.max
        if huge or not _accepts(tp, value):
            raise InvalidConfig(f"{name}: expected {_describe(tp)}, got {shown(value)}")
        if tp is float and isinstance(value, int):  # (in a float's range: float() raised past it)
            # keep snapshots stable: 1 and 1.0 must not round-trip as different values
            msgspec.structs.force_setattr(config, name, float(value))


def _describe(tp: Any) -> str:
    if typing.get_origin(tp) is Literal:
        return "one of " + ", ".join(repr(a) for a in typing.get_args(tp))
    args = typing.get_args(tp)
    if args:
        return " or ".join(_describe(a) for a in args)
    return "null" if tp is type(None) else getattr(tp, "__name__", str(tp))


def _convert(data: Mapping[str, Any], source: str) -> CompressionConfig:
    try:
        return msgspec.convert(dict(data), CompressionConfig)
    except msgspec.ValidationError as exc:
        raise InvalidConfig(f"invalid compression setting in {source}: {_humanize(exc)}") from None


def _humanize(exc: msgspec.ValidationError) -> str:
    # msgspec says "... - at `$.threshold`"; lead with the key so the user sees it first
    # (its message quotes a bad value whole: a 2 MB one from a file is cut)
    text = str(exc)
    if " - at `$." in text:
        message, _, where = text.rpartition(" - at `$.")
        return f"{_cut(where.rstrip('`'), 100)}: {_cut(message, 300)}"
    return _cut(text, 300)


def _cut(text: str, most: int) -> str:
    """`text` escaped, cut at `most` characters with a mark saying it was."""
    return printable(text) if len(text) <= most else f"{printable(text[:most])}… (cut)"


_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})
_NULL = frozenset({"", "none", "null"})


def _from_env_text(name: str, tp: Any, raw: str, where: str) -> Any:
    """Convert one setting's text to its type, or say where the wrong text came from."""
    try:
        raw.encode("utf-8")
    except UnicodeEncodeError as exc:  # an argument or variable that was not UTF-8
        bad = exc.object[exc.start : exc.end]
        raise InvalidConfig(f"{where}: {name} is not UTF-8 text (it holds {shown(bad)})") from None
    text = raw.strip()
    args = typing.get_args(tp)
    if type(None) in args:
        if text.lower() in _NULL:
            return None
        tp = next(a for a in args if a is not type(None))
    try:
        if typing.get_origin(tp) is Literal:
            if text not in typing.get_args(tp):
                raise ValueError
            return text
        if tp is bool:
            if text.lower() in _TRUE:
                return True
            if text.lower() in _FALSE:
                return False
            raise ValueError
        if tp in (int, float) and not text.isascii():  # int() and float() read "١" as 1
            raise ValueError
        if tp is int:
            return int(text.replace("_", ""))
        if tp is float:
            return float(text)
        return text
    except ValueError:
        raise InvalidConfig(f"{where}={shown(raw)}: {name} expects {_describe(tp)}") from None


#: a settings file is read up to this much (/dev/zero was read until memory ran out)
_MAX_CONFIG_BYTES = 1 << 20


def _config_bytes(path: Path) -> bytes:
    """The bytes of a settings file (a file, a FIFO or pipe, /dev/null: see
    :mod:`ctxledger.inputfile`; /dev/zero was read forever), of at most 1 MiB."""
    try:
        with open_input(path) as fh:
            data = read_capped(fh, _MAX_CONFIG_BYTES)
    except NotAFile as exc:
        raise InvalidConfig(f"config file {shown_path(path)} is {exc.strerror}") from None
    if len(data) > _MAX_CONFIG_BYTES:
        raise InvalidConfig(
            f"config file {shown_path(path)} is larger than 1 MiB: no settings file is"
        )
    return data


def _read_toml(path: Path) -> dict[str, Any]:
    raw = b""
    try:
        raw = _config_bytes(path)
        # (utf-8-sig: a file an editor saved with a byte-order mark was "Invalid statement")
        data = tomllib.loads(raw.decode("utf-8-sig"))
    except InvalidConfig:
        raise
    except FileNotFoundError:
        raise InvalidConfig(f"config file {shown_path(path)} does not exist") from None
    except tomllib.TOMLDecodeError as exc:
        raise InvalidConfig(f"config file {shown_path(path)} is not valid TOML: {exc}") from None
    except UnicodeDecodeError as exc:
        bad = exc.object[exc.start : exc.start + 1].hex()
        at = exc.start + len(raw) - len(exc.object)  # (utf-8-sig decodes after a BOM)
        raise InvalidConfig(
            f"config file {shown_path(path)} is not UTF-8 text (it holds the byte 0x{bad} at offset "
            f"{at:,})"
        ) from None
    except ValueError as exc:  # tomllib's int() of a number past Python's digit limit
        if "integer string conversion" not in str(exc):
            raise InvalidConfig(
                f"config file {shown_path(path)} is not valid TOML: {exc}"
            ) from None
        raise InvalidConfig(
            f"config file {shown_path(path)} holds a number of more than {sys.get_int_max_str_digits():,} "
            "digits"
        ) from None
    except RecursionError:  # tomllib recurses into nested arrays and inline tables
        raise InvalidConfig(
            f"config file {shown_path(path)} nests too deep to be a settings file"
        ) from None
    except OSError as exc:
        raise InvalidConfig(
            f"cannot read config file {shown_path(path)}: {exc.strerror or exc}"
        ) from None
    known = _field_types()
    for key, value in data.items():
        if key not in known:
            hint = (
                " (settings are flat keys, not tables)"
                if isinstance(value, dict)
                else did_you_mean(key)
            )
            raise InvalidConfig(
                f"config file {shown_path(path)}: unknown setting {shown(key)}{hint}"
            )
    return data


def closest_key(key: str) -> str | None:
    """The setting a misspelt `key` most likely means, if one is close."""
    close = difflib.get_close_matches(key.lower(), list(_field_types()), n=1, cutoff=0.8)
    return close[0] if close else None


def did_you_mean(key: str) -> str:
    """`` (did you mean 'threshold'?)`` for a misspelt setting name, else ``""``."""
    close = closest_key(key)
    return f" (did you mean {close!r}?)" if close else ""


def env_settings(env: Mapping[str, str] | None) -> dict[str, tuple[str, Any]]:
    """Settings named by ``CTXLEDGER_<UPPER_KEY>`` variables: key -> (variable, typed value).

    Other ``CTXLEDGER_*`` variables belong to other components and are ignored; a value
    that does not fit its setting's type raises InvalidConfig naming the variable.
    """
    out: dict[str, tuple[str, Any]] = {}
    for name, tp in _field_types().items():
        var = ENV_PREFIX + name.upper()
        if env and var in env:
            out[name] = (var, _from_env_text(name, tp, env[var], f"environment variable {var}"))
    return out


def setting_from_text(key: str, raw: str, where: str) -> Any:
    """One known setting from text, typed as ``CTXLEDGER_<KEY>`` is (``--set KEY=VALUE``);
    a value that does not fit raises InvalidConfig naming `where`."""
    return _from_env_text(key, _field_types()[key], raw, where)


def read_config_file(path: str | Path) -> dict[str, Any]:
    """The flat settings of a TOML file (unknown keys, bad TOML, a missing file, a name
    holding a NUL: InvalidConfig)."""
    return _read_toml(Path(path_text(path, "the config file", InvalidConfig)))


def build_config(
    data: Mapping[str, Any], source: str, recorded: Iterable[str] = ()
) -> CompressionConfig:
    """A validated config from plain settings; errors name `source` (a file, variables, ...).
    The settings named in `recorded` hold recorded values: their range is not checked (a
    what-if starts from a chain's settings, legal when it ran)."""
    token = _RECORDED.set(frozenset(recorded))
    try:
        return _convert(data, source)
    finally:
        _RECORDED.reset(token)


def _check_ranges(config: CompressionConfig, recorded: frozenset[str]) -> None:
    """A window the library accepts, a ``summary_model`` a model name can be, and no count,
    token budget or number of seconds past what it can mean (:data:`_INT_MAXIMUM`, a year
    of seconds); else InvalidConfig naming the setting. Not run on a recorded snapshot,
    nor on the `recorded` settings: they replay as recorded."""
    model = config.summary_model  # (recorded, shown, sent: a model name's rule)
    try:
        if config.context_length is not None and "context_length" not in recorded:
            check_context_length(config.context_length)
        if model is not None and "summary_model" not in recorded:
            check_name(model, "summary_model", MAX_MODEL_CHARS)
    except InvalidInput as exc:
        raise InvalidConfig(str(exc)) from None
    for name, most in _INT_MAXIMUM.items():
        value = getattr(config, name)
        if value > most and name not in recorded:
            raise InvalidConfig(f"{name} is out of range: {_shown(value)} > {most:,}")
    for name in _SECONDS:
        value = getattr(config, name)
        if value > _MAX_SECONDS and name not in recorded:
            raise InvalidConfig(
                f"{name} is out of range: {value:g} s > {_MAX_SECONDS:,.0f} s (a year)"
            )


def _shown(value: int) -> str:
    """An int as the error shows it (one past Python's text limit would itself raise)."""
    if value.bit_length() <= 1024:
        return f"{value:,}"
    return f"an integer of {decimal_digits(value):,} digits"


def load_config(
    path: str | Path | None, env: Mapping[str, str] | None = os.environ
) -> CompressionConfig:
    """Settings from a TOML file (flat keys as in HERMES_SPEC §1), then env overrides.

    Environment variables ``CTXLEDGER_<UPPER_KEY>`` (e.g. ``CTXLEDGER_THRESHOLD=0.6``)
    win over the file; other ``CTXLEDGER_*`` variables belong to other components and
    are ignored. Pass ``env=None`` to ignore the environment. Raises InvalidConfig.
    No file is looked for: :func:`ctxledger.compressor.settings.resolve_config` also
    finds one (``$CTXLEDGER_CONFIG``, ``./ctxledger.toml``, the user config directory)
    and says where every value came from.
    """
    data = read_config_file(path) if path is not None else {}  # (a NUL: InvalidConfig)
    source = shown_path(os.fsdecode(path)) if path is not None else "defaults"
    overridden = env_settings(env)
    for name, (_, value) in overridden.items():
        data[name] = value
    if overridden:
        source += " + " + ", ".join(var for var, _ in overridden.values())
    return _convert(data, source)
