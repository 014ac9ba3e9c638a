"""A client generated from our spec by openapi-python-client (into a temporary directory) drives a turn:
the contract is exact enough for a generator that knows nothing else about the server."""

from __future__ import annotations

import asyncio
import importlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.harness import start_live_server
from tests.fakes.openai_server import FakeOpenAI, reply

SPEC = Path(__file__).resolve().parents[2] / "sdk" / "openapi.json"
PACKAGE = "forge_generated_client"


@pytest.fixture
def generated(tmp_path: Path) -> Iterator[Path]:
    sys.path.insert(0, str(tmp_path))
    yield tmp_path / PACKAGE
    sys.path.remove(str(tmp_path))
    for name in [module for module in sys.modules if module.split(".")[0] == PACKAGE]:
        del sys.modules[name]


def _module(name: str) -> Any:
    return importlib.import_module(f"{PACKAGE}.{name}")


async def test_a_generated_client_drives_a_turn(
    generated: Path, tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "openapi_python_client", "generate", "--path", str(SPEC),
        "--output-path", str(generated), "--meta", "none",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    output, _ = await asyncio.wait_for(process.communicate(), 120)
    assert process.returncode == 0, output.decode()
    assert b"Warning" not in output, output.decode()  # every schema and operation understood

    client_module = _module("client")
    session_create = _module("api.session.session_create")
    session_prompt = _module("api.session.session_prompt")
    session_get = _module("api.session.session_get")
    models = _module("models")

    fake_openai.enqueue(reply("Hello, generated client"))
    (tmp_path / "server").mkdir()
    async with start_live_server(tmp_path / "server", fake_openai) as live:
        client = client_module.Client(base_url=live.url, raise_on_unexpected_status=True)
        session = await session_create.asyncio(
            client=client, body=models.SessionCreateInput(title="generated")
        )
        assert isinstance(session, models.Session) and session.title == "generated"

        body = models.PromptInput(parts=[models.TextPartInput(type_="text", text="hi")])
        answer = await session_prompt.asyncio(session.id, client=client, body=body)
        assert isinstance(answer, models.WithParts)
        assert answer.info.role == "assistant"
        texts = [part.text for part in answer.parts if isinstance(part, models.TextPart)]
        assert texts == ["Hello, generated client"]

        missing = await session_get.asyncio_detailed("ses_missing", client=client)
        assert missing.status_code == 404
        assert isinstance(missing.parsed, models.ErrorBody) and missing.parsed.name == "NotFoundError"
