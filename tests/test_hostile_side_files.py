"""Files beside the ledger edited by hand, config files and variables of odd shapes
(session 42's fuzzing): a clear error and nothing changed, or taken as meant.

Found: a ``trajectories compress`` metrics line edited into JSON of another shape was a
``msgspec.ValidationError`` traceback, one without a key (``{}``) was read as a record
of key "" (its record was compressed and written a second time), and the torn last
line a crash leaves made the resume a ``DecodeError`` traceback (the CLI read the keys
before the resume dropped the torn line); a config file
saved with a byte-order mark was "Invalid statement (at line 1, column 1)"; a number
setting from the environment took non-ASCII digits (``CTXLEDGER_THRESHOLD=١`` was
1.0); the anchor key file's name and a config file's name were shown whole and raw (a
5,000-character name, a name holding ESC).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from ctxledger import CompressionConfig, InvalidConfig, load_config
from ctxledger.cli.app import cli


def _digest(*paths: Path) -> list[str]:
    return [hashlib.sha256(p.read_bytes()).hexdigest() for p in paths]


def _trajectories(folder: Path) -> tuple[Path, Path, Path]:
    """An input of three short trajectories, compressed once (every record written)."""
    records = [
        {
            "conversations": [
                {"from": "system", "value": "s"},
                {"from": "human", "value": f"question {i} " * 20},
                {"from": "gpt", "value": f"answer {i} " * 20},
            ]
        }
        for i in range(3)
    ]
    source, out = folder / "in.jsonl", folder / "out.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in records))
    result = CliRunner().invoke(
        cli, ["trajectories", "compress", str(source), str(out), "--no-progress"]
    )
    assert result.exit_code == 0, result.output
    return source, out, folder / "out.metrics.jsonl"


@pytest.mark.parametrize(
    ("line", "words"),
    [
        ("{}", "it has no key"),
        ('{"a": 1}', "it has no key"),
        ("[1, 2]", "Expected `object`, got `array`"),
        ("null", "Expected `object`, got `null`"),
        ('{"key": "k", "original_tokens": "\\u001b[2J"}', "at `$.original_tokens`"),
    ],
    ids=["empty", "other keys", "array", "null", "wrong field"],
)
def test_a_metrics_line_edited_by_hand_is_refused_and_nothing_is_changed(
    tmp_path: Path, line: str, words: str
) -> None:
    source, out, metrics = _trajectories(tmp_path)
    kept = metrics.read_text().splitlines()
    metrics.write_text("\n".join([kept[0], line, kept[2]]) + "\n")
    before = _digest(out, metrics)
    result = CliRunner().invoke(
        cli, ["trajectories", "compress", str(source), str(out), "--no-progress"]
    )
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert "out.metrics.jsonl:2 is no metrics record this command wrote" in result.output
    assert words in result.output
    assert _digest(out, metrics) == before  # neither file trimmed, no record written again


def test_a_torn_last_metrics_line_is_still_resumed(tmp_path: Path) -> None:
    """A crash's half-written line is no record yet: the resume drops it (as before)."""
    source, out, metrics = _trajectories(tmp_path)
    with metrics.open("a") as fh:
        fh.write('{"key": "tor')
    result = CliRunner().invoke(
        cli, ["trajectories", "compress", str(source), str(out), "--no-progress"]
    )
    assert result.exit_code == 0, result.output
    assert len(out.read_text().splitlines()) == 3


def test_a_config_file_with_a_byte_order_mark_is_read(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_bytes(b"\xef\xbb\xbfthreshold = 0.6\n")
    assert load_config(path, env={}).threshold == 0.6


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("CTXLEDGER_THRESHOLD", "\u0661"),  # Arabic-Indic 1: float() read it as 1.0
        ("CTXLEDGER_THRESHOLD", "0.\u0665"),
        ("CTXLEDGER_PROTECT_LAST_N", "\u0663"),
        ("CTXLEDGER_CONTEXT_LENGTH", "\uff19" * 5),  # fullwidth digits
    ],
)
def test_a_number_setting_in_other_digits_is_refused(name: str, value: str) -> None:
    with pytest.raises(InvalidConfig, match="expects"):
        load_config(None, env={name: value})


def test_a_long_config_value_from_a_file_is_quoted_short(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text('orphan_policy = "' + "\x1b" * 1 + "x" * 500_000 + '"\n')
    with pytest.raises(InvalidConfig) as caught:
        load_config(path, env={})
    text = str(caught.value)
    assert len(text) < 600 and text.isprintable(), text[:200]
    assert CompressionConfig().orphan_policy == "strip"


def test_the_anchor_key_file_is_named_short_and_plain(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "l.db"
    conv = tmp_path / "c.json"
    conv.write_text(json.dumps([{"role": "user", "content": "hi"}]))
    runner = CliRunner()
    assert runner.invoke(cli, ["--db", str(db), "import", str(conv)]).exit_code == 0
    before = _digest(db)
    key = tmp_path / ("\x1b[31m" + "k" * 3_000)
    monkeypatch.setenv("CTXLEDGER_ANCHOR_KEY_FILE", str(key))
    result = runner.invoke(cli, ["--db", str(db), "verify"])
    assert result.exit_code != 0
    line = result.output.strip()
    assert "anchor key file" in line and len(line) < 600, line[:300]
    assert all(c.isprintable() for c in line), line[:300]
    assert _digest(db) == before
