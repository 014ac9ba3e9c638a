"""Running the `agentforge` CLI in tests: in-process server, fake provider, isolated config."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from agentforge.cli.main import app
from tests.client.conftest import fake_provider_config
from tests.fakes.openai_server import FakeOpenAI

_ENV_VARS = (
    "AGENTFORGE_URL",
    "AGENTFORGE_CONFIG",
    "AGENTFORGE_DATA_DIR",
    "AGENTFORGE_DATABASE_URL",
    "AGENTFORGE_HOST",
    "AGENTFORGE_PORT",
)


class StderrLines:
    """A process's stderr read to its end as it comes (a large report must not fill the pipe)."""

    def __init__(self, stream: asyncio.StreamReader) -> None:
        self.lines: list[str] = []
        self._grew = asyncio.Event()
        self._task = asyncio.create_task(self._read(stream))

    async def _read(self, stream: asyncio.StreamReader) -> None:
        while line := await stream.readline():
            self.lines.append(line.decode())
            self._grew.set()
        self._grew.set()

    async def wait_for(self, text: str) -> list[str]:
        """The lines up to the one holding `text`."""
        while (found := next((n for n, line in enumerate(self.lines) if text in line), None)) is None:
            assert not self._task.done(), f"the process ended without logging {text!r}: {self.lines[-5:]}"
            self._grew.clear()
            await asyncio.wait_for(self._grew.wait(), 30)
        return self.lines[: found + 1]

    async def rest(self) -> list[str]:
        """Every line, once the process closed its stderr."""
        await asyncio.wait_for(self._task, 30)
        return self.lines


@dataclass
class Cli:
    workspace: Path
    config: Path
    data_dir: Path
    stderr: StderrLines | None = None  # the last `serve(drain_stderr=True)`'s

    @property
    def local(self) -> list[str]:
        """The options that point an in-process command at this test's config and database."""
        return ["--config", str(self.config), "--data-dir", str(self.data_dir)]

    async def invoke(self, *args: str, input: str | None = None) -> Result:
        """Runs the CLI in a worker thread: the fake provider keeps serving from this loop meanwhile.
        `input` is its stdin (not a terminal, as in a pipe)."""
        runner = CliRunner()
        return await asyncio.wait_for(asyncio.to_thread(runner.invoke, app, list(args), input), 30)

    async def run_local(self, *args: str, input: str | None = None) -> Result:
        return await self.invoke(*args, *self.local, input=input)

    async def serve(
        self, *args: str, python: tuple[str, ...] = (), drain_stderr: bool = False
    ) -> tuple[asyncio.subprocess.Process, str]:
        """`agentforge serve --port 0 ARGS` as a process on this test's config and data (`python`:
        options for the interpreter); the process and the line it printed once listening (stop it
        with SIGTERM). With `drain_stderr`, `self.stderr` reads its stderr from the start."""
        env = {**os.environ, "XDG_CONFIG_HOME": str(self.config.parent / "xdg")}
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            *python,
            "-m",
            "agentforge.cli",
            "serve",
            "--port",
            "0",
            *args,
            *self.local,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=env,
            cwd=self.workspace,
        )
        assert process.stdout is not None and process.stderr is not None
        if drain_stderr:
            self.stderr = StderrLines(process.stderr)
        line = (await asyncio.wait_for(process.stdout.readline(), 30)).decode()
        return process, line


@pytest.fixture
def cli(tmp_path: Path, fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch) -> Cli:
    for name in _ENV_VARS:
        monkeypatch.delenv(name, raising=False)
    # No user-level config file may leak into the test.
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    workspace = tmp_path / "ws"
    workspace.mkdir()
    monkeypatch.chdir(workspace)
    config = tmp_path / "agentforge.json"
    config.write_text(json.dumps(fake_provider_config(fake_openai)))
    return Cli(workspace=workspace, config=config, data_dir=tmp_path / "data")
