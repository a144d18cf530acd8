"""A ShareGPT turn's other fields are kept on its message as they came: one of them named
like a field the importer reads must not crash it (session 45's sweep).

What it found: a human turn holding a ``tool_calls`` field of text was a ``TypeError``
traceback out of ``ctxledger import`` (pairing a tool response with a call whose id was
synthesized read the calls of every earlier message). Now only the well-formed calls
of assistant turns are read there, and the message check names the stray field. The
every-object-every-field table in ``test_import_fuzzed_files.py`` keeps the class;
``tests/importers/test_sharegpt.py`` guards the id a response gives its call.
"""

from __future__ import annotations

import json
from pathlib import Path

from helpers.import_fixtures import sharegpt_record
from test_import_hostile_files import _import


def test_a_human_turn_holding_tool_calls_of_text_is_a_located_error(tmp_path: Path) -> None:
    record = sharegpt_record()
    record["conversations"][1]["tool_calls"] = "\u202e"
    code, output, appended = _import(tmp_path, json.dumps([record]).encode())
    assert code == 2, output
    assert output.startswith("error: ") and output.count("\n") == 1, output
    assert "'tool_calls' is only allowed on assistant messages, not user" in output
    assert appended == 0
