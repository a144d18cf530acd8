"""``ctxledger serve --port 0`` with a host that cannot be listened on (session 46).

The address was probed before uvicorn starts only for a port other than 0, so with
``--port 0`` (any free port) a host that does not resolve — ``[::1]`` written as in a
URL (``is_loopback`` reads it as ::1, so no token is asked for), a name with a blank —
reached uvicorn, which logged its start-up lines, ``ERROR: [Errno -2] Name or service
not known`` naming no host, and exited 3. Port 0 is probed too now: one ``error:`` line
naming the host, exit 1, and the ledger is not written.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

CLI = [str(Path(sys.executable).parent / "ctxledger")]


@pytest.mark.parametrize(
    ("host", "says"),
    [
        ("[::1]", "cannot listen on [::1]:0: "),
        ("no such host.invalid", "cannot listen on no such host.invalid:0: "),
        ("\x1b[31m", "cannot listen on \\x1b[31m:0: "),
    ],
)
def test_a_host_that_cannot_be_had_is_one_line_with_port_0(
    tmp_path: Path, host: str, says: str
) -> None:
    token = tmp_path / "token"
    token.write_text("a-token-long-enough-to-pass\n")
    db = tmp_path / "l.db"
    args = ["--db", str(db), "serve", "--port", "0", "--host", host, "--token-file", str(token)]
    out = subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=60)
    assert out.returncode == 1, out.stderr
    assert out.stderr.startswith("error: " + says) and out.stderr.count("\n") == 1, out.stderr
    assert "\x1b" not in out.stderr and "Started server process" not in out.stderr
    if host.startswith("["):
        assert "(an IPv6 address goes without brackets: --host ::1)" in out.stderr
    assert not db.exists()  # (checked before the ledger is opened)
