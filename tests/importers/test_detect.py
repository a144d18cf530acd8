"""Format detection and loading."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers.import_fixtures import (
    anthropic_conversation,
    assert_valid,
    claude_code_lines,
    codex_lines,
    jsonl,
    make_hermes_db,
    openai_conversation,
    sharegpt_record,
    write,
)

from ctxledger.errors import ImportFormatError
from ctxledger.importers.detect import detect_format, load, load_text
from ctxledger.importers.model import ImportedSession
from ctxledger.importers.openai import parse_openai


def test_detect_and_load_every_format(tmp_path: Path) -> None:
    files = {
        "openai": write(tmp_path, "o.jsonl", jsonl(openai_conversation()["messages"])),
        "anthropic": write(tmp_path, "a.json", json.dumps(anthropic_conversation(), indent=2)),
        "sharegpt": write(tmp_path, "s.jsonl", jsonl([sharegpt_record()])),
        "claude_code": write(tmp_path, "c.jsonl", jsonl(claude_code_lines())),
        "codex": write(tmp_path, "r.jsonl", jsonl(codex_lines())),
        "hermes_db": make_hermes_db(tmp_path / "state.db"),
    }
    for fmt, path in files.items():
        assert detect_format(path) == fmt, fmt
        assert detect_format(str(path)) == fmt, fmt
        sessions = load(path)
        assert_valid(sessions)
        assert all(s.source_format == fmt for s in sessions)
    assert load_text(files["codex"].read_text(), path="-")[0].source_format == "codex"
    assert load(None, "claude-code", text=files["claude_code"].read_text())[-1].key == "sess-cc"
    assert load(files["hermes_db"], "hermes-db")[0].key == "s1"
    with pytest.raises(ImportFormatError, match="read from a file"):
        load_text("x", "hermes_db")
    with pytest.raises(ImportFormatError, match="unknown import format"):
        load(files["openai"], "xml")


def test_load_reads_the_file_once_and_parses_the_text_it_detected_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os

    from ctxledger.importers import detect

    path = write(tmp_path, "o.jsonl", jsonl(openai_conversation()["messages"]))
    opened: list[str] = []
    os_open = os.open

    def counting_open(file: Any, *args: Any, **kwargs: Any) -> Any:
        opened.append(str(file))
        return os_open(file, *args, **kwargs)

    def no_second_read(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the file was read again")

    parsed: list[str] = []
    real = detect.IMPORTERS["openai"]

    def parse(text: str, *, path: str | None = None) -> list[ImportedSession]:
        parsed.append(text)
        return real(text, path=path)

    monkeypatch.setattr(detect.os, "open", counting_open)  # the file is opened by descriptor
    monkeypatch.setattr(Path, "read_text", no_second_read)
    monkeypatch.setattr(Path, "read_bytes", no_second_read)
    monkeypatch.setitem(detect.IMPORTERS, "openai", parse)
    (s,) = load(path)
    assert opened == [str(path)] and parsed == [jsonl(openai_conversation()["messages"])]
    assert s.messages and s.source_format == "openai"


def test_load_translates_crlf_newlines_like_text_mode(tmp_path: Path) -> None:
    lf = jsonl(openai_conversation()["messages"])
    path = tmp_path / "crlf.jsonl"
    path.write_bytes(lf.replace("\n", "\r\n").encode())
    assert detect_format(path) == "openai"
    assert load(path)[0].messages == parse_openai(lf)[0].messages
    (tmp_path / "bad.json").write_bytes(b'[{"role": "user", "content": "\xff"}]')
    with pytest.raises(ImportFormatError, match="not UTF-8 text"):
        load(tmp_path / "bad.json")
    with pytest.raises(ImportFormatError, match="not UTF-8 text"):
        load(tmp_path / "bad.json", "openai")
