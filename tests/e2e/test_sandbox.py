"""Commands in the OS sandbox, through HTTP: tenants granted a shell run it confined (another tenant's
files and the server's data invisible, nothing writable outside the workspace, no network unless
granted), and in local mode a command that names a path outside the workspace asks first, and still
cannot write there once approved.

The tenants' commands reach their targets through `$(printf ...)` on purpose: the static checks
(tools/shell_paths.py) would refuse a literal path outright, and these tests are about what the
sandbox stops when a path is computed at run time.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import pytest_asyncio

from agentforge.identity.apikeys import mint_api_key
from agentforge.identity.model import MEMBER
from tests.e2e.harness import REPOSITORY, EventCollector, LiveServer, fake_provider_config, start_live_server
from tests.fakes.openai_server import FakeOpenAI, call, reply
from tests.sandboxing import requires_sandbox

pytestmark = requires_sandbox

ACME = "acme"
GLOBEX = "globex"  # also granted the network
SECRET = "globex's launch codes: 7-7-4-1"


def computed(path: Path | str) -> str:
    """`path` as the shell computes it at run time: invisible to the static checks."""
    return f'"$(printf %s {path})"'


@dataclass
class Forge:
    live: LiveServer
    tmp_path: Path
    headers: dict[str, dict[str, str]]

    def workspace(self, tenant: str) -> Path:
        return self.tmp_path / "data" / "tenants" / tenant / "workspace"

    @property
    def port(self) -> int:
        port = urlsplit(self.live.url).port
        assert port is not None
        return port

    async def post(self, tenant: str, path: str, body: dict[str, Any], status: int = 200) -> Any:
        response = await self.live.client.post(path, json=body, headers=self.headers[tenant])
        assert response.status_code == status, response.text
        return response.json()

    async def session(self, tenant: str) -> str:
        created = await self.post(tenant, "/session", {})
        session_id: str = created["id"]
        return session_id

    async def bash(self, tenant: str, command: str) -> str:
        """What the model's bash call printed, in a new session of `tenant`."""
        session_id = await self.session(tenant)
        self.live.fake.enqueue(call("bash", {"command": command, "description": "Probe"}), reply("seen"))
        body = {"parts": [{"type": "text", "text": "run it"}]}
        await self.post(tenant, f"/session/{session_id}/message", body)
        response = await self.live.client.get(f"/session/{session_id}/message", headers=self.headers[tenant])
        states = [p["state"] for m in response.json() for p in m["parts"] if p["type"] == "tool"]
        assert [state["status"] for state in states] == ["completed"], states
        output: str = states[0]["output"]
        return output


@pytest_asyncio.fixture
async def forge(tmp_path: Path, fake_openai: FakeOpenAI, database_url: str) -> AsyncIterator[Forge]:
    globex_secret = tmp_path / "data" / "tenants" / GLOBEX / "workspace" / "secret.txt"
    config = {
        **fake_provider_config(fake_openai),
        "auth": {"required": True},
        "tenancy": {"shell": [ACME, GLOBEX]},
        "sandbox": {"network": [GLOBEX]},
        "command": {"peek": {"template": f"Peek: !`cat $(printf %s {globex_secret})`"}},
    }
    async with start_live_server(tmp_path, fake_openai, config, database_url=database_url) as live:
        headers = {}
        for tenant in (ACME, GLOBEX):
            minted = mint_api_key(tenant, "test", frozenset({MEMBER}), "test")
            await live.runtime.store.create_api_key(minted.stored)
            headers[tenant] = {"Authorization": f"Bearer {minted.token}"}
        forge = Forge(live, tmp_path, headers)
        await forge.session(GLOBEX)  # creates globex's workspace
        (forge.workspace(GLOBEX) / "secret.txt").write_text(SECRET + "\n")
        yield forge


async def test_a_tenants_bash_sees_neither_other_tenants_files_nor_the_servers_data(forge: Forge) -> None:
    data = forge.tmp_path / "data"
    (data / "server-key.pem").write_text("the server's own secret\n")
    output = await forge.bash(
        ACME,
        f"cat {computed(forge.workspace(GLOBEX) / 'secret.txt')}; "
        f"cat {computed(data / 'server-key.pem')}; "
        f"ls {computed(data / 'tenants')}; cat {computed(REPOSITORY / 'README.md')} | head -1",
    )
    assert SECRET not in output
    assert "the server's own secret" not in output
    assert output.count("No such file or directory") == 3, output  # the repository is not in its view
    assert output.split("\n")[2:3] == [ACME]  # its own roots only: globex's are not there


async def test_a_tenants_bash_cannot_write_outside_its_workspace(forge: Forge) -> None:
    outside = forge.tmp_path / "outside.txt"
    system = f"/usr/local/forge-escape-{secrets.token_hex(4)}"
    output = await forge.bash(
        ACME,
        f"echo x > {computed(outside)}; touch {computed(system)}; echo kept > inside.txt; cat inside.txt",
    )
    assert "Read-only file system" in output, output
    assert not outside.exists()
    assert not await asyncio.to_thread(Path(system).exists)
    assert (forge.workspace(ACME) / "inside.txt").read_text() == "kept\n"


async def test_only_a_tenant_granted_the_network_reaches_it(forge: Forge) -> None:
    # The server's own port on loopback: what a tenant must never reach from an unshared network.
    probe = f"(exec 3<>/dev/tcp/127.0.0.1/{forge.port}) 2>/dev/null && echo connected || echo unreachable"
    assert (await forge.bash(ACME, probe)).strip() == "unreachable"
    assert (await forge.bash(GLOBEX, probe)).strip() == "connected"


async def test_the_shell_route_and_command_snippets_run_in_the_sandbox(forge: Forge) -> None:
    session_id = await forge.session(ACME)
    secret = forge.workspace(GLOBEX) / "secret.txt"
    shell = await forge.post(
        ACME, f"/session/{session_id}/shell", {"agent": "build", "command": f"cat {computed(secret)}"}
    )
    (part,) = shell["parts"]
    assert "No such file or directory" in part["state"]["output"]
    assert SECRET not in part["state"]["output"]

    forge.live.fake.enqueue(reply("noted"))
    await forge.post(ACME, f"/session/{session_id}/command", {"command": "peek", "arguments": ""})
    sent = str(forge.live.fake.requests[-1]["messages"][-1]["content"])
    assert "Peek:" in sent
    assert SECRET not in sent


@pytest.mark.parametrize("grant", [True, False])
async def test_without_a_sandbox_granted_tenants_run_no_commands(
    tmp_path: Path, fake_openai: FakeOpenAI, grant: bool
) -> None:
    broken = tmp_path / "bwrap"
    broken.write_text("#!/bin/sh\necho 'bwrap: No permissions to create a new namespace' >&2\nexit 1\n")
    broken.chmod(0o755)
    config = {
        **fake_provider_config(fake_openai),
        "auth": {"required": True},
        "tenancy": {"shell": [ACME] if grant else []},
        "sandbox": {"bwrap": str(broken)},
    }
    async with start_live_server(tmp_path, fake_openai, config) as live:
        minted = mint_api_key(ACME, "test", frozenset({MEMBER}), "test")
        await live.runtime.store.create_api_key(minted.stored)
        forge = Forge(live, tmp_path, {ACME: {"Authorization": f"Bearer {minted.token}"}})
        session_id = await forge.session(ACME)
        refused = await forge.post(
            ACME, f"/session/{session_id}/shell", {"agent": "build", "command": "touch ran"}, status=403
        )
        message = refused["data"]["message"]
        if grant:
            assert "run only inside the OS sandbox" in message
            assert "No permissions to create a new namespace" in message
        else:
            assert "tenancy.shell" in message
        assert not (forge.workspace(ACME) / "ran").exists()
        live.fake.enqueue(reply("no shell"))
        await forge.post(ACME, f"/session/{session_id}/message", {"parts": [{"type": "text", "text": "hi"}]})
        offered = [tool["function"]["name"] for tool in live.fake.requests[-1].get("tools") or []]
        assert "bash" not in offered


# --- local mode ---------------------------------------------------------------------------------------


async def test_a_local_redirect_outside_the_workspace_asks_first(
    tmp_path: Path, fake_openai: FakeOpenAI, database_url: str
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    async with start_live_server(tmp_path, fake_openai, database_url=database_url) as live:
        events = EventCollector()
        await events.start(live.client)
        try:
            session_id = (await live.create_session())["id"]
            live.fake.enqueue(call("bash", {"command": f"echo x > {outside}/file", "description": "Write"}))
            started = await live.client.post(
                f"/session/{session_id}/prompt_async", json={"parts": [{"type": "text", "text": "w"}]}
            )
            assert started.status_code == 204
            asked = await events.wait_for(lambda f: f.type == "permission.asked")
            assert asked.properties["permission"] == "external_directory"
            assert asked.properties["patterns"] == [f"{outside.resolve()}/*"]
            answered = await live.client.post(
                f"/permission/{asked.properties['id']}/reply", json={"reply": "reject"}
            )
            assert answered.status_code == 200
            await events.wait_for(
                lambda f: f.type == "session.status" and f.properties["status"]["type"] == "idle"
            )
        finally:
            await events.stop()
    assert not (outside / "file").exists()


async def test_a_local_write_outside_the_workspace_fails_even_when_approved(
    tmp_path: Path, fake_openai: FakeOpenAI, database_url: str
) -> None:
    escape = REPOSITORY / f"forge-sandbox-escape-{secrets.token_hex(4)}"
    config = {**fake_provider_config(fake_openai), "permission": {"external_directory": "allow"}}
    async with start_live_server(tmp_path, fake_openai, config, database_url=database_url) as live:
        session_id = (await live.create_session())["id"]
        command = f"echo x > {escape}; echo inside > inside.txt"
        live.fake.enqueue(call("bash", {"command": command, "description": "Write"}), reply("done"))
        answer = await live.prompt(session_id, "write")
        assert answer.status_code == 200, answer.text
        messages = (await live.client.get(f"/session/{session_id}/message")).json()
        (state,) = [p["state"] for m in messages for p in m["parts"] if p["type"] == "tool"]
    try:
        # The host tree is read-only in the sandbox; a checkout under /tmp is not visible at all there
        # (the sandbox's /tmp is its own), so the write fails either way.
        under_tmp = REPOSITORY.is_relative_to("/tmp")
        refusal = "No such file or directory" if under_tmp else "Read-only file system"
        assert refusal in state["output"], state
        assert not escape.exists()
        assert (live.workspace / "inside.txt").read_text() == "inside\n"
    finally:
        escape.unlink(missing_ok=True)
