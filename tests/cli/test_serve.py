"""`agentforge serve`: refuses public addresses; serves on loopback."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import pytest

from agentforge.cli.serve import is_loopback
from agentforge.client import AsyncAgentForge
from tests.cli.conftest import Cli


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.10", "example.com"])
async def test_serve_refuses_a_non_loopback_host(cli: Cli, host: str) -> None:
    result = await cli.invoke("serve", "--host", host, *cli.local)
    assert result.exit_code == 2
    assert f"refusing to bind {host} without authentication configured" in result.stderr


async def test_serve_refuses_a_public_host_from_the_environment(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENTFORGE_HOST", "0.0.0.0")
    result = await cli.invoke("serve", *cli.local)
    assert result.exit_code == 2
    assert "refusing to bind 0.0.0.0" in result.stderr


def test_loopback_addresses() -> None:
    loopback = ["127.0.0.1", "127.8.0.1", "::1", "[::1]", "localhost", "LOCALHOST"]
    assert all(is_loopback(host) for host in loopback)


async def test_serve_prints_its_url_and_answers(cli: Cli, tmp_path: Path) -> None:
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path / "xdg")}
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "agentforge.cli",
        "serve",
        "--port",
        "0",
        *cli.local,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
        cwd=cli.workspace,
    )
    try:
        assert process.stdout is not None
        line = (await asyncio.wait_for(process.stdout.readline(), 30)).decode()
        assert line.startswith("Agent Forge listening on http://127.0.0.1:"), line
        url = line.split()[-1]
        async with AsyncAgentForge(url) as client:
            assert (await client.health())["healthy"] is True
            session = await client.create_session(title="served")
            assert (await client.get_session(session.id)).title == "served"
    finally:
        process.send_signal(signal.SIGTERM)
        await asyncio.wait_for(process.wait(), 30)
    assert (cli.data_dir / "agentforge.db").exists()
