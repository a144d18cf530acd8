"""Everything the CLI prints from data is plain text: never rich markup, never a control sequence.

A transcript whose model name, message text, tool names and tool-call ids hold rich
markup (``[/]``, ``[bold]…[/italic]``, ``[link=…]``) and terminal escapes (OSC title,
CSI colour, C1 CSI, BEL, carriage return) goes through every command that prints
data. Each must exit 0, print the markup literally and emit no control character.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from ctxledger.cli.main import cli

OSC_TITLE = "\x1b]0;pwned\x07"
CSI_RED = "\x1b[31m"
C1_CSI = "\x9b32m"
#: (":smile:" is a rich emoji code: `recall` printed it as 😄 until session 41)
MARKUP = "[bold]x[/italic] [/] [link=https://evil.example]click[/link] :smile:"
MODEL = "gpt-[/]-[bold]m[/italic]" + CSI_RED
CALL_ID = "call_[/]" + OSC_TITLE
TOOL_NAME = "run[/]tool"

#: any C0 control but newline, DEL, or a C1 control
CONTROL = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f]")


def run(db: Path, *args: str) -> click.testing.Result:
    return CliRunner().invoke(cli, ["--db", str(db), *args], catch_exceptions=False)


def hostile_transcript(turns: int = 14) -> list[dict[str, object]]:
    msgs: list[dict[str, object]] = [{"role": "system", "content": "sys " + MARKUP + OSC_TITLE}]
    for i in range(turns):
        cid = f"{CALL_ID}{i}"
        msgs += [
            {"role": "user", "content": f"ask {i} {MARKUP} {OSC_TITLE} {C1_CSI} wordy " * 30},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": cid,
                        "type": "function",
                        "function": {"name": TOOL_NAME, "arguments": json.dumps({"q": MARKUP})},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": cid, "content": f"out {CSI_RED}{MARKUP}\r " * 40},
            {"role": "assistant", "content": f"done {i} [red]{MARKUP}\x07 " * 10},
        ]
    return msgs


@pytest.fixture(scope="module")
def ledger(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str, str]:
    """(db, root session, continuation, compaction id) of a compacted hostile transcript."""
    tmp = tmp_path_factory.mktemp("hostile")
    src = tmp / "conv.json"
    src.write_text(json.dumps({"model": MODEL, "messages": hostile_transcript()}))
    db = tmp / "l.db"
    # a ledger written before session 33 may hold such a model name (since then it is
    # refused where it would be recorded: test_hostile_names.py); written here as one was
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("ctxledger.ledger.spec.check_name", lambda value, *_: value)
        result = run(db, "import", str(src), "--context-length", "16000")
    assert result.exit_code == 0, result.output
    root = result.output.strip().splitlines()[-1]
    done = json.loads(run(db, "compress", root, "--json").output)
    return db, root, done["new_session_id"], done["compaction_id"]


def assert_plain(result: click.testing.Result) -> str:
    assert result.exit_code in (0, 1), result.output
    assert not CONTROL.search(result.output), repr(CONTROL.search(result.output))
    return result.output


COMMANDS = {
    "sessions": lambda root, tip, cmp: ["sessions"],
    "show": lambda root, tip, cmp: ["show", root],
    "show-tip": lambda root, tip, cmp: ["show", tip],
    "usage": lambda root, tip, cmp: ["usage", tip],
    "chain": lambda root, tip, cmp: ["chain", tip],
    "audit": lambda root, tip, cmp: ["audit", tip, "--all"],
    "audit-compaction": lambda root, tip, cmp: ["audit", cmp],
    "trace": lambda root, tip, cmp: ["trace", tip, "wordy"],
    "recall": lambda root, tip, cmp: ["recall", tip, "wordy"],
    "expand": lambda root, tip, cmp: ["expand", cmp],
    "diff": lambda root, tip, cmp: ["diff", cmp],
    "diff-two": lambda root, tip, cmp: ["diff", root, tip],
    "replay": lambda root, tip, cmp: ["replay", tip, "--verify"],
    "export": lambda root, tip, cmp: ["export", tip, "--format", "anthropic"],
    "export-sharegpt": lambda root, tip, cmp: ["export", tip, "--format", "sharegpt"],
    "export-openai": lambda root, tip, cmp: ["export", root],
    "compress-dry-run": lambda root, tip, cmp: ["compress", tip, "--dry-run"],
    "verify": lambda root, tip, cmp: ["verify"],
}


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_data_is_printed_as_plain_text(name: str, ledger: tuple[Path, str, str, str]) -> None:
    db, root, tip, cmp = ledger
    out = assert_plain(run(db, *COMMANDS[name](root, tip, cmp)))
    assert out.strip()


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_no_emoji_code_in_data_is_replaced(name: str, ledger: tuple[Path, str, str, str]) -> None:
    db, root, tip, cmp = ledger
    out = run(db, *COMMANDS[name](root, tip, cmp)).output
    assert "\N{SMILING FACE WITH OPEN MOUTH AND SMILING EYES}" not in out
    if name in ("recall", "show", "expand"):
        assert ":smile:" in out


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_json_output_has_no_raw_control_characters(
    name: str, ledger: tuple[Path, str, str, str]
) -> None:
    db, root, tip, cmp = ledger
    args = COMMANDS[name](root, tip, cmp)
    if args[0] in ("export",):
        out = assert_plain(run(db, *args))
    else:
        out = assert_plain(run(db, *args, "--json"))
    json.loads(out)  # still one valid document: escapes, not mangled text


def test_markup_from_data_is_shown_literally(ledger: tuple[Path, str, str, str]) -> None:
    db, root, _tip, _cmp = ledger
    shown = run(db, "show", root).output
    assert MARKUP in shown
    assert "← call_[/]\\x1b]0;pwned\\x07" in shown  # the escape is shown, not obeyed
    assert "run[/]tool(" in shown


def test_an_error_naming_hostile_data_is_plain(ledger: tuple[Path, str, str, str]) -> None:
    db, _root, _tip, _cmp = ledger
    result = run(db, "show", "ses_[/]" + OSC_TITLE)
    assert result.exit_code == 2
    assert not CONTROL.search(result.output)


def test_config_prints_hostile_settings_literally(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`ctxledger config` shows values and the file they came from: data, never markup.
    (A summary model holding ESC is refused since session 43, as a model name is: the
    error names it escaped.)"""
    model = "sum-[bold]m[/italic]"
    conf = tmp_path / "c[bold]onf.toml"
    conf.write_text(f"summary_model = {json.dumps(model)}\n")
    monkeypatch.setenv("CTXLEDGER_CONFIG", str(conf))
    out = assert_plain(run(tmp_path / "l.db", "config"))
    assert "sum-[bold]m[/italic]" in out
    assert "c[bold]onf.toml" in out
    conf.write_text(f"summary_model = {json.dumps(model + CSI_RED)}\n")
    result = run(tmp_path / "l.db", "config")
    assert result.exit_code == 2 and not CONTROL.search(result.output), result.output
    assert "'sum-[bold]m[/italic]\\x1b[31m'" in result.output


def test_demo_prints_a_hostile_ledger_path_literally(tmp_path: Path) -> None:
    """The demo styles only its own labels; the ledger path a user typed is shown as text."""
    db = tmp_path / ("d[bold]x" + OSC_TITLE + ".db")
    out = assert_plain(run(db, "demo", "--turns", "3", "--context-length", "16000"))
    assert "d[bold]x\\x1b]0;pwned\\x07.db" in out
    assert "hash chain: verified" in out
