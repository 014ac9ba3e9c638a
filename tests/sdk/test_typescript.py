"""The TypeScript SDK (sdk/typescript, generated from sdk/openapi.json) drives a turn under node."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import pytest

from tests.e2e.harness import start_live_server
from tests.fakes.openai_server import FakeOpenAI, reply

PACKAGE = Path(__file__).resolve().parents[2] / "sdk" / "typescript"
TSC = PACKAGE / "node_modules" / ".bin" / "tsc"
# Compiling (tsc) dominates; the turn itself takes well under a second.
BOUND_SECONDS = 90

pytestmark = pytest.mark.skipif(
    shutil.which("node") is None or not TSC.exists(),
    reason="needs node and `npm ci` in sdk/typescript (.ci/run does both)",
)


async def _run(*command: str, env: dict[str, str] | None = None) -> str:
    process = await asyncio.create_subprocess_exec(
        *command, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env
    )
    try:
        out, err = await asyncio.wait_for(process.communicate(), BOUND_SECONDS)
    except TimeoutError:
        process.kill()
        raise
    assert process.returncode == 0, (command, out.decode(), err.decode())
    return out.decode()


async def test_the_typescript_sdk_drives_a_turn(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    out = tmp_path / "js"
    # CommonJS into a directory of its own: node runs it without a bundler or loader.
    await _run(
        str(TSC), "-p", str(PACKAGE / "tsconfig.json"), "--noEmit", "false", "--module", "commonjs",
        "--moduleResolution", "node10", "--outDir", str(out), "--rootDir", str(PACKAGE),
    )  # fmt: skip
    fake_openai.enqueue(reply("Hello from the fake model"))
    async with start_live_server(tmp_path, fake_openai) as live:
        node = shutil.which("node")
        assert node is not None
        printed = await _run(node, str(out / "test" / "turn.js"), env={"FORGE_URL": live.url, "PATH": ""})
        result = json.loads(printed.strip().splitlines()[-1])
        assert result["streamed"] == "Hello from the fake model"
        assert result["types"][0] == "server.connected"
        assert "message.part.delta" in result["types"] and result["types"][-1] == "session.idle"
        assert result["roles"] == ["user", "assistant"]
        assert result["missing"] == {"status": 404, "name": "NotFoundError"}
        stored = (await live.client.get(f"/session/{result['sessionID']}/message")).json()
        texts = [part["text"] for part in stored[-1]["parts"] if part["type"] == "text"]
        assert texts == ["Hello from the fake model"]
