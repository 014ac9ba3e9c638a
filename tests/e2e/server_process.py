"""A real `agentforge serve` in a subprocess, for what only a separate process shows: kill -9
(durability, orphaned commands) and fuzzing over HTTP while the test's own loop stays free."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.databases import owner_url_for

START_TIMEOUT_SECONDS = 120  # a loaded CI machine imports slowly


@dataclass
class ServerProcess:
    url: str
    process: asyncio.subprocess.Process

    def kill(self) -> None:
        """kill -9: no cleanup of any kind runs in the server."""
        self.process.kill()


@contextlib.asynccontextmanager
async def serve_process(
    tmp_path: Path, config: dict[str, Any], *, database_url: str, workspace: Path
) -> AsyncIterator[ServerProcess]:
    """Start `agentforge serve` on a free port over `database_url`; stopped (or already killed) on
    exit. Call it again with the same arguments to restart on the same data."""
    config_file = tmp_path / "agentforge.json"
    config_file.write_text(json.dumps(config))
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("AGENTFORGE_")},
        "XDG_CONFIG_HOME": str(tmp_path / "xdg"),
        "AGENTFORGE_DATABASE_URL": database_url,
    }
    owner = owner_url_for(database_url)
    if owner is not None:
        env["AGENTFORGE_DATABASE_OWNER_URL"] = owner
    data_dir = tmp_path / "data"
    args = ["serve", "--port", "0", "--config", str(config_file), "--data-dir", str(data_dir)]
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "agentforge.cli",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
        env=env,
        cwd=workspace,
    )
    try:
        assert process.stdout is not None
        line = (await asyncio.wait_for(process.stdout.readline(), START_TIMEOUT_SECONDS)).decode()
        assert line.startswith("Agent Forge listening on http://"), line
        yield ServerProcess(url=line.split()[-1], process=process)
    finally:
        if process.returncode is None:
            process.terminate()
            try:
                await asyncio.wait_for(process.wait(), 30)
            except TimeoutError:
                process.kill()
                await process.wait()
