"""`agentforge serve`: run the HTTP server with uvicorn; a non-loopback bind needs authentication on."""

from __future__ import annotations

import socket
from typing import Annotated

import typer
import uvicorn
from fastapi import FastAPI

from agentforge.cli.connect import Target, build_settings
from agentforge.cli.nondumpable import make_non_dumpable
from agentforge.cli.options import ConfigPath, DatabaseUrl, DataDir
from agentforge.config import Settings, is_loopback
from agentforge.server.serve import ForgeServer
from agentforge.telemetry.logs import LEVELS, LogFormat, configure_logging

__all__ = ["is_loopback", "serve"]


class _AnnouncingServer(ForgeServer):
    """Prints the bound URL once listening (with `--port 0` only the socket knows the port)."""

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started:
            typer.echo(f"Agent Forge listening on {_bound_url(self)}")


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
        str,
        typer.Option("--log-level", help="Log level of the whole server: debug, info, warning, error."),
    ] = "info",
    log_format: Annotated[
        str,
        typer.Option("--log-format", help="Log lines as `text` or `json` (one object a line)."),
    ] = "text",
    production: Annotated[
        bool,
        typer.Option(
            "--production",
            help="Run `agentforge doctor`'s checks first; refuse to start if a critical one fails.",
        ),
    ] = False,
) -> None:
    """Run the Agent Forge server."""
    logs = _log_options(log_format, log_level)
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
    # From here on, same-uid processes (tenants' commands) cannot read our environ or ptrace us.
    make_non_dumpable()
    from agentforge.server.app import create_app

    # Only now: the process is serving, every logger of it goes through the structured handler.
    configure_logging(*logs)
    _run_server(create_app(settings), settings.host, settings.port, logs[1])


def _log_options(log_format: str, log_level: str) -> tuple[LogFormat, str]:
    if log_format not in ("text", "json"):
        typer.echo(f"error: --log-format must be text or json, got {log_format!r}", err=True)
        raise typer.Exit(2)
    if log_level.lower() not in LEVELS:
        typer.echo(f"error: --log-level must be one of {', '.join(LEVELS)}, got {log_level!r}", err=True)
        raise typer.Exit(2)
    return ("json" if log_format == "json" else "text"), log_level.lower()


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


def _run_server(app: FastAPI, host: str, port: int, log_level: str) -> None:
    _AnnouncingServer(app, host=host, port=port, log_level=log_level).run()


def _bound_url(server: uvicorn.Server) -> str:
    address = server.servers[0].sockets[0].getsockname()
    host, port = address[0], address[1]
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"
