"""One precedence everywhere: defaults < config file < CTXLEDGER_<KEY> < flags/arguments.

Covers the file discovery, the library entry points (Ledger.open, ContextService.open),
the CLI (`ctxledger config`, `compress`), the derived budgets and their floor note,
and the README table that must list every key with its default.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import anyio
import msgspec
import pytest
from click.testing import CliRunner

from ctxledger import CompressionConfig, ContextService, Ledger
from ctxledger.cli.main import cli
from ctxledger.compressor.settings import (
    CLI_DEFAULTS,
    KEY_DOCS,
    find_config_file,
    keys_markdown,
    resolve_config,
    user_config_file,
    window_budgets,
)
from ctxledger.errors import InvalidConfig

README = Path(__file__).parent.parent / "README.md"


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


# --- resolution (library) ---------------------------------------------------------------


def test_each_layer_overrides_the_one_below(tmp_path: Path) -> None:
    cfg = write(
        tmp_path / "c.toml", "threshold = 0.6\nprotect_first_n = 2\norphan_policy = 'stub'\n"
    )
    env = {"CTXLEDGER_PROTECT_FIRST_N": "5", "CTXLEDGER_ORPHAN_POLICY": "strip"}
    resolved = resolve_config(cfg, env=env, overrides={"orphan_policy": "stub"})
    c = resolved.config
    assert (c.threshold, c.protect_first_n, c.orphan_policy, c.target_ratio) == (
        0.6,
        5,
        "stub",
        0.2,
    )
    assert resolved.sources["threshold"] == "file"
    assert resolved.sources["protect_first_n"] == "env"
    assert resolved.env_vars["protect_first_n"] == "CTXLEDGER_PROTECT_FIRST_N"
    assert resolved.sources["orphan_policy"] == "flag"
    assert resolved.sources["target_ratio"] == "default"
    assert resolved.source_of("threshold") == f"file ({cfg})"


def test_none_overrides_are_skipped_and_unknown_ones_rejected() -> None:
    resolved = resolve_config(env={}, discover=False, overrides={"estimator": None})
    assert resolved.sources["estimator"] == "default"
    with pytest.raises(InvalidConfig, match="unknown setting 'thresold'"):
        resolve_config(env={}, discover=False, overrides={"thresold": 0.4})


def test_file_is_found_env_first_then_working_directory_then_user_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert find_config_file({}) is None
    user = write(user_config_file(), "threshold = 0.7\n")
    assert find_config_file({}) == (user, "user config directory")
    local = write(tmp_path / "ctxledger.toml", "threshold = 0.65\n")
    assert find_config_file({}) == (local, "working directory")
    named = write(tmp_path / "elsewhere.toml", "threshold = 0.55\n")
    assert find_config_file({"CTXLEDGER_CONFIG": str(named)}) == (named, "CTXLEDGER_CONFIG")
    assert resolve_config(env={"CTXLEDGER_CONFIG": str(named)}).config.threshold == 0.55
    assert resolve_config(env={}).config.threshold == 0.65
    # a flag's file wins over every found one
    flagged = write(tmp_path / "flag.toml", "threshold = 0.45\n")
    assert resolve_config(flagged, env={"CTXLEDGER_CONFIG": str(named)}).config.threshold == 0.45


def test_a_missing_file_named_by_the_environment_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(InvalidConfig, match=r"CTXLEDGER_CONFIG=.*no such config file"):
        resolve_config(env={"CTXLEDGER_CONFIG": str(tmp_path / "typo.toml")})


def test_ledger_open_applies_file_and_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    write(tmp_path / "ctxledger.toml", "threshold = 0.6\nprotect_first_n = 2\n")
    monkeypatch.setenv("CTXLEDGER_PROTECT_FIRST_N", "4")
    with Ledger.open(tmp_path / "a.db") as ledger:
        assert (ledger.config.threshold, ledger.config.protect_first_n) == (0.6, 4)
    # an argument wins as a whole
    with Ledger.open(tmp_path / "a.db", config=CompressionConfig()) as ledger:
        assert ledger.config.threshold == 0.5


def test_context_service_open_applies_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CTXLEDGER_THRESHOLD", "0.5")
    monkeypatch.setenv("CTXLEDGER_THRESHOLD_FLOOR_TOKENS", "0")

    async def main() -> dict[str, object]:
        async with ContextService.open(tmp_path / "s.db") as svc:
            sid = await svc.start_session(model="m", context_length=32_000)
            return svc.status(sid)

    status = anyio.run(main)
    assert status["threshold_tokens"] == 16_000  # the floor is off: 0.5 x 32,000


def test_session_start_records_the_resolved_snapshot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CTXLEDGER_TARGET_RATIO", "0.3")
    with Ledger.open(tmp_path / "a.db") as ledger:
        sid = ledger.start_session(model="m", context_length=64_000)
        assert ledger.transcript.session(sid).config["target_ratio"] == 0.3


# --- derived budgets ----------------------------------------------------------------------


def test_floor_note_says_why_a_small_window_fires_late() -> None:
    b = window_budgets(CompressionConfig(), 32_000)
    assert (b.threshold_tokens, b.threshold_share_tokens, b.floor_applied) == (
        27_200,
        16_000,
        True,
    )
    assert b.note is not None and "threshold_floor_tokens = 64,000" in b.note
    assert "85 %" in b.note
    b100 = window_budgets(CompressionConfig(), 100_000)
    assert b100.threshold_tokens == 64_000 and b100.note and "85 %" not in b100.note
    b200 = window_budgets(CompressionConfig(), 200_000)
    assert (b200.threshold_tokens, b200.tail_budget_tokens, b200.note) == (100_000, 20_000, None)
    assert (b200.summary_min_tokens, b200.summary_max_tokens) == (2_000, 10_000)


# --- README ---------------------------------------------------------------------------------


def test_readme_lists_every_key_with_its_default() -> None:
    text = README.read_text()
    block = re.search(r"<!-- config-keys:start -->\n(.*?)\n<!-- config-keys:end -->", text, re.S)
    assert block is not None, "README lost its configuration table markers"
    assert block.group(1) == keys_markdown(), (
        "README's configuration table is stale: paste ctxledger.compressor.settings.keys_markdown()"
    )
    fields = [f.name for f in msgspec.structs.fields(CompressionConfig)]
    assert list(KEY_DOCS) == fields  # a new key needs its meaning, in declaration order
    for key in fields:
        assert f"| `{key}` |" in block.group(1)


# --- CLI ------------------------------------------------------------------------------------


def invoke(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), env=env)
    return result.exit_code, result.stdout, result.stderr


def test_config_command_shows_values_sources_and_budgets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    write(tmp_path / "ctxledger.toml", "threshold = 0.5\ncontext_length = 32000\n")
    code, out, _ = invoke(
        "config", "--set", "estimator=rough", env={"CTXLEDGER_PROTECT_LAST_N": "9"}
    )
    assert code == 0, out
    assert "config file: " in out and "found in the working directory" in out
    table = out.split("\n\n")[1]  # after the file lines, before the budgets
    lines = {line.split()[0]: line for line in table.splitlines()}
    assert lines["threshold"].split()[1:] == ["0.5", "file", f"({tmp_path / 'ctxledger.toml'})"]
    assert lines["protect_last_n"].split()[1:] == ["9", "env", "(CTXLEDGER_PROTECT_LAST_N)"]
    assert lines["estimator"].split()[1:] == ["rough", "flag"]
    assert lines["target_ratio"].split()[1:] == ["0.2", "default"]
    assert "budgets for a 32,000-token window:" in out
    assert "27,200 tokens (compression fires here)" in out
    assert "note: threshold 0.5 x 32,000 = 16,000 tokens was raised to 27,200" in out


def test_set_none_overrides_a_files_value(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # `--set summary_model=none` read as "not given": the file's model stayed, shown as set
    monkeypatch.chdir(tmp_path)
    write(tmp_path / "ctxledger.toml", 'summary_model = "gpt-x"\n')
    code, out, _ = invoke("config", "--json", "--set", "summary_model=none")
    assert code == 0, out
    (row,) = [s for s in json.loads(out)["settings"] if s["key"] == "summary_model"]
    assert row["value"] is None and row["source"] == "flag"


def test_config_json_has_every_key_and_window_budgets(tmp_path: Path) -> None:
    code, out, _ = invoke("config", "--json", "--context-length", "100000")
    assert code == 0, out
    data = json.loads(out)
    assert [s["key"] for s in data["settings"]] == list(KEY_DOCS)
    by_key = {s["key"]: s for s in data["settings"]}
    assert by_key["context_length"] == {
        "key": "context_length",
        "value": 100_000,
        "source": "flag",
        "env_var": None,
        "meaning": KEY_DOCS["context_length"],
    }
    assert by_key["summary_timeout"]["value"] == CLI_DEFAULTS["summary_timeout"]
    (budget,) = data["budgets"]
    assert (budget["context_length"], budget["threshold_tokens"], budget["floor_applied"]) == (
        100_000,
        64_000,
        True,
    )
    assert data["file"] is None and "$CTXLEDGER_CONFIG" in data["searched"]


def test_config_without_a_window_shows_sample_windows() -> None:
    code, out, _ = invoke("config", "--json")
    assert code == 0
    assert [b["context_length"] for b in json.loads(out)["budgets"]] == [32_000, 128_000, 200_000]


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (["--set", "nope=1"], {}, "unknown setting 'nope'"),
        (["--set", "protect_lst_n=3"], {}, "(did you mean 'protect_last_n'?)"),
        (["--set", "threshold"], {}, "--set takes KEY=VALUE"),
        (["--set", "threshold=lots"], {}, "threshold expects float"),
        # a flag's bad value is named as the flag, not as an environment variable
        (["--set", "context_length=abc"], {}, "--set context_length='abc': context_length"),
        ([], {"CTXLEDGER_CONTEXT_LENGTH": "abc"}, "environment variable CTXLEDGER_CONTEXT_LENGTH="),
        ([], {"CTXLEDGER_THRESHOLD": "2"}, "threshold must be in (0, 1]"),
        ([], {"CTXLEDGER_CONFIG": "/nonexistent/c.toml"}, "no such config file"),
    ],
)
def test_config_errors_are_one_line_and_exit_2(
    args: list[str], env: dict[str, str], message: str
) -> None:
    code, _, err = invoke("config", *args, env=env)
    assert code == 2
    assert err.startswith("error: ") and message in err and err.count("\n") == 1


def test_config_prints_data_as_plain_text(tmp_path: Path) -> None:
    code, out, _ = invoke("config", "--set", "summary_model=[bold]x[/bold]")
    assert code == 0
    assert "[bold]x[/bold]" in out


def test_a_misspelt_key_is_named_with_the_one_meant(tmp_path: Path) -> None:
    cfg = write(tmp_path / "c.toml", "threshhold = 0.6\n")
    with pytest.raises(InvalidConfig, match=r"'threshhold' \(did you mean 'threshold'\?\)"):
        resolve_config(cfg)


def test_config_notes_a_misspelt_variable_that_is_silently_ignored() -> None:
    env = {
        "CTXLEDGER_THRESHHOLD": "0.6",  # a typo: ignored, so `config` says so
        "CTXLEDGER_SUMMARY_API": "openai",  # other components' variables are not strays
        "CTXLEDGER_SERVE_DB": "x.db",
        "CTXLEDGER_SOMETHING_ELSE": "1",
    }
    code, out, err = invoke("config", env=env)
    assert code == 0
    assert err == (
        "note: CTXLEDGER_THRESHHOLD is not a setting and is ignored "
        "(did you mean CTXLEDGER_THRESHOLD?)\n"
    )
    assert "threshold                   0.5     default" in out
    code, out, _ = invoke("config", "--json", env=env)
    assert json.loads(out)["notes"] == [err.removeprefix("note: ").strip()]
