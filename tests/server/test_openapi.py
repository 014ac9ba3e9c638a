"""The OpenAPI contract: valid, named by resource and verb, errors as sent, events typed, exported."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from openapi_spec_validator import validate

from agentforge.config import load_settings
from agentforge.model import events
from agentforge.model.event_types import EVENT_TYPES
from agentforge.server.app import create_app
from agentforge.session.channels import questions
from agentforge.session.channels.commands import COMMAND_EXECUTED
from agentforge.session.context.compaction import SESSION_COMPACTED
from agentforge.terminal import registry

OPERATION_ID = re.compile(r"^[a-z][A-Za-z0-9]*(\.[a-z][A-Za-z0-9_]*)+$")
METHODS = {"get", "post", "put", "patch", "delete"}


@pytest.fixture(scope="module")
def spec(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root: Path = tmp_path_factory.mktemp("spec")
    settings = load_settings(data_dir=root, database_url=f"sqlite:///{root / 'f.db'}", directory=root)
    contract: dict[str, Any] = create_app(settings).openapi()
    return contract


def _operations(spec: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (path, method, operation)
        for path, item in spec["paths"].items()
        for method, operation in item.items()
        if method in METHODS
    ]


def test_the_spec_is_valid_openapi(spec: dict[str, Any]) -> None:
    validate(spec)


def test_operation_ids_are_resource_and_verb_and_unique(spec: dict[str, Any]) -> None:
    ids = [operation["operationId"] for _, _, operation in _operations(spec)]
    assert len(ids) == len(set(ids))
    assert [i for i in ids if not OPERATION_ID.match(i)] == []
    by_route = {(method, path): operation["operationId"] for path, method, operation in _operations(spec)}
    assert by_route[("get", "/session")] == "session.list"
    assert by_route[("post", "/session")] == "session.create"
    assert by_route[("post", "/session/{session_id}/message")] == "session.prompt"
    assert by_route[("get", "/session/{session_id}/message")] == "session.messages"
    assert by_route[("post", "/session/{session_id}/abort")] == "session.abort"
    assert by_route[("get", "/event")] == "event.subscribe"
    assert by_route[("post", "/permission/{request_id}/reply")] == "permission.reply"
    assert by_route[("post", "/question/{request_id}/reply")] == "question.reply"


def test_no_route_documents_a_422(spec: dict[str, Any]) -> None:
    assert [(p, m) for p, m, op in _operations(spec) if "422" in op["responses"]] == []
    assert "HTTPValidationError" not in spec["components"]["schemas"]


def test_errors_are_documented_with_the_error_schema(spec: dict[str, Any]) -> None:
    error = {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}}
    seen: set[str] = set()
    for path, method, operation in _operations(spec):
        responses = operation["responses"]
        assert responses["400"]["content"] == error, (method, path)
        if path != "/global/health":
            assert {"401", "403"} <= responses.keys(), (method, path)
            assert operation["security"], (method, path)
        if "{" in path:
            assert "404" in responses, (method, path)
        seen |= {status for status in responses if status.startswith("4")}
        assert all(responses[s]["content"] == error for s in responses if s.startswith("4"))
    assert {"400", "401", "403", "404", "409", "413"} <= seen
    schemes = spec["components"]["securitySchemes"]
    assert schemes["apiKey"]["scheme"] == "bearer"
    assert schemes["jwt"]["bearerFormat"] == "JWT"


def test_every_success_response_is_typed(spec: dict[str, Any]) -> None:
    untyped = []
    for path, method, operation in _operations(spec):
        for status, response in operation["responses"].items():
            if not status.startswith("2") or status == "204":
                continue
            schemas = [media.get("schema") for media in response.get("content", {}).values()]
            if not schemas or any(not schema for schema in schemas):
                untyped.append(f"{method.upper()} {path} {status}")
    assert untyped == []


def test_the_event_stream_is_documented_with_one_schema_per_event(spec: dict[str, Any]) -> None:
    ok = spec["paths"]["/event"]["get"]["responses"]["200"]["content"]
    assert list(ok) == ["text/event-stream"]
    assert ok["text/event-stream"]["schema"] == {"$ref": "#/components/schemas/Event"}
    mapping = spec["components"]["schemas"]["Event"]["discriminator"]["mapping"]
    published = {
        value
        for module in (events, questions, registry)
        for name, value in vars(module).items()
        if name.isupper() and isinstance(value, str) and "." in value
    } | {COMMAND_EXECUTED, SESSION_COMPACTED}
    assert published <= EVENT_TYPES
    assert set(mapping) == EVENT_TYPES


def test_the_committed_spec_is_current() -> None:
    """sdk/openapi.json (what the TypeScript SDK is generated from) is the server's contract."""
    script = Path(__file__).resolve().parents[2] / "scripts" / "export_openapi.py"
    command = [sys.executable, str(script), "--check"]
    check = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert check.returncode == 0, check.stderr


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
def test_the_docs_load_their_assets_from_the_server(tmp_path: Path, page: str) -> None:
    """No CDN: every script and stylesheet the page loads is served by the app itself."""
    settings = load_settings(
        data_dir=tmp_path, database_url=f"sqlite:///{tmp_path / 'f.db'}", directory=tmp_path
    )
    with TestClient(create_app(settings)) as client:
        html = client.get(page).text
        assets = re.findall(r'(?:src|href)="([^"]+)"', html)
        assert assets and all(asset.startswith("/") for asset in assets), assets
        for asset in assets:
            assert client.get(asset).status_code == 200, asset
        assert "https://" not in html and "http://" not in html


# A fresh interpreter: whether the app imported the contract's module, then whether each build of
# the contract ran on the main (event loop's) thread, over two requests for /openapi.json.
_SERVED_PROBE = """
import asyncio, sys, threading
from pathlib import Path
import fastapi.openapi.utils
from agentforge.client import StreamingASGITransport
from agentforge.server.app import create_app
from agentforge.testing import scripted_settings
import httpx2

built = []
derive = fastapi.openapi.utils.get_openapi
def recording(**kwargs):
    built.append(threading.current_thread() is threading.main_thread())
    return derive(**kwargs)
fastapi.openapi.utils.get_openapi = recording

root = Path(sys.argv[1])
app = create_app(scripted_settings(root, root / "data"))
print("agentforge.server.openapi" in sys.modules)

async def main():
    async with httpx2.AsyncClient(transport=StreamingASGITransport(app), base_url="http://t") as client:
        first, again = await asyncio.gather(client.get("/openapi.json"), client.get("/openapi.json"))
    assert first.json() == again.json() and "/session" in first.json()["paths"]
    print(built)

asyncio.run(main())
"""


def test_the_contract_is_built_when_first_asked_for_in_a_worker_thread(tmp_path: Path) -> None:
    # Not at start-up (~25 ms of imports, ~0.4 s to build), and never on the event loop, whose
    # requests and turns would wait meanwhile; once, however many ask at the same time.
    done = subprocess.run(
        [sys.executable, "-c", _SERVED_PROBE, str(tmp_path)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split("\n")[:2] == ["False", "[False]"]
