"""A manual compression's focus is bounded free text at every face that takes it.

Session 33 left the focus bounded by the 64 MiB body cap only. Session 34: at most
``MAX_FOCUS_CHARS`` characters, newline and tab allowed, no other control character
and no bidirectional-text control (``limits.check_name(..., lines=True)``); each face
(library, CLI, service, HTTP, Hermes) refuses it before anything is appended. A ledger
that recorded such a focus still replays (what-if) as recorded.
"""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path
from typing import Any

import anyio
import pytest
from click.testing import CliRunner
from helpers.hermes_run import run_hermes
from helpers.ledger_helpers import compact_now, deterministic_ledger, session_with_turns
from helpers.server_rig import rig

from ctxledger import Ledger
from ctxledger.analysis.compactions import chain_signature
from ctxledger.analysis.history import history
from ctxledger.analysis.whatif import replay_history
from ctxledger.cli.main import cli
from ctxledger.errors import InvalidInput
from ctxledger.limits import MAX_FOCUS_CHARS, replaying_recorded
from ctxledger.runtime.service import ContextService

TOKEN = "hostile-focus-token-0123456789abcdef"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
CONTROL = "focus holds the control character"

#: (focus, what the error says)
BAD_FOCUS: list[tuple[Any, str]] = [
    ("f" * (MAX_FOCUS_CHARS + 1), f"focus is too long: {MAX_FOCUS_CHARS + 1:,} characters"),
    # the string as given, at every face (the service strips it only after the check)
    ("f" * MAX_FOCUS_CHARS + "\n", f"focus is too long: {MAX_FOCUS_CHARS + 1:,} characters"),
    ("the auth bug\x1c", f"{CONTROL} U+001C at character 13"),
    ("the\x00bug", f"{CONTROL} U+0000 at character 4"),
    ("the auth\r bug", f"{CONTROL} U+000D"),
    ("auth \x1b[2Jbug", f"{CONTROL} U+001B"),
    ("auth\u202ebug", f"{CONTROL} U+202E"),
    ("auth\u2066bug", f"{CONTROL} U+2066"),
    ("a\u2028b", f"{CONTROL} U+2028"),
]
IDS = ["long", "long-newline", "file-separator", "nul", "cr", "esc", "rlo", "lri", "line-sep"]


def _ledger(tmp_path: Path) -> tuple[Ledger, str]:
    ledger = deterministic_ledger(tmp_path / "l.db")
    return ledger, session_with_turns(ledger, 8)


@pytest.mark.parametrize(("focus", "says"), BAD_FOCUS, ids=IDS)
@pytest.mark.parametrize("dry_run", [False, True])
def test_the_library_refuses_a_bad_focus(
    tmp_path: Path, focus: str, says: str, dry_run: bool
) -> None:
    ledger, sid = _ledger(tmp_path)
    before = ledger.store.last_seq()
    with pytest.raises(InvalidInput, match=re.escape(says)):
        compact_now(ledger, sid, focus=focus, dry_run=dry_run)
    assert ledger.store.last_seq() == before


@pytest.mark.parametrize(("focus", "says"), BAD_FOCUS, ids=IDS)
def test_the_service_refuses_a_bad_focus_and_records_no_check(
    tmp_path: Path, focus: str, says: str
) -> None:
    ledger, sid = _ledger(tmp_path)
    before = ledger.store.last_seq()

    async def main() -> int:
        async with ContextService(ledger) as svc:
            with pytest.raises(InvalidInput, match=re.escape(says)):
                await svc.compress(sid, focus=focus)
            return svc.ledger.store.last_seq()

    assert anyio.run(main) == before


def test_a_focus_of_lines_and_tabs_at_the_bound_goes_through(tmp_path: Path) -> None:
    ledger, sid = _ledger(tmp_path)
    focus = "the auth bug\n\tand the deploy key " + "x" * (MAX_FOCUS_CHARS - 33)
    assert len(focus) == MAX_FOCUS_CHARS
    assert compact_now(ledger, sid, focus=focus).action == "compressed"


@pytest.mark.parametrize(("focus", "says"), BAD_FOCUS[:7], ids=IDS[:7])
def test_the_cli_refuses_a_bad_focus_on_one_line(tmp_path: Path, focus: str, says: str) -> None:
    ledger, sid = _ledger(tmp_path)
    before = ledger.store.last_seq()
    ledger.close()
    db = str(tmp_path / "l.db")
    for extra in ([], ["--dry-run"]):
        result = CliRunner().invoke(cli, ["--db", db, "compress", sid, "--focus", focus, *extra])
        assert result.exit_code == 2, result.output[-500:]
        assert result.exception is None or isinstance(result.exception, SystemExit)
        assert says.replace("\\", "") in result.output and "Traceback" not in result.output
        assert "\x00" not in result.output and "\u202e" not in result.output
    with Ledger.open(db) as again:
        assert again.store.last_seq() == before


@pytest.mark.parametrize(("focus", "says"), BAD_FOCUS[:7], ids=IDS[:7])
@pytest.mark.parametrize("dry_run", [False, True])
def test_the_state_api_refuses_a_bad_focus_with_a_422(
    tmp_path: Path, focus: str, says: str, dry_run: bool
) -> None:
    async def main() -> tuple[int, str, int, int]:
        async with rig(tmp_path, token=TOKEN) as r:
            made = await r.http.post("/v1/sessions", headers=AUTH, json={"model": "m"})
            sid = made.json()["session_id"]
            before = r.last_seq()
            body = {"focus": focus, "dry_run": dry_run}
            response = await r.http.post(f"/v1/sessions/{sid}/compress", headers=AUTH, json=body)
            return response.status_code, response.text, before, r.last_seq()

    status, text, before, after = anyio.run(main)
    assert status == 422, text
    assert json.loads(text)["error"]["message"].startswith(says[:20]), text
    assert after == before


def test_a_ledger_that_recorded_such_a_focus_replays_as_recorded(tmp_path: Path) -> None:
    ledger, sid = _ledger(tmp_path)
    focus = "auth\u202e\x1bbug"

    async def main() -> str:
        async with ContextService(ledger) as svc:
            with replaying_recorded():  # as a ctxledger before session 34 recorded it
                return (await svc.compress(sid, focus=focus)).session_id

    tip = anyio.run(main)
    assert tip != sid
    with Ledger.open(tmp_path / "l.db") as old:
        with replay_history(history(old, tip)) as (scratch, result):
            again = chain_signature(scratch, result.session_id)
        recorded = chain_signature(old, tip)
    # (the replay also compacts automatically first: the session recorded no usage)
    assert [c["focus"] for c in recorded] == [focus] and again[-1]["focus"] == focus
    result = CliRunner().invoke(cli, ["--db", str(tmp_path / "l.db"), "replay", tip])
    assert result.exit_code == 0, result.output[-500:]


def test_a_what_if_replays_a_focus_as_the_library_recorded_it(tmp_path: Path) -> None:
    """(The library records a focus as given; the service strips a new one.)"""
    ledger, sid = _ledger(tmp_path)
    focus = " the auth bug\n"
    tip = compact_now(ledger, sid, focus=focus).new_session_id
    ledger.close()
    assert tip is not None
    with Ledger.open(tmp_path / "l.db") as old:
        with replay_history(history(old, tip)) as (scratch, result):
            again = chain_signature(scratch, result.session_id)
        recorded = chain_signature(old, tip)
    assert [c["focus"] for c in recorded] == [focus] and again[-1]["focus"] == focus


_HERMES = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path
    from ctxledger import Ledger
    from ctxledger.integrations.hermes import CtxLedgerEngine

    db = Path(sys.argv[1])
    e = CtxLedgerEngine(db_path=db)
    e.update_model("m1", 100_000)
    e.on_session_start("hostile-focus")
    said = [{"role": "user", "content": f"ask {i}"} for i in range(6)]
    e.compress(said, focus_topic="ok")
    with Ledger.open(db) as ledger:
        before = ledger.store.last_seq()
    more = said + [{"role": "user", "content": "one more"}]
    kept = e.compress(more, focus_topic=json.loads(sys.argv[2]))
    with Ledger.open(db) as ledger:
        after = ledger.store.last_seq()
    print(json.dumps({"same": kept == more, "aborted": e._last_compress_aborted,
                      "error": e._last_summary_error, "before": before, "after": after}))
    """
)


@pytest.mark.parametrize(("focus", "says"), [BAD_FOCUS[6], BAD_FOCUS[1]], ids=["rlo", "long-nl"])
def test_the_hermes_engine_refuses_a_bad_focus_before_appending(
    tmp_path: Path, focus: str, says: str
) -> None:
    proc = run_hermes(
        ["-c", _HERMES, str(tmp_path / "h.db"), json.dumps(focus)],
        tmp_path,
        timeout=120,
        PYTHONPATH=str(Path(__file__).resolve().parent.parent),
        HERMES_HOME=str(tmp_path / "home"),
    )
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert seen["same"] and seen["aborted"], seen
    assert says in seen["error"], seen
    assert seen["after"] == seen["before"], seen


def test_a_generated_recording_checks_and_strips_its_focus(tmp_path: Path) -> None:
    # review 2: record_generated (a live recording into the caller's ledger) ran inside
    # replaying_recorded, so its focus was neither checked nor stripped
    from ctxledger.demo.record import record_generated
    from ctxledger.events import SummaryGenerated

    ledger = deterministic_ledger(tmp_path / "a.db")
    record_generated(ledger, seed=5, turns=4, focus_at={1: "  tests\n"})
    events = [r.event for r in ledger.store.read_all()]
    assert [e.focus for e in events if isinstance(e, SummaryGenerated) and e.focus] == ["tests"]
    ledger.close()
    ledger = deterministic_ledger(tmp_path / "b.db")
    with pytest.raises(InvalidInput, match=re.escape(f"{CONTROL} U+001B")):
        record_generated(ledger, seed=5, turns=4, focus_at={1: "auth \x1b[2Jbug"})
    ledger.close()
