"""Values stored from a caller and shown later are printed as plain text everywhere.

A session title, a model, a session id, the agent a host names when it compacts, the
summary model, summarizer name and failure a summarizer reports, a config's ``summary_model``,
a tool's name and an import ``source``, each holding rich markup, ESC sequences, a
carriage return, a newline, C1 CSI and bidi overrides, are written into one ledger (as a
ledger written before their checks holds them: today most are refused where they are
recorded, ``test_hostile_names.py``) and every command that shows the ledger is run:
each prints them escaped (``\\x1b``, ``\\x0d``, ``\\u202e``), the markup literally,
never as terminal control, and no line starts with the text a value tried to forge.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import click
import pytest
from click.testing import CliRunner
from helpers.ledger_helpers import SMALL

from ctxledger import CompressionConfig, ContextService
from ctxledger.cli.main import cli
from ctxledger.compressor.summarizers.base import SummaryResult
from ctxledger.compressor.summarizers.recorded import RecordedSummarizer
from ctxledger.demo.synth import SessionSynth
from ctxledger.errors import InvalidConfig, InvalidInput
from ctxledger.ledger.facade import Ledger
from ctxledger.usage import CanonicalUsage

#: rich markup, an emoji code, OSC title, CSI colour, CR, a forged line, C1 CSI, bidi
HOSTILE = (
    "[bold]B[/bold][link=https://e.example]L[/link]:smile:"
    "\x1b]0;T\x07\x1b[31mR\rX\nFORGED\x9b2J\u202eE\u2066z\u200f"
)
SID = "ses_" + HOSTILE
VALUES = {
    "title": "title " + HOSTILE,
    "model": "model " + HOSTILE,
    "agent": "agent " + HOSTILE,
    "summary_model": "smodel " + HOSTILE,
    "summarizer": "smz " + HOSTILE,
    "config_summary_model": "cfg " + HOSTILE,
    "tool": "tool " + HOSTILE,
    "source": "source " + HOSTILE,
    "failure": "failure " + HOSTILE,
}
#: any C0 control but newline, DEL, a C1 control, a bidi control or mark
RAW = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
#: how the markup reads once printed: literally
MARKUP = "[bold]B[/bold][link=https://e.example]L[/link]:smile:"


def _unchecked(patch: pytest.MonkeyPatch) -> None:
    """Every name check off: the ledger is written as one made before them was."""

    def taken(value: Any, *_: Any, **__: Any) -> Any:
        return value

    for where in (
        "ctxledger.ledger.spec.check_name",
        "ctxledger.runtime.service_io.check_name",
        "ctxledger.compressor.config.check_name",
        "ctxledger.usage.check_name",
    ):
        patch.setattr(where, taken, raising=False)


def _write(db: Path) -> None:
    synth = SessionSynth(3)
    config = SMALL.replace(summary_model=VALUES["config_summary_model"])
    result = SummaryResult(
        text="the summary of it all",
        summarizer=VALUES["summarizer"],
        model=VALUES["summary_model"],
        usage=CanonicalUsage(input=100, output=20),
        fallback=True,
        failure=VALUES["failure"],
        failure_class="other",
    )
    ledger = Ledger.open(db, config=config)
    service = ContextService(ledger, summarizer=RecordedSummarizer(result), config=config)
    tools = [
        {"type": "function", "function": {"name": VALUES["tool"], "parameters": {"type": "object"}}}
    ]
    sid = ledger.start_session(
        model=VALUES["model"],
        context_length=16_000,
        system_prompt=synth.system_prompt(),
        tools=tools,
        title=VALUES["title"],
        source=VALUES["source"],
        session_id=SID,
    )
    call = {"name": VALUES["tool"], "arguments": json.dumps({"q": MARKUP})}
    for i, msgs in enumerate(synth.turns(10)):
        ledger.append_messages(sid, msgs)
        calls = [{"id": f"c{i}", "type": "function", "function": call}]
        ledger.append_messages(
            sid,
            [
                {"role": "assistant", "content": None, "tool_calls": calls},
                {"role": "tool", "tool_call_id": f"c{i}", "content": "out " * 3000},
                {"role": "assistant", "content": "done"},
            ],
        )
    ledger.report_usage(sid, {"prompt_tokens": 9000, "completion_tokens": 5}, model=VALUES["model"])

    async def compacted() -> None:
        await service.host_compress(sid, "host", agent=VALUES["agent"], requested=True)

    anyio.run(compacted)
    ledger.close()


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    path = tmp_path_factory.mktemp("hostile-stored") / "l.db"
    with pytest.MonkeyPatch.context() as patch:
        _unchecked(patch)
        _write(path)
    yield path


def run(db: Path, *args: str) -> click.testing.Result:
    return CliRunner(env={"COLUMNS": "120"}).invoke(
        cli, ["--db", str(db), *args], catch_exceptions=False
    )


def tip_and_compaction(db: Path) -> tuple[str, str]:
    ledger = Ledger.open(db, read_only=True)
    try:
        tip = ledger.chains.tip(SID)
        cmp = ledger.chains.compaction_ids_in_effect(tip)[-1]
        return tip, cmp
    finally:
        ledger.close()


def assert_plain(result: click.testing.Result) -> str:
    out = result.output
    assert not RAW.search(out), (RAW.search(out), out[-2000:])
    forged = [line for line in out.splitlines() if line.lstrip("│┃ |").startswith("FORGED")]
    assert not forged, out
    return out


def commands(tip: str, cmp: str) -> dict[str, list[str]]:
    return {
        "sessions": ["sessions"],
        "show": ["show", SID],
        "show-tip": ["show", tip],
        "chain": ["chain", tip],
        "usage": ["usage", tip],
        "audit": ["audit", tip, "--all"],
        "audit-compaction": ["audit", cmp],
        "diff": ["diff", cmp],
        "diff-two": ["diff", SID, tip],
        "trace": ["trace", tip, "out"],
        "recall": ["recall", tip, "out"],
        "expand": ["expand", cmp],
        "replay": ["replay", tip, "--verify"],
        "whatif": ["replay", tip, "--summarizer", "offline"],
        "export": ["export", tip],
        "export-anthropic": ["export", tip, "--format", "anthropic"],
        "compress-dry-run": ["compress", tip, "--dry-run"],
        "verify": ["verify"],
    }


NAMES = sorted(commands("t", "c"))


@pytest.mark.parametrize("name", NAMES)
def test_every_command_prints_stored_values_as_plain_text(db: Path, name: str) -> None:
    tip, cmp = tip_and_compaction(db)
    result = run(db, *commands(tip, cmp)[name])
    assert result.exit_code == 0, result.output
    assert_plain(result)


@pytest.mark.parametrize("name", [n for n in NAMES if not n.startswith(("export", "verify"))])
def test_every_command_s_json_is_plain_and_decodes_to_the_values(db: Path, name: str) -> None:
    tip, cmp = tip_and_compaction(db)
    result = run(db, *commands(tip, cmp)[name], "--json")
    assert result.exit_code == 0, result.output
    json.loads(assert_plain(result))


def test_the_values_are_shown_escaped_where_they_are_printed(db: Path) -> None:
    tip, cmp = tip_and_compaction(db)
    escaped = "\\x1b]0;T\\x07\\x1b[31mR\\x0dX\\nFORGED\\x9b2J\\u202eE\\u2066z\\u200f"
    assert "[bold]B[/bold][link=https:…" in assert_plain(run(db, "sessions"))  # (cut: a model)
    assert f"→ tool {MARKUP}{escaped}(" in assert_plain(run(db, "show", SID))
    assert f"→ tool {MARKUP}{escaped}(" in assert_plain(run(db, "expand", cmp))
    assert f"by smz {MARKUP}{escaped}:" in assert_plain(run(db, "audit", cmp))
    assert f"ses_{MARKUP}{escaped} root" in assert_plain(run(db, "chain", tip))
    assert f"what-if of ses_{MARKUP}{escaped} (" in assert_plain(
        run(db, "replay", tip, "--summarizer", "offline")
    )


#: commands given a reference on the command line that names nothing: an error line
REFUSED = [
    ["show", "ses_nothing" + HOSTILE],
    ["chain", HOSTILE],
    ["usage", HOSTILE],
    ["audit", HOSTILE],
    ["diff", HOSTILE],
    ["diff", SID, HOSTILE + "@3"],
    ["trace", HOSTILE, "x"],
    ["recall", HOSTILE, "x"],
    ["expand", "cmp_" + HOSTILE],
    ["undo", "cmp_" + HOSTILE],
    ["pin", SID, "msg_" + HOSTILE],
    ["replay", HOSTILE],
    ["export", HOSTILE],
    ["compress", HOSTILE, "--dry-run"],
    ["compress", SID, "--focus", HOSTILE, "--dry-run"],
]


@pytest.mark.parametrize("args", REFUSED, ids=lambda a: "-".join(x for x in a if x.isalpha()))
def test_a_hostile_reference_on_the_command_line_is_a_plain_error(
    db: Path, args: list[str]
) -> None:
    result = run(db, *args)
    assert result.exit_code in (1, 2), result.output
    out = assert_plain(result)
    assert out.startswith("error: "), out
    assert len(out.splitlines()) <= 3, out


@pytest.mark.parametrize("command", ["trace", "recall"])
def test_a_hostile_query_is_echoed_plainly(db: Path, command: str) -> None:
    tip, _ = tip_and_compaction(db)
    out = assert_plain(run(db, command, tip, "nothing " + HOSTILE))
    assert MARKUP in out


# --- new such values are refused where they would be recorded ------------------------


@pytest.mark.parametrize(
    ("agent", "says"),
    [
        ("a\x1b[31m", "agent holds the control character U+001B at character 2"),
        ("a\nb", "agent holds the control character U+000A"),
        ("a\u202eb", "agent holds the control character U+202E"),
        ("a" * 1025, "agent is too long: 1,025 characters (at most 1,024)"),
    ],
)
def test_a_host_s_agent_name_is_checked_as_a_name_and_nothing_is_recorded(
    tmp_path: Path, agent: str, says: str
) -> None:
    ledger = Ledger.open(tmp_path / "l.db", config=SMALL)
    service = ContextService(ledger, config=SMALL)
    sid = ledger.start_session(model="m", context_length=16_000)
    ledger.append_messages(sid, [{"role": "user", "content": "hi"}])
    before = ledger.store.last_seq()

    async def ask() -> None:
        await service.host_compress(sid, "host", agent=agent, requested=True)

    with pytest.raises(InvalidInput, match=re.escape(says)):
        anyio.run(ask)
    assert ledger.store.last_seq() == before
    ledger.close()


@pytest.mark.parametrize(
    ("model", "says"),
    [
        ("m\x1b[31m", "summary_model holds the control character U+001B"),
        ("m\r", "summary_model holds the control character U+000D"),
        ("m\u2066", "summary_model holds the control character U+2066"),
        ("m" * 2049, "summary_model is too long: 2,049 characters (at most 2,048)"),
    ],
)
def test_a_summary_model_is_checked_as_a_model_name(model: str, says: str) -> None:
    with pytest.raises(InvalidConfig, match=re.escape(says)):
        CompressionConfig(summary_model=model)
    with pytest.raises(InvalidConfig, match=re.escape(says)):
        SMALL.replace(summary_model=model)


def test_a_summary_model_from_a_config_file_or_the_cli_is_checked(tmp_path: Path) -> None:
    conf = tmp_path / "c.toml"
    conf.write_text('summary_model = "m\\u001b[2J"\n')
    result = CliRunner(env={"CTXLEDGER_CONFIG": str(conf)}).invoke(
        cli, ["--db", str(tmp_path / "l.db"), "config"]
    )
    assert result.exit_code == 2, result.output
    assert "summary_model holds the control character U+001B" in assert_plain(result)
    result = run(tmp_path / "l.db", "config", "--set", "summary_model=a\x07b")
    assert result.exit_code == 2 and "U+0007" in assert_plain(result), result.output
    assert not (tmp_path / "l.db").exists()


def test_a_recorded_summary_model_still_replays(db: Path) -> None:
    """The fixture's config snapshot holds one: it is read back as recorded."""
    tip, _ = tip_and_compaction(db)
    ledger = Ledger.open(db, read_only=True)
    try:
        started = ledger.transcript.session(SID)
        assert started.config["summary_model"] == VALUES["config_summary_model"]
        assert (
            CompressionConfig.from_snapshot(started.config).summary_model
            == (VALUES["config_summary_model"])
        )
    finally:
        ledger.close()
    assert "equal" in run(db, "replay", tip, "--verify").output
