"""The server anchors the audit chains outside the database on its own: a signed checkpoint when it
starts and every `audit.checkpoint_interval` seconds, in a private file, that `audit verify` can check
the chains against. And what it creates is private: the data directory 0700, the database 0600."""

from __future__ import annotations

import asyncio
import stat
import time
from pathlib import Path

from agentforge.identity.model import SYSTEM_TENANT
from agentforge.runtime.checkpoints import checkpoint_file, checkpoint_key
from agentforge.store.audit_checkpoints import Checkpoint, read_checkpoints, verified
from agentforge.store.audit_verify import verify_database
from agentforge.store.engine import parse_database_url
from tests.e2e.harness import fake_provider_config, start_live_server
from tests.fakes.openai_server import FakeOpenAI
from tests.store.audit_helpers import owner_url, run_sql


async def checkpoints_once(path: Path, count: int, within: float = 10.0) -> list[Checkpoint]:
    deadline = time.monotonic() + within
    while True:
        found = await asyncio.to_thread(lambda: read_checkpoints(path) if path.exists() else [])
        if len(found) >= count:
            return found
        assert time.monotonic() < deadline, f"{len(found)} checkpoint(s) after {within} s"
        await asyncio.sleep(0.02)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


async def test_the_server_checkpoints_at_start_and_then_periodically(
    tmp_path: Path, fake_openai: FakeOpenAI, database_url: str
) -> None:
    config = {**fake_provider_config(fake_openai), "audit": {"checkpoint_interval": 0.05}}
    async with start_live_server(tmp_path, fake_openai, config, database_url=database_url) as live:
        path = checkpoint_file(live.settings)
        await live.create_session()
        found = await checkpoints_once(path, 3)
        key = await asyncio.to_thread(checkpoint_key, live.settings, create=False)
        checked = verified(found, key, path)
        assert SYSTEM_TENANT in checked[0].heads  # the config it started with, recorded before the first one
        assert checked[-1].heads["default"].seq >= 1  # the session it created since
        assert mode(path) == 0o600
        assert mode(live.settings.data_dir) == 0o700
        assert mode(key_path := live.settings.config.audit.key_file(live.settings.data_dir)) == 0o600
        assert mode(key_path.parent) == 0o700
        if parse_database_url(live.settings.database_url).dialect == "sqlite":
            database = parse_database_url(live.settings.database_url).sqlite_path
            assert mode(database) == 0o600
            assert mode(database.with_name(database.name + "-wal")) == 0o600

    # What the server signed catches the owner quietly dropping the newest row.
    await run_sql(database_url, "DELETE FROM audit_log WHERE tenant_id = 'default'")
    reports = await asyncio.to_thread(verify_database, owner_url(database_url), None, checked)
    default = next(report for report in reports if report.tenant_id == "default")
    assert default.broken is not None and "rows deleted from the end" in default.broken.reason
