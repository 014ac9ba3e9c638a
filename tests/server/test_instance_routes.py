"""opencode's instance routes its terminal UI reads (project, config, experimental, tooling status,
MCP, log, the global event stream, session init and share), and the answers to routes deliberately
not offered, through a live server."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import httpx2
import orjson
import pytest

from agentforge.model import ids
from agentforge.server.routes.session_extras import INIT_PROMPT, SHARING_DISABLED
from tests.e2e.harness import LiveServer
from tests.fakes.openai_server import reply


def _json(response: httpx2.Response, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    return response.json()


async def test_project_is_the_workspace(live: LiveServer) -> None:
    current = _json(await live.client.get("/project/current"))
    assert current["worktree"] == str(live.workspace) and current["name"] == "workspace"
    assert len(current["id"]) == 40 and current["sandboxes"] == [] and "vcs" not in current
    assert _json(await live.client.get("/project")) == [current]
    directories = _json(await live.client.get(f"/project/{current['id']}/directories"))
    assert directories == [{"directory": str(live.workspace)}]
    assert (await live.client.get("/project/0123/directories")).status_code == 404


async def test_config_shows_what_clients_need_and_no_secret(live: LiveServer) -> None:
    config = _json(await live.client.get("/config"))
    assert config["model"] == "fake/test-model"
    assert config["share"] == "disabled" and config["autoupdate"] is False and config["snapshot"] is True
    assert config["username"] == "local"
    assert config["provider"] == {
        "fake": {"name": "fake", "models": {"test-model": {"limit": {"context": 128_000, "output": 4096}}}}
    }
    raw = orjson.dumps(config)
    assert b"sk-test" not in raw and b"baseURL" not in raw and b"apiKey" not in raw
    refused = await live.client.patch("/config", json={"model": "other/model"})
    assert refused.status_code == 403 and "cannot be changed over HTTP" in refused.json()["data"]["message"]
    assert _json(await live.client.get("/config"))["model"] == "fake/test-model"


async def test_experimental_routes(live: LiveServer) -> None:
    assert _json(await live.client.get("/experimental/capabilities")) == {"backgroundSubagents": False}
    console = _json(await live.client.get("/experimental/console"))
    assert console == {"consoleManagedProviders": [], "switchableOrgCount": 0}
    ids = _json(await live.client.get("/experimental/tool/ids"))
    assert {"read", "write", "edit", "bash", "grep"} <= set(ids)
    tools = _json(
        await live.client.get("/experimental/tool", params={"provider": "fake", "model": "test-model"})
    )
    read = next(tool for tool in tools if tool["id"] == "read")
    assert read["description"] and read["parameters"]["properties"]["filePath"]["type"] == "string"
    unknown = await live.client.get("/experimental/tool", params={"provider": "nope", "model": "x"})
    assert unknown.status_code == 400
    assert _json(await live.client.get("/experimental/resource")) == {}
    assert _json(await live.client.get("/experimental/workspace")) == []
    assert _json(await live.client.get("/experimental/workspace/status")) == []


async def test_status_routes_of_tooling_not_run_here(live: LiveServer) -> None:
    for route in ("/lsp", "/formatter", "/skill"):
        assert _json(await live.client.get(route)) == [], route
    assert _json(await live.client.get("/provider/auth")) == {}
    assert _json(await live.client.get("/mcp")) == {}
    added = await live.client.post("/mcp", json={"name": "x", "config": {"type": "local", "command": ["x"]}})
    assert added.status_code == 403 and "cannot be added over HTTP" in added.json()["data"]["message"]
    missing = await live.client.post("/mcp/nope/connect")
    assert missing.status_code == 404 and missing.json()["data"]["message"] == "MCP server not found: nope"


async def test_log_writes_the_clients_line_to_the_server_log(
    live: LiveServer, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="agentforge.client"):
        body = {"service": "tui", "level": "warn", "message": "terminal too small\nFORGED server line"}
        assert _json(await live.client.post("/log", json=body)) is True
    [record] = [r for r in caplog.records if r.name == "agentforge.client"]
    assert record.levelno == logging.WARNING
    # One line, whatever the client sent: it cannot forge a line of the server's log.
    assert record.getMessage() == "[default/local] tui: terminal too small\\nFORGED server line"
    assert (
        await live.client.post("/log", json={"service": "tui", "level": "loud", "message": "x"})
    ).status_code == 400


@pytest.mark.parametrize(
    ("method", "path", "reason"),
    [
        ("PUT", "/auth/openai", "Provider credentials are part of the server's config"),
        ("POST", "/provider/openai/oauth/authorize", "Provider login (OAuth) is not offered"),
        ("POST", "/instance/dispose", "restart the server"),
        ("POST", "/tui/open-help", "no UI of its own"),
        ("GET", "/api/session", "opencode's v2 API"),
        ("POST", "/experimental/worktree", "each tenant works in its one workspace"),
        ("POST", "/global/upgrade", "its operator restarts or upgrades it"),
    ],
)
async def test_routes_deliberately_not_offered_say_why(
    live: LiveServer, method: str, path: str, reason: str
) -> None:
    response = await live.client.request(method, path, json={})
    assert response.status_code == 501
    body = response.json()
    assert body["name"] == "UnsupportedError"
    assert body["data"]["message"].startswith(f"{method} {path} is not offered by Agent Forge.")
    assert reason in body["data"]["message"]


async def test_an_unknown_route_is_named_in_its_404(live: LiveServer) -> None:
    response = await live.client.get("/no/such/route")
    assert response.status_code == 404
    assert response.json() == {"name": "NotFoundError", "data": {"message": "No route GET /no/such/route"}}


async def test_global_event_wraps_the_tenants_events_in_opencodes_envelope(live: LiveServer) -> None:
    project = _json(await live.client.get("/project/current"))["id"]
    frames: list[dict[str, Any]] = []
    connected = asyncio.Event()
    created = asyncio.Event()

    async def read() -> None:
        async with live.client.stream("GET", "/global/event", timeout=None) as response:
            assert response.headers["content-type"].startswith("text/event-stream")
            async for line in response.aiter_lines():
                if not line.startswith("data: "):
                    continue
                frames.append(orjson.loads(line[len("data: ") :]))
                kind = frames[-1]["payload"]["type"]
                connected.set()
                if kind == "session.created":
                    created.set()
                    return

    reader = asyncio.create_task(read())
    await asyncio.wait_for(connected.wait(), 10)
    session = await live.create_session(title="watched")
    await asyncio.wait_for(created.wait(), 10)
    await reader
    first, last = frames[0], frames[-1]
    assert first == {"directory": str(live.workspace), "project": project, "payload": first["payload"]}
    assert first["payload"]["type"] == "server.connected"
    assert last["directory"] == str(live.workspace) and last["project"] == project
    assert last["payload"]["properties"]["info"]["id"] == session["id"]
    assert last["payload"]["id"].startswith("evt_")


async def test_share_is_refused_and_unshare_changes_nothing(live: LiveServer) -> None:
    session = await live.create_session()
    refused = await live.client.post(f"/session/{session['id']}/share")
    assert refused.status_code == 403 and refused.json()["data"]["message"] == SHARING_DISABLED
    assert _json(await live.client.delete(f"/session/{session['id']}/share")) == session
    assert (await live.client.post("/session/ses_nope/share")).status_code == 404


async def test_init_runs_a_turn_that_asks_for_agents_md(live: LiveServer) -> None:
    session = await live.create_session()
    live.fake.enqueue(reply("Wrote AGENTS.md."))
    body = {"providerID": "fake", "modelID": "test-model", "messageID": ids.ascending("msg")}
    assert _json(await live.client.post(f"/session/{session['id']}/init", json=body)) is True
    sent = live.fake.requests[-1]["messages"]
    assert sent[-1]["role"] == "user" and INIT_PROMPT in str(sent[-1]["content"])
    history = _json(await live.client.get(f"/session/{session['id']}/message"))
    assert history[0]["info"]["id"] == body["messageID"] and history[1]["info"]["role"] == "assistant"
