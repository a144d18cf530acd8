"""CompressionConfig: defaults, derived budgets, validation, TOML + environment loading."""

from __future__ import annotations

import os
import re
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from ctxledger.compressor.config import CompressionConfig, load_config
from ctxledger.compressor.settings import resolve_config
from ctxledger.errors import InvalidConfig


def test_defaults_match_hermes_spec_section_1() -> None:
    c = CompressionConfig()
    assert (c.enabled, c.threshold, c.target_ratio, c.protect_first_n, c.protect_last_n) == (
        True,
        0.5,
        0.2,
        3,
        20,
    )
    assert (c.summary_model, c.hygiene_threshold, c.hygiene_min_messages) == (None, 0.85, 4)
    assert (c.hygiene_hard_message_limit, c.max_compression_attempts) == (5000, 3)
    assert (c.orphan_policy, c.estimator, c.cache_ttl, c.prompt_caching) == (
        "strip",
        "exact",
        "5m",
        True,
    )
    assert (c.cooldown_no_summarizer, c.cooldown_generic, c.cooldown_malformed) == (600, 60, 30)


@pytest.mark.parametrize(
    ("window", "threshold", "tail", "max_summary"),
    [
        (200_000, 100_000, 20_000, 10_000),  # the spec's worked example
        (64_000, 54_400, 10_880, 3_200),  # floor reaches the window: 85 % of it
        (32_000, 27_200, 5_440, 1_600),
        (128_000, 64_000, 12_800, 6_400),  # 50 % equals the floor
        (100_000, 64_000, 12_800, 5_000),  # the floor wins over 50 %
        (1_000_000, 500_000, 100_000, 10_000),  # cap on the summary
    ],
)
def test_derived_budgets(window: int, threshold: int, tail: int, max_summary: int) -> None:
    c = CompressionConfig()
    assert c.threshold_tokens(window) == threshold
    assert c.tail_token_budget(window) == tail
    assert c.max_summary_tokens(window) == max_summary


def test_threshold_floor_can_be_disabled() -> None:
    assert CompressionConfig(threshold_floor_tokens=0).threshold_tokens(32_000) == 16_000


def test_summary_budget_is_clamped_between_minimum_and_maximum() -> None:
    c = CompressionConfig()
    assert c.summary_budget(5_000, 200_000) == 2_000  # 20 % = 1,000 -> raised to the minimum
    assert c.summary_budget(30_000, 200_000) == 6_000
    assert c.summary_budget(90_000, 200_000) == 10_000  # capped
    assert c.summary_budget(90_000, 64_000) == 3_200  # 5 % of the window
    assert c.summary_budget(50_000, 32_000) == 1_600  # maximum below the minimum: maximum wins
    assert c.summary_budget(-5, 200_000) == 2_000


def test_tail_minimum_count_is_min_of_setting_and_protect_last_n_but_at_least_three() -> None:
    assert CompressionConfig().tail_min_count() == 8
    assert CompressionConfig(protect_last_n=5).tail_min_count() == 5
    assert CompressionConfig(protect_last_n=1).tail_min_count() == 3
    assert CompressionConfig(tail_min_messages=0).tail_min_count() == 3


def test_pressure_level_is_a_share_of_the_threshold_not_the_window() -> None:
    assert CompressionConfig(threshold_floor_tokens=0).pressure_tokens(100_000) == 42_500


@pytest.mark.parametrize(("given", "clamped"), [(0.01, 0.10), (0.95, 0.80), (0.33, 0.33)])
def test_target_ratio_is_clamped_not_rejected(given: float, clamped: float) -> None:
    assert CompressionConfig(target_ratio=given).target_ratio == pytest.approx(clamped)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"threshold": 0.0}, "threshold"),
        ({"threshold": 1.2}, "threshold"),
        ({"threshold": float("nan")}, "threshold"),
        ({"hygiene_threshold": -0.1}, "hygiene_threshold"),
        ({"protect_first_n": -1}, "protect_first_n"),
        ({"max_compression_attempts": 0}, "max_compression_attempts"),
        ({"context_length": 0}, "context_length"),
        ({"tail_soft_ceiling": 0.5}, "tail_soft_ceiling"),
        ({"cooldown_generic": -1.0}, "cooldown_generic"),
        ({"orphan_policy": "delete"}, "orphan_policy"),
        ({"cache_ttl": "10m"}, "cache_ttl"),
        ({"enabled": "yes"}, "enabled"),
        ({"protect_last_n": 2.5}, "protect_last_n"),
        ({"protect_last_n": True}, "protect_last_n"),
        ({"target_ratio": float("inf")}, "target_ratio"),
    ],
)
def test_invalid_settings_raise_invalid_config_naming_the_setting(
    kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(InvalidConfig, match=message):
        CompressionConfig(**kwargs)


def test_invalid_config_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        CompressionConfig(threshold=2)


def test_unknown_settings_are_rejected() -> None:
    with pytest.raises(TypeError):
        CompressionConfig(treshold=0.5)  # type: ignore[call-arg]


def test_share_limits_round_once_without_float_noise() -> None:
    # 0.57 x 100 is 56.99999999999999 and 0.85 x 27,852 is 23,674.2: both round down once
    assert CompressionConfig(hygiene_threshold=0.57).hygiene_threshold_tokens(100) == 57
    assert CompressionConfig().hygiene_threshold_tokens(200_000) == 170_000
    assert CompressionConfig().pressure_tokens(32_768) == 23_674


def test_cooldown_for_each_failure_class() -> None:
    config = CompressionConfig(
        cooldown_no_summarizer=600.0, cooldown_malformed=30.0, cooldown_generic=60.0
    )
    assert config.cooldown_for("not_configured") == 600.0
    assert config.cooldown_for("malformed") == config.cooldown_for("network") == 30.0
    assert config.cooldown_for("timeout") == config.cooldown_for(None) == 60.0
    assert config.cooldown_for("empty") == 60.0


def test_budget_methods_reject_a_nonsense_window() -> None:
    with pytest.raises(InvalidConfig):
        CompressionConfig().threshold_tokens(0)


def test_snapshot_round_trip() -> None:
    c = CompressionConfig(
        threshold=0.6, orphan_policy="stub", summary_model="small", context_length=8_192
    )
    snap = c.to_snapshot()
    assert snap["threshold"] == 0.6 and snap["orphan_policy"] == "stub"
    assert CompressionConfig.from_snapshot(snap) == c


def test_snapshot_from_a_newer_version_ignores_unknown_settings() -> None:
    snap = {**CompressionConfig().to_snapshot(), "setting_from_the_future": 1}
    assert CompressionConfig.from_snapshot(snap) == CompressionConfig()


def test_snapshot_values_are_still_validated() -> None:
    with pytest.raises(InvalidConfig, match="threshold"):
        CompressionConfig.from_snapshot({"threshold": 7})


def test_replace_returns_a_validated_copy() -> None:
    c = CompressionConfig()
    assert c.replace(threshold=0.7).threshold == 0.7 and c.threshold == 0.5
    with pytest.raises(InvalidConfig):
        c.replace(protect_first_n=-2)


# --- loading -----------------------------------------------------------------------------


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "compression.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_load_config_reads_flat_toml_keys(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        'threshold = 0.6\nprotect_first_n = 2\nsummary_model = "mini"\norphan_policy = "stub"\n',
    )
    c = load_config(path, env=None)
    assert (c.threshold, c.protect_first_n, c.summary_model, c.orphan_policy) == (
        0.6,
        2,
        "mini",
        "stub",
    )


def test_load_config_without_a_file_gives_defaults() -> None:
    assert load_config(None, env={}) == CompressionConfig()


def test_integer_in_toml_is_accepted_for_a_fraction(tmp_path: Path) -> None:
    assert load_config(_write(tmp_path, "threshold = 1\n"), env=None).threshold == 1.0


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("threshold = 3\n", "threshold"),
        ("thresold = 0.5\n", "thresold"),
        ("[compression]\nthreshold = 0.5\n", "flat keys"),
        ("threshold = \n", "not valid TOML"),
        ('protect_first_n = "3"\n', "protect_first_n"),
    ],
)
def test_bad_files_raise_invalid_config_naming_the_key(
    tmp_path: Path, text: str, message: str
) -> None:
    with pytest.raises(InvalidConfig, match=message):
        load_config(_write(tmp_path, text), env=None)


def test_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(InvalidConfig, match="does not exist"):
        load_config(tmp_path / "nope.toml", env=None)


def test_environment_overrides_the_file_with_typed_values(tmp_path: Path) -> None:
    path = _write(tmp_path, "threshold = 0.6\nenabled = true\n")
    env = {
        "CTXLEDGER_THRESHOLD": "0.7",
        "CTXLEDGER_ENABLED": "off",
        "CTXLEDGER_PROTECT_LAST_N": "12",
        "CTXLEDGER_SUMMARY_MODEL": "gpt-small",
        "CTXLEDGER_CONTEXT_LENGTH": "none",
        "CTXLEDGER_CACHE_TTL": "1h",
        "CTXLEDGER_DB": "/tmp/other-component.db",  # not a compression setting: ignored
    }
    c = load_config(path, env=env)
    assert (c.threshold, c.enabled, c.protect_last_n, c.summary_model) == (
        0.7,
        False,
        12,
        "gpt-small",
    )
    assert (c.context_length, c.cache_ttl) == (None, "1h")


@pytest.mark.parametrize("raw", ["1", "true", "YES", "on"])
def test_boolean_environment_spellings(raw: str) -> None:
    assert load_config(None, env={"CTXLEDGER_PROMPT_CACHING": raw}).prompt_caching is True


@pytest.mark.parametrize(
    ("var", "raw"),
    [
        ("CTXLEDGER_PROTECT_FIRST_N", "three"),
        ("CTXLEDGER_ENABLED", "maybe"),
        ("CTXLEDGER_THRESHOLD", "half"),
        ("CTXLEDGER_ORPHAN_POLICY", "drop"),
    ],
)
def test_bad_environment_values_name_the_variable(var: str, raw: str) -> None:
    with pytest.raises(InvalidConfig, match=var):
        load_config(None, env={var: raw})


def test_environment_values_are_range_checked() -> None:
    with pytest.raises(InvalidConfig, match="threshold"):
        load_config(None, env={"CTXLEDGER_THRESHOLD": "1.5"})


def test_process_environment_is_used_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CTXLEDGER_PROTECT_FIRST_N", "1")
    assert load_config(None).protect_first_n == 1


@pytest.mark.parametrize(
    ("raw", "match"),
    [
        ("1", "must be an integer ≥ 1024, got 1"),
        ("500", "must be an integer ≥ 1024, got 500"),
        (str(10**30), "is out of range"),
    ],
)
def test_a_configured_window_follows_the_library_s_context_length_rule(
    raw: str, match: str, tmp_path: Path
) -> None:
    """context_length from a file, a variable or ``--set`` is a window a session could
    have (1,024 to 10^9 tokens); 1 gave budgets of 0 tokens and 10^30 a session error
    that did not name the setting. A recorded snapshot is not re-checked (it replays)."""
    with pytest.raises(InvalidConfig, match=f"CTXLEDGER_CONTEXT_LENGTH: context_length {match}"):
        load_config(None, env={"CTXLEDGER_CONTEXT_LENGTH": raw})
    conf = tmp_path / "c.toml"
    conf.write_text(f"context_length = {raw}\n")
    with pytest.raises(InvalidConfig, match=f"c.toml: context_length {match}"):
        resolve_config(conf, env=None)
    assert CompressionConfig.from_snapshot({"context_length": 500}).context_length == 500
    assert load_config(None, env={"CTXLEDGER_CONTEXT_LENGTH": "1024"}).context_length == 1024


def test_a_flag_s_bad_value_is_named_as_a_flag() -> None:
    """The source of a bad flag read "invalid compression setting in threshold: ...",
    as if a file or a variable were called 'threshold'."""
    with pytest.raises(InvalidConfig, match="setting in flag threshold: threshold must be in"):
        resolve_config(None, env=None, overrides={"threshold": 2.0}, discover=False)


@pytest.mark.parametrize(
    ("key", "value", "says"),
    [
        ("protect_last_n", 10**30, "protect_last_n is out of range: 1,000,000"),
        ("protect_first_n", 10**9 + 1, "protect_first_n is out of range: 1,000,000,001 > 1,000,000,000"),
        ("hygiene_hard_message_limit", 10**12, "hygiene_hard_message_limit is out of range"),
        ("max_compression_attempts", 1001, "max_compression_attempts is out of range: 1,001 > 1,000"),
        ("threshold_floor_tokens", 10**10, "threshold_floor_tokens is out of range"),
        ("max_summary_tokens_cap", 10**10, "max_summary_tokens_cap is out of range"),
        ("prune_min_chars", 10**13, "prune_min_chars is out of range"),
        ("summary_timeout", 1e300, "summary_timeout is out of range: 1e+300 s > 31,622,400 s"),
        ("cooldown_generic", 1e12, "cooldown_generic is out of range"),
        ("context_length", 500, "context_length must be an integer ≥ 1024, got 500"),
    ],
)  # fmt: skip
def test_a_setting_past_what_it_can_mean_is_refused_on_every_path(
    key: str, value: float, says: str, tmp_path: Path
) -> None:
    """10**30 was accepted and read as "all" (protect_last_n) or "never"; now a count, a
    token budget or a number of seconds past what it can mean is refused naming it, from
    the library, a file, a variable or a flag. A recorded snapshot replays as it was."""
    with pytest.raises(InvalidConfig, match=re.escape(says)):
        CompressionConfig(**{key: value})
    with pytest.raises(InvalidConfig, match=re.escape(f"c.toml: {says}")):
        conf = tmp_path / "c.toml"
        conf.write_text(f"{key} = {value}\n")
        resolve_config(conf, env=None)
    var = f"CTXLEDGER_{key.upper()}"
    with pytest.raises(InvalidConfig, match=re.escape(f"{var}: {says}")):
        load_config(None, env={var: str(value)})
    with pytest.raises(InvalidConfig, match=re.escape(f"in flag {key}: {says}")):
        resolve_config(None, env=None, overrides={key: value}, discover=False)
    recorded = {**CompressionConfig().to_snapshot(), key: value}
    assert getattr(CompressionConfig.from_snapshot(recorded), key) == value


def test_the_largest_meaningful_settings_are_kept() -> None:
    config = CompressionConfig(
        protect_last_n=10**9,
        hygiene_hard_message_limit=10**9,
        max_compression_attempts=1000,  # 101 to 1,000 were taken before the caps
        threshold_floor_tokens=10**9,
        prune_min_chars=10**12,
        summary_timeout=3600.0 * 24 * 366,
        context_length=10**9,
    )
    assert config.protect_last_n == 10**9 and config.context_length == 10**9
    # one past Python's digit limit is named by its length (its text would itself raise)
    with pytest.raises(InvalidConfig, match="protect_first_n is out of range: an integer of 5,001"):
        CompressionConfig(protect_first_n=10**5000)


def test_a_config_file_number_past_python_s_digit_limit_is_a_clear_error(tmp_path: Path) -> None:
    # tomllib's int() raised a ValueError traceback out of `ctxledger config`
    with pytest.raises(InvalidConfig, match="holds a number of more than 4,300 digits"):
        load_config(_write(tmp_path, "protect_last_n = 1" + "0" * 5000 + "\n"), env=None)


@pytest.mark.parametrize(
    ("data", "says"),
    [
        (b"protect_last_n = " + b"[" * 100_000 + b"]" * 100_000 + b"\n", "nests too deep"),
        (b"\xff\xfe = 1\n", "is not UTF-8 text (it holds the byte 0xff at offset 0)"),
        (b'threshold = 0.5\nsummary_model = "a\xe9"\n', "byte 0xe9 at offset 34"),
    ],
    ids=["deep", "utf16-bom", "latin1"],
)
def test_a_config_file_tomllib_cannot_read_is_a_clear_error(
    tmp_path: Path, data: bytes, says: str
) -> None:
    # deep nesting was a RecursionError traceback, bytes that are not UTF-8 a
    # UnicodeDecodeError one
    path = tmp_path / "c.toml"
    path.write_bytes(data)
    with pytest.raises(InvalidConfig, match=re.escape(says)):
        load_config(path, env=None)


def test_a_config_file_that_is_a_device_or_is_huge_is_refused(tmp_path: Path) -> None:
    # /dev/zero was read until memory ran out; /dev/null stays what it was: no settings
    import os

    with pytest.raises(InvalidConfig, match=r"is not a regular file \(a character device\)"):
        load_config(Path("/dev/zero"), env=None)
    huge = tmp_path / "huge.toml"
    huge.write_text("# " + "x" * (1 << 20) + "\n")
    with pytest.raises(InvalidConfig, match="is larger than 1 MiB"):
        load_config(huge, env=None)
    assert load_config(Path(os.devnull), env=None) == CompressionConfig()


def test_a_config_file_that_is_a_pipe_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--config <(echo 'threshold = 0.6')` names a pipe (/dev/fd/63): it was refused
    as "not a regular file" (review R4). A FIFO no program opens for writing is waited
    for a while, then refused naming the wait (it was read at once as empty: the
    settings were dropped without a word, and a producer started just after hung)."""
    from helpers.fifo import fifo_with_writer

    from ctxledger import inputfile

    with fifo_with_writer(tmp_path / "c.toml", b"threshold = 0.6\n") as fifo:
        assert load_config(fifo, env=None).threshold == 0.6
    monkeypatch.setattr(inputfile, "WRITER_WAIT", 0.2)
    with pytest.raises(InvalidConfig, match=r"no program opened for writing within 0\.2 s"):
        load_config(fifo, env=None)  # the writer is gone


def test_a_config_fifo_whose_writer_comes_late_is_read(tmp_path: Path) -> None:
    """`ctxledger --config f & producer > f`: the producer opens the FIFO after ctxledger
    did; its settings are read (they were lost, and the producer blocked forever)."""
    fifo = tmp_path / "late.toml"
    os.mkfifo(fifo)

    def produce() -> None:
        time.sleep(0.3)
        with open(fifo, "w") as fh:
            fh.write("threshold = 0.6\n")

    writer = threading.Thread(target=produce, daemon=True)  # (old code: blocked forever)
    writer.start()
    try:
        assert load_config(fifo, env=None).threshold == 0.6
    finally:
        writer.join(timeout=10)
    assert not writer.is_alive()
