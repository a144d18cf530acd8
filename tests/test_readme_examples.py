"""Every Python block of the README runs as written: each is executed (top-level ``await``
allowed) with only the names it leaves to the reader defined (``SYSTEM``, ``call_model``,
``agent``, ``model``, …), against a scratch ledger, the offline summarizer and a fake
model upstream on 127.0.0.1. A new Python block must get a runner here; the JSON the
README shows for the state API and an aborted ``compress`` is compared with the real one."""

from __future__ import annotations

import ast
import json
import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from click.testing import CliRunner
from helpers import readme
from helpers.fake_upstream import Error, FakeUpstream
from helpers.frameworks import require
from helpers.uvicorn_thread import serving

from ctxledger import ContextService, Ledger
from ctxledger.cli.main import cli
from ctxledger.server import create_app

os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")


def run_block(
    first_line: str, names: dict[str, Any], *, replace: tuple[str, str] = ("", "")
) -> dict[str, Any]:
    """Execute the README block starting with `first_line` in a namespace holding
    `names`; top-level ``await`` is run on an event loop. Returns the namespace."""
    src = (
        readme.block(first_line).body.replace(*replace)
        if replace[0]
        else readme.block(first_line).body
    )
    code = compile(src, f"README.md:{first_line}", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)

    result = eval(code, names)  # the README's own example
    if result is not None:  # a coroutine: the block awaits at top level

        async def main() -> None:
            await result

        anyio.run(main)
    return names


@pytest.fixture
def scratch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")  # what the Responses block's client reads
    for var in [v for v in os.environ if v.startswith("CTXLEDGER_")]:
        monkeypatch.delenv(var)
    return tmp_path


@pytest.fixture(scope="module")
def upstream() -> Iterator[tuple[FakeUpstream, str]]:
    fake = FakeUpstream()
    with serving(fake) as port:
        yield fake, f"http://127.0.0.1:{port}/v1"


# --- the Python blocks -------------------------------------------------------------------


class _Stop(Exception):
    """Ends the README's `while True` agent loop after a few turns."""


class ProviderError(Exception):
    def __init__(self, status: int, body: Any) -> None:
        super().__init__(status)
        self.status, self.body = status, body


def _agent_loop(scratch: Path, upstream: Any) -> None:
    calls = 0

    async def call_model(messages: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, int]]:
        nonlocal calls
        calls += 1
        if calls > 5:
            raise _Stop
        if calls == 3:  # a max-tokens complaint: handled, the loop goes on
            raise ProviderError(
                400,
                {
                    "error": {
                        "message": "max_tokens is too large: 4096. "
                        "This model supports at most 2048 completion tokens"
                    }
                },
            )
        reply = {"role": "assistant", "content": f"step {calls}: edited src/app.py"}
        return reply, {"prompt_tokens": 500 * calls, "completion_tokens": 12}

    names: dict[str, Any] = {
        "SYSTEM": "You are a coding agent.",
        "TOOLS": [],
        "ask": "fix the bug",
        "call_model": call_model,
        "ProviderError": ProviderError,
        "tool_results": [],
    }
    with pytest.raises(_Stop):
        run_block("from ctxledger import ContextService", names)
    svc, sid = names["svc"], names["sid"]

    async def after() -> None:  # the calls the paragraph under the block names
        turn = await svc.compress(sid, focus="the auth bug")
        assert turn.compactions and turn.compactions[0].action == "compressed"
        assert [t["function"]["name"] for t in svc.tools()] == ["read_persisted"]

    anyio.run(after)
    assert calls == 6 and (scratch / "agent.ledger.db").exists()


def _core(scratch: Path, upstream: Any) -> None:
    messages = []
    for i in range(20):
        messages += [
            {"role": "user", "content": f"question {i} about tests/test_{i}.py " + "w " * 150},
            {"role": "assistant", "content": f"answer {i}: 1 failed, 5 passed " + "v " * 150},
        ]
    names = run_block("from functools import partial", {"messages": messages})
    assert names["outcome"].action == "compressed"
    view = names["ledger"].api_messages(names["outcome"].new_session_id)
    assert 3 < len(view) < len(messages)


def _openai_agents(scratch: Path, upstream: Any) -> None:
    require("agents", "agents")
    import openai
    from agents import Agent, OpenAIResponsesModel

    client = openai.AsyncOpenAI(base_url=upstream[1], api_key="sk-test", max_retries=0)
    agent = Agent(
        name="helper",
        instructions="Be brief.",
        model=OpenAIResponsesModel(model="gpt-4.1", openai_client=client),
    )
    names = run_block("from agents import Runner", {"agent": agent})
    assert names["result"].final_output
    assert [tool.name for tool in names["agent"].tools] == ["read_persisted"]
    with Ledger.open(scratch / "agents.ledger.db") as ledger:
        # the agent's prompt (the example gives agent=), the question, the answer
        assert [m["role"] for m in ledger.api_messages("user-42")] == [
            "system",
            "user",
            "assistant",
        ]
        assert ledger.transcript.session("user-42").system_prompt == "Be brief."


def _langchain(scratch: Path, upstream: Any) -> None:
    require("langchain.agents", "langchain")
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage
    from langgraph.checkpoint.memory import InMemorySaver

    usage = {"input_tokens": 30, "output_tokens": 2, "total_tokens": 32}
    model = GenericFakeChatModel(messages=iter([AIMessage(content="done", usage_metadata=usage)]))
    names = run_block(
        "from langchain.agents import create_agent",
        {"model": model, "tools": [], "PROMPT": "Be brief.", "saver": InMemorySaver()},
    )
    out = names["agent"].invoke(
        {"messages": [{"role": "user", "content": "hi"}]}, {"configurable": {"thread_id": "t1"}}
    )
    assert out["messages"][-1].content == "done"
    with Ledger.open(scratch / "lc.ledger.db") as ledger:
        assert len(ledger.api_messages("langchain:t1")) == 3


def _responses_through_the_proxy(scratch: Path, upstream: Any) -> None:
    require("openai", "server-test")
    service = ContextService.open(scratch / "proxy.db")
    app = create_app(service, own_service=True, upstream=upstream[1])
    with serving(app) as port:
        names = run_block("import openai", {}, replace=("127.0.0.1:8765", f"127.0.0.1:{port}"))
    assert names["res"].output_text and len(names["items"]) == 2
    with Ledger.open(scratch / "proxy.db") as ledger:
        assert len(ledger.api_messages("task-7")) == 3


RUNNERS: dict[str, Callable[[Path, Any], None]] = {
    "from ctxledger import ContextService": _agent_loop,
    "from functools import partial": _core,
    "from agents import Runner": _openai_agents,
    "from langchain.agents import create_agent": _langchain,
    "import openai": _responses_through_the_proxy,
}


def test_every_python_block_has_a_runner() -> None:
    firsts = [b.first_line for b in readme.blocks("python")]
    assert sorted(firsts) == sorted(RUNNERS), "a README Python block without a runner here"


@pytest.mark.parametrize("first_line", list(RUNNERS))
def test_python_block_runs(first_line: str, scratch: Path, upstream: Any) -> None:
    RUNNERS[first_line](scratch, upstream)


# --- JSON the README shows -----------------------------------------------------------------


def _matches(shown: str, real: str) -> bool:
    """`real` fits `shown`, where each `…` of `shown` stands for any text."""
    pattern = ".*".join(re.escape(part.strip()) for part in shown.split("…"))
    return re.fullmatch(pattern, real, re.S) is not None


def test_an_aborted_compress_prints_what_the_readme_shows(scratch: Path, upstream: Any) -> None:
    fake, base = upstream
    key = "sk-proj-" + "a1b2c3d4" * 5
    with Ledger.open(scratch / "l.db") as ledger:
        sid = ledger.start_session(model="gpt-4.1", context_length=128_000, system_prompt="s")
        ledger.append_messages(
            sid,
            [
                {"role": "user", "content": f"ask {i} " + "w " * 200}
                if i % 2 == 0
                else {"role": "assistant", "content": f"done {i}"}
                for i in range(16)
            ],
        )
    fake.queue(Error(401, {"error": {"message": f"Incorrect API key provided: {key}"}}))
    env = {
        "CTXLEDGER_SUMMARY_API": "openai",
        "CTXLEDGER_SUMMARY_BASE_URL": base,
        "CTXLEDGER_SUMMARY_API_KEY": key,
    }
    result = CliRunner().invoke(
        cli,
        ["--db", str(scratch / "l.db"), "compress", sid, "--summarizer", "llm", "--json"],
        env=env,
    )
    assert result.exit_code == 1, result.output
    real = json.loads(result.stdout)
    shown = json.loads(readme.block('{"session_id": "...", "action": "aborted"').body)
    assert set(real) == set(shown)
    assert (real["action"], real["failure_class"]) == (shown["action"], shown["failure_class"])
    assert _matches(shown["failure"], real["failure"]), real["failure"]
    assert key not in result.output and real["messages_before"] == 17


def test_the_state_api_preflight_answers_what_the_readme_shows(scratch: Path) -> None:
    line = next(x for x in readme.block("T=$(cat token)").body.splitlines() if "/preflight" in x)
    shown = set(re.findall(r'"(\w+)":', line.split("# →", 1)[1]))
    service = ContextService.open(scratch / "api.db")
    app = create_app(service, own_service=True)

    async def main() -> dict[str, Any]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as http:
            body = {"model": "gpt-4.1", "context_length": 128000, "system_prompt": "Be brief."}
            sid = (await http.post("/v1/sessions", json=body)).json()["session_id"]
            msgs = {"messages": [{"role": "user", "content": "hi"}], "expected_version": 2}
            assert (await http.post(f"/v1/sessions/{sid}/messages", json=msgs)).status_code == 200
            answer: dict[str, Any] = (await http.post(f"/v1/sessions/{sid}/preflight")).json()
        await app.state.ctx.aclose()
        await service.aclose()
        return answer

    assert set(anyio.run(main)) == shown
