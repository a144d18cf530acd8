"""Where every setting comes from, in one order: defaults < config file < environment < flags.

:func:`resolve_config` is the one resolution the CLI, :meth:`Ledger.open
<ctxledger.Ledger.open>` and :meth:`ContextService.open <ctxledger.ContextService.open>`
use. The config file is the one given (``--config FILE``), else the first that exists
of ``$CTXLEDGER_CONFIG``, ``ctxledger.toml`` in the working directory and
``ctxledger.toml`` in the user config directory (platformdirs); ``CTXLEDGER_<KEY>``
variables override it, and flags (or arguments) override both. The result keeps, for
every key, where its value came from, so ``ctxledger config`` can say it.

:data:`KEY_DOCS` is the meaning of every key (the README's configuration table is
generated from it and checked by a test), and :func:`window_budgets` the budgets the
settings give on a window, with a note whenever ``threshold_floor_tokens`` moved the
threshold (HERMES_SPEC §1, #14690). Read-only: nothing here writes anything.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import msgspec

from ctxledger.compressor.config import (
    ENV_PREFIX,
    CompressionConfig,
    build_config,
    closest_key,
    did_you_mean,
    env_settings,
    read_config_file,
)
from ctxledger.errors import InvalidConfig
from ctxledger.inputfile import shown_path
from ctxledger.integers import shown

__all__ = [
    "CONFIG_ENV",
    "CONFIG_FILENAME",
    "GIVEN_NONE",
    "KEY_DOCS",
    "ResolvedConfig",
    "WindowBudgets",
    "find_config_file",
    "keys_markdown",
    "resolve_config",
    "stray_env_notes",
    "user_config_file",
    "window_budgets",
]

#: names the config file to read when no ``--config`` is given
CONFIG_ENV = "CTXLEDGER_CONFIG"
CONFIG_FILENAME = "ctxledger.toml"

Source = Literal["default", "file", "env", "flag"]


class _GivenNone:
    """A flag that sets a setting to none (``--set summary_model=none``), unlike a flag
    left out (None): it overrides a file's or the environment's value."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "GIVEN_NONE"


GIVEN_NONE = _GivenNone()

#: ``CTXLEDGER_*`` variables of other components (not settings): never reported as strays
OTHER_VARIABLES = frozenset(
    {
        "CTXLEDGER_DB",
        CONFIG_ENV,
        "CTXLEDGER_SUMMARY_API",
        "CTXLEDGER_SUMMARY_BASE_URL",
        "CTXLEDGER_SUMMARY_API_KEY",
        "CTXLEDGER_REQUIRE_HERMES",
    }
)


def stray_env_notes(env: Mapping[str, str] | None = os.environ) -> list[str]:
    """A note for each ``CTXLEDGER_*`` variable that looks like a misspelt setting.

    Such a variable is ignored (other components own other ``CTXLEDGER_*`` names), so
    ``CTXLEDGER_THRESHHOLD=0.6`` would silently change nothing; ``ctxledger config``
    says so. Only names close to a setting's are reported.
    """
    notes = []
    for var in sorted(env or {}):
        if not var.startswith(ENV_PREFIX) or var in OTHER_VARIABLES:
            continue
        key = var[len(ENV_PREFIX) :].lower()
        if key in KEY_DOCS or key.startswith("serve_"):
            continue
        close = closest_key(key)
        if close is not None:
            notes.append(
                f"{var} is not a setting and is ignored (did you mean {ENV_PREFIX}{close.upper()}?)"
            )
    return notes


#: what every setting means (README's configuration table is generated from this)
KEY_DOCS: dict[str, str] = {
    "enabled": "automatic compression on or off (manual `compress` always works)",
    "threshold": "share of the window at which compression fires (see threshold_floor_tokens)",
    "target_ratio": "tail budget = threshold tokens x this (clamped to 0.10-0.80)",
    "protect_first_n": "messages after the system prompt kept verbatim at the first compaction",
    "protect_last_n": "the tail keeps at least min(this, tail_min_messages) messages, >= 3 "
    "(prunes never touch the tail)",
    "summary_model": "model that writes summaries (default: the session's model)",
    "hygiene_threshold": "share of the window at which the gateway hygiene check fires",
    "hygiene_min_messages": "hygiene runs only with at least this many messages",
    "hygiene_hard_message_limit": "hygiene also fires at this many messages",
    "max_compression_attempts": "compress-and-retry passes per turn (preflight, overflow)",
    "context_length": "window for new sessions and imports that name none (tokens)",
    "max_summary_tokens_cap": "longest summary in tokens (also at most 5 % of the window)",
    "summary_min_tokens": "shortest summary budget in tokens",
    "summary_ratio": "summary budget = this x the tokens being summarized (then clamped)",
    "summary_timeout": "seconds one LLM summary request may take (the CLI's default is 60)",
    "threshold_floor_tokens": "the threshold is at least this many tokens; when the floor "
    "reaches the window, 85 % of the window is used instead",
    "tail_min_messages": "see protect_last_n",
    "tail_soft_ceiling": "the tail may grow to this x its budget to end at a valid cut",
    "prune_min_chars": "tool results shorter than this are not pruned to one-liners",
    "args_truncate_over": "tool-call arguments longer than this are truncated (JSON-valid)",
    "args_leaf_keep": "characters kept of each long argument value when truncating",
    "orphan_policy": "`strip` a tool call whose result was cut, or `stub` an answer for it",
    "estimator": "token counts the planner, preflight and hygiene use: `exact` (cl100k) or `rough` (chars/4)",
    "pressure_level": "share of the threshold at which the pressure warning fires",
    "anti_thrash_min_saving": "a compaction saving less than this share is a strike",
    "anti_thrash_strikes": "automatic compression stops after this many strikes",
    "cooldown_no_summarizer": "seconds automatic compression pauses when no summarizer is set",
    "cooldown_generic": "seconds it pauses after a summarizer failure",
    "cooldown_malformed": "seconds it pauses after malformed summarizer output or a dropped connection",
    "cache_ttl": "prompt-cache marker lifetime for Claude models: `5m` or `1h`",
    "prompt_caching": "add prompt-cache markers to the API view for models that take them",
}

#: the CLI waits less for a summary than the library: a person is watching a terminal
CLI_DEFAULTS: dict[str, Any] = {"summary_timeout": 60.0}


class ResolvedConfig(msgspec.Struct, frozen=True, kw_only=True):
    """A config and, for every key, where its value came from."""

    config: CompressionConfig
    #: key -> "default", "file", "env" or "flag"
    sources: dict[str, str]
    #: the config file read, if any, and how it was found
    file: str | None = None
    file_found_by: str | None = None
    #: key -> the environment variable that set it
    env_vars: dict[str, str] = msgspec.field(default_factory=dict)

    def source_of(self, key: str) -> str:
        """``file`` / ``env`` spelled out: ``file (./ctxledger.toml)``, ``env (CTXLEDGER_X)``."""
        source = self.sources[key]
        if source == "file":
            return f"file ({self.file})"
        if source == "env":
            return f"env ({self.env_vars[key]})"
        return source


def user_config_file() -> Path:
    """``ctxledger.toml`` in the user config directory (``~/.config/ctxledger`` on Linux)."""
    from platformdirs import user_config_dir

    return Path(user_config_dir("ctxledger", appauthor=False)) / CONFIG_FILENAME


def find_config_file(
    env: Mapping[str, str] | None = os.environ, cwd: str | Path | None = None
) -> tuple[Path, str] | None:
    """The config file to read when none is given, and how it was found; None if none exists.

    ``$CTXLEDGER_CONFIG`` must name an existing file (a typo there is an error, not a
    silent fall-back to defaults); the other two places are read only if they exist.
    """
    named = (env or {}).get(CONFIG_ENV, "").strip()
    if named:
        path = Path(named).expanduser()
        try:
            there = path.is_file()
        except OSError as exc:  # (a name over the system's limit: a traceback, session 39)
            raise InvalidConfig(f"{CONFIG_ENV}={shown_path(named)}: {exc.strerror}") from None
        if not there:
            raise InvalidConfig(f"{CONFIG_ENV}={shown_path(named)}: no such config file")
        return path, CONFIG_ENV
    local = Path(cwd) if cwd is not None else Path.cwd()
    if _found(local / CONFIG_FILENAME):
        return local / CONFIG_FILENAME, "working directory"
    user = user_config_file()
    if _found(user):
        return user, "user config directory"
    return None


def _found(path: Path) -> bool:
    """Whether a config file is at `path`; a place this user may not look into (a HOME
    of another user, under ``runuser``/``sudo -u``) holds none for it, as no traceback."""
    try:
        return path.is_file()
    except OSError:
        return False


def resolve_config(
    path: str | Path | None = None,
    *,
    env: Mapping[str, str] | None = os.environ,
    overrides: Mapping[str, Any] | None = None,
    defaults: Mapping[str, Any] | None = None,
    discover: bool = True,
    cwd: str | Path | None = None,
    recorded: bool = False,
) -> ResolvedConfig:
    """Resolve settings: `defaults` < the config file < ``CTXLEDGER_<KEY>`` < `overrides`.

    `path` is the file a flag named (it must exist); without it the file is found
    (:func:`find_config_file`) unless ``discover=False``. `overrides` are flags or
    arguments (None values are skipped, so unset options can be passed as they are);
    `defaults` change the built-in defaults (the CLI's shorter summary timeout).
    ``env=None`` ignores the environment. Raises InvalidConfig naming the culprit.
    With `recorded`, `defaults` are a chain's recorded settings: the ones nothing
    overrides replay as recorded (no range check: it blamed the file for them).
    """
    known = {f.name for f in msgspec.structs.fields(CompressionConfig)}
    data: dict[str, Any] = {}
    sources: dict[str, str] = dict.fromkeys(known, "default")
    for key, value in (defaults or {}).items():
        _check_key(key, known, "defaults")
        data[key] = value
    found: tuple[Path, str] | None = None
    if path is not None:
        found = (Path(path), "flag")
    elif discover:
        found = find_config_file(env, cwd)
    if found is not None:
        for key, value in read_config_file(found[0]).items():
            data[key], sources[key] = value, "file"
    env_vars: dict[str, str] = {}
    for key, (var, value) in env_settings(env).items():
        data[key], sources[key], env_vars[key] = value, "env", var
    for key, value in (overrides or {}).items():
        _check_key(key, known, "flags")
        if value is not None:
            data[key], sources[key] = None if value is GIVEN_NONE else value, "flag"
    where = [str(found[0])] if found else []
    where += list(env_vars.values()) + [f"flag {k}" for k, s in sources.items() if s == "flag"]
    kept = [k for k, s in sources.items() if s == "default"] if recorded else ()
    config = build_config(data, " + ".join(where) or "defaults", kept)
    return ResolvedConfig(
        config=config,
        sources=sources,
        file=str(found[0]) if found else None,
        file_found_by=found[1] if found else None,
        env_vars=env_vars,
    )


def _check_key(key: str, known: set[str], where: str) -> None:
    if key not in known:
        raise InvalidConfig(
            f"unknown setting {shown(key)}{did_you_mean(key)} in {where}; `ctxledger config` lists them"
        )


class WindowBudgets(msgspec.Struct, frozen=True, kw_only=True):
    """What the settings give on one window (all in tokens)."""

    context_length: int
    threshold_tokens: int
    #: threshold x window, before the floor
    threshold_share_tokens: int
    floor_applied: bool
    tail_budget_tokens: int
    summary_min_tokens: int
    summary_max_tokens: int
    hygiene_tokens: int
    pressure_tokens: int
    note: str | None = None


def window_budgets(config: CompressionConfig, context_length: int) -> WindowBudgets:
    """The derived budgets for `context_length`, with a note when the floor moved the threshold."""
    threshold = config.threshold_tokens(context_length)
    share = int(context_length * config.threshold)
    note = None
    if threshold != share:
        floor = config.threshold_floor_tokens
        how = (
            f"threshold_floor_tokens = {floor:,} reaches the window, so 85 % of it is used"
            if floor >= context_length
            else f"threshold_floor_tokens = {floor:,}"
        )
        note = (
            f"threshold {config.threshold:g} x {context_length:,} = {share:,} tokens was raised "
            f"to {threshold:,} because {how} (set threshold_floor_tokens = 0 to turn the floor off)"
        )
    summary_max = config.max_summary_tokens(context_length)
    return WindowBudgets(
        context_length=context_length,
        threshold_tokens=threshold,
        threshold_share_tokens=share,
        floor_applied=threshold != share,
        tail_budget_tokens=config.tail_token_budget(context_length),
        summary_min_tokens=min(config.summary_min_tokens, summary_max),
        summary_max_tokens=summary_max,
        hygiene_tokens=config.hygiene_threshold_tokens(context_length),
        pressure_tokens=config.pressure_tokens(context_length),
        note=note,
    )


def _default_text(value: Any) -> str:
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int):
        return f"{value:_}"
    if isinstance(value, float):
        return repr(value)
    return f'"{value}"'


def keys_markdown() -> str:
    """The README's table of every setting: key, default (as written in TOML), meaning."""
    defaults = CompressionConfig().to_snapshot()
    rows = ["| key | default | meaning |", "| --- | --- | --- |"]
    for key, value in defaults.items():
        shown = _default_text(value)
        if key in CLI_DEFAULTS:
            shown += f" (CLI: {_default_text(CLI_DEFAULTS[key])})"
        rows.append(f"| `{key}` | `{shown}` | {KEY_DOCS[key]} |")
    return "\n".join(rows)
