"""The SDK needs none of the server's dependencies: a process where importing FastAPI, Starlette,
SQLAlchemy, uvicorn or a provider SDK fails still imports the client and runs a turn over HTTP."""

from __future__ import annotations

import asyncio
import json
import sys
import textwrap
from pathlib import Path

from tests.e2e.harness import start_live_server
from tests.fakes.openai_server import FakeOpenAI, reply

BLOCKED = [
    "fastapi",
    "starlette",
    "sqlalchemy",
    "alembic",
    "asyncpg",
    "uvicorn",
    "openai",
    "anthropic",
    "google",
]

CLIENT = textwrap.dedent(
    """
    import importlib.abc, json, sys

    class Blocked(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in BLOCKED:
                raise ImportError(f"{name} is a server dependency")
            return None

    sys.meta_path.insert(0, Blocked())
    from agentforge.client import AgentForge
    from agentforge.model.event_types import EventMessagePartDelta

    with AgentForge(sys.argv[1]) as forge:
        session = forge.sessions.create(title="client only")
        turn = forge.sessions.stream(session.id, "hello")
        deltas = "".join(e.properties.delta for e in turn if isinstance(e, EventMessagePartDelta))
    loaded = sorted({name.split(".")[0] for name in sys.modules} & set(BLOCKED))
    final = [part.text for part in turn.message.parts if part.type == "text"]
    print(json.dumps({"deltas": deltas, "final": final, "loaded": loaded}))
    """
)


async def test_the_client_runs_a_turn_without_the_server_dependencies(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    script = tmp_path / "client_only.py"
    script.write_text(f"BLOCKED = {BLOCKED!r}\n{CLIENT}")
    fake_openai.enqueue(reply("Hello from afar"))
    async with start_live_server(tmp_path, fake_openai) as live:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            str(script),
            live.url,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 0, err.decode()
    result = json.loads(out.decode().strip().splitlines()[-1])
    assert result == {"deltas": "Hello from afar", "final": ["Hello from afar"], "loaded": []}
