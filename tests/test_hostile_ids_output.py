"""Ids and model names from data stay on their line and read left to right.

A session id or model name holding a newline, a carriage return, ESC or a bidi control
(U+202E RIGHT-TO-LEFT OVERRIDE, U+2066 isolates) was printed raw into tables and report
lines: a hostile session could forge a row or reverse the text after it. Every command
shows such characters as visible escapes (``\\n``, ``\\x0d``, ``\\u202e``); a message's
own text keeps its line breaks but not its bidi controls.
"""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from helpers.ledger_helpers import SMALL, compact_now, session_with_turns

from ctxledger.analysis.listing import session_rows
from ctxledger.cli.main import cli
from ctxledger.ledger.facade import Ledger
from ctxledger.terminal import TABLE_MIN_WIDTH, PlainConsole, inline, plain

SID = "ses_a\r\nforged row\u202eevil\u2066x\x1b[31m"
MODEL = "gpt\nFAKE LINE\u202eledom"
BRANCH = "ses_b\nforged branch\u2067"
TEXT = "hello\nthere \u202etxet"

#: any raw control character but newline, and every bidi control
RAW = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("hostile-ids") / "l.db"
    ledger = Ledger.open(str(path))
    # written as a ledger made before session 33 holds them (since then such ids and
    # models are refused where they are recorded: test_hostile_names.py)
    patch = pytest.MonkeyPatch()
    patch.setattr("ctxledger.ledger.spec.check_name", lambda value, *_: value)
    try:
        ledger.start_session(model=MODEL, context_length=16_000, session_id=SID)
        ledger.append_messages(SID, [{"role": "user", "content": TEXT}])
        ledger.start_session(
            model=MODEL, context_length=16_000, session_id=BRANCH,
            parent_session_id=SID, reason="branch",
        )  # fmt: skip
    finally:
        patch.undo()
        ledger.close()
    return path


def run(db: Path, *args: str, width: int = 80) -> click.testing.Result:
    result = CliRunner(env={"COLUMNS": str(width)}).invoke(
        cli, ["--db", str(db), *args], catch_exceptions=False
    )
    assert result.exit_code == 0, result.output
    assert not RAW.search(result.output), repr(RAW.search(result.output))
    assert not any(
        line.lstrip("│┃ ").startswith(("forged", "FAKE LINE"))
        for line in result.output.splitlines()
    ), result.output
    return result


@pytest.mark.parametrize(
    "args",
    [
        ["sessions"],
        ["show", SID],
        ["chain", SID],
        ["usage", SID],
        ["replay", SID],
        ["recall", SID, "hello"],
        ["diff", SID, BRANCH],
        ["audit", SID],
        ["sessions", "--json"],
        ["show", SID, "--json"],
    ],
    ids=lambda a: "-".join(x for x in a if x.isascii() and x.isprintable()),
)
def test_no_raw_control_or_bidi_character_from_data_is_printed(db: Path, args: list[str]) -> None:
    run(db, *args)


def test_the_sessions_table_shows_the_escapes(db: Path) -> None:
    out = run(db, "sessions", width=300).output
    assert "ses_a\\x0d\\nforged row\\u202eevil\\u2066x\\x1b[31m" in out
    assert "gpt\\nFAKE LINE\\u202eledom" in out
    assert len(out.splitlines()) == 6  # top, header, rule, two rows, bottom: no forged row


def test_a_report_line_shows_the_id_escaped_on_one_line(db: Path) -> None:
    out = run(db, "chain", SID).output
    assert "ses_a\\x0d\\nforged row\\u202eevil\\u2066x\\x1b[31m root" in out
    assert "ses_b\\nforged branch\\u2067 (branch)" in out


def test_message_text_keeps_its_lines_but_not_its_bidi_controls(db: Path) -> None:
    out = run(db, "show", SID).output
    assert "hello\nthere \\u202etxet" in out


def test_json_output_escapes_bidi_controls_and_decodes_to_the_data(db: Path) -> None:
    out = run(db, "sessions", "--json").output
    assert "\\u202e" in out
    assert {row["session_id"] for row in json.loads(out)} == {SID, BRANCH}


def test_inline_and_plain() -> None:
    assert inline("a\nb\tc\rd\u202ee\u2028") == "a\\nb\\tc\\x0dd\\u202ee\\u2028"
    assert plain("a\nb\tc\rd\u202ee") == "a\nb\tc\\x0dd\\u202ee"
    assert inline("plain id ses_01") == "plain id ses_01"


def test_right_to_left_prose_keeps_its_marks_and_an_id_shows_every_invisible() -> None:
    """Message text keeps the bidi marks of Hebrew or Arabic prose (RLM, LRM, ALM move
    nothing past their neighbours) but not the overrides and isolates; a one-line id
    shows the marks and every invisible character, so it cannot pass for another id."""
    prose = "שלום\u200f עולם \u061cمرحبا\u200e ok"
    assert plain(prose) == prose
    assert plain("a\u202eb\u2066c") == "a\\u202eb\\u2066c"
    assert inline("ses_a\u200bb\u2060c\ufeffd\u00ade\u200ff") == (
        "ses_a\\u200bb\\u2060c\\ufeffd\\xade\\u200ff"
    )
    assert inline("Zürich 東京 👨\u200d👩") == "Zürich 東京 👨\u200d👩"  # joiners stay


@pytest.mark.parametrize(
    "args", [["audit", SID], ["replay", SID, "--verify"], ["compress", SID]], ids=lambda a: a[0]
)
def test_the_spinner_on_a_terminal_shows_the_id_escaped(
    db: Path, args: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A spinner's label names the session a user typed; rich's ``Text`` keeps ESC and
    the bidi controls, so the label is made one plain line before it is drawn."""
    from rich.console import Console

    from ctxledger.cli import progress

    drawn = io.StringIO()
    monkeypatch.setattr(
        progress, "err_console", lambda: Console(file=drawn, force_terminal=True, width=300)
    )
    run(db, *args)
    label = "ses_a\\x0d\\nforged row\\u202eevil\\u2066x\\x1b[31m"
    assert label in drawn.getvalue()
    assert not re.search("\x1b\\[31m|[\u202e\u2066\r\n]forged", drawn.getvalue())


def test_a_very_long_session_id_folds_instead_of_squeezing_the_other_columns(
    tmp_path: Path,
) -> None:
    """A caller may choose session ids; one of 2,000 characters kept on one line took
    the whole width and left every other column of `sessions` zero wide."""
    path = tmp_path / "long.db"
    long_id = "ses_" + "a" * 2000
    # (a ledger written before session 33: an id past 1,024 characters is refused since)
    with pytest.MonkeyPatch.context() as patch, Ledger.open(str(path)) as ledger:
        patch.setattr("ctxledger.ledger.spec.check_name", lambda value, *_: value)
        ledger.start_session(model="model-one", context_length=16_000, session_id=long_id)
        ledger.start_session(model="model-two", context_length=16_000, session_id="ses_short")
    out = run(path, "sessions", width=100).output
    assert "model-one" in out and "model-two" in out and "ses_short" in out
    assert out.count("root") == 2
    assert max(len(line) for line in out.splitlines()) <= 100
    folded = "".join(line.rsplit("│", 2)[1].strip() for line in out.splitlines()[3:-1])
    assert folded == long_id + "ses_short"  # every character shown, in order


@pytest.mark.parametrize("width", [20, 40, 60])
def test_a_narrow_terminal_wraps_a_table_rather_than_cutting_its_columns(
    tmp_path: Path, width: int
) -> None:
    """Session 36: at COLUMNS=40 `sessions` drew five zero-wide columns (no kind, model,
    count or state, not even their headers) and cropped the session id by a character,
    without a mark: a copied id named no session. Below 80 columns a table is laid out
    as wide as its words need (up to 80) and the terminal wraps the lines."""
    path = tmp_path / "narrow.db"
    with Ledger.open(str(path)) as ledger:
        sids = [ledger.start_session(model="m-1", context_length=16_000) for _ in range(2)]
        ledger.append_messages(sids[0], [{"role": "user", "content": "hello"}])
    lines = run(path, "sessions", width=width).output.splitlines()
    header = [c.strip() for c in next(x for x in lines if x.startswith("┃")).split("┃")[1:-1]]
    rows = [[c.strip() for c in x.split("│")[1:-1]] for x in lines if x.startswith("│")]
    assert header == ["kind", "model", "messages", "tokens", "state", "session"]
    assert [(row[:3], row[4:]) for row in rows] == [
        (["root", "m-1", "1"], ["live", sids[0]]),
        (["root", "m-1", "0"], ["live", sids[1]]),
    ]
    assert int(rows[0][3]) > 0 and rows[1][3] == "0"
    assert max(map(len, lines)) <= TABLE_MIN_WIDTH


def test_the_sessions_table_never_cuts_a_figure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Session 40's sweep: on 80 columns a session of 2,109,639 tokens showed `2,109…`
    in `sessions`, read as 2,109 (its kind, model and state words were cut too)."""
    path = tmp_path / "big.db"
    with Ledger.open(str(path)) as ledger:
        sid = ledger.start_session(model="deepseek/deepseek-chat", context_length=16_000)
        row = session_rows(ledger)[0]
    big = {**row, "kind": "continuation", "messages": 19_443, "tokens": 2_109_639}
    ended = {**big, "ended": True, "end_reason": "compression", "messages": 7}
    monkeypatch.setattr("ctxledger.cli.ledger_commands.session_rows", lambda _: [big, ended])
    lines = run(path, "sessions").output.splitlines()
    rows = [[c.strip() for c in x.split("│")[1:-1]] for x in lines if x.startswith("│")]
    assert [(r[2], r[3], r[5]) for r in rows if r[5]] == [
        ("19,443", "2,109,639", sid),  # (grouped since session 42)
        ("7", "2,109,639", sid),
    ]
    assert max(map(len, lines)) <= TABLE_MIN_WIDTH


@pytest.mark.parametrize("id_length", [32, 44, 48])
@pytest.mark.parametrize("tokens", [2_109_639, 123_456_789_012])
def test_the_sessions_table_keeps_a_mark_of_every_word_and_the_whole_id(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, id_length: int, tokens: int
) -> None:
    """Review 1 of session 40: with the figures never cut, an id of 41-48 characters
    (kept on one line) squeezed kind, model and state to nothing ("ended" was gone with
    no mark), and with 12-digit tokens a 48-character id lost its last character."""
    path = tmp_path / "wide.db"
    sid = ("run-2025-" + "abcdefghijklmnopqrstuvwxyz0123456789" * 2)[:id_length]
    with Ledger.open(str(path)) as ledger:
        ledger.start_session(model="x", context_length=16_000, session_id=sid)
        row = session_rows(ledger)[0]
    model = "anthropic/claude-sonnet-4-20250514"
    ended = {**row, "kind": "continuation", "model": model, "messages": 19_443}
    ended |= {"tokens": tokens, "ended": True, "end_reason": "compression"}
    monkeypatch.setattr("ctxledger.cli.ledger_commands.session_rows", lambda _: [ended])
    lines = run(path, "sessions").output.splitlines()
    cells = [[c.strip() for c in x.split("│")[1:-1]] for x in lines if x.startswith("│")]
    kind, shown_model, messages, figure, state, _ = cells[0]
    assert (messages, figure) == ("19,443", f"{tokens:,}")  # (grouped since session 42)
    for word, whole in ((kind, "continuation"), (shown_model, model), (state, "ended")):
        assert len(word) >= 3 and (word == whole or whole.startswith(word.rstrip("…"))), word
    assert "".join(c[5] for c in cells) == sid
    assert max(map(len, lines)) <= TABLE_MIN_WIDTH


@pytest.fixture(scope="module")
def compacted(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    """A ledger with generated (full-length) ids: a session compacted once. (path, tip,
    compaction id)"""
    path = tmp_path_factory.mktemp("narrow") / "l.db"
    with Ledger.open(str(path), config=SMALL) as ledger:
        outcome = compact_now(ledger, session_with_turns(ledger, 8))
    assert outcome.new_session_id and outcome.compaction_id
    return path, outcome.new_session_id, outcome.compaction_id


def _table_lines(output: str) -> list[str]:
    return [line for line in output.splitlines() if line[:1] in "┏┃┡│└"]


@pytest.mark.parametrize("command", ["usage", "audit"])
@pytest.mark.parametrize("width", [20, 40, 60])
def test_a_narrow_terminal_lays_a_table_out_as_80_columns_do(
    compacted: tuple[Path, str, str], command: str, width: int
) -> None:
    """Review 1 of session 36: a table under 80 columns was laid out at rich's minimum
    measure, narrower than its words: `usage` at 40 still showed `summari…` and
    `reasoni…`, and at 60 was cut as before (the minimum, 57, was under 60)."""
    path, tip, _ = compacted
    narrow = run(path, command, tip, width=width).output
    assert narrow == run(path, command, tip).output  # (the 80-column layout)
    if command == "usage":
        assert "…" not in "".join(_table_lines(narrow))


@pytest.mark.parametrize("width", [20, 60, 80])
def test_the_audit_table_shows_the_compaction_id_whole(
    compacted: tuple[Path, str, str], width: int
) -> None:
    """Review 1 of session 36: at 80 columns and under, the table showed `cmp_01a22b1…`.
    The id is folded onto more lines where it does not fit (no_wrap would cut 5 of the 8
    headers at 80 columns instead)."""
    path, tip, compaction_id = compacted
    lines = _table_lines(run(path, "audit", tip, width=width).output)
    rows = [x.split("│") for x in lines if x.startswith("│")]
    assert "".join(r[2].strip() for r in rows) == compaction_id
    assert "…" not in "".join(lines)


@pytest.mark.parametrize("columns", ["0", "00"])
def test_columns_zero_prints_every_line_as_an_unset_columns_does(
    monkeypatch: pytest.MonkeyPatch, columns: str
) -> None:
    """Review 2 of session 36: a console made under ``COLUMNS=0`` was 0 wide, and rich then
    wrote no line that is not a table (an audit's detail lines vanished, exit 0)."""
    monkeypatch.setenv("COLUMNS", columns)
    out = io.StringIO()
    console = PlainConsole(file=out, highlight=False, soft_wrap=True, markup=False)
    console.print("compaction 1 [bold]kept[/bold]")
    assert console.width == 80 and out.getvalue() == "compaction 1 [bold]kept[/bold]\n"


def test_a_lone_surrogate_is_shown_escaped_not_written_back_as_its_raw_byte() -> None:
    """An argument that was not UTF-8 arrives with lone surrogates (byte 0x9b, an 8-bit
    CSI, as U+DC9B); stdout's surrogateescape wrote them back as the raw bytes."""
    assert inline("a\udc9b2Jb\ud800") == "a\\udc9b2Jb\\ud800"
    assert plain("x\n\udcff") == "x\n\\udcff"


def test_json_output_holding_a_lone_surrogate_is_valid_escaped_json(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """msgspec refuses to encode a lone surrogate (a UnicodeEncodeError traceback from
    `--json` output echoing such an argument or path); it is written as its escape."""
    from ctxledger.cli.app import emit_json

    emit_json({"path": "/tmp/\udc9b2J", "n": [1]})
    out = capsys.readouterr().out
    assert "\\udc9b2J" in out and not re.search("[\ud800-\udfff]", out)
    assert json.loads(out) == {"path": "/tmp/\udc9b2J", "n": [1]}


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["trace", SID, "\udc9b2J"], "the fact to trace holds bytes that are not UTF-8 (0x9b)"),
        (["trace", SID, "\udcff", "--json"], "the fact to trace holds bytes that are not UTF-8"),
        (["config", "--set", "summary_model=\udc9b2J"], "summary_model is not UTF-8 text"),
        (["config", "--json", "--set", "summary_model=\udcff"], "summary_model is not UTF-8"),
    ],
    ids=["trace", "trace-json", "config-set", "config-set-json"],
)
def test_an_argument_that_was_not_utf8_is_a_clear_error(
    db: Path, args: list[str], said: str
) -> None:
    """trace printed the fact's raw bytes, and with --json (as config --set with --json)
    was a UnicodeEncodeError traceback."""
    result = CliRunner().invoke(cli, ["--db", str(db), *args])
    assert result.exit_code == 2, result.output
    assert said in result.output and ("\\udc" in result.output or "(0x" in result.output)
    assert not re.search("[\ud800-\udfff]", result.output)


def test_an_error_line_shows_a_carriage_return_in_a_path_not_a_blank(tmp_path: Path) -> None:
    """Error lines were joined with str.split(), which took a CR, a tab or U+001F in a
    path the user typed for a space: the path shown was not the path tried."""
    db = tmp_path / "a\rb\tc\x1fd.db"
    result = CliRunner().invoke(cli, ["--db", str(db), "sessions"])
    assert result.exit_code == 2
    (line,) = result.output.splitlines()
    assert f"no ledger file at {tmp_path}/a\\x0db\\tc\\x1fd.db (the ledger is" in line


def test_an_error_line_joins_lines_in_one_pass_over_long_blanks(db: Path) -> None:
    """Review of session 29: the joining regex ("[ \\t]*\\n") retried a run of blanks
    from each of its positions: 30,000 spaces in a session id took 10 s to print "no
    session", a 60,000-space role in an import file 44 s. Lines are split now."""
    from ctxledger.cli.app import _one_line

    assert _one_line(ValueError("a  \n\n \t b\r\nc\td")) == "a b c\\td"
    hostile = "a" + " " * 200_000 + "b"
    result = CliRunner().invoke(cli, ["--db", str(db), "show", hostile])
    assert result.exit_code == 2
    (line,) = result.output.splitlines()
    # session 41: the id is quoted short (a 2 MB id made a 2 MB error); the join itself
    # still meets the long run of blanks here
    assert line.startswith("error: no session 'a ") and len(line) < 300, line[:300]
    joined = _one_line(ValueError(hostile + " \n\t" + hostile))
    assert "\n" not in joined and joined.startswith("a ") and joined.endswith(" b")


def test_json_output_with_a_lone_surrogate_and_a_nan_stays_valid_json(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # review of session 29: the fallback for text msgspec refuses wrote NaN (not JSON)
    from ctxledger.cli.app import emit_json

    emit_json({"name": "x\udc9by", "ratio": float("nan"), "rows": [float("inf"), 1.5]})
    out = capsys.readouterr().out
    assert "x\\udc9by" in out  # escaped in the text, the same string once decoded
    assert json.loads(out) == {"name": "x\udc9by", "ratio": None, "rows": [None, 1.5]}
