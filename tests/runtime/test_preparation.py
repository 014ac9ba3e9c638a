"""What `serve` prepares in a child process before serving (runtime/preparation.py): a database so
prepared leaves the server nothing to migrate, audit or sign. (tests/cli/test_serve.py: the served
process then never loads Alembic or the signing library.)"""

from __future__ import annotations

import asyncio
import logging
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
