"""Reaching a server: over HTTP with `--url`, or by running the app in this process.

In-process, the real app (with its lifespan: store, runtime) is driven through the streaming ASGI
transport, so the CLI speaks the same HTTP API either way, live events included.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Coroutine
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import typer

from agentforge.client import (
    AgentForgeConnectionError,
    AgentForgeError,
    AsyncAgentForge,
    LifespanError,
    StreamingASGITransport,
)
from agentforge.config import ConfigError, Settings, load_settings

# Any URL works in-process (no socket is opened); this one says where requests go in logs and errors.
IN_PROCESS_URL = "http://agentforge.in-process"


@dataclass(frozen=True, slots=True)
class Target:
    url: str | None = None
    config_path: Path | None = None
    data_dir: Path | None = None
    database_url: str | None = None


def build_settings(target: Target, *, host: str | None = None, port: int | None = None) -> Settings:
    """Settings from the command's options; a broken config is a usage error (exit 2)."""
    try:
        return load_settings(
            config_path=target.config_path,
            data_dir=target.data_dir,
            database_url=target.database_url,
            host=host,
            port=port,
        )
    except ConfigError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc


@asynccontextmanager
async def connect(target: Target) -> AsyncIterator[AsyncAgentForge]:
    if target.url is not None:
        async with AsyncAgentForge(target.url) as client:
            yield client
        return
    settings = build_settings(target)
    # Imported here: the server stack is only needed when running in-process.
    from agentforge.server.app import create_app

    # Like a real server, the app's own failures become 500 answers rather than tracebacks here.
    transport = StreamingASGITransport(create_app(settings), raise_app_exceptions=False)
    async with transport.lifespan(), AsyncAgentForge(IN_PROCESS_URL, transport=transport) as client:
        yield client


def run_command(main: Coroutine[Any, Any, int]) -> NoReturn:
    """Runs a command's coroutine; failures the user should read become a message and an exit code.

    0 success, 1 the server (or the turn) failed, 2 usage errors (raised by typer or `build_settings`),
    130 interrupted.
    """
    try:
        code = asyncio.run(main)
    except AgentForgeConnectionError as exc:
        typer.echo(f"error: cannot reach the server: {exc.message}", err=True)
        code = 1
    except AgentForgeError as exc:
        typer.echo(f"error: {exc.message} ({exc.name})", err=True)
        code = 1
    except LifespanError as exc:
        typer.echo(f"error: the in-process server failed to start or stop: {exc}", err=True)
        code = 1
    except KeyboardInterrupt:
        typer.echo("interrupted", err=True)
        code = 130
    raise typer.Exit(code)
