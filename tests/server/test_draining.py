"""While the server drains, every way of starting a turn answers 503 before anything is stored."""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e.harness import LiveServer

TEXT = {"parts": [{"type": "text", "text": "hi"}]}


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("message", TEXT),
        ("prompt_async", TEXT),
        ("command", {"command": "init", "arguments": ""}),
        ("shell", {"agent": "build", "command": "echo hi"}),
        ("summarize", {"providerID": "fake", "modelID": "test-model"}),
    ],
)
async def test_a_draining_server_refuses_new_turns_storing_nothing(
    live: LiveServer, path: str, body: dict[str, Any]
) -> None:
    session = await live.create_session()
    live.runtime.runners.stop_accepting()
    response = await live.client.post(f"/session/{session['id']}/{path}", json=body)
    assert response.status_code == 503, response.text
    assert response.json()["name"] == "ShuttingDownError"
    assert (await live.client.get(f"/session/{session['id']}/message")).json() == []
    ready = await live.client.get("/global/ready")
    assert ready.status_code == 503 and ready.json()["failed"] == {"lifecycle": "the server is shutting down"}


async def test_the_openapi_documents_readiness_and_the_shutdown_event(live: LiveServer) -> None:
    spec = (await live.client.get("/openapi.json")).json()
    route = spec["paths"]["/event"]["get"]
    assert "`server.shutdown`" in route["description"]
    assert "text/event-stream" in route["responses"]["200"]["content"]
    # One model per event type: the shutdown notice is one of them.
    assert (
        spec["components"]["schemas"]["EventServerShutdown"]["properties"]["type"]["const"]
        == "server.shutdown"
    )
    assert "503" in spec["paths"]["/global/ready"]["get"]["responses"]
    assert "/webhook/delivery" in spec["paths"]
