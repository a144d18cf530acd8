"""The README's commands work as written: it opens with ``make demo`` and ``make test``,
every ``ctxledger`` command and option it names exists, its links to its own sections
resolve, and its command sequences run in the order it gives them (offline, on a
scratch ledger)."""

from __future__ import annotations

import json
import os
import re
import shlex
from pathlib import Path

import click
import pytest
from click.testing import CliRunner, Result
from helpers import readme
from helpers.ledger_helpers import deterministic_ledger, session_with_turns

from ctxledger.cli.main import cli

ROOT = readme.README.parent

#: options the README names that belong to other programs, with the file that has them
FOREIGN_OPTIONS = {
    "--help": None,  # click's, on every command
    "--resume": None,  # hermes's own CLI (`hermes --resume`)
    "--recall": "bench/audit_corpus_bench.py",
    "--date": "bench/readme_table.py",
    "--write": "bench/readme_table.py",
    "--work": "bench/layout_bench.py",
}


def _options(cmd: click.Command) -> dict[str, click.Parameter]:
    return {o: p for p in cmd.params for o in (*p.opts, *p.secondary_opts)}


def _all_options(cmd: click.Command) -> set[str]:
    found = set(_options(cmd))
    for sub in getattr(cmd, "commands", {}).values():
        found |= _all_options(sub)
    return found


def check_command(command: str) -> list[str]:
    """What is wrong with one ``ctxledger …`` command as the README writes it: an
    unknown subcommand or an option the (sub)command does not have."""
    words = command.split("#")[0].replace("\\|", "|").split()
    assert words[0] == "ctxledger", command
    cmd: click.Command = cli
    problems: list[str] = []
    i = 1
    while i < len(words):
        word = words[i].strip("[]")
        if word.startswith("-"):
            name = word.split("=")[0]
            param = _options(cmd).get(name)
            if param is None:
                problems.append(f"{command!r}: `{cmd.name}` has no option {name}")
            elif not getattr(param, "is_flag", False) and "=" not in word:
                i += 1
        elif isinstance(cmd, click.Group):
            sub = cmd.commands.get(word)
            if sub is None:
                if word != "…":
                    problems.append(f"{command!r}: no command {word!r}")
                break
            cmd = sub
        i += 1
    return problems


def test_the_readme_opens_with_make_demo_and_make_test() -> None:
    assert readme.text().startswith("```sh\n")
    first = readme.blocks()[0]
    commands = [line.split("#")[0].strip() for line in first.body.splitlines()]
    assert commands == ["make demo", "make test"]
    makefile = (ROOT / "Makefile").read_text()
    for target in ("demo", "test"):
        assert re.search(rf"^{target}:", makefile, re.M), f"Makefile has no {target} target"
    demo_recipe = makefile.split("\ndemo:", 1)[1].split("\n\n", 1)[0]
    assert "ctxledger --db demo.ledger.db demo" in demo_recipe  # what the README says it writes


def test_every_make_target_named_exists() -> None:
    makefile = (ROOT / "Makefile").read_text()
    targets = set(re.findall(r"^([\w-]+):", makefile, re.M))
    named = set(re.findall(r"`make (?:PYTHON=\S+ )?([\w-]+)`", readme.text()))
    assert named and named <= targets, named - targets


def test_links_to_sections_resolve() -> None:
    src = readme.text()
    slugs = set()
    for heading in re.findall(r"^#+ (.+)$", src, re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
        slugs.add(slug)
    anchors = set(re.findall(r"\]\(#([\w-]+)\)", src))
    assert anchors and anchors <= slugs, anchors - slugs


def test_every_ctxledger_command_named_exists_with_its_options() -> None:
    commands = readme.commands()
    names = set(cli.commands)
    commands += [f"ctxledger {span}" for span in readme.bare_inline(names)]
    assert len(commands) > 50  # the extraction still finds them
    problems = [p for c in commands for p in check_command(c)]
    assert not problems, "\n".join(problems)
    # `ctxledger serve --api anthropic` (a comment of the proxy block) is among them
    assert any(c.startswith("ctxledger serve --api") for c in commands)


def test_every_option_named_anywhere_exists() -> None:
    """A bare ``--option`` in prose (``--guard-proxy``, ``--stall-timeout``) is one of
    the CLI's, or belongs to the program named with it."""
    named = set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", readme.text()))
    unknown = named - _all_options(cli) - set(FOREIGN_OPTIONS)
    assert not unknown, unknown
    for option, owner in FOREIGN_OPTIONS.items():
        if owner is not None:
            assert option in (ROOT / owner).read_text(), f"{owner} has no {option}"


def test_every_file_the_readme_points_to_exists() -> None:
    spans = re.findall(r"`((?:bench|tests|docs|ctxledger|tools)/[\w./-]+)`", readme.text())
    spans += re.findall(r"python (bench/\w+\.py)", readme.text())
    missing = sorted({s for s in spans if not (ROOT / s).exists()})
    assert len(spans) > 10 and not missing, missing


# --- command sequences, as a new user runs them ---------------------------------------------


def _cli(*args: str, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(cli, list(args), env=env, catch_exceptions=False)


def _chat_file(path: Path) -> None:
    messages = [{"role": "system", "content": "You are a coding agent."}]
    for i in range(30):
        call = {"id": f"call_{i}", "type": "function"}
        call["function"] = {"name": "bash", "arguments": json.dumps({"cmd": f"cat src/mod_{i}.py"})}
        messages += [
            {"role": "user", "content": f"Fix src/mod_{i}.py, keep the API. " + "detail " * 120},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"call_{i}", "content": "line\n" * 100},
            {"role": "assistant", "content": f"Ran pytest on src/mod_{i}.py: 1 failed, 5 passed"},
        ]
    path.write_text("\n".join(json.dumps(m) for m in messages) + "\n")


def test_the_postgresql_block_runs_in_its_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fleet block's commands, in order, against a file ledger standing in for the
    URL (migrate refuses a destination that is not empty: it must come before import)."""
    block = readme.block("pip install 'ctxledger[postgres]'")
    home = tmp_path / "home"
    default = home / ".local/share/ctxledger/ctxledger.db"
    default.parent.mkdir(parents=True)
    with deterministic_ledger(default) as ledger:
        session_with_turns(ledger, 3)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("CTXLEDGER_DB", str(tmp_path / "fleet.db"))
    monkeypatch.chdir(tmp_path)
    _chat_file(tmp_path / "chat.jsonl")
    ran = 0
    for line in block.body.splitlines():
        if not line.startswith("ctxledger "):
            continue
        args = [os.path.expanduser(os.path.expandvars(w)) for w in shlex.split(line, comments=True)]
        result = _cli(*args[1:])
        assert result.exit_code == 0, (line, result.output)
        ran += 1
    assert ran == 2
    assert len(json.loads(_cli("sessions", "--json").stdout)) == 2  # the copied one, the import


def test_the_dry_run_plan_block_shows_real_keys_and_relations(tmp_path: Path) -> None:
    db = tmp_path / "l.db"
    _chat_file(tmp_path / "chat.jsonl")
    assert _cli("--db", str(db), "import", str(tmp_path / "chat.jsonl")).exit_code == 0
    sid = json.loads(_cli("--db", str(db), "sessions", "--json").stdout)[0]["session_id"]
    real = json.loads(_cli("--db", str(db), "compress", sid, "--dry-run", "--json").stdout)
    shown = json.loads(readme.block('{"session_id": "...", "action": "dry_run"').body)
    for doc in (shown, real):  # the relations the README states hold in both
        plan = doc["plan"]
        assert doc["action"] == "dry_run" and doc["messages_after"] == 0
        assert doc["removed"] == plan["compress_end"] - plan["compress_start"]
        assert doc["tokens_after"] == plan["estimated_tokens_after"]
    assert set(shown) <= set(real), set(shown) - set(real)
    assert set(shown["plan"]) <= set(real["plan"]), set(shown["plan"]) - set(real["plan"])
    prune = real["plan"]["prunes"][0]
    assert set(shown["plan"]["prunes"][0]) <= set(prune)
    assert prune["kind"] in ("tool_result", "duplicate", "args_truncated")


def test_every_read_command_takes_json_but_export() -> None:
    """ "Every read command takes `--json` but `export`": the read commands are those the
    README lists as opening a ledger it cannot write read-only."""
    src = readme.text()
    listed = src.split("the commands that only read (", 1)[1].split(")", 1)[0]
    reads = set(re.findall(r"`(\w+)`", listed))
    assert {"sessions", "show", "export", "audit"} <= reads
    for name in reads:
        has_json = "--json" in _options(cli.commands[name])
        assert has_json is (name != "export"), name
