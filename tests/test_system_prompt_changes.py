"""A system prompt changed mid-session: recorded once per change, counted by preflight,
carried by a compaction and replayed at its position by what-if (session 34)."""

from __future__ import annotations

from pathlib import Path

import anyio
import msgspec
import pytest
from helpers.ledger_helpers import SMALL, compact_now, deterministic_ledger, session_with_turns
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxledger.analysis.compactions import chain_signature
from ctxledger.analysis.replay import rebuild_check, verify_compactions
from ctxledger.analysis.whatif import (
    AppendStep,
    StartInfo,
    Step,
    SystemStep,
    history,
    replay_history,
    scripted_steps,
    start_and_drive,
    whatif,
)
from ctxledger.compressor.markers import add_system_note, has_system_note, strip_system_note
from ctxledger.demo.synth import SessionSynth
from ctxledger.errors import InvalidInput, SessionEndedError
from ctxledger.events import SessionSwitched, SystemPromptSet
from ctxledger.importers.model import ImportedSession
from ctxledger.ledger.facade import Ledger
from ctxledger.ledger.importing import import_sessions
from ctxledger.ledger.prompt import set_system_prompt
from ctxledger.runtime.service import ContextService

PADDING = "Follow the house rules listed here in every answer you give. "


def _prompt(size: int) -> str:
    return "You are a careful assistant. " + PADDING * size


def _prompt_events(ledger: Ledger, sid: str) -> list[SystemPromptSet]:
    return [
        r.event
        for s in ledger.chains.chain(sid)
        for r in ledger.store.read_stream(s)
        if isinstance(r.event, SystemPromptSet)
    ]


def _started(tmp_path: Path, prompt: str | None = "short") -> tuple[ContextService, str]:
    ledger = deterministic_ledger(tmp_path / "p.db")
    svc = ContextService(ledger, config=SMALL)
    sid = anyio.run(
        lambda: svc.start_session(model="m", context_length=16_000, system_prompt=prompt)
    )
    return svc, sid


# --------------------------------------------------------------------------- writer


def test_the_same_prompt_writes_nothing_and_a_changed_one_writes_one_event(tmp_path: Path) -> None:
    svc, sid = _started(tmp_path)
    version = svc.ledger.version(sid)
    for _ in range(3):
        assert anyio.run(svc.set_system_prompt, sid, "short").session_id == sid
    assert svc.ledger.version(sid) == version
    for text in ("longer now", "longer now", "third", "third"):
        anyio.run(svc.set_system_prompt, sid, text)
    assert [e.text for e in _prompt_events(svc.ledger, sid)] == ["short", "longer now", "third"]
    view = svc.ledger.transcript.session(sid)
    assert view.system_prompt == "third"
    assert view.system_tokens == _prompt_events(svc.ledger, sid)[-1].tokens > 0


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (None, "system_prompt must be a string"),
        (7, "must be a string"),
        ("a\ud800b", "system_prompt"),
    ],
)
def test_a_bad_prompt_is_refused_and_nothing_is_appended(
    tmp_path: Path, text: object, says: str
) -> None:
    svc, sid = _started(tmp_path)
    version = svc.ledger.version(sid)
    with pytest.raises(InvalidInput, match=says):
        anyio.run(svc.set_system_prompt, sid, text)
    assert svc.ledger.version(sid) == version


@pytest.mark.parametrize("text", ["x" * 5000, "\u20ac" * 2000])
def test_a_prompt_over_the_input_limit_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str
) -> None:
    """The limit is in UTF-8 bytes ("\u20ac" is 3 of them: 2,000 characters, 6,000 bytes),
    for a change as for a start."""
    svc, sid = _started(tmp_path)
    monkeypatch.setenv("CTXLEDGER_MAX_INPUT_BYTES", "4096")
    version = svc.ledger.version(sid)
    with pytest.raises(InvalidInput, match="bytes, over CTXLEDGER_MAX_INPUT_BYTES"):
        anyio.run(svc.set_system_prompt, sid, text)
    assert svc.ledger.version(sid) == version
    with pytest.raises(InvalidInput, match="bytes, over CTXLEDGER_MAX_INPUT_BYTES"):
        anyio.run(lambda: svc.start_session(model="m", context_length=16_000, system_prompt=text))
    assert anyio.run(svc.set_system_prompt, sid, "\u20ac" * 1300).session_id == sid  # 3,900


def test_a_change_already_recorded_by_another_worker_still_runs_preflight(tmp_path: Path) -> None:
    svc, sid = _started(tmp_path, prompt="v1")
    anyio.run(svc.set_system_prompt, sid, "v2")  # another worker records the change first
    for turn in SessionSynth(3, big_outputs=False).turns(14):
        sid = _appended(svc, sid, turn)
    assert svc.ledger.transcript.total_tokens(sid) >= SMALL.threshold_tokens(16_000)
    # the caller read "v1" before another worker's change: a preflight runs (review 1)
    assert anyio.run(lambda: svc.set_system_prompt(sid, "v2", seen="v1")).compressed


def test_the_same_prompt_again_over_the_threshold_appends_nothing(tmp_path: Path) -> None:
    """A client that posts its prompt before every call: the same text writes nothing and
    runs no preflight (one would append a CompressionSkipped per call) (review 2)."""
    svc, sid = _started(tmp_path, prompt=_prompt(800))
    assert svc.ledger.transcript.total_tokens(sid) >= SMALL.threshold_tokens(16_000)
    sid = anyio.run(svc.preflight, sid).session_id
    version, held = svc.ledger.version(sid), svc.ledger.transcript.session(sid).system_prompt
    for _ in range(3):
        assert anyio.run(svc.set_system_prompt, sid, held).session_id == sid
    assert svc.ledger.version(sid) == version


def test_the_notes_wording_inside_a_prompt_is_the_prompts_own(tmp_path: Path) -> None:
    """Only a prompt ending with the note as a compaction writes it is a compacted one."""
    quoted = f"Quote: {add_system_note('')} End."
    svc, sid = _started(tmp_path, prompt=quoted)
    anyio.run(svc.set_system_prompt, sid, "You are v2.")
    assert svc.ledger.transcript.session(sid).system_prompt == "You are v2."


@pytest.mark.parametrize("change", [False, True])
def test_a_what_if_under_a_lower_limit_replays_a_larger_recorded_prompt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, change: bool
) -> None:
    """A prompt recorded under a higher CTXLEDGER_MAX_INPUT_BYTES replays as recorded."""
    big = "P" * 6000
    svc, sid = _started(tmp_path, prompt="short" if change else big)
    for turn in SessionSynth(5, big_outputs=False).turns(3):
        sid = _appended(svc, sid, turn)
    if change:
        sid = anyio.run(svc.set_system_prompt, sid, big).session_id
        sid = _appended(svc, sid, [{"role": "user", "content": "again"}])
    monkeypatch.setenv("CTXLEDGER_MAX_INPUT_BYTES", "4096")
    assert whatif(svc.ledger, svc.ledger.chains.root(sid)).reproduces_recorded


def _appended(svc: ContextService, sid: str, messages: list[dict[str, object]]) -> str:
    return anyio.run(svc.append, sid, messages).session_id


def test_a_change_on_a_compacted_chain_keeps_the_compaction_note(tmp_path: Path) -> None:
    """The note is the ledger's: kept when the tip has it (from the stale root id too, as
    the state API or a LangChain worker that read before a compaction passes it), and
    taken out of a caller's text when the tip has none."""
    svc, sid = _started(tmp_path, prompt="You are v1.")
    for turn in SessionSynth(3, big_outputs=False).turns(4):
        _appended(svc, sid, turn)
    tip = compact_now(svc.ledger, sid, trigger="manual").new_session_id
    assert tip is not None and has_system_note(svc.ledger.transcript.session(tip).system_prompt)
    assert anyio.run(svc.set_system_prompt, sid, "You are v2.").session_id == tip
    assert svc.ledger.transcript.session(tip).system_prompt == add_system_note("You are v2.")
    assert set_system_prompt(svc.ledger, tip, "You are v3.")
    assert svc.api_messages(tip)[0]["content"] == add_system_note("You are v3.")
    assert not set_system_prompt(svc.ledger, tip, add_system_note("You are v3."))
    (tmp_path / "o").mkdir()
    other, root = _started(tmp_path / "o")
    assert set_system_prompt(other.ledger, root, add_system_note("v4"))
    assert other.ledger.transcript.session(root).system_prompt == "v4"


def test_an_ended_session_takes_no_prompt(tmp_path: Path) -> None:
    svc, sid = _started(tmp_path)
    anyio.run(svc.end_session, sid)
    with pytest.raises(SessionEndedError):
        anyio.run(svc.set_system_prompt, sid, "new")


# --------------------------------------------------------------------------- projections


def test_counts_view_and_preflight_use_the_current_prompt(tmp_path: Path) -> None:
    svc, sid = _started(tmp_path)
    t = svc.ledger.transcript
    synth = SessionSynth(5, big_outputs=False)
    for turn in list(synth.turns(2)):
        anyio.run(svc.append, sid, turn)
    before_total, before_rough = t.total_tokens(sid), t.rough_tokens(sid)
    grown = _prompt(40)
    result = anyio.run(svc.set_system_prompt, sid, grown)
    assert not result.compressed  # still under the threshold
    added = t.session(sid).system_tokens - _prompt_events(svc.ledger, sid)[0].tokens
    assert added > 300
    assert t.total_tokens(sid) == before_total + added
    assert t.rough_tokens(sid) > before_rough + 300
    assert svc.api_messages(sid)[0] == {"role": "system", "content": grown}


def test_a_grown_prompt_compacts_and_the_continuation_carries_it(tmp_path: Path) -> None:
    svc, sid = _started(tmp_path)
    synth = SessionSynth(5, big_outputs=False)
    for turn in list(synth.turns(4)):
        anyio.run(svc.append, sid, turn)
    assert not anyio.run(svc.preflight, sid).compressed
    grown = _prompt(300)  # ~3.6K tokens: past SMALL's threshold with the history
    result = anyio.run(svc.set_system_prompt, sid, grown)
    assert result.compressed and result.session_id != sid
    switch = next(
        r.event for r in svc.ledger.store.read_stream(sid) if isinstance(r.event, SessionSwitched)
    )
    assert switch.system_prompt is not None and switch.system_prompt.startswith(grown.rstrip())
    continuation = svc.ledger.transcript.session(result.session_id)
    assert continuation.system_prompt == switch.system_prompt
    assert svc.api_messages(result.session_id)[0]["content"] == switch.system_prompt


# --------------------------------------------------------------------------- replay


def _with_prompts(steps: list[Step], at: dict[int, int]) -> list[Step]:
    """`steps` with a prompt of size ``at[i]`` set before user turn ``i``."""
    out: list[Step] = []
    turn = 0
    for step in steps:
        if isinstance(step, AppendStep) and step.user_turn:
            if turn in at:
                out.append(SystemStep(text=_prompt(at[turn])))
            turn += 1
        out.append(step)
    return out


def _record(path: Path, steps: list[Step], prompt: str | None = "short", **start: object) -> Ledger:
    ledger = deterministic_ledger(path)
    info = StartInfo(session_id="ses_p", model="m", context_length=16_000, system_prompt=prompt)
    info = msgspec.structs.replace(info, **start)
    svc = ContextService(ledger, config=SMALL)
    anyio.run(lambda: start_and_drive(svc, info, steps))
    return ledger


def _same_chain(ledger: Ledger) -> None:
    report = whatif(ledger, "ses_p")
    assert report.reproduces_recorded, report.reproduction.differences
    with replay_history(history(ledger, "ses_p")) as (scratch, result):
        tip = ledger.chains.tip("ses_p")
        assert chain_signature(scratch, result.session_id) == chain_signature(ledger, tip)
        assert scratch.api_messages(result.session_id) == ledger.api_messages(tip)
        assert [e.text for e in _prompt_events(scratch, result.session_id)] == [
            e.text for e in _prompt_events(ledger, tip)
        ]


def test_a_recorded_prompt_change_is_replayed_at_its_position(tmp_path: Path) -> None:
    synth = SessionSynth(3, big_outputs=False)
    base = scripted_steps(synth.turns(16))
    changes = {3: 60, 7: 160, 11: 20}
    ledger = _record(tmp_path / "p.db", _with_prompts(base, changes))
    hist = history(ledger, "ses_p")
    assert hist.start.system_prompt == "short"
    # (a change on a compacted tip keeps the note: review 1)
    assert [
        strip_system_note(s.text).rstrip() for s in hist.steps if isinstance(s, SystemStep)
    ] == [_prompt(n).rstrip() for n in changes.values()]
    _same_chain(ledger)
    # the changes matter: the same turns on the start prompt alone compact otherwise
    plain = _record(tmp_path / "q.db", base)
    assert chain_signature(plain, plain.chains.tip("ses_p")) != chain_signature(
        ledger, ledger.chains.tip("ses_p")
    )
    assert not verify_compactions(ledger, "ses_p").drifted
    assert rebuild_check(ledger, "ses_p").equal


def test_a_what_if_that_compacts_before_a_change_keeps_the_note(tmp_path: Path) -> None:
    """Recorded: the change before the first compaction. A lower threshold compacts
    before it: the change is replayed on a compacted tip and keeps the note there."""
    steps = _with_prompts(scripted_steps(SessionSynth(3, big_outputs=False).turns(10)), {3: 2})
    ledger = _record(tmp_path / "p.db", steps, prompt="You are v1.")
    root = ledger.store.read_stream("ses_p")
    assert _prompt(2) in [r.event.text for r in root if isinstance(r.event, SystemPromptSet)]
    low = msgspec.structs.replace(SMALL, threshold=0.12)
    with replay_history(history(ledger, "ses_p"), config=low) as (scratch, result):
        prompts = [e.text for e in _prompt_events(scratch, result.session_id)]
        assert add_system_note(_prompt(2)) in prompts and _prompt(2) not in prompts
        tip_prompt = scratch.transcript.session(result.session_id).system_prompt
        assert tip_prompt is not None and has_system_note(tip_prompt)


def test_a_trajectory_continuation_is_the_ledgers_own() -> None:
    """``trajectories compress`` writes its continuation itself (``source="trajectory:…"``):
    its event 2 is a change, as in the ledger's own continuations; an importer's is not."""
    from ctxledger.analysis.history import _native_continuation
    from ctxledger.events import SessionStarted

    def started(source: str | None) -> SessionStarted:
        return SessionStarted(
            event_id="e",
            session_id="s",
            at=0.0,
            model="m",
            context_length=16_000,
            reason="compression",
            parent_session_id="p",
            source=source,
        )

    assert _native_continuation(started("trajectory:abc"))
    assert _native_continuation(started(None))
    assert not _native_continuation(started("hermes"))


def test_a_root_with_tools_and_no_prompt_replays_a_later_prompt_as_a_change(
    tmp_path: Path,
) -> None:
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    synth = SessionSynth(4, big_outputs=False)
    steps = [SystemStep(text=_prompt(30)), *scripted_steps(synth.turns(6))]
    ledger = _record(tmp_path / "p.db", steps, prompt=None, tools=tools)
    hist = history(ledger, "ses_p")
    assert hist.start.system_prompt is None and hist.start.tools == tools
    assert isinstance(hist.steps[0], SystemStep)
    _same_chain(ledger)


def test_a_change_as_a_continuations_event_2_is_a_change(tmp_path: Path) -> None:
    """A compaction's continuation carries its prompt in the switch: its event 2 is a
    change (an importer's session starts with its prompt there, see the next test)."""
    ledger = deterministic_ledger(tmp_path / "c.db")
    sid = session_with_turns(ledger, 6)
    tip = compact_now(ledger, sid, trigger="manual").new_session_id
    assert tip is not None
    assert set_system_prompt(ledger, tip, _prompt(25))
    changed = [r for r in ledger.store.read_stream(tip) if isinstance(r.event, SystemPromptSet)]
    assert [r.version for r in changed] == [2]
    assert [s.text for s in history(ledger, sid).steps if isinstance(s, SystemStep)] == [
        add_system_note(_prompt(25))  # a compacted tip keeps the note (review 1)
    ]


def test_an_imported_chain_has_no_prompt_steps(tmp_path: Path) -> None:
    """An importer starts each session of a chain with its prompt (event 2): not a change."""
    ledger = deterministic_ledger(tmp_path / "i.db")
    user = {"role": "user", "content": "hi"}
    first = ImportedSession(
        key="a",
        source_format="openai",
        messages=[user],
        system_prompt="one",
        end_reason="compression",
    )
    second = ImportedSession(
        key="b", source_format="openai", messages=[user], system_prompt="two", parent_key="a"
    )
    sids = import_sessions(ledger, [first, second], model="m", context_length=16_000)
    assert ledger.chains.chain(sids[0]) == sids
    assert len(_prompt_events(ledger, sids[0])) == 2
    hist = history(ledger, sids[0])
    assert hist.start.system_prompt == "one"
    assert not [s for s in hist.steps if isinstance(s, SystemStep)]


@settings(max_examples=5, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    changes=st.dictionaries(st.integers(0, 9), st.integers(0, 200), max_size=5),
)
def test_replay_of_sessions_with_random_prompt_changes_is_exact(
    tmp_path_factory: pytest.TempPathFactory, seed: int, changes: dict[int, int]
) -> None:
    synth = SessionSynth(seed, big_outputs=False)
    steps = _with_prompts(scripted_steps(synth.turns(10)), changes)
    ledger = _record(tmp_path_factory.mktemp("h") / "p.db", steps)
    _same_chain(ledger)
    assert not verify_compactions(ledger, "ses_p").drifted
    ledger.close()
