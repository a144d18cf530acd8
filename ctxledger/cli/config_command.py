"""``ctxledger config``: every setting in force, where it came from, and what it gives."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
import msgspec

from ctxledger.cli.app import (
    CONTEXT_LENGTH,
    cli,
    config_file_option,
    echo,
    emit_json,
    handle_errors,
    json_option,
    state_of,
)
from ctxledger.compressor.config import did_you_mean, setting_from_text
from ctxledger.compressor.settings import (
    CONFIG_ENV,
    CONFIG_FILENAME,
    GIVEN_NONE,
    KEY_DOCS,
    ResolvedConfig,
    WindowBudgets,
    stray_env_notes,
    user_config_file,
    window_budgets,
)
from ctxledger.errors import InvalidConfig
from ctxledger.integers import shown

#: windows shown when neither --context-length nor the config names one
SAMPLE_WINDOWS = (32_000, 128_000, 200_000)


def _parse_sets(pairs: tuple[str, ...]) -> dict[str, Any]:
    """``KEY=VALUE`` flags, typed as the environment's ``CTXLEDGER_<KEY>`` values are."""
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            raise InvalidConfig(f"--set takes KEY=VALUE, got {shown(pair)}")
        if key not in KEY_DOCS:
            raise InvalidConfig(
                f"--set: unknown setting {shown(key)}{did_you_mean(key)}; `ctxledger config` lists them"
            )
        parsed = setting_from_text(key, value, f"--set {key}")
        out[key] = GIVEN_NONE if parsed is None else parsed  # (None: "not given")
    return out


def _searched() -> list[str]:
    return [f"${CONFIG_ENV}", f"./{CONFIG_FILENAME}", str(user_config_file())]


def _value_text(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return str(value).lower()
    return f"{value:,}" if isinstance(value, int) else str(value)


def _settings_rows(resolved: ResolvedConfig) -> list[dict[str, Any]]:
    snapshot = resolved.config.to_snapshot()
    return [
        {
            "key": key,
            "value": value,
            "source": resolved.sources[key],
            "env_var": resolved.env_vars.get(key),
            "meaning": KEY_DOCS[key],
        }
        for key, value in snapshot.items()
    ]


def _print_budgets(b: WindowBudgets, ratio: float) -> None:
    echo(f"budgets for a {b.context_length:,}-token window:")
    echo(f"  threshold         {b.threshold_tokens:>9,} tokens (compression fires here)")
    if b.note:
        echo(f"    note: {b.note}")
    echo(f"  tail budget       {b.tail_budget_tokens:>9,} tokens (recent messages kept)")
    if b.summary_min_tokens == b.summary_max_tokens:
        echo(
            f"  summary budget    {b.summary_max_tokens:>9,} tokens (5 % of the window, below "
            "summary_min_tokens)"
        )
    else:
        echo(
            f"  summary budget    {ratio:.0%} of the summarized middle, "
            f"between {b.summary_min_tokens:,} and {b.summary_max_tokens:,} tokens"
        )
    echo(f"  pressure warning  {b.pressure_tokens:>9,} tokens")
    echo(f"  gateway hygiene   {b.hygiene_tokens:>9,} tokens")


@cli.command("config")
@config_file_option(
    f"Read this TOML file instead of finding one (${CONFIG_ENV}, ./{CONFIG_FILENAME}, "
    "the user config directory)."
)
@click.option(
    "--context-length",
    type=CONTEXT_LENGTH,
    default=None,
    help="Window to derive the budgets for (also the context_length flag).",
)
@click.option(
    "--set",
    "sets",
    multiple=True,
    metavar="KEY=VALUE",
    help="Override one setting as a flag would (repeatable).",
)
@json_option
@click.pass_context
@handle_errors
def config_cmd(
    ctx: click.Context,
    config_path: Path | None,
    context_length: int | None,
    sets: tuple[str, ...],
    as_json: bool,
) -> None:
    """Every setting in force, its source (default, file, env, flag), and the budgets it gives.

    Precedence: defaults < config file < CTXLEDGER_<KEY> variables < flags. Without a
    window (--context-length or context_length), budgets are shown for 32K, 128K, 200K.
    """
    overrides = _parse_sets(sets)
    if context_length is not None:
        overrides["context_length"] = context_length
    resolved = state_of(ctx).settings(config_path, overrides or None)
    config = resolved.config
    windows = (config.context_length,) if config.context_length else SAMPLE_WINDOWS
    budgets = [window_budgets(config, w) for w in windows]
    notes = stray_env_notes()
    if as_json:
        emit_json(
            {
                "file": resolved.file,
                "file_found_by": resolved.file_found_by,
                "searched": _searched() if config_path is None else [str(config_path)],
                "settings": _settings_rows(resolved),
                "budgets": msgspec.to_builtins(budgets),
                "notes": notes,
            }
        )
        return
    for note in notes:
        echo(f"note: {note}", err=True)
    if resolved.file:
        how = {"flag": "given with --config", CONFIG_ENV: f"named by ${CONFIG_ENV}"}.get(
            str(resolved.file_found_by), f"found in the {resolved.file_found_by}"
        )
        echo(f"config file: {resolved.file} ({how})")
    else:
        echo("config file: none found (looked at " + ", ".join(_searched()) + ")")
    echo("precedence: defaults < config file < CTXLEDGER_<KEY> variables < flags")
    echo("")
    rows = [
        (r["key"], _value_text(r["value"]), resolved.source_of(r["key"]))
        for r in _settings_rows(resolved)
    ]
    width = max(len(k) for k, _, _ in rows)
    value_width = max(len(v) for _, v, _ in rows)
    echo(f"{'key':<{width}}  {'value':<{value_width}}  source")
    for key, value, source in rows:
        echo(f"{key:<{width}}  {value:<{value_width}}  {source}")
    for b in budgets:
        echo("")
        _print_budgets(b, config.summary_ratio)
