"""Reaching a server: over HTTP with `--url`, or by running the app in this process.

In-process, the real app (with its lifespan: store, runtime) is driven through the streaming ASGI
transport, so the CLI speaks the same HTTP API either way, live events included.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
from collections.abc import AsyncIterator, Coroutine
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import typer

from agentforge.cli import exits, gcpause
from agentforge.cli.logs import log_file, logging_to_file
from agentforge.config import ConfigError, Settings, load_settings
from agentforge.config.keys import unknown_keys

if TYPE_CHECKING:
    from agentforge.client import AsyncAgentForge

log = logging.getLogger(__name__)

# Any URL works in-process (no socket is opened); this one says where requests go in logs and errors.
IN_PROCESS_URL = "http://agentforge.in-process"


@dataclass(frozen=True, slots=True)
class Target:
    url: str | None = None
    config_path: Path | None = None
    data_dir: Path | None = None
    database_url: str | None = None
    verbose: bool = False


def build_settings(target: Target, *, host: str | None = None, port: int | None = None) -> Settings:
    """Settings from the command's options; a broken config is a usage error (exit 2), an unknown
    key a warning."""
    try:
        settings = load_settings(
            config_path=target.config_path,
            data_dir=target.data_dir,
            database_url=target.database_url,
            host=host,
            port=port,
        )
    except ConfigError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(exits.USAGE) from exc
    # Imported here: the store's engine module brings SQLAlchemy, which `--help` does not need.
    from agentforge.store.engine import parse_database_url

    try:
        parse_database_url(settings.database_url)
    except ValueError as exc:  # one line naming what is wrong, not a traceback from deep in start-up
        typer.echo(f"error: database URL: {exc}", err=True)
        raise typer.Exit(exits.USAGE) from exc
    # `doctor` and `serve --production` refuse these; everywhere else a typo is at least visible.
    for unknown in unknown_keys(settings.config):
        typer.echo(f"warning: {unknown.describe()}", err=True)
    return settings


@asynccontextmanager
async def connect(target: Target) -> AsyncIterator[AsyncAgentForge]:
    # Imported here: `serve` shares this module and needs no client.
    from agentforge.client import AsyncAgentForge, StreamingASGITransport

    if target.url is not None:
        async with AsyncAgentForge(target.url) as client:
            gcpause.resume()  # started: the collector runs from here on
            yield client
        return
    settings = build_settings(target)
    # Imported here: the server stack is only needed when running in-process.
    from agentforge.server.app import create_app

    path = log_file(settings.data_dir)
    await asyncio.to_thread(path.parent.mkdir, parents=True, exist_ok=True, mode=0o700)
    with logging_to_file(path, verbose=target.verbose):
        # Like a real server, the app's own failures become 500 answers rather than tracebacks here.
        transport = StreamingASGITransport(create_app(settings, serving=False), raise_app_exceptions=False)
        try:
            async with transport.lifespan(), AsyncAgentForge(IN_PROCESS_URL, transport=transport) as client:
                gcpause.resume()  # the server is up: the collector runs from here on
                yield client
        except Exception as exc:
            # The user gets one line (run_command); the traceback goes to the log.
            log.exception("command failed")
            exc.add_note(f"the log is in {path}")
            raise


def run_command(main: Coroutine[Any, Any, int]) -> NoReturn:
    """Runs a command's coroutine; failures the user should read become a message and an exit code.

    See `agentforge.cli.exits`. Never a traceback: anything unexpected is one line here and the full
    report in the log.
    """
    from agentforge.client import AgentForgeConnectionError, AgentForgeError, LifespanError

    try:
        code = asyncio.run(main)
    except AgentForgeConnectionError as exc:
        typer.echo(f"error: cannot reach the server: {exc.message} (is it running? check --url)", err=True)
        code = exits.ERROR
    except AgentForgeError as exc:
        typer.echo(f"error: {exc.message} ({exc.name})", err=True)
        code = exits.ERROR
    except LifespanError as exc:
        typer.echo(f"error: the in-process server failed to start or stop: {_last_line(exc)}", err=True)
        code = exits.ERROR
    except ConfigError as exc:
        typer.echo(f"error: {exc} (fix the config file)", err=True)
        code = exits.USAGE
    except KeyboardInterrupt:
        typer.echo("interrupted", err=True)
        code = exits.INTERRUPTED
    except BrokenPipeError:
        # The reader of stdout has gone (`| head -1`): nothing to say, and nothing more to flush.
        _discard_stdout()
        code = exits.OUTPUT_CLOSED
    except (typer.Exit, typer.TyperException):
        raise  # usage errors (typer's own click, not the click package): printed, exit 2
    except Exception as exc:
        notes = "; ".join(getattr(exc, "__notes__", []))
        hint = f" ({notes}; --verbose shows it as it happens)" if notes else ""
        typer.echo(f"error: {type(exc).__name__}: {_one_line(exc)}{hint}", err=True)
        code = exits.ERROR
    raise typer.Exit(code)


def _discard_stdout() -> None:
    """Points stdout at /dev/null, so the interpreter's last flush at exit cannot fail again."""
    with contextlib.suppress(OSError, ValueError):  # a stdout with no descriptor has nothing to flush
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


def _last_line(exc: BaseException) -> str:
    """What ended a failure whose message carries its traceback (the lifespan's): its last line."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return lines[-1] if lines else type(exc).__name__


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    cause = exc.__cause__ or exc.__context__
    if not text and cause is not None:
        return _one_line(cause)
    return text or type(exc).__name__
