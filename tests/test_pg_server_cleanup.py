"""The private-server helper leaves nothing behind when a server cannot be set up.

Fake ``initdb`` / ``pg_ctl`` / ``postgres`` scripts stand in for the binaries, so the
failures are certain: an ``initdb`` that fails (the server's directory, with any copy of
the binaries in it, is removed) and a ``pg_ctl start`` that fails while its "postmaster"
(a ``sleep``) keeps running (``started`` stops it and removes the directory).
"""

from __future__ import annotations

import os
import pwd
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest
from helpers import pg_server
from helpers.pg_server import PgServer, started

INITDB_OK = 'while [ "$1" != -D ]; do shift; done; mkdir -p "$2"\n'
INITDB_FAILS = 'echo "initdb: no room" >&2; exit 1\n'
# `start` leaves a running stand-in postmaster behind and reports failure; `stop` ends it
PG_CTL = """while [ "$1" != -D ]; do shift; done; data="$2"
for last; do :; done
if [ "$last" = start ]; then
  setsid sleep 300 </dev/null >/dev/null 2>&1 &
  echo $! > "$data/postmaster.pid"
  echo "pg_ctl: server did not start in time" >&2; exit 1
fi
kill "$(head -n 1 "$data/postmaster.pid")"
"""


def fake_bin_dir(base: Path, initdb: str) -> Path:
    bin_dir = base / "install" / "bin"
    bin_dir.mkdir(parents=True)
    for name, body in (("initdb", initdb), ("pg_ctl", PG_CTL), ("postgres", "exit 0\n")):
        (bin_dir / name).write_text("#!/bin/sh\n" + body)
        (bin_dir / name).chmod(0o755)
    return bin_dir


@pytest.fixture
def roots(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """The directories the servers of a test create (each must be gone afterwards)."""
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            pytest.fail("under root the helper needs a `postgres` user (`make test` adds it)")
    made: list[Path] = []
    real = tempfile.mkdtemp

    def recording(*args: Any, **kwargs: Any) -> str:
        path = real(*args, **kwargs)
        made.append(Path(path))
        return str(path)

    monkeypatch.setattr(pg_server.tempfile, "mkdtemp", recording)
    return made


def test_a_failed_initdb_leaves_no_directory_behind(tmp_path: Path, roots: list[Path]) -> None:
    bin_dir = fake_bin_dir(tmp_path, INITDB_FAILS)
    with pytest.raises(RuntimeError, match="initdb failed"):
        PgServer(bin_dir)
    assert len(roots) == 1
    assert not roots[0].exists()


def test_a_failed_start_stops_its_postmaster_and_leaves_no_directory(
    tmp_path: Path, roots: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    postmasters: list[int] = []
    real_cleanup = PgServer.cleanup

    def noting_cleanup(self: PgServer) -> None:
        postmasters.append(self._postmaster_pid())
        assert pg_server._alive(postmasters[-1])  # still running when the start failed
        real_cleanup(self)

    monkeypatch.setattr(PgServer, "cleanup", noting_cleanup)
    bin_dir = fake_bin_dir(tmp_path, INITDB_OK)
    with pytest.raises(RuntimeError, match="did not start"):
        started(bin_dir)
    assert len(postmasters) == 1
    deadline = time.monotonic() + 10
    while pg_server._alive(postmasters[0]) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not pg_server._alive(postmasters[0])
    assert len(roots) == 1
    assert not roots[0].exists()
