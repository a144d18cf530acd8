"""The system prompt's role (session 38): a prompt given as ``developer`` is stored so
(``SystemPromptSet.role``, ``SessionSwitched.system_prompt_role``, unset for ``system``)
and every reader gives it back in that role; a ledger written before opens, verifies
and replays byte for byte."""

from __future__ import annotations

import asyncio
import hashlib
import json
import shutil
import sqlite3
from pathlib import Path

import anyio
import click.testing
import msgspec
import pytest
from click.testing import CliRunner
from helpers.frameworks import require
from helpers.ledger_helpers import SMALL, compact_now, deterministic_ledger
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxledger.analysis.compactions import find_compaction
from ctxledger.analysis.diff import compaction_views, resolve_view
from ctxledger.analysis.replay import rebuild_check, verify_compactions
from ctxledger.analysis.undo import undo
from ctxledger.analysis.whatif import history, replay_history, whatif
from ctxledger.cli.main import cli
from ctxledger.errors import ImportFormatError, InvalidInput
from ctxledger.events import SessionSwitched, SystemPromptSet, encode_event
from ctxledger.eventstore.rows import decode_stored
from ctxledger.importers.anthropic import parse_anthropic
from ctxledger.importers.export import export_messages
from ctxledger.importers.model import ImportedSession
from ctxledger.importers.openai import parse_openai
from ctxledger.importers.sharegpt import parse_sharegpt
from ctxledger.integrations.common import live_messages, system_view
from ctxledger.ledger.facade import Ledger
from ctxledger.ledger.importing import import_sessions
from ctxledger.ledger.prompt import set_system_prompt
from ctxledger.projections.projector import ROLELESS_CHECKPOINT_NAME, Projector
from ctxledger.runtime.service import ContextService

GOLDEN = Path(__file__).parent / "golden"
PARSERS = {"openai": parse_openai, "anthropic": parse_anthropic, "sharegpt": parse_sharegpt}
TURNS = [
    [
        {"role": "user", "content": f"Step {i}: check module_{i}.py " + "and more " * 60},
        {"role": "assistant", "content": f"module_{i}.py is fine. " + "details " * 60},
    ]
    for i in range(8)
]


def _session(ledger: Ledger, role: str, text: str = "Be brief.") -> str:
    sid = ledger.start_session(
        model="m", context_length=16_000, system_prompt=text, system_role=role
    )
    for batch in TURNS:
        ledger.append_messages(sid, batch)
    return sid


def _head(ledger: Ledger, sid: str) -> dict[str, object]:
    return ledger.api_messages(ledger.tip(sid))[0]


# --------------------------------------------------------------------------- storage


def test_a_system_role_is_not_encoded_and_a_developer_one_is() -> None:
    ledger = deterministic_ledger()
    plain, dev = _session(ledger, "system"), _session(ledger, "developer")
    payloads = {
        sid: next(
            encode_event(r.event)
            for r in ledger.store.read_stream(sid)
            if isinstance(r.event, SystemPromptSet)
        )
        for sid in (plain, dev)
    }
    assert b"role" not in payloads[plain]  # an old event's bytes
    assert payloads[dev].endswith(b',"role":"developer"}')
    assert _head(ledger, plain)["role"] == "system" and _head(ledger, dev)["role"] == "developer"


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    first=st.sampled_from(["system", "developer"]),
    later=st.sampled_from([None, "system", "developer"]),
    text=st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), min_size=1, max_size=30),
    fmt=st.sampled_from(sorted(PARSERS)),
)
def test_the_role_survives_the_fold_compactions_replay_and_export_import(
    first: str, later: str | None, text: str, fmt: str
) -> None:
    ledger = deterministic_ledger()
    sid = _session(ledger, first, text)
    compact_now(ledger, sid)
    if later is not None:  # a change of role (and text) on the continuation
        set_system_prompt(ledger, ledger.tip(sid), text + " now", later)
    compact_now(ledger, ledger.tip(sid))
    role = later or first
    tip = ledger.tip(sid)
    assert ledger.tip(sid) != sid and _head(ledger, sid)["role"] == role
    switch = [r.event for r in ledger.store.read_all() if isinstance(r.event, SessionSwitched)][-1]
    assert switch.system_prompt_role == ("developer" if role == "developer" else msgspec.UNSET)
    assert rebuild_check(ledger, tip).equal and not verify_compactions(ledger, tip).drifted
    view = ledger.transcript.session(tip)
    exported = export_messages(view.system_prompt, ledger.transcript.live_messages(tip), fmt, role)
    (back,) = PARSERS[fmt](exported)
    assert (back.system_prompt, back.system_role) == (view.system_prompt, role)
    again = deterministic_ledger()
    (imported,) = import_sessions(again, [back])
    assert again.api_messages(imported)[0] == {"role": role, "content": view.system_prompt}


def test_what_if_replays_the_role_of_the_start_and_of_a_change(tmp_path: Path) -> None:
    ledger = deterministic_ledger(tmp_path / "w.db")
    sid = _session(ledger, "developer")
    set_system_prompt(ledger, sid, "Be terse.", "system")
    set_system_prompt(ledger, sid, "Be terse.", "developer")  # the role alone changed
    assert whatif(ledger, sid).reproduces_recorded
    with replay_history(history(ledger, sid)) as (scratch, result):
        roles = [
            r.event.role for r in scratch.store.read_all() if isinstance(r.event, SystemPromptSet)
        ]
        assert roles == ["developer", msgspec.UNSET, "developer"]
        assert _head(scratch, result.session_id) == {"role": "developer", "content": "Be terse."}


def test_an_undo_restores_the_prompt_in_its_role() -> None:
    """A revert's switch names the restored session's role: the head stays developer."""
    ledger = deterministic_ledger()
    sid = _session(ledger, "developer")
    outcome = compact_now(ledger, sid)
    assert outcome.compaction_id is not None
    result = undo(ledger, outcome.compaction_id)
    assert _head(ledger, result.new_session_id) == {"role": "developer", "content": "Be brief."}


def test_an_imported_chain_continues_in_the_developer_role() -> None:
    """The switch of an imported compaction chain records its continuation's role."""
    ledger = deterministic_ledger()
    user = {"role": "user", "content": "hi"}
    first = ImportedSession(
        key="a",
        source_format="openai",
        messages=[user],
        system_prompt="one",
        system_role="developer",
        end_reason="compression",
    )
    second = ImportedSession(
        key="b",
        source_format="openai",
        messages=[{"role": "user", "content": "What happened so far: a greeting."}, user],
        system_prompt="two",
        system_role="developer",
        parent_key="a",
        summary_index=0,
    )
    sids = import_sessions(ledger, [first, second], model="m", context_length=16_000)
    assert ledger.chains.chain(sids[0]) == sids
    [switch] = [r.event for r in ledger.store.read_all() if isinstance(r.event, SessionSwitched)]
    assert switch.system_prompt_role == "developer"
    assert _head(ledger, sids[1]) == {"role": "developer", "content": "two"}


def test_an_openai_file_naming_developer_takes_a_leading_system_message_as_its_prompt() -> None:
    """The file's ``system_role`` wins over the leading message's role (said in a
    warning); without the field a leading developer message stays a message (s37)."""
    user = {"role": "user", "content": "hi"}
    named = {"system_role": "developer", "messages": [{"role": "system", "content": "S"}, user]}
    (session,) = parse_openai(json.dumps(named))
    assert (session.system_prompt, session.system_role, session.messages) == (
        "S",
        "developer",
        [user],
    )
    assert any("leading system message is the prompt" in w for w in session.warnings)
    unnamed = {"messages": [{"role": "developer", "content": "S"}, user]}
    (session,) = parse_openai(json.dumps(unnamed))
    assert (session.system_prompt, [m["role"] for m in session.messages]) == (
        None,
        ["developer", "user"],
    )


# --------------------------------------------------------------------------- validation


def _appended(ledger: Ledger) -> int:
    ledger.refresh()
    return ledger.store.last_seq()


@pytest.mark.parametrize("role", ["boss", "user", "", 3, "System"])
def test_an_unknown_role_is_refused_by_the_python_api_and_nothing_is_appended(role: object) -> None:
    ledger = deterministic_ledger()
    sid = _session(ledger, "system")
    before = _appended(ledger)
    with pytest.raises(InvalidInput, match="system_role must be 'system' or 'developer'"):
        ledger.start_session(model="m", context_length=16_000, system_prompt="x", system_role=role)  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match="role must be 'system' or 'developer'"):
        set_system_prompt(ledger, sid, "Be brief.", role)
    bad = ImportedSession(key="k", source_format="openai", messages=[], system_prompt="x")
    bad.system_role = role  # type: ignore[assignment]
    with pytest.raises(InvalidInput, match="system_role must be"):
        import_sessions(ledger, [bad])
    assert _appended(ledger) == before


def test_a_developer_role_without_a_prompt_is_refused_and_nothing_is_appended() -> None:
    """Refused, not kept for a later prompt: a ``set_system_prompt`` without a role
    would otherwise give back ``system`` after the caller asked for developer."""
    ledger = deterministic_ledger()
    before = _appended(ledger)
    with pytest.raises(InvalidInput, match="system_role 'developer' needs a system_prompt"):
        ledger.start_session(model="m", context_length=16_000, system_role="developer")
    assert ledger.start_session(model="m", context_length=16_000, system_role="system")
    assert _appended(ledger) > before
    before = _appended(ledger)
    user = [{"role": "user", "content": "hi"}]
    for parse in (parse_openai, parse_anthropic):
        text = json.dumps({"system_role": "developer", "messages": user})
        with pytest.raises(ImportFormatError, match="system_role 'developer' names no system"):
            parse(text)
    bare = ImportedSession(key="k", source_format="openai", messages=user, system_role="developer")
    with pytest.raises(InvalidInput, match="needs a system_prompt"):
        import_sessions(ledger, [bare])
    assert _appended(ledger) == before


def _cli(db: Path, *args: str) -> click.testing.Result:
    return CliRunner().invoke(cli, ["--db", str(db), *args], catch_exceptions=False)


@pytest.mark.parametrize("fmt", ["openai", "anthropic", "sharegpt"])
def test_an_unknown_role_in_an_imported_file_is_an_error_at_its_line(
    tmp_path: Path, fmt: str
) -> None:
    text = export_messages("Be brief.", [{"role": "user", "content": "hi"}], fmt, "developer")
    src = tmp_path / "in.json"
    src.write_text(text.replace('"developer"', '"boss"'))
    db = tmp_path / "l.db"
    result = _cli(db, "import", str(src), "--context-length", "9000")
    assert result.exit_code != 0
    assert "system_role must be 'system' or 'developer', got 'boss'" in result.output
    assert not db.exists() or not sqlite3.connect(db).execute("SELECT * FROM events").fetchall()
    src.write_text(text)  # the export as written imports, and `show` gives the role back
    sid = _cli(db, "import", str(src), "--context-length", "9000").output.strip().splitlines()[-1]
    shown = json.loads(_cli(db, "show", sid, "--json").output)
    assert shown[0]["message"] == {"role": "developer", "content": "Be brief."}
    exported = json.loads(_cli(db, "export", sid, "--format", fmt).output)
    assert exported == json.loads(text)


# --------------------------------------------------------------------------- old ledgers


def test_a_ledger_written_before_roles_opens_verifies_and_replays_byte_for_byte(
    tmp_path: Path,
) -> None:
    """``golden/ledger_pre_sysrole.db`` was written by main before this change (see
    ``golden/make_pre_sysrole_ledger.py``)."""
    path = tmp_path / "old.db"
    shutil.copyfile(GOLDEN / "ledger_pre_sysrole.db", path)
    views = json.loads((GOLDEN / "ledger_pre_sysrole.json").read_text())
    rows = sqlite3.connect(path).execute("SELECT schema, payload FROM events ORDER BY seq")
    for schema, payload in rows:  # each row decodes and encodes back to its very bytes
        assert encode_event(decode_stored(payload, schema)) == payload
    with Ledger.open(path) as ledger:
        assert ledger.store.verify().ok
        for sid, digest in views.items():
            view = ledger.api_messages(sid)
            assert hashlib.sha256(msgspec.json.encode(view)).hexdigest() == digest
        root = next(iter(views))
        tip = ledger.tip(root)
        assert ledger.transcript.session(tip).system_role == "system"
        assert rebuild_check(ledger, tip).equal
        drift = verify_compactions(ledger, tip)
        assert len(drift.compactions) == 2 and not drift.drifted


# --------------------------------------------------------------------------- adapters


def test_the_adapters_read_a_developer_prompt_as_the_prompt_and_a_developer_message_as_one() -> (
    None
):
    """``live_messages`` / ``system_view`` (Hermes, Agents, LangChain): a prompt held as
    developer is the system message, not a message; a session opening with a developer
    message of its own (no prompt) keeps it as a message."""
    service = ContextService(deterministic_ledger(), config=SMALL)
    dev = anyio.run(
        lambda: service.start_session(model="m", system_prompt="Be brief.", system_role="developer")
    )
    plain = anyio.run(lambda: service.start_session(model="m"))
    lead = {"role": "developer", "content": "Use tabs."}
    user = {"role": "user", "content": "hi"}
    anyio.run(service.append, dev, [user])
    anyio.run(service.append, plain, [lead, user])
    assert live_messages(service, dev) == [user]
    assert system_view(service, dev) == {"role": "developer", "content": "Be brief."}
    assert live_messages(service, plain) == [lead, user] and system_view(service, plain) is None
    require("langchain.agents", "langchain")
    from ctxledger.integrations.langchain_messages import system_message

    made = system_message(None, system_view(service, dev))  # as langchain-openai marks it
    assert made is not None and made.additional_kwargs == {"__openai_role__": "developer"}


def test_diff_shows_the_prompt_in_its_role_before_and_after_a_compaction() -> None:
    ledger = deterministic_ledger()
    sid = _session(ledger, "developer")
    outcome = compact_now(ledger, sid)
    assert outcome.compaction_id is not None
    record = find_compaction(ledger, outcome.compaction_id)
    for view in (resolve_view(ledger, sid), *compaction_views(ledger, record)):
        assert view.entries[0].role == view.entries[0].message["role"] == "developer"


def test_a_checkpoint_saved_here_wins_over_a_later_roleless_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``projector/v4``: an older version saving its ``projector/v3`` checkpoint (its fold
    dropped the roles) over this ledger later does not replace the one saved here; a v3
    alone (no v4 saved) is still loaded, not rebuilt from the log."""
    ledger = deterministic_ledger(tmp_path / "c.db")
    dev = _session(ledger, "developer")
    ledger.projector.save_checkpoint(ledger.store)
    ledger.append_messages(dev, [{"role": "user", "content": "later"}])
    older = Projector.decode(ledger.projector.encode())
    for view in older.transcript.state.sessions.values():
        view.prompt_role = msgspec.UNSET  # what the older fold holds
    ledger.store.save_checkpoint(ROLELESS_CHECKPOINT_NAME, older.last_seq, older.encode())
    assert Projector.rebuild(ledger.store).transcript.session(dev).system_role == "developer"
    decoded: list[int] = []
    real = Projector.decode

    def counted(data: bytes, *args: object, **kwargs: object) -> Projector:
        decoded.append(len(data))
        return real(data, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Projector, "decode", counted)
    plain = deterministic_ledger(tmp_path / "p.db")
    _session(plain, "system")
    state = plain.projector.encode()
    plain.store.save_checkpoint(ROLELESS_CHECKPOINT_NAME, plain.projector.last_seq, state)
    assert Projector.rebuild(plain.store).fingerprint() == plain.projector.fingerprint()
    assert decoded == [len(state)]  # the v3 was loaded


def test_a_checkpoint_keeps_the_role_and_a_state_without_roles_encodes_as_before(
    tmp_path: Path,
) -> None:
    ledger = deterministic_ledger(tmp_path / "c.db")
    dev, plain = _session(ledger, "developer"), _session(ledger, "system")
    compact_now(ledger, dev)
    fingerprint = ledger.projector.fingerprint()
    assert fingerprint.count(b"prompt_role") == 2  # the developer session and its continuation
    ledger.projector.save_checkpoint(ledger.store)
    loaded = Projector.rebuild(ledger.store)
    assert loaded.fingerprint() == fingerprint
    assert loaded.transcript.api_messages(ledger.tip(dev))[0]["role"] == "developer"
    assert loaded.transcript.api_messages(plain)[0]["role"] == "system"


def test_adapters_read_the_prompt_first_only_when_the_session_holds_one() -> None:
    """A session with no system prompt whose first live message is a system or developer
    message: the adapters' live list keeps it (it is a message, not the prompt), in either
    role alike; with a prompt, the list starts after it whatever its role."""
    from ctxledger import ContextService
    from ctxledger.integrations.common import live_messages, system_view

    async def run() -> None:
        svc = ContextService(Ledger.open(":memory:"))
        for role in ("system", "developer"):
            sid = await svc.start_session(model="m", context_length=100_000)
            await svc.append(
                sid, [{"role": role, "content": "live"}, {"role": "user", "content": "hi"}]
            )
            assert [m["role"] for m in live_messages(svc, sid)] == [role, "user"]
            assert system_view(svc, sid) is None
            held = await svc.start_session(
                model="m", context_length=100_000, system_prompt="p", system_role=role
            )
            await svc.append(held, [{"role": "user", "content": "hi"}])
            assert [m["role"] for m in live_messages(svc, held)] == ["user"]
            assert system_view(svc, held) == {"role": role, "content": "p"}

    asyncio.run(run())
