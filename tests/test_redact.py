"""Secret redaction: every credential shape becomes [REDACTED], the text around it stays."""

from __future__ import annotations

import copy
import json
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxledger.compressor.redact import REDACTED, redact, redact_message

OPENAI_KEY = "sk-proj-" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4"
ANTHROPIC_KEY = "sk-ant-api03-" + "Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2"
GITHUB_TOKEN = "ghp_" + "a" * 20 + "B" * 16
GITHUB_PAT = "github_pat_11ABCDEFG0" + "x" * 30
SLACK_TOKEN = "xoxb-" + "123456789012-abcdefghijkl"
AWS_KEY_ID = "AKIA" + "IOSFODNN7EXAMPL1"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"

CASES = [
    (f"export OPENAI_API_KEY={OPENAI_KEY}", "export OPENAI_API_KEY=[REDACTED]"),
    (f"using {ANTHROPIC_KEY} now", "using [REDACTED] now"),
    ("api_key=abc123def456&user=bob", "api_key=[REDACTED]&user=bob"),
    (
        'curl -H "Authorization: Bearer eyJhbGciOi.payload.sig" x',
        'curl -H "Authorization: Bearer [REDACTED]" x',
    ),
    ("Authorization: Basic dXNlcjpwYXNzd29yZA==", "Authorization: Basic [REDACTED]"),
    ("got bearer abcdefghij123 back", "got bearer [REDACTED] back"),
    ("password=hunter22 rest", "password=[REDACTED] rest"),
    ('{"password": "s3cr3t!", "user": "bob"}', '{"password": "[REDACTED]", "user": "bob"}'),
    ("DB_PASSWORD='my pass word'", "DB_PASSWORD='[REDACTED]'"),
    ("mysql --password=foo123 -u root", "mysql --password=[REDACTED] -u root"),
    (
        "postgres://app:supersecret@db.internal:5432/main",
        "postgres://app:[REDACTED]@db.internal:5432/main",
    ),
    (
        "mongodb+srv://admin:p%40ss@cluster0.example.net/test",
        "mongodb+srv://admin:[REDACTED]@cluster0.example.net/test",
    ),
    (f"token {GITHUB_TOKEN} done", "token [REDACTED] done"),
    (f"pat {GITHUB_PAT}", "pat [REDACTED]"),
    (f"slack {SLACK_TOKEN}.", "slack [REDACTED]."),
    (f"key id {AWS_KEY_ID}.", "key id [REDACTED]."),
    (f"aws_secret_access_key = {AWS_SECRET}", "aws_secret_access_key = [REDACTED]"),
    (r"{\"api_key\": \"abc123xyz\"}", r"{\"api_key\": \"[REDACTED]\"}"),
]


@pytest.mark.parametrize(("text", "expected"), CASES)
def test_each_secret_shape_is_redacted_keeping_its_surroundings(text: str, expected: str) -> None:
    assert redact(text) == expected


def test_private_key_block_keeps_its_armor_lines() -> None:
    block = (
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\nq83hfh==\n-----END RSA PRIVATE KEY-----"
    )
    out = redact(f"key:\n{block}\nafter")
    assert "MIIEowIBAAKCAQEA" not in out and "q83hfh" not in out
    assert out == (
        "key:\n-----BEGIN RSA PRIVATE KEY-----\n[REDACTED]\n-----END RSA PRIVATE KEY-----\nafter"
    )


def test_truncated_private_key_block_is_redacted_to_its_end() -> None:
    out = redact("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk\nAAAABG5vbmU=\n")
    assert "b3BlbnNzaC1rZXk" not in out and REDACTED in out


@pytest.mark.parametrize(
    "text",
    [
        "sort_key=lambda x: x, primary_key=True, monkey: banana",
        "max_tokens: 1024, tokens: 55, token: 5",
        "password = settings.DB_PASSWORD",
        "password = os.environ['DB_PASSWORD']",
        "http://localhost:8080/path@x",
        "the task-abcdefghijklmnopqrstuvwxyz0123 is done",
        "The password is required; the secret: ok",
        'password: "${DB_PASSWORD}"',
        "see https://example.com/docs?page=2",
    ],
)
def test_ordinary_text_and_code_are_left_alone(text: str) -> None:
    assert redact(text) == text


_fragments = st.sampled_from(
    [t for t, _ in CASES] + ["plain words ", "\n", " = ", '"', "'", "x" * 30, "password", ": "]
)


@given(st.lists(_fragments, max_size=12).map("".join))
def test_redaction_is_idempotent(text: str) -> None:
    once = redact(text)
    assert redact(once) == once


def _removed(text: str, expected: str) -> str:
    """The part of `text` that `expected` replaced with [REDACTED]."""
    head = expected.index(REDACTED)
    tail = len(expected) - head - len(REDACTED)
    return text[head : len(text) - tail]


@given(
    st.sampled_from(CASES),
    st.text(alphabet=st.characters(codec="ascii", exclude_characters="\\"), max_size=30),
    st.text(alphabet=st.characters(codec="ascii", exclude_characters="\\"), max_size=30),
)
def test_secret_values_never_survive_whatever_surrounds_them(
    case: tuple[str, str], before: str, after: str
) -> None:
    text, expected = case
    secret = _removed(text, expected)
    assert secret not in redact(f"{before} {text} {after}")


def test_redact_message_copies_and_redacts_content_parts_and_tool_arguments() -> None:
    message = {
        "role": "assistant",
        "content": [
            {"type": "text", "text": f"key {OPENAI_KEY}"},
            {"type": "image_url", "image_url": {}},
        ],
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {
                    "name": "terminal",
                    "arguments": json.dumps(
                        {"command": f"export T={GITHUB_TOKEN}", "password": "pw-123456"}
                    ),
                },
            }
        ],
        "reasoning_content": f"the key is {ANTHROPIC_KEY}",
    }
    original = copy.deepcopy(message)
    out = redact_message(message)
    assert message == original
    assert out["content"][0]["text"] == "key [REDACTED]"
    assert out["content"][1] == message["content"][1]
    args = json.loads(out["tool_calls"][0]["function"]["arguments"])
    assert args == {"command": "export T=[REDACTED]", "password": REDACTED}
    assert out["reasoning_content"] == "the key is [REDACTED]"


def test_megabytes_of_tool_output_redact_quickly() -> None:
    line = "2026-01-01 12:00:00 INFO worker-3 processed item 12345 in 0.42s (token count 512)\n"
    text = line * 25_000 + f"password={OPENAI_KEY}\n" + line * 25_000
    assert len(text) > 3_000_000
    start = time.perf_counter()
    out = redact(text)
    elapsed = time.perf_counter() - start
    assert out.count(REDACTED) == 1
    assert elapsed < 2.0, f"redacting {len(text):,} chars took {elapsed:.2f}s"
