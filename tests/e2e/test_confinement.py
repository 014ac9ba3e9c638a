"""A tenant's tools stay in its workspace and never see the server's secrets, through HTTP with API
keys: the model's bash, the user's shell route and command snippets get the tenant's clean
environment; file tools are refused outside its workspace without a permission ask. Commands run
only for the tenants the server config grants them (`tenancy.shell`): without the grant the bash
tool is not offered, the shell route answers 403 and command snippets are refused. With
authentication on, the tenant `default` is confined like any other."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from agentforge.identity.apikeys import mint_api_key
from agentforge.identity.model import MEMBER
from agentforge.runtime.scope import TMP_DIR
from agentforge.tools.command_ledger import TOKEN_VARIABLE
from tests.e2e.harness import LiveServer, fake_provider_config, start_live_server
from tests.fakes.openai_server import FakeOpenAI, Script, call, reply

SECRET_NAME = "FORGE_TEST_SERVER_SECRET"
SECRET_VALUE = "hunter2-do-not-leak"
ACME = "acme"
UNGRANTED = "globex"  # a tenant the server config does not let run commands


@dataclass
class Forge:
    live: LiveServer
    tmp_path: Path
    headers: dict[str, dict[str, str]]  # per tenant: its API key

    def workspace(self, tenant: str) -> Path:
        return self.tmp_path / "data" / "tenants" / tenant / "workspace"

    async def post(
        self, tenant: str, path: str, body: dict[str, Any] | None = None, status: int = 200
    ) -> Any:
        response = await self.live.client.post(path, json=body, headers=self.headers[tenant])
        assert response.status_code == status, response.text
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
        "tenancy": {
            "overlays": {ACME: {"shell_env": {"ACME_REGION": "eu-1"}}},
            "shell": [ACME, "default"],
        },
        "command": {"environment": {"template": "Env:\n!`env`"}},
    }
    async with start_live_server(tmp_path, fake_openai, config, database_url=database_url) as live:
        headers = {}
        for tenant in ("default", ACME, UNGRANTED):
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


async def test_a_tenants_bash_gets_a_clean_environment_and_so_does_default_with_auth_on(forge: Forge) -> None:
    acme = await bash_env(forge, ACME)
    assert SECRET_NAME not in acme
    assert SECRET_VALUE not in "\n".join(acme.values())
    assert acme["HOME"] == str(forge.workspace(ACME))
    assert acme["TMPDIR"] == str(forge.tmp_path / "data" / "tenants" / ACME / TMP_DIR)
    assert acme["ACME_REGION"] == "eu-1"
    # Nothing of the server's environment; only the token that marks the command's own processes
    # for the reaper (command_ledger.py).
    assert not any(name.startswith("AGENTFORGE_") for name in acme if name != TOKEN_VARIABLE)

    # Authentication is on: whoever holds a `default` key is a tenant, not the server's local user.
    default = await bash_env(forge, "default")
    assert SECRET_NAME not in default
    assert default["HOME"] == str(forge.live.workspace)  # its workspace stays the server directory
    assert "ACME_REGION" not in default  # another tenant's declared variables stay its own


async def test_the_default_tenant_with_auth_on_is_kept_inside_the_server_directory(forge: Forge) -> None:
    outside = forge.tmp_path / "outside.txt"
    outside.write_text("not the default tenant's\n")
    session_id = await forge.session("default")
    forge.live.fake.enqueue(call("read", {"filePath": str(outside)}))  # a refusal ends the turn
    await forge.post("default", f"/session/{session_id}/message", {"parts": [{"type": "text", "text": "x"}]})
    (state,) = await forge.tool_states("default", session_id)
    assert state["status"] == "error"
    assert "outside this tenant's workspace" in state["error"], state["error"]
    assert await forge.pending_permissions("default") == []


async def test_a_tenant_without_the_shell_grant_runs_no_commands(forge: Forge) -> None:
    session_id = await forge.session(UNGRANTED)
    forge.live.fake.enqueue(reply("no shell here"))
    await forge.post(UNGRANTED, f"/session/{session_id}/message", {"parts": [{"type": "text", "text": "hi"}]})
    offered = [tool["function"]["name"] for tool in forge.live.fake.requests[-1].get("tools") or []]
    assert "read" in offered
    assert "bash" not in offered

    refused = await forge.post(
        UNGRANTED, f"/session/{session_id}/shell", {"agent": "build", "command": "env"}, status=403
    )
    assert "disabled for tenant 'globex'" in refused["data"]["message"]
    assert "tenancy.shell" in refused["data"]["message"]

    requests_before = len(forge.live.fake.requests)
    refused = await forge.post(
        UNGRANTED, f"/session/{session_id}/command", {"command": "environment", "arguments": ""}, status=403
    )
    assert "disabled for tenant 'globex'" in refused["data"]["message"]
    assert len(forge.live.fake.requests) == requests_before  # nothing was prompted
    messages = await forge.live.client.get(f"/session/{session_id}/message", headers=forge.headers[UNGRANTED])
    assert len(messages.json()) == 2  # only the first exchange: no shell run was recorded


async def test_a_bash_call_from_a_tenant_without_the_grant_is_refused(forge: Forge) -> None:
    session_id = await forge.session(UNGRANTED)
    forge.live.fake.enqueue(call("bash", {"command": "env", "description": "Show env"}), reply("ok"))
    await forge.post(UNGRANTED, f"/session/{session_id}/message", {"parts": [{"type": "text", "text": "x"}]})
    (state,) = await forge.tool_states(UNGRANTED, session_id)
    # Routed to `invalid` (the model is told what it may call): the command never ran.
    assert state["input"]["tool"] == "bash", state
    assert "unavailable tool 'bash'" in state["output"], state
    assert "PATH=" not in state["output"]


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


async def test_a_server_run_from_the_parent_of_the_workspaces_serves_every_tenant_apart(
    tmp_path: Path, fake_openai: FakeOpenAI, database_url: str
) -> None:
    # Like cwd /srv/forge with workspaces in /srv/forge/tenants/{tenant}: refused in local mode only.
    config = {
        **fake_provider_config(fake_openai),
        "auth": {"required": True},
        "tenancy": {"workspace_root": str(tmp_path / "workspace" / "tenants" / "{tenant}")},
    }
    async with start_live_server(tmp_path, fake_openai, config, database_url=database_url) as live:
        forge = Forge(live, tmp_path, {})
        for tenant in ("default", ACME):
            minted = mint_api_key(tenant, "test", frozenset({MEMBER}), "test")
            await live.runtime.store.create_api_key(minted.stored)
            forge.headers[tenant] = {"Authorization": f"Bearer {minted.token}"}
        acme_session = await forge.session(ACME)
        plans = live.workspace / "tenants" / ACME / "plans.txt"
        forge.live.fake.enqueue(
            call("write", {"filePath": "plans.txt", "content": "acme's plans\n"}), reply("ok")
        )
        await forge.post(ACME, f"/session/{acme_session}/message", {"parts": [{"type": "text", "text": "w"}]})
        assert plans.read_text() == "acme's plans\n"

        # The default tenant's workspace contains acme's, yet acme's files stay out of its reach.
        default_session = await forge.session("default")
        forge.live.fake.enqueue(call("read", {"filePath": str(plans)}))  # a refusal ends the turn
        await forge.post(
            "default", f"/session/{default_session}/message", {"parts": [{"type": "text", "text": "r"}]}
        )
        (state,) = await forge.tool_states("default", default_session)
        assert state["status"] == "error"
        assert "outside this tenant's workspace" in state["error"], state["error"]
        assert "acme's plans" not in str(state)

        # A search from the top of its workspace would walk into acme's: refused, not filtered.
        (live.workspace / "notes.txt").write_text("default's plans\n")
        step = Script()
        step.tool_call("grep", {"pattern": "plans"})
        step.tool_call("glob", {"pattern": "**/*.txt"})
        forge.live.fake.enqueue(step.usage(10, 5).finish("tool_calls"))
        await forge.post(
            "default", f"/session/{default_session}/message", {"parts": [{"type": "text", "text": "s"}]}
        )
        states = (await forge.tool_states("default", default_session))[1:]
        assert [state["status"] for state in states] == ["error", "error"]
        for state in states:
            assert f"contains {(live.workspace / 'tenants').resolve()}" in state["error"], state["error"]
