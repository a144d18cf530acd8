"""``ctxledger serve``: run the state API, the event feed and the compacting proxy under uvicorn."""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Any

import click

from ctxledger.cli.app import (
    CONTEXT_LENGTH,
    LEDGER_TARGET,
    POSITIVE,
    SECONDS,
    AsciiIntRange,
    FilePath,
    cli,
    config_file_option,
    handle_errors,
    state_of,
    summarizer_option,
)
from ctxledger.errors import CtxLedgerError, InvalidInput
from ctxledger.limits import check_context_length, check_limit_variables

APP_FACTORY = "ctxledger.server.app:app_from_env"
#: the most worker processes `serve --workers` starts
MAX_WORKERS = 256


def _require_server_extra() -> None:
    try:
        import starlette  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError:
        raise InvalidInput(
            "`ctxledger serve` needs the server extra: pip install 'ctxledger[server]'"
        ) from None


@cli.command()
@click.option(
    "--db",
    "db_path",
    type=LEDGER_TARGET,
    default=None,
    help="Ledger: a SQLite file or a postgresql:// URL (default: the global --db, "
    "$CTXLEDGER_DB, else the user data dir's).",
)
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to bind (non-loopback needs --token-file).",
)
@click.option(
    "--port",
    type=AsciiIntRange(0, 65535),
    default=8765,
    show_default=True,
    help="Port (0: any free port).",
)
@click.option(
    "--upstream",
    default=None,
    help="Model API the proxy forwards to (default: the --api provider's public URL).",
)
@click.option(
    "--api",
    type=click.Choice(["openai", "anthropic"]),
    default="openai",
    show_default=True,
    help="What the upstream speaks: /v1/chat/completions (openai) or /v1/messages (anthropic).",
)
@config_file_option(
    "TOML file with compression settings (context_length is the default window of new sessions)."
)
@click.option(
    "--token-file",
    type=FilePath(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="File holding the bearer token every state-API request must carry.",
)
@click.option(
    "--guard-proxy",
    is_flag=True,
    help="Also require the token (X-Ctxledger-Token header) on the proxy endpoints.",
)
@click.option(
    "--context-length",
    type=CONTEXT_LENGTH,
    default=None,
    help="Window of sessions the proxy starts (default: config, else 128000).",
)
@summarizer_option()
@click.option(
    "--durability",
    type=click.Choice(["full", "normal"]),
    default="full",
    show_default=True,
    help="full survives power loss; normal (SQLite WAL sync, PostgreSQL synchronous_commit=off) may lose the last commits on a crash, never corrupts.",
)
@click.option(
    "--workers",
    # 10**9 forked until the machine gave out: more processes than any host has cores
    # share one ledger no better
    type=AsciiIntRange(1, MAX_WORKERS),
    default=1,
    show_default=True,
    help="Worker processes sharing the ledger (a file, or a postgresql:// URL for many hosts).",
)
@click.option(
    "--graceful-timeout",
    type=POSITIVE,
    default=30,
    show_default=True,
    help="Seconds in-flight requests get to finish on shutdown.",
)
@click.option(
    "--stall-timeout",
    type=SECONDS,
    default=None,
    help="Seconds a streamed reply waits for a client that stops reading before the turn "
    "ends as if it left (its session is freed, the reply not recorded; default 60).",
)
@click.option(
    "--turn-timeout",
    type=SECONDS,
    default=None,
    help="Seconds of silence (no bytes from the upstream) a proxied turn (or a request "
    "passed on, /v1/models, embeddings, count_tokens) waits before a 502 "
    "(a stream ends with an error event); a cap on silence, not on the whole answer; a "
    "client's own shorter timeout ends the turn first (default 3600).",
)
@click.option(
    "--log-level",
    type=click.Choice(["critical", "error", "warning", "info", "debug"]),
    default="info",
)
@click.pass_context
@handle_errors
def serve(
    ctx: click.Context,
    db_path: str | None,
    host: str,
    port: int,
    upstream: str | None,
    api: str,
    config_path: Path | None,
    token_file: Path | None,
    guard_proxy: bool,
    context_length: int | None,
    summarizer_kind: str,
    durability: str,
    workers: int,
    graceful_timeout: int,
    stall_timeout: float | None,
    turn_timeout: float | None,
    log_level: str,
) -> None:
    """Serve the ledger over HTTP: state API, event feed (SSE) and the compacting proxy."""
    _require_server_extra()
    from ctxledger.server.auth import check_bind, read_token_file

    token = read_token_file(token_file) if token_file else None
    check_bind(host, token)
    if guard_proxy and token is None:
        raise InvalidInput("--guard-proxy needs --token-file")
    if context_length is not None:  # 10**30 served, and every proxied session then failed
        check_context_length(context_length, "--context-length")
    if upstream is not None:
        from ctxledger.server.state import check_upstream

        check_upstream(upstream)
    from ctxledger.compressor.settings import resolve_config

    resolve_config(config_path)  # a bad file or CTXLEDGER_<KEY> fails here, not in every worker
    check_limit_variables()  # (so do CTXLEDGER_MAX_*, at start, not at the first message)
    _export_settings(
        db=str(db_path or state_of(ctx).db),
        config=str(config_path or ""),
        token_file=str(token_file or ""),
        guard_proxy="1" if guard_proxy else "",
        upstream=upstream or "",
        api=api,
        context_length=str(context_length or ""),
        summarizer=summarizer_kind,
        durability=durability,
        stall_timeout=str(stall_timeout or ""),
        turn_timeout=str(turn_timeout or ""),
    )
    _run(host, port, workers, graceful_timeout, log_level)


def _export_settings(**settings: str) -> None:
    """Hand the settings to the app factory (each worker process reads them back)."""
    from ctxledger.server.app import ENV_PREFIX

    for key, value in settings.items():
        os.environ[ENV_PREFIX + key.upper()] = value


def _check_port(host: str, port: int) -> None:
    """One ``error:`` line (exit 1) when the address is taken or cannot be had, before
    uvicorn starts (which logs the error with its start-up lines and exits 3). Port 0
    is probed too (a free port, let go at once): a host that does not resolve (``[::1]``,
    written as in a URL), or that no DNS name can be made of (a byte not UTF-8, 300
    characters), is named whatever the port. Every address the host resolves to is
    tried as uvicorn's one worker binds them (asyncio's ``create_server``): one whose
    family the machine cannot make a socket of is skipped, any other that cannot be
    bound is the error."""
    try:
        if not _bound_each(host, port):
            raise OSError("no address of it can be listened on")
    except (OSError, UnicodeError) as exc:
        if isinstance(exc, OSError):
            reason = exc.strerror or str(exc)
        else:  # (the IDNA codec's; getaddrinfo raises it for a host no DNS name is made of)
            reason = "no DNS name can be made of it"
        bracketed = host.startswith("[")
        where = f"[{host}]:{port}" if ":" in host and not bracketed else f"{host}:{port}"
        inner = host[1:-1] if bracketed and host.endswith("]") else ""
        hint = f" (an IPv6 address goes without brackets: --host {inner})" if ":" in inner else ""
        raise CtxLedgerError(f"cannot listen on {where}: {reason}{hint}") from None


def _bound_each(host: str, port: int) -> int:
    """How many of `host`'s addresses were bound (each let go at once); raises the
    error of one that could not be."""
    found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    bound = 0
    for family, kind, proto, _, address in dict.fromkeys(found):
        try:
            probe = socket.socket(family, kind, proto)
        except OSError:
            continue  # (a family this machine has not: asyncio skips it too)
        with probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
            if family == socket.AF_INET6:  # (as asyncio: no dual stack)
                probe.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            probe.bind(address)
        bound += 1
    return bound


def log_config(log_level: str) -> dict[str, Any]:
    """uvicorn's logging configuration with the ``ctxledger`` loggers added at
    `log_level`, on uvicorn's stderr handler: the proxy's notices (``ctxledger.server``,
    info) were not shown under ``serve`` before (session 45's review), only uvicorn's
    own loggers being set up, and an info line reaching no handler is dropped."""
    import copy

    from uvicorn.config import LOG_LEVELS, LOGGING_CONFIG

    config = copy.deepcopy(LOGGING_CONFIG)
    level = LOG_LEVELS.get(log_level, LOG_LEVELS["info"])
    config["loggers"]["ctxledger"] = {"handlers": ["default"], "level": level, "propagate": False}
    return config


def _run(host: str, port: int, workers: int, graceful_timeout: int, log_level: str) -> None:
    import uvicorn

    _check_port(host, port)

    options: dict[str, Any] = {
        "factory": True,
        "host": host,
        "port": port,
        "workers": workers,
        "timeout_graceful_shutdown": graceful_timeout,
        "log_level": log_level,
        "log_config": log_config(log_level),
        "lifespan": "on",
    }
    if workers > 1:
        uvicorn.run(APP_FACTORY, **options)
        return
    server = uvicorn.Server(uvicorn.Config(APP_FACTORY, **options))
    from ctxledger.server import app as app_module

    app_module.STOPPING = lambda: server.should_exit  # event feeds end when shutdown starts
    try:
        server.run()
    except KeyboardInterrupt:
        # Ctrl-C is how a server is stopped: uvicorn shut it down (its "Shutting down"
        # lines), then raised the SIGINT again. Exit 0, as with --workers (whose
        # supervisor returns), not the 130 of a command cut short (session 42)
        return
