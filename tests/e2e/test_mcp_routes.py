"""Connecting and disconnecting a tenant's MCP server over HTTP (opencode's `/mcp/{name}/connect` and
`/disconnect`): its tools stop and start answering, admins only, each change audited."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import httpx2

from agentforge.identity.apikeys import mint_api_key
from agentforge.identity.model import MEMBER
from tests.e2e.harness import LiveServer, fake_provider_config, start_live_server
from tests.fakes.openai_server import FakeOpenAI, call, reply
from tests.sandboxing import python_readable

ECHO_SERVER = Path(__file__).resolve().parents[1] / "tools" / "mcp_servers" / "echo_server.py"


def mcp_config(fake: FakeOpenAI) -> dict[str, Any]:
    return {
        **fake_provider_config(fake),
        "mcp": {"echo": {"type": "local", "command": [sys.executable, str(ECHO_SERVER)]}},
        "permission": {"echo_*": "allow"},
        "sandbox": python_readable(),  # with auth on, the default tenant's commands are confined
    }


async def _echo_once(live: LiveServer, text: str) -> dict[str, Any]:
    """A turn calling the server's echo tool; its tool part."""
    sid = (await live.create_session())["id"]
    live.fake.enqueue(call("echo_echo", {"text": text}), reply("echoed"))
    assert (await live.prompt(sid, "echo it")).status_code == 200
    history = (await live.client.get(f"/session/{sid}/message")).json()
    part: dict[str, Any] = next(p for item in history for p in item["parts"] if p["type"] == "tool")
    return part


async def test_disconnect_and_connect_again(
    tmp_path: Path, fake_openai: FakeOpenAI, database_url: str
) -> None:
    async with start_live_server(
        tmp_path, fake_openai, mcp_config(fake_openai), database_url=database_url
    ) as live:
        assert (await live.client.get("/mcp")).json() == {"echo": {"status": "connected"}}
        assert (await _echo_once(live, "one"))["state"]["output"] == "echo: one"

        assert (await live.client.post("/mcp/echo/disconnect")).json() is True
        assert (await live.client.get("/mcp")).json() == {"echo": {"status": "disabled"}}
        failed = await _echo_once(live, "two")
        assert failed["state"]["status"] == "error" and "not connected" in failed["state"]["error"]

        assert (await live.client.post("/mcp/echo/connect")).json() is True
        assert (await live.client.get("/mcp")).json() == {"echo": {"status": "connected"}}
        assert (await _echo_once(live, "three"))["state"]["output"] == "echo: three"

        entries = (await live.client.get("/audit")).json()["entries"]
        changes = [(e["action"], e["data"]["server"]) for e in entries if e["action"].startswith("mcp.")]
        assert changes == [("mcp.disconnected", "echo"), ("mcp.connected", "echo")]


async def test_only_an_admin_may_connect_or_disconnect(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    config = {**mcp_config(fake_openai), "auth": {"required": True}}
    async with start_live_server(tmp_path, fake_openai, config) as live:
        minted = mint_api_key("default", "member", frozenset({MEMBER}), "test")
        await live.runtime.store.create_api_key(minted.stored)
        headers = {"Authorization": f"Bearer {minted.token}"}
        async with httpx2.AsyncClient(base_url=live.url, headers=headers, timeout=30) as member:
            assert (await member.get("/mcp")).json() == {"echo": {"status": "connected"}}
            for action in ("disconnect", "connect"):
                refused = await member.post(f"/mcp/echo/{action}")
                assert refused.status_code == 403 and refused.json()["name"] == "ForbiddenError"
            assert (await member.get("/mcp")).json() == {"echo": {"status": "connected"}}
