"""The state API names the client's agent loop (session 39): ``agent_loop`` in
``POST /v1/sessions`` is recorded in ``SessionStarted.config`` (as the adapters record
theirs), so a what-if of the session checks for compaction where the client did. An
unknown value is a 422 naming the field, with nothing appended; without one the start
is recorded as before (no key: the ``hermes`` loop)."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.server_rig import rig

from ctxledger.analysis.whatif import history
from ctxledger.events import SessionStarted
from ctxledger.ledger.spec import LOOP_KEY

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _config(r, sid: str) -> dict:
    [start] = [
        rec.event
        for rec in r.service.ledger.store.read_all()
        if isinstance(rec.event, SessionStarted) and rec.event.session_id == sid
    ]
    return start.config


async def test_a_client_names_its_agent_loop_when_it_starts_a_session(tmp_path: Path) -> None:
    async with rig(tmp_path) as r:
        for sid, loop in (("a", "every_call"), ("b", "per_run"), ("c", "hermes")):
            body = {"model": "m", "session_id": sid, "agent_loop": loop}
            assert (await r.http.post("/v1/sessions", json=body)).status_code == 201
            assert _config(r, sid)[LOOP_KEY] == loop
            assert history(r.service.ledger, sid).start.loop == loop  # what a what-if replays
        res = await r.http.post("/v1/sessions", json={"model": "m", "session_id": "d"})
        assert res.status_code == 201
        assert LOOP_KEY not in _config(r, "d")  # not said: recorded as before


CHOICES = "agent_loop must be one of hermes, every_call, per_run"


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ("fast", f"{CHOICES} (got 'fast')"),
        ("Every_Call", CHOICES),
        ("", CHOICES),
        (7, "field 'agent_loop' must be of type string"),
        (["per_run"], "field 'agent_loop' must be of type string"),
    ],
)
async def test_an_unknown_agent_loop_is_a_422_and_starts_nothing(
    tmp_path: Path, value: object, said: str
) -> None:
    async with rig(tmp_path) as r:
        before = r.last_seq()
        body = {"model": "m", "session_id": "x", "agent_loop": value}
        res = await r.http.post("/v1/sessions", json=body)
        assert res.status_code == 422 and said in res.json()["error"]["message"]
        assert r.last_seq() == before
        assert "x" not in r.service.ledger.transcript.state.sessions


async def test_a_branch_takes_its_parent_s_loop_unless_it_names_one(tmp_path: Path) -> None:
    """Session 40: a branch started through the API without ``agent_loop`` recorded none
    (a what-if replayed it in the ``hermes`` loop) though its parent named one. A branch
    is the same conversation, forked: it takes the parent's loop, a loop it
    names wins; a delegate (another agent) takes none."""
    async with rig(tmp_path) as r:
        body = {"model": "m", "session_id": "p", "agent_loop": "per_run"}
        assert (await r.http.post("/v1/sessions", json=body)).status_code == 201
        starts = {
            "b": {"reason": "branch"},
            "e": {"reason": "branch", "agent_loop": "every-call"},
            "d": {"reason": "delegate"},
        }
        for sid, extra in starts.items():
            body = {"model": "m", "session_id": sid, "parent_session_id": "p", **extra}
            assert (await r.http.post("/v1/sessions", json=body)).status_code == 201
        assert _config(r, "b")[LOOP_KEY] == "per_run"
        assert history(r.service.ledger, "b").start.loop == "per_run"
        assert _config(r, "e")[LOOP_KEY] == "every_call"
        assert LOOP_KEY not in _config(r, "d")
        body = {"model": "m", "session_id": "q", "parent_session_id": "d", "reason": "branch"}
        assert (await r.http.post("/v1/sessions", json=body)).status_code == 201
        assert LOOP_KEY not in _config(r, "q")  # (its parent named none: as before)
        schema = (await r.http.get("/openapi.json")).json()
        post = schema["paths"]["/v1/sessions"]["post"]["requestBody"]["content"]
        said = post["application/json"]["schema"]["properties"]["agent_loop"]["description"]
        assert said.endswith("(when not given: a branch takes its parent's, else hermes)")
