"""Two tenants on one live server that requires auth, each with its API key: each gets its own
overlay (agent prompt, model, permission rule, MCP server, output limits), works in its own
workspace and data directory, and cannot reach the other's files. Both are driven over HTTP.

The tenant `default` (the server's own workspace and data directory) and `tenant-b` (an overlay,
roots under the data directory). What one tenant's ids, listings and events show another is in
test_tenant_isolation.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2

from agentforge.identity.apikeys import mint_api_key
from agentforge.identity.model import MEMBER
from agentforge.tools.truncation import output_dir
from tests.e2e.harness import PYTHON_READABLE, LiveServer, fake_provider_config, start_live_server
from tests.fakes.openai_server import FakeOpenAI, call, reply

TENANT = "tenant-b"
ECHO_SERVER = Path(__file__).resolve().parents[1] / "tools" / "mcp_servers" / "echo_server.py"
B_PROMPT = "You are tenant B's builder."


@dataclass
class Tenants:
    live: LiveServer
    default: httpx2.AsyncClient  # tenant `default`, authenticated with its key
    b: httpx2.AsyncClient  # tenant-b

    @property
    def b_workspace(self) -> Path:
        return self.live.settings.data_dir / "tenants" / TENANT / "workspace"


def tenancy_config(fake: FakeOpenAI, **overlay: Any) -> dict[str, Any]:
    config = fake_provider_config(fake)
    config["tenancy"] = {"overlays": {TENANT: overlay}, "shell": "*"}
    config["auth"] = {"required": True}
    config["sandbox"] = {"readable": PYTHON_READABLE}  # the tenant's MCP server runs our Python
    return config


async def _client(live: LiveServer, tenant: str, stack: contextlib.AsyncExitStack) -> httpx2.AsyncClient:
    minted = mint_api_key(tenant, "tenancy-test", frozenset({MEMBER}), "test")
    await live.runtime.store.create_api_key(minted.stored)
    headers = {"Authorization": f"Bearer {minted.token}"}
    client = httpx2.AsyncClient(base_url=live.url, headers=headers, timeout=30)
    return await stack.enter_async_context(client)


@contextlib.asynccontextmanager
async def two_tenants(
    tmp_path: Path, fake: FakeOpenAI, config: dict[str, Any], database_url: str | None = None
) -> AsyncIterator[Tenants]:
    async with (
        start_live_server(tmp_path, fake, config, database_url=database_url) as live,
        contextlib.AsyncExitStack() as stack,
    ):
        yield Tenants(live, await _client(live, "default", stack), await _client(live, TENANT, stack))


def text_body(text: str) -> dict[str, Any]:
    return {"parts": [{"type": "text", "text": text}]}


async def prompt_in_new_session(client: httpx2.AsyncClient, text: str) -> str:
    """A new session of the client's tenant, prompted once; its id."""
    created = await client.post("/session")
    assert created.status_code == 200, created.text
    sid: str = created.json()["id"]
    answered = await client.post(f"/session/{sid}/message", json=text_body(text))
    assert answered.status_code == 200, answered.text
    return sid


async def tool_parts(client: httpx2.AsyncClient, sid: str) -> list[dict[str, Any]]:
    history = (await client.get(f"/session/{sid}/message")).json()
    return [part for item in history for part in item["parts"] if part["type"] == "tool"]


def tool_names(request: dict[str, Any]) -> set[str]:
    return {tool["function"]["name"] for tool in request.get("tools") or []}


def system_text(request: dict[str, Any]) -> str:
    return "\n".join(str(m["content"]) for m in request["messages"] if m["role"] == "system")


async def test_each_tenant_runs_with_its_own_agent_prompt_model_and_rules(
    tmp_path: Path, fake_openai: FakeOpenAI, database_url: str
) -> None:
    overlay = {
        "model": "fake/b-model",
        "provider": {"fake": {"models": {"b-model": {"limit": {"context": 64_000, "output": 2048}}}}},
        "agent": {"build": {"prompt": B_PROMPT}, "auditor": {"description": "B's own", "mode": "primary"}},
        "permission": {"webfetch": "deny"},
    }
    config = tenancy_config(fake_openai, **overlay)
    async with two_tenants(tmp_path, fake_openai, config, database_url) as tenants:
        tenants.live.fake.enqueue(reply("default here"), reply("tenant B here"))
        await prompt_in_new_session(tenants.default, "hello from default")
        await prompt_in_new_session(tenants.b, "hello from B")

        default_request, b_request = tenants.live.fake.requests
        assert default_request["model"] == "test-model"
        assert B_PROMPT not in system_text(default_request)
        assert "webfetch" in tool_names(default_request)
        assert b_request["model"] == "b-model"
        assert B_PROMPT in system_text(b_request)
        assert "webfetch" not in tool_names(b_request)

        # Listings answer from the caller's tenant: B's agent and default model are B's alone.
        assert "auditor" not in {agent["name"] for agent in (await tenants.default.get("/agent")).json()}
        assert "auditor" in {agent["name"] for agent in (await tenants.b.get("/agent")).json()}
        assert (await tenants.default.get("/config/providers")).json()["default"] == {"fake": "test-model"}
        assert (await tenants.b.get("/config/providers")).json()["default"] == {"fake": "b-model"}


async def test_a_broken_overlay_file_fails_only_its_tenant_until_it_is_fixed(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    async with two_tenants(tmp_path, fake_openai, tenancy_config(fake_openai)) as tenants:
        overlay_file = tenants.live.settings.data_dir / "tenants" / TENANT / "agentforge.json"
        overlay_file.parent.mkdir(parents=True)
        overlay_file.write_text('{"model": ')

        broken = await tenants.b.get("/agent")
        assert broken.status_code == 500
        assert broken.json()["name"] == "TenantConfigError"
        assert broken.json()["data"]["message"].startswith(f"tenant '{TENANT}' cannot be served: ")
        assert str(overlay_file) in broken.json()["data"]["message"]
        assert (await tenants.b.post("/session")).status_code == 500
        assert (await tenants.default.get("/agent")).status_code == 200

        # A failed scope is not kept: the fixed file is read on the next request, no restart.
        overlay_file.write_text('{"agent": {"auditor": {"description": "B\'s own", "mode": "primary"}}}')
        fixed = await tenants.b.get("/agent")
        assert fixed.status_code == 200, fixed.text
        assert "auditor" in {agent["name"] for agent in fixed.json()}


async def test_a_tenants_mcp_server_runs_in_its_workspace_and_only_its_sessions_see_it(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    config = tenancy_config(
        fake_openai,
        mcp={"echo": {"type": "local", "command": [sys.executable, str(ECHO_SERVER)]}},
        permission={"echo_*": "allow"},
    )
    async with two_tenants(tmp_path, fake_openai, config) as tenants:
        tenants.live.fake.enqueue(reply("no MCP here"))
        await prompt_in_new_session(tenants.default, "which tools?")
        assert not {name for name in tool_names(tenants.live.fake.requests[0]) if name.startswith("echo_")}
        assert (await tenants.live.runtime.scope("default")).mcp is None

        tenants.live.fake.enqueue(call("echo_whereami", {"variable": "HOME"}), reply("found it"))
        sid = await prompt_in_new_session(tenants.b, "where does your server run?")
        assert "echo_whereami" in tool_names(tenants.live.fake.requests[1])
        (part,) = await tool_parts(tenants.b, sid)
        assert part["state"]["status"] == "completed"
        assert part["state"]["output"].startswith(str(tenants.b_workspace.resolve()))
        # It runs in the tenant's OS sandbox: bubblewrap is among its ancestors.
        assert await asyncio.to_thread(ancestors_of, ECHO_SERVER) == [True]


def ancestors_of(script: Path) -> list[bool]:
    """For each running process of `script` (bwrap's own, whose command line names it too, left
    out): whether a bwrap is among its ancestors."""

    def command(pid: str) -> bytes:
        return Path(f"/proc/{pid}/cmdline").read_bytes()

    def program(pid: str) -> bytes:
        return command(pid).split(b"\0")[0]

    def parent(pid: str) -> str:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1]

    found: list[bool] = []
    for entry in Path("/proc").iterdir():
        try:
            if not entry.name.isdigit() or str(script).encode() not in command(entry.name):
                continue
            if program(entry.name).endswith(b"bwrap"):
                continue
            pid, under_bwrap = entry.name, False
            while pid not in ("0", "1") and not under_bwrap:
                pid = parent(pid)
                under_bwrap = program(pid).endswith(b"bwrap")
            found.append(under_bwrap)
        except OSError:
            continue  # gone meanwhile
    return found


async def test_a_tenants_tools_cannot_reach_the_default_workspace_even_with_a_rule_allowing_it(
    tmp_path: Path, fake_openai: FakeOpenAI, database_url: str
) -> None:
    config = tenancy_config(fake_openai, permission={"external_directory": "allow"})
    # Even a directory the server config grants past the workspace boundary (tools/confinement.py)
    # stays fenced when it is another tenant's root.
    config["tenancy"]["external_directories"] = {TENANT: [str(tmp_path / "workspace")]}
    async with two_tenants(tmp_path, fake_openai, config, database_url) as tenants:
        secret = tenants.live.workspace / "secret.txt"
        secret.write_text("the default tenant's secret\n")
        tenants.live.fake.enqueue(
            call("read", {"filePath": str(secret)}),
            call("bash", {"command": f"cat {secret}", "description": "Peek"}),
            reply("could not"),
        )
        sid = await prompt_in_new_session(tenants.b, "read the other tenant's file")

        for part in await tool_parts(tenants.b, sid):
            assert part["state"]["status"] == "error", part
            assert part["state"]["error"] == (
                f"Refusing to access {secret}: it belongs to the server or to another tenant."
            )
        # Refused outright: no request waits for anyone, in either tenant.
        assert (await tenants.b.get("/permission")).json() == []
        assert (await tenants.default.get("/permission")).json() == []
        assert len(tenants.live.fake.requests) == 3  # a refusal by rule lets the model go on


async def test_a_tenants_tool_output_spills_into_its_own_data_directory(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    async with two_tenants(tmp_path, fake_openai, tenancy_config(fake_openai)) as tenants:
        # More lines than a tool may hand the model (2000): the full output is saved to a file.
        tenants.live.fake.enqueue(
            call("bash", {"command": "seq 1 3000", "description": "Count"}), reply("counted")
        )
        sid = await prompt_in_new_session(tenants.b, "count to three thousand")

        (part,) = await tool_parts(tenants.b, sid)
        assert part["state"]["status"] == "completed"
        spilled = list(output_dir(tmp_path / "data" / "tenants" / TENANT).iterdir())
        assert len(spilled) == 1
        assert spilled[0].read_text().split() == [str(n) for n in range(1, 3001)]
        assert str(spilled[0]) in part["state"]["output"]
        assert not output_dir(tmp_path / "data").exists()  # the default tenant's spill directory


async def test_a_tenants_sessions_must_lie_in_its_own_workspace(
    tmp_path: Path, fake_openai: FakeOpenAI, database_url: str
) -> None:
    async with two_tenants(tmp_path, fake_openai, tenancy_config(fake_openai), database_url) as tenants:
        root = tenants.b_workspace
        first = (await tenants.b.post("/session")).json()
        assert Path(first["directory"]) == root
        (root / "project").mkdir()
        inside = (await tenants.b.post("/session", json={"directory": str(root / "project")})).json()
        assert inside["directory"] == str(root / "project")

        for client, elsewhere in [(tenants.b, tenants.live.workspace), (tenants.default, root)]:
            refused = await client.post("/session", json={"directory": str(elsewhere)})
            assert refused.status_code == 400
            message = refused.json()["data"]["message"]
            assert "outside the server's workspace for this tenant" in message
        listed = (await tenants.b.get("/session")).json()
        assert sorted(s["directory"] for s in listed) == sorted([str(root), str(root / "project")])
        assert (await tenants.default.get("/session")).json() == []
