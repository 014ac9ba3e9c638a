"""`agentforge serve`: run the HTTP server with uvicorn; a non-loopback bind needs authentication on."""

from __future__ import annotations

import socket
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated

import typer

from agentforge.cli import exits, gcpause
from agentforge.cli.connect import Target, build_settings
from agentforge.cli.nondumpable import make_non_dumpable
from agentforge.cli.options import ConfigPath, DatabaseUrl, DataDir
from agentforge.config import Settings, is_loopback
from agentforge.telemetry.logs import LogFormat, configure_logging

# The server stack (uvicorn, FastAPI, the runtime: most of a start's imports) is imported only once a
# first start's preparing child runs, so that the two overlap.
if TYPE_CHECKING:
    import uvicorn
    from fastapi import FastAPI

__all__ = ["is_loopback", "serve"]


class LogLevel(StrEnum):
    debug = "debug"
    info = "info"
    warning = "warning"
    error = "error"
    critical = "critical"


class LogFormatChoice(StrEnum):
    text = "text"
    json = "json"


def serve(
    host: Annotated[
        str | None,
        typer.Option(
            "--host", help="Address to bind [default: 127.0.0.1]; a non-loopback one needs auth configured."
        ),
    ] = None,
    port: Annotated[
        int | None,
        typer.Option("--port", min=0, max=65535, help="Port to bind [default: 4096]; 0 picks one."),
    ] = None,
    config: ConfigPath = None,
    data_dir: DataDir = None,
    db: DatabaseUrl = None,
    log_level: Annotated[
        LogLevel,
        typer.Option("--log-level", help="Log level of the whole server.", case_sensitive=False),
    ] = LogLevel.info,
    log_format: Annotated[
        LogFormatChoice,
        typer.Option(
            "--log-format", help="Log lines as text, or json (one object a line).", case_sensitive=False
        ),
    ] = LogFormatChoice.text,
    production: Annotated[
        bool,
        typer.Option(
            "--production",
            help="Run `agentforge doctor`'s checks first; refuse to start if a critical one fails.",
        ),
    ] = False,
) -> None:
    """Run the Agent Forge server."""
    logs: tuple[LogFormat, str] = ("json" if log_format is LogFormatChoice.json else "text", log_level.value)
    settings = build_settings(
        Target(config_path=config, data_dir=data_dir, database_url=db), host=host, port=port
    )
    if not is_loopback(settings.host) and not settings.config.auth.enabled(settings.host):
        # Without authentication anyone who can reach a public address could drive the agent.
        typer.echo(
            f"error: refusing to bind {settings.host} without authentication configured"
            " (set auth.jwt, auth.gateway, auth.required or auth.api_keys in the config)",
            err=True,
        )
        raise typer.Exit(2)
    if production:
        _require_production_checks(settings)
    # Before anything starts: what would stop this server is one line, not a log of a failed start.
    _refuse_a_second_server(settings)
    listener = _listen(settings.host, settings.port)
    # From here on, same-uid processes (tenants' commands) cannot read our environ or ptrace us.
    make_non_dumpable()
    from agentforge.runtime.preparation import start_preparing

    # A first start's child prepares the database while this process imports the server.
    preparing = start_preparing(settings, initializer=make_non_dumpable, inherited=[listener])
    try:
        from agentforge.server.app import create_app

        # Only now: the process is serving, every logger of it goes through the structured handler.
        configure_logging(*logs)
    finally:
        if preparing is not None:
            preparing.finish()
    _run_server(create_app(settings), listener, logs[1])


def _refuse_a_second_server(settings: Settings) -> None:
    """A SQLite database serves one process (the store would refuse it too, after a longer start)."""
    from agentforge.store.engine import parse_database_url
    from agentforge.store.ownership import server_running

    target = parse_database_url(settings.database_url)
    if target.dialect == "sqlite" and server_running(target.sqlite_path):
        typer.echo(
            f"error: another Agent Forge server is already running on {target.sqlite_path}; stop it,"
            " or give this one its own --data-dir (several servers on one database need Postgres)",
            err=True,
        )
        raise typer.Exit(exits.ERROR)


def _listen(host: str, port: int) -> socket.socket:
    """The bound listening socket (uvicorn serves on it), or one line and exit 1 when the address
    cannot be taken (a port in use, an address not of this machine)."""
    address = host.strip("[]")
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    # IPPROTO_TCP named, not 0: asyncio turns Nagle off (TCP_NODELAY) only on accepted sockets whose
    # proto says TCP; with 0 a response's small writes waited ~40 ms for the client's delayed ACK.
    listener = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind((address, port))
    except OSError as exc:
        listener.close()
        hint = " (another server is using it: stop it or pick another --port)" if port else ""
        typer.echo(f"error: cannot listen on {host}:{port}: {exc.strerror or exc}{hint}", err=True)
        raise typer.Exit(exits.ERROR) from None
    return listener


def _require_production_checks(settings: Settings) -> None:
    from agentforge.cli.doctor import print_results
    from agentforge.doctor.run import critical_failures, deployment_checks

    results = deployment_checks(settings)
    failures = critical_failures(results)
    if failures:
        print_results(results)
        names = ", ".join(result.name for result in failures)
        typer.echo(f"error: refusing to start in production mode: {names} failed", err=True)
        raise typer.Exit(2)


def _run_server(app: FastAPI, listener: socket.socket, log_level: str) -> None:
    from agentforge.server.serve import ForgeServer

    class AnnouncingServer(ForgeServer):
        """Prints the bound URL once listening (with `--port 0` only the socket knows the port)."""

        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets)
            if self.started:
                gcpause.resume()  # started: the collector runs from here on
                typer.echo(f"Agent Forge listening on {_bound_url(self)}")

    host, port = listener.getsockname()[:2]
    AnnouncingServer(app, host=host, port=port, log_level=log_level).run(sockets=[listener])


def _bound_url(server: uvicorn.Server) -> str:
    address = server.servers[0].sockets[0].getsockname()
    host, port = address[0], address[1]
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"
