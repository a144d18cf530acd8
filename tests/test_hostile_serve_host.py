"""``ctxledger serve --port 0`` with a host that cannot be listened on (session 46).

The address was probed before uvicorn starts only for a port other than 0, so with
``--port 0`` (any free port) a host that does not resolve — ``[::1]`` written as in a
URL (``is_loopback`` reads it as ::1, so no token is asked for), a name with a blank —
reached uvicorn, which logged its start-up lines, ``ERROR: [Errno -2] Name or service
not known`` naming no host, and exited 3. Port 0 is probed too now: one ``error:`` line
naming the host, exit 1, and the ledger is not written.

Review mends: a host no DNS name can be made of (a byte not UTF-8, 300 characters)
made ``getaddrinfo`` raise a UnicodeError, not an OSError: a traceback, for port 0 and
a fixed port alike. Every resolved address is tried now, as uvicorn binds them, and
the brackets hint is given only to an IPv6 address in brackets.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ctxledger.cli.serve import _check_port
from ctxledger.errors import CtxLedgerError

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
    stderr = _serve_fails(tmp_path, host, 0)
    assert stderr.startswith("error: " + says), stderr
    if host.startswith("["):
        assert "(an IPv6 address goes without brackets: --host ::1)" in stderr


def _serve_fails(tmp_path: Path, host: str, port: int) -> str:
    """``serve``'s stderr, checked to be one line, exit 1, no uvicorn log, no ledger."""
    token = tmp_path / "token"
    token.write_text("a-token-long-enough-to-pass\n")
    db = tmp_path / "l.db"
    args = ["--db", str(db), "serve", "--port", str(port), "--host", host]
    out = subprocess.run(
        [*CLI, *args, "--token-file", str(token)], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 1, out.stderr
    assert out.stderr.startswith("error: ") and out.stderr.count("\n") == 1, out.stderr
    assert "\x1b" not in out.stderr and "Started server process" not in out.stderr
    assert "Traceback" not in out.stderr
    assert not db.exists()  # (checked before the ledger is opened)
    return out.stderr


@pytest.mark.parametrize("port", [0, 18765])
@pytest.mark.parametrize("host", ["\udcff", "a" * 300], ids=["byte-ff", "300-chars"])
def test_a_host_no_dns_name_is_made_of_is_one_line(tmp_path: Path, host: str, port: int) -> None:
    # (getaddrinfo raised the IDNA codec's UnicodeError: a traceback; the argument
    # reaches the process as the byte 0xff, read back as a surrogate)
    stderr = _serve_fails(tmp_path, host, port)
    assert stderr.startswith("error: cannot listen on "), stderr
    assert stderr.endswith(f":{port}: no DNS name can be made of it\n"), stderr


def test_the_brackets_hint_is_given_only_to_an_ipv6_address(tmp_path: Path) -> None:
    stderr = _serve_fails(tmp_path, "[name", 0)
    assert stderr.startswith("error: cannot listen on [name:0: ") and "brackets" not in stderr


def _resolving(monkeypatch: pytest.MonkeyPatch, *addresses: tuple[Any, ...]) -> None:
    found = [
        (family, socket.SOCK_STREAM, proto, "", address) for family, proto, address in addresses
    ]
    monkeypatch.setattr(socket, "getaddrinfo", lambda *args, **kwargs: found)


def test_every_address_is_tried_and_a_family_the_machine_has_not_is_skipped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # (a socket that cannot be made, here AF_UNIX with TCP, is skipped as asyncio does;
    # only the first address was probed)
    _resolving(monkeypatch, (socket.AF_UNIX, 6, "/nowhere"), (socket.AF_INET, 6, ("127.0.0.1", 0)))
    _check_port("somewhere", 0)
    _resolving(monkeypatch, (socket.AF_UNIX, 6, "/nowhere"))
    with pytest.raises(CtxLedgerError, match="no address of it can be listened on"):
        _check_port("somewhere", 0)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()
        _resolving(monkeypatch, (socket.AF_INET, 6, ("127.0.0.1", 0)), (socket.AF_INET, 6, busy))
        with pytest.raises(CtxLedgerError, match="cannot listen on somewhere:0: "):
            _check_port("somewhere", 0)
