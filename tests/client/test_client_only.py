"""The SDK installs and runs alone: a fresh virtualenv holding only the `agentforge-client`
distribution (clients/python, installed from its directory; pydantic, httpx2 and orjson from the
package index) imports the client, runs a turn against a server started from the test's own
environment, and cannot import FastAPI, SQLAlchemy, a provider SDK or the server's modules."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.e2e.harness import start_live_server
from tests.fakes.openai_server import FakeOpenAI, reply

CLIENT_DISTRIBUTION = Path(__file__).resolve().parents[2] / "clients" / "python"
SERVER_ONLY = [
    *("fastapi", "starlette", "uvicorn", "sqlalchemy", "alembic"),
    *("openai", "anthropic", "google.genai"),
]

CLIENT = textwrap.dedent(
    """
    import importlib, json, sys

    from agentforge.client import AgentForge
    from agentforge.model.event_types import EventMessagePartDelta

    with AgentForge(sys.argv[1]) as forge:
        session = forge.sessions.create(title="client only")
        turn = forge.sessions.stream(session.id, "hello")
        deltas = "".join(e.properties.delta for e in turn if isinstance(e, EventMessagePartDelta))
    importable = []
    for name in [*SERVER_ONLY, "agentforge.server", "agentforge.session"]:
        try:
            importlib.import_module(name)
        except ImportError:
            continue
        importable.append(name)
    print(json.dumps({
        "deltas": deltas,
        "final": [part.text for part in turn.message.parts if part.type == "text"],
        "importable": importable,
        "client_from": importlib.import_module("agentforge.client").__file__,
    }))
    """
)


@pytest.fixture(scope="session")
def client_only_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A virtualenv with nothing but the client distribution and its dependencies, built once per
    test session (~6 s): no pip inside it, the test environment's pip installs into it."""
    venv = tmp_path_factory.mktemp("client-only-venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    pip = [sys.executable, "-m", "pip", "--python", str(python)]
    installed = subprocess.run(
        [*pip, "install", "--quiet", str(CLIENT_DISTRIBUTION)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert installed.returncode == 0, installed.stderr
    return python


async def test_the_client_alone_runs_a_turn_and_has_none_of_the_server(
    tmp_path: Path, fake_openai: FakeOpenAI, client_only_python: Path
) -> None:
    script = tmp_path / "client_only.py"
    script.write_text(f"SERVER_ONLY = {SERVER_ONLY!r}\n{CLIENT}")
    fake_openai.enqueue(reply("Hello from afar"))
    async with start_live_server(tmp_path, fake_openai) as live:
        # -I: neither this checkout nor PYTHONPATH nor the user's site-packages is on its path.
        process = await asyncio.create_subprocess_exec(
            str(client_only_python),
            "-I",
            str(script),
            live.url,
            cwd=tmp_path,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 0, err.decode()
    result = json.loads(out.decode().strip().splitlines()[-1])
    assert Path(result.pop("client_from")).is_relative_to(client_only_python.parent.parent)
    assert result == {"deltas": "Hello from afar", "final": ["Hello from afar"], "importable": []}
