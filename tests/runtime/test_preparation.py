"""What `serve` prepares in a child process before serving (runtime/preparation.py): a database so
prepared leaves the server nothing to migrate, audit or sign. (tests/cli/test_serve.py: the served
process then never loads Alembic or the signing library.)"""

from __future__ import annotations

import asyncio
import logging
import sys
from pathlib import Path

import pytest

from agentforge.config import load_settings
from agentforge.runtime.checkpoints import take_start_checkpoint
from agentforge.runtime.preparation import Prepared, prepare, start_preparing
from agentforge.store.audit_verify import heads_of_database
from agentforge.store.migrate import HEAD_REVISION
from tests.e2e.harness import fake_provider_config, start_live_server
from tests.fakes.openai_server import FakeOpenAI


async def test_a_prepared_database_leaves_the_server_nothing_to_migrate_audit_or_sign(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    url = f"sqlite:///{tmp_path / 'forge.db'}"
    settings = load_settings(
        data_dir=tmp_path / "data",
        database_url=url,
        directory=tmp_path,
        config_override=fake_provider_config(fake_openai),
    )
    prepared = await asyncio.to_thread(prepare, settings)
    assert prepared == Prepared(
        [f"Database created at schema {HEAD_REVISION}", "Audit checkpoint of 1 chain(s) written"]
    )
    heads = await asyncio.to_thread(heads_of_database, url)
    assert list(heads) == ["_system"]  # the config it starts with, audited

    assert await asyncio.to_thread(prepare, settings) == Prepared([])  # nothing left to do
    assert await asyncio.to_thread(start_preparing, settings) is None  # so no child is started

    async with start_live_server(tmp_path, fake_openai, database_url=url):
        assert await asyncio.to_thread(heads_of_database, url) == heads  # nothing audited again
    assert await asyncio.to_thread(take_start_checkpoint, settings, 3600.0) is None  # nor signed


async def test_a_step_the_child_cannot_do_is_left_to_the_server_with_what_failed(tmp_path: Path) -> None:
    # A database path under a regular file: nothing can be created there.
    (tmp_path / "file").write_text("")
    settings = load_settings(
        data_dir=tmp_path / "data",
        database_url=f"sqlite:///{tmp_path / 'file' / 'forge.db'}",
        directory=tmp_path,
    )
    prepared = await asyncio.to_thread(prepare, settings)
    assert prepared.done == [] and prepared.failed is not None


def _broken_child() -> None:
    raise RuntimeError("this child cannot start")


async def test_a_child_that_fails_to_start_leaves_everything_to_the_server(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    database = tmp_path / "forge.db"
    settings = load_settings(
        data_dir=tmp_path / "data", database_url=f"sqlite:///{database}", directory=tmp_path
    )
    with caplog.at_level(logging.DEBUG, logger="agentforge.runtime.preparation"):
        preparing = start_preparing(settings, initializer=_broken_child)
        assert preparing is not None  # a new database: there is something to prepare
        await asyncio.to_thread(preparing.finish)  # no error: the server prepares itself
    assert not database.exists()
    assert "the server prepares itself" in caplog.text


# A process preparing a new database as `serve` does, reporting its imports (-X importtime, on
# stderr); with `thread`, while another thread of it runs. The child's report follows the marker.
_PREPARING = """
import sys, threading
from pathlib import Path
from agentforge.config import load_settings
from agentforge.runtime.preparation import start_preparing

root = Path(sys.argv[1])
url = f"sqlite:///{root / 'forge.db'}"
settings = load_settings(data_dir=root / "data", database_url=url, directory=root)
if sys.argv[2] == "thread":
    threading.Thread(target=threading.Event().wait, args=(60,), daemon=True).start()
print("-- preparing", file=sys.stderr, flush=True)
preparing = start_preparing(settings)
assert preparing is not None
preparing.finish()
assert (root / "forge.db").exists()
"""


@pytest.mark.parametrize("threads", ["alone", "thread"])
async def test_the_child_starts_from_the_imports_of_a_process_running_no_other_thread(
    tmp_path: Path, threads: str
) -> None:
    # Alone (`serve` before it imports the server), the process forks on Linux: the child has the
    # config and the store already and imports only what preparing adds. Beside another thread it
    # spawns a fresh interpreter (a fork could copy a lock that thread holds), which imports them again.
    reimported = threads == "thread" or not sys.platform.startswith("linux")
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-X", "importtime", "-c", _PREPARING, str(tmp_path), threads,
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    _out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 0, err.decode()[-2000:]
    report = err.decode().split("-- preparing", 1)[1].splitlines()
    child = {row.rsplit("|", 1)[1].strip() for row in report if row.startswith("import time:")}
    assert "alembic" in child  # the child migrated
    assert ("sqlalchemy" in child) is reimported
    assert ("agentforge.config" in child) is reimported


# `serve`'s case: its listener bound and the collector paused when it forks. The forked child says
# (in a file) whether it still holds the listener and whether it collects garbage.
_FORKING = """
import gc, os, socket, sys
from pathlib import Path
from agentforge.config import load_settings
from agentforge.runtime.preparation import start_preparing

root = Path(sys.argv[1])
url = f"sqlite:///{root / 'forge.db'}"
settings = load_settings(data_dir=root / "data", database_url=url, directory=root)
listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
listener.bind(("127.0.0.1", 0))
gc.disable()

def report() -> None:
    try:
        os.fstat(listener.fileno())
        holds = True
    except OSError:
        holds = False
    (root / "child").write_text(f"{holds} {gc.isenabled()}")

preparing = start_preparing(settings, initializer=report, inherited=[listener])
assert preparing is not None
preparing.finish()
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the child is forked on Linux only")
async def test_a_forked_child_closes_the_listener_and_collects_garbage(tmp_path: Path) -> None:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-c", _FORKING, str(tmp_path), stderr=asyncio.subprocess.PIPE
    )
    _out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 0, err.decode()[-2000:]
    assert (tmp_path / "child").read_text() == "False True"
