"""A tenant's tools stay in its workspace and never see the server's secrets, through HTTP with API
keys: the model's bash, the user's shell route and command snippets get the tenant's clean
environment; file tools are refused outside its workspace without a permission ask. The default
tenant (local mode) keeps the server's environment."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from agentforge.identity.apikeys import mint_api_key
from agentforge.identity.model import MEMBER
from agentforge.session.scope import TMP_DIR
from tests.e2e.harness import LiveServer, fake_provider_config, start_live_server
from tests.fakes.openai_server import FakeOpenAI, Script, call, reply

SECRET_NAME = "FORGE_TEST_SERVER_SECRET"
SECRET_VALUE = "hunter2-do-not-leak"
ACME = "acme"


@dataclass
class Forge:
    live: LiveServer
    tmp_path: Path
    headers: dict[str, dict[str, str]]  # per tenant: its API key

    def workspace(self, tenant: str) -> Path:
        return self.tmp_path / "data" / "tenants" / tenant / "workspace"

    async def post(self, tenant: str, path: str, body: dict[str, Any] | None = None) -> Any:
        response = await self.live.client.post(path, json=body, headers=self.headers[tenant])
        assert response.status_code == 200, response.text
        return response.json()

    async def session(self, tenant: str) -> str:
        created = await self.post(tenant, "/session", {})
        session_id: str = created["id"]
        return session_id

    async def tool_states(self, tenant: str, session_id: str) -> list[dict[str, Any]]:
        response = await self.live.client.get(f"/session/{session_id}/message", headers=self.headers[tenant])
        assert response.status_code == 200, response.text
        parts = [part for message in response.json() for part in message["parts"]]
        return [part["state"] for part in parts if part["type"] == "tool"]

    async def pending_permissions(self, tenant: str) -> list[Any]:
        response = await self.live.client.get("/permission", headers=self.headers[tenant])
        assert response.status_code == 200, response.text
        pending: list[Any] = response.json()
        return pending


@pytest_asyncio.fixture
async def forge(
    tmp_path: Path, fake_openai: FakeOpenAI, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Forge]:
    monkeypatch.setenv(SECRET_NAME, SECRET_VALUE)  # a secret of the server process
    config = {
        **fake_provider_config(fake_openai),
        "auth": {"required": True},
        "tenancy": {"overlays": {ACME: {"shell_env": {"ACME_REGION": "eu-1"}}}},
        "command": {"environment": {"template": "Env:\n!`env`"}},
    }
    async with start_live_server(tmp_path, fake_openai, config, database_url=database_url) as live:
        headers = {}
        for tenant in ("default", ACME, "globex"):
            minted = mint_api_key(tenant, "test", frozenset({MEMBER}), "test")
            await live.runtime.store.create_api_key(minted.stored)
            headers[tenant] = {"Authorization": f"Bearer {minted.token}"}
        yield Forge(live, tmp_path, headers)


def env_of(output: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in output.splitlines() if "=" in line)


async def bash_env(forge: Forge, tenant: str) -> dict[str, str]:
    session_id = await forge.session(tenant)
    forge.live.fake.enqueue(call("bash", {"command": "env", "description": "Show env"}), reply("seen"))
    await forge.post(tenant, f"/session/{session_id}/message", {"parts": [{"type": "text", "text": "env"}]})
    (state,) = await forge.tool_states(tenant, session_id)
    assert state["status"] == "completed", state
    return env_of(state["output"])


async def test_a_tenants_bash_gets_a_clean_environment_and_the_default_tenant_its_own(forge: Forge) -> None:
    acme = await bash_env(forge, ACME)
    assert SECRET_NAME not in acme
    assert SECRET_VALUE not in "\n".join(acme.values())
    assert acme["HOME"] == str(forge.workspace(ACME))
    assert acme["TMPDIR"] == str(forge.tmp_path / "data" / "tenants" / ACME / TMP_DIR)
    assert acme["ACME_REGION"] == "eu-1"
    assert not any(name.startswith("AGENTFORGE_") for name in acme)

    local = await bash_env(forge, "default")
    assert local[SECRET_NAME] == SECRET_VALUE
    assert "ACME_REGION" not in local  # another tenant's declared variables stay its own


async def test_the_shell_route_and_command_snippets_get_the_tenants_environment(forge: Forge) -> None:
    session_id = await forge.session(ACME)
    shell = await forge.post(ACME, f"/session/{session_id}/shell", {"agent": "build", "command": "env"})
    (part,) = shell["parts"]
    env = env_of(part["state"]["output"])
    assert SECRET_NAME not in env
    assert env["HOME"] == str(forge.workspace(ACME))

    forge.live.fake.enqueue(reply("noted"))
    await forge.post(ACME, f"/session/{session_id}/command", {"command": "environment", "arguments": ""})
    sent = forge.live.fake.requests[-1]["messages"][-1]["content"]
    text = sent if isinstance(sent, str) else "\n".join(c.get("text", "") for c in sent)
    assert f"HOME={forge.workspace(ACME)}" in text
    assert SECRET_NAME not in text


async def test_paths_outside_a_tenants_workspace_are_refused_without_an_ask(forge: Forge) -> None:
    default_secret = forge.live.workspace / "secret.txt"
    default_secret.write_text("the default tenant's secret\n")
    globex_file = forge.workspace("globex") / "plans.txt"
    globex_file.parent.mkdir(parents=True)
    globex_file.write_text("globex's plans\n")
    session_id = await forge.session(ACME)  # creates acme's workspace
    (forge.workspace(ACME) / "peek").symlink_to(forge.workspace("globex"))

    step = Script()
    step.tool_call("read", {"filePath": "/etc/hostname"})
    step.tool_call("read", {"filePath": str(default_secret)})
    step.tool_call("read", {"filePath": "peek/plans.txt"})
    step.tool_call("grep", {"pattern": "plans", "path": "peek"})
    step.tool_call("bash", {"command": "cat /etc/hostname", "description": "Read hostname"})
    step.tool_call("bash", {"command": "pwd", "workdir": "/tmp", "description": "Where"})
    forge.live.fake.enqueue(step.usage(10, 5).finish("tool_calls"))
    await forge.post(ACME, f"/session/{session_id}/message", {"parts": [{"type": "text", "text": "peek"}]})

    states = await forge.tool_states(ACME, session_id)
    assert [state["status"] for state in states] == ["error"] * 6
    for state in states:
        assert "outside this tenant's workspace" in state["error"], state["error"]
    assert f"resolves to {globex_file.resolve()}" in states[2]["error"]
    assert await forge.pending_permissions(ACME) == []
    # Refused, not asked: the turn ended without waiting for anyone and without another model call.
    assert len(forge.live.fake.requests) == 1
