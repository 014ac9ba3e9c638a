"""The API fuzzed (issue 11, item 7): schemathesis generates requests, valid and invalid, for every
operation of `/openapi.json` and sends them to a live `agentforge serve` subprocess, on SQLite and on
Postgres. No request may answer 5xx. Bounded: a few examples per operation (AGENTFORGE_FUZZ_EXAMPLES
raises it for a longer local run)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import httpx2
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.core.result import Ok

from tests.e2e.harness import fake_provider_config
from tests.e2e.server_process import serve_process
from tests.fakes.openai_server import FakeOpenAI, reply

EXAMPLES = int(os.environ.get("AGENTFORGE_FUZZ_EXAMPLES", "3"))
# Streams never end (a request would wait forever); the others change the server itself: its config
# file, its MCP servers (processes), its terminals (shells). The routes' own tests cover those.
SKIPPED = {
    ("GET", "/event"),
    ("GET", "/global/event"),
    ("PATCH", "/config"),
    ("POST", "/mcp"),
    ("POST", "/pty"),
}


def fuzz(url: str, session_id: str) -> list[str]:
    """Run every operation's examples; the 5xx answers, described."""
    schema = schemathesis.openapi.from_url(f"{url}/openapi.json")
    failures: list[str] = []
    for result in schema.get_all_operations():
        assert isinstance(result, Ok), f"an operation of /openapi.json is invalid: {result.err()}"
        operation = result.ok()
        if (operation.method.upper(), operation.path) in SKIPPED:
            continue
        failures.extend(_fuzz_operation(operation, url, session_id))
    return failures


def _fuzz_operation(operation: Any, url: str, session_id: str) -> list[str]:
    fixed: dict[str, Any] = {}
    # Against a real session too, so bodies get past the lookup (deleting it is left to random ids).
    if "{session_id}" in operation.path and (operation.method.upper(), operation.path) != (
        "DELETE",
        "/session/{session_id}",
    ):
        fixed = {"path_parameters": {"session_id": session_id}}
    strategy = st.one_of(
        operation.as_strategy(GenerationMode.POSITIVE, **fixed),
        operation.as_strategy(GenerationMode.NEGATIVE, **fixed),
    )
    failures: list[str] = []

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        derandomize=True,  # the same requests every run: a failure reproduces
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(case=strategy)
    def check(case: Any) -> None:
        response = case.call(base_url=url, timeout=60)
        if response.status_code >= 500:
            failures.append(
                f"{case.method} {case.formatted_path} -> {response.status_code}: {response.text[:300]}"
            )

    check()
    return failures


async def test_no_generated_request_answers_a_server_error(
    tmp_path: Path, fake_openai: FakeOpenAI, database_url: str
) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / "notes.txt").write_text("fuzzing\n")
    config = {**fake_provider_config(fake_openai), "title": False, "compaction": {"auto": False}}
    # Every valid prompt gets an answer at once: no provider fault, so no back-off to wait out.
    fake_openai.enqueue(*(reply("ok") for _ in range(2000)))
    async with serve_process(tmp_path, config, database_url=database_url, workspace=workspace) as server:
        async with httpx2.AsyncClient(base_url=server.url, timeout=30) as client:
            session_id = (await client.post("/session")).json()["id"]
        failures = await asyncio.to_thread(fuzz, server.url, session_id)
        assert server.process.returncode is None, "the server died during the fuzzing"

    assert failures == []
