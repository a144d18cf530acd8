"""Secrets never leave the log: one redactor on every path out, a test per secret kind.

The log keeps the originals. What leaves it — the summary request sent to a model,
the summary a model sends back (even one that echoes secrets), ``audit``/``trace``
output including ``--json`` fact lists, ``recall``/``expand`` in the CLI, as agent
tools and over the HTTP state API — goes through :mod:`ctxledger.compressor.redact`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import click
import httpx
import pytest
from click.testing import CliRunner
from helpers.fake_provider import FakeProvider, Reply
from helpers.ledger_helpers import SMALL, make_ledger

from ctxledger import ContextService, LLMSummarizer, compact, handle_tool_call
from ctxledger.cli.main import cli
from ctxledger.compressor.redact import REDACTED, redact
from ctxledger.events import SummaryGenerated
from ctxledger.server import create_app

HTTP_TOKEN = "token-for-the-secrets-test-0123456789"

JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJ1c2VyLTQyIiwicm9sZSI6ImFkbWluIn0"
    ".Zm9vYmFyYmF6cXV4cXV1eGNvcmdlZ3JhdWx0"
)
PEM_BODY = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7q1"

#: kind -> (a line as it would appear in a transcript, the secret it must not leak)
SECRETS: dict[str, tuple[str, str]] = {
    "aws_key_id": ("export AWS_ACCESS_KEY_ID=AKIAZQ7XJ2LMNPQRSTUV", "AKIAZQ7XJ2LMNPQRSTUV"),
    "aws_secret": (
        "aws_secret_access_key = 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",
        "qR7tY2uI9oP4aS6dF8gH1jK3lZ5xC0vB7nM2wE4r",
    ),
    "github_token": (
        "git clone https://github.com/acme/app using ghp_Q1w2E3r4T5y6U7i8O9p0A1s2D3f4G5h6J7k8",
        "ghp_Q1w2E3r4T5y6U7i8O9p0A1s2D3f4G5h6J7k8",
    ),
    "openai_key": (
        "OPENAI key in use: sk-proj-Zx9Cv8Bn7Mq6Wl5Er4Ty3Ui2Op1As0Df",
        "sk-proj-Zx9Cv8Bn7Mq6Wl5Er4Ty3Ui2Op1As0Df",
    ),
    "anthropic_key": (
        "claude via sk-ant-api03-Pl0Ok9Ij8Uh7Yg6Tf5Rd4Es3Wa2Qz1-XcVbNm",
        "sk-ant-api03-Pl0Ok9Ij8Uh7Yg6Tf5Rd4Es3Wa2Qz1-XcVbNm",
    ),
    "pem_private_key": (
        f"-----BEGIN PRIVATE KEY-----\n{PEM_BODY}\n-----END PRIVATE KEY-----",
        PEM_BODY,
    ),
    "url_password": (
        "DATABASE_URL is postgres://app:Hx7pQ2mZr9vL@db.internal:5432/app",
        "Hx7pQ2mZr9vL",
    ),
    "dotenv_line": ("SENDGRID_API_KEY=SG.k4Jd9sLq.Wm2Xz8Rt5Yv", "SG.k4Jd9sLq.Wm2Xz8Rt5Yv"),
    "dotenv_password": ("  export DB_PASSWORD='pa55-w0rd.Zeta'", "pa55-w0rd.Zeta"),
    "jwt": (f"the session token in the header was {JWT} yesterday", JWT),
    "bearer_header": (
        "curl -H 'Authorization: Bearer Vb7Nm3Kl9Qw2Er5Ty8Ui1Op4' https://api.acme.dev",
        "Vb7Nm3Kl9Qw2Er5Ty8Ui1Op4",
    ),
    "cookie": (
        "Cookie: sessionid=t5Gh8Jk2Lm6Np9Qr3St7; theme=dark",
        "t5Gh8Jk2Lm6Np9Qr3St7",
    ),
}
KINDS = sorted(SECRETS)


@pytest.mark.parametrize("kind", KINDS)
def test_the_redactor_removes_each_secret_kind(kind: str) -> None:
    line, secret = SECRETS[kind]
    out = redact(line)
    assert secret not in out and REDACTED in out, out
    assert redact(out) == out


def _transcript() -> list[dict[str, Any]]:
    """A session whose middle holds every secret: in user prose and in tool output."""
    msgs: list[dict[str, Any]] = []
    for i, kind in enumerate(KINDS):
        line, _ = SECRETS[kind]
        call = {
            "id": f"call_{i}",
            "type": "function",
            "function": {"name": "terminal", "arguments": json.dumps({"command": "cat .env"})},
        }
        msgs += [
            {"role": "user", "content": f"step {i} ({kind}): {line}\n" + "context words " * 120},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"call_{i}", "content": f"{line}\n" + "log " * 200},
            {"role": "assistant", "content": f"noted step {i}"},
        ]
    for j in range(6):
        msgs += [
            {"role": "user", "content": f"later question {j} " + "tail words " * 100},
            {"role": "assistant", "content": f"later answer {j}"},
        ]
    return msgs


class Outputs:
    """Everything that left the log, gathered once for the per-kind checks."""

    def __init__(self) -> None:
        self.texts: dict[str, str] = {}


def _cli(db: Path, *args: str) -> str:
    result: click.testing.Result = CliRunner().invoke(cli, ["--db", str(db), *args])
    assert result.exit_code == 0, (args, result.output)
    return result.output


@pytest.fixture(scope="module")
def outputs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Outputs]:
    db = tmp_path_factory.mktemp("secrets") / "l.db"
    ledger = make_ledger(db, SMALL)
    sid = ledger.start_session(model="m", context_length=16_000, system_prompt="agent")
    ledger.append_messages(sid, _transcript())
    out = Outputs()
    with FakeProvider() as provider:
        # a model that echoes every secret it was (not) shown into its summary
        echo = "\n".join(line for line, _ in SECRETS.values())
        provider.default = Reply("## Active Task\nDeploy.\n\n## Goal\nShip.\n\n" + echo)
        summarizer = LLMSummarizer(
            api="openai",
            base_url=provider.openai_base_url,
            model="summary-model",
            api_key="k",
            env={},
        )

        async def run() -> Any:
            return await compact(ledger, sid, summarizer, focus="deploy")

        outcome = anyio.run(run)
        out.texts["summary request"] = "\n".join(r.body.decode() for r in provider.requests)
    assert outcome.new_session_id and provider.requests
    tip, cmp = outcome.new_session_id, outcome.compaction_id
    summaries = [
        r.event.text for r in ledger.store.read_all() if isinstance(r.event, SummaryGenerated)
    ]
    out.texts["stored summary"] = "\n".join(t or "" for t in summaries)
    out.texts["recall tool"] = handle_tool_call(
        ledger, tip, "recall", json.dumps({"query": "step", "limit": 50})
    )
    out.texts["expand tool"] = handle_tool_call(
        ledger, tip, "expand_compaction", json.dumps({"compaction_id": cmp, "limit": 100})
    )
    ledger.close()
    out.texts["audit --json"] = _cli(db, "audit", tip, "--json")
    out.texts["audit compaction --json"] = _cli(db, "audit", cmp, "--json")
    out.texts["audit --all"] = _cli(db, "audit", tip, "--all")
    for kind in KINDS:  # the query is the line as the user saw it (a bare value is theirs)
        out.texts[f"trace {kind}"] = _cli(db, "trace", "--json", tip, "--", SECRETS[kind][0])
    out.texts["recall --json"] = _cli(db, "recall", tip, "step", "--limit", "50", "--json")
    out.texts["recall"] = _cli(db, "recall", tip, "step", "--limit", "50")
    out.texts["recall jwt"] = _cli(db, "recall", tip, "session token header", "--json")
    out.texts["expand --json"] = _cli(db, "expand", cmp, "--json")
    out.texts["expand"] = _cli(db, "expand", cmp)
    out.texts.update(anyio.run(_over_http, db, tip, cmp))
    yield out


async def _over_http(db: Path, tip: str, cmp: str) -> dict[str, str]:
    """The same reads through the HTTP state API."""
    service = ContextService.open(db, config=SMALL)
    app = create_app(service, token=HTTP_TOKEN)
    texts: dict[str, str] = {}
    paths = {
        "http audit": f"/v1/sessions/{tip}/audit",
        "http audit compaction": f"/v1/compactions/{cmp}/audit",
        "http recall": f"/v1/sessions/{tip}/recall?query=step&limit=50",
        "http expand": f"/v1/compactions/{cmp}/expand",
    }
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://ledger.test"
    ) as client:
        headers = {"Authorization": f"Bearer {HTTP_TOKEN}"}
        for name, path in paths.items():
            resp = await client.get(path, headers=headers)
            assert resp.status_code == 200, resp.text
            texts[name] = resp.text
        for kind in KINDS:
            resp = await client.get(
                f"/v1/sessions/{tip}/trace", params={"fact": SECRETS[kind][0]}, headers=headers
            )
            assert resp.status_code == 200, resp.text
            texts[f"http trace {kind}"] = resp.text
    await app.state.ctx.aclose()
    await service.aclose()
    return texts


@pytest.mark.parametrize("kind", KINDS)
def test_no_secret_kind_leaves_the_log_on_any_path(outputs: Outputs, kind: str) -> None:
    secret = SECRETS[kind][1]
    leaks = [path for path, text in outputs.texts.items() if secret in text]
    assert not leaks, f"{kind} leaked through {leaks}"


def test_the_outputs_are_not_empty(outputs: Outputs) -> None:
    # the checks above mean something only if the paths carried the messages
    assert REDACTED in outputs.texts["stored summary"]
    assert REDACTED in outputs.texts["expand --json"]
    assert "step" in outputs.texts["recall --json"]
    assert json.loads(outputs.texts["audit --json"])["compactions"]
    assert json.loads(outputs.texts["http audit"])["compactions"]
