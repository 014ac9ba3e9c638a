"""The garbage collector paused while a command starts (cli/gcpause.py): running again, with what
start-up built frozen, once the command is ready."""

from __future__ import annotations

import asyncio
import gc
import os
import signal
import sys
from collections.abc import Iterator

import pytest

from agentforge.cli import gcpause
from tests.cli.conftest import Cli
from tests.fakes.openai_server import FakeOpenAI, reply

# `agentforge ARGS` as the console script runs it, saying on stderr at exit whether the collector
# ran then and whether anything had been frozen.
_PROBE = (
    "import atexit, gc, runpy, sys\n"
    "atexit.register(lambda: print('collector', gc.isenabled(), gc.get_freeze_count() > 0,"
    " file=sys.stderr, flush=True))\n"
    "sys.argv = ['agentforge', *sys.argv[1:]]\n"
    "runpy.run_module('agentforge.cli', run_name='__main__')\n"
)
RUNNING_FROZEN = "collector True True"


@pytest.fixture
def collector() -> Iterator[None]:
    """The test process's collector as it was, and nothing of it left frozen."""
    enabled = gc.isenabled()
    try:
        yield
    finally:
        gcpause.resume()
        gc.unfreeze()
        (gc.enable if enabled else gc.disable)()


def test_resume_freezes_what_exists_and_runs_the_collector_again(collector: None) -> None:
    gc.enable()
    gcpause.pause()
    assert not gc.isenabled()
    gcpause.resume()
    assert gc.isenabled() and gc.get_freeze_count() > 0
    gc.unfreeze()
    gcpause.resume()  # once only
    assert gc.get_freeze_count() == 0


def test_a_collector_someone_else_stopped_stays_stopped(collector: None) -> None:
    gc.disable()
    gcpause.pause()
    gcpause.resume()
    assert not gc.isenabled() and gc.get_freeze_count() == 0


async def _probe(cli: Cli, *args: str) -> asyncio.subprocess.Process:
    env = {**os.environ, "XDG_CONFIG_HOME": str(cli.config.parent / "xdg")}
    return await asyncio.create_subprocess_exec(
        sys.executable, "-c", _PROBE, *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env, cwd=cli.workspace,
    )  # fmt: skip


async def test_serve_runs_the_collector_once_listening(cli: Cli) -> None:
    process = await _probe(cli, "serve", "--port", "0", *cli.local)
    assert process.stdout is not None
    line = (await asyncio.wait_for(process.stdout.readline(), 30)).decode()
    assert "listening on" in line
    # SIGINT: uvicorn raises it again once stopped, and Python exits through its atexit hooks.
    process.send_signal(signal.SIGINT)
    _out, err = await asyncio.wait_for(process.communicate(), 30)
    assert RUNNING_FROZEN in err.decode()


async def test_run_runs_the_collector_once_its_server_is_up(cli: Cli, fake_openai: FakeOpenAI) -> None:
    fake_openai.enqueue(reply("hello back"))
    process = await _probe(cli, "run", "hello", *cli.local)
    out, err = await asyncio.wait_for(process.communicate(), 30)
    assert process.returncode == 0, err.decode()
    assert "hello back" in out.decode()
    assert RUNNING_FROZEN in err.decode()


async def test_any_other_command_runs_the_collector_once_it_is_loaded(cli: Cli) -> None:
    process = await _probe(cli, "keys", "--help")
    out, err = await asyncio.wait_for(process.communicate(), 30)
    assert process.returncode == 0 and "API keys" in out.decode()
    assert RUNNING_FROZEN in err.decode()
