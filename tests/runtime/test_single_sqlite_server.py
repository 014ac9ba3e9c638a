"""SQLite is one process: a second server on the same data directory refuses to start, clearly."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentforge.config import load_settings
from agentforge.runtime.runtime import Runtime
from agentforge.store.store import SecondServerError
from agentforge.testing import ScriptedModel


async def test_a_second_server_on_one_sqlite_database_refuses_to_start(tmp_path: Path) -> None:
    settings = load_settings(data_dir=tmp_path / "data", directory=tmp_path)
    first = await Runtime.open(settings, stream=ScriptedModel([]), serving=True)
    try:
        with pytest.raises(SecondServerError, match="Another Agent Forge server is already running"):
            await Runtime.open(settings, stream=ScriptedModel([]), serving=True)
        # Not a server (the CLI running a prompt in-process): still allowed beside it.
        beside = await Runtime.open(settings, stream=ScriptedModel([]))
        await beside.close()
    finally:
        await first.close()
    # Once the first server stopped, the next one starts.
    second = await Runtime.open(settings, stream=ScriptedModel([]), serving=True)
    await second.close()
