"""Two tenants on one live server: each gets its own overlay (agent prompt, model, permission rule,
MCP server, output limits), works in its own workspace and data directory, and cannot see the other's
sessions, permission requests or files.

The default tenant is driven over HTTP. Until identity lands HTTP cannot pick another tenant, so
tenant B is driven in-process through `SessionService(rt, "tenant-b")` on the same live runtime and
the same fake provider.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest

from agentforge.model.message import WithParts
from agentforge.model.part import ToolPart, ToolStateCompleted, ToolStateError
from agentforge.permission.service import PermissionService
from agentforge.session.inputs import PromptInput, SessionCreateInput
from agentforge.session.service import InvalidInputError, NotFoundError, SessionService
from agentforge.tools.truncation import output_dir
from tests.e2e.harness import LiveServer, fake_provider_config, start_live_server
from tests.fakes.openai_server import FakeOpenAI, call, reply

TENANT = "tenant-b"
ECHO_SERVER = Path(__file__).resolve().parents[1] / "tools" / "mcp_servers" / "echo_server.py"
B_PROMPT = "You are tenant B's builder."


def tenancy_config(fake: FakeOpenAI, **overlay: Any) -> dict[str, Any]:
    config = fake_provider_config(fake)
    config["tenancy"] = {"overlays": {TENANT: overlay}}
    return config


def prompt(text: str) -> PromptInput:
    return PromptInput.model_validate({"parts": [{"type": "text", "text": text}]})


def tool_names(request: dict[str, Any]) -> set[str]:
    return {tool["function"]["name"] for tool in request.get("tools") or []}


def system_text(request: dict[str, Any]) -> str:
    return "\n".join(str(m["content"]) for m in request["messages"] if m["role"] == "system")


def tool_parts(result: WithParts) -> list[ToolPart]:
    return [part for part in result.parts if isinstance(part, ToolPart)]


async def tenant_b(live: LiveServer) -> SessionService:
    return SessionService(live.runtime, TENANT)


async def http_prompt(live: LiveServer, text: str) -> dict[str, Any]:
    session = await live.create_session()
    response = await live.prompt(session["id"], text)
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


async def first_pending(permissions: PermissionService, tenant_id: str) -> Any:
    """The tenant's first waiting permission request, once the tool has asked."""
    for _ in range(1000):
        pending = permissions.pending(tenant_id)
        if pending:
            return pending[0]
        await asyncio.sleep(0.01)
    raise AssertionError(f"no permission request of {tenant_id} came")


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
    async with start_live_server(tmp_path, fake_openai, config, database_url=database_url) as live:
        live.fake.enqueue(reply("default here"), reply("tenant B here"))
        await http_prompt(live, "hello from default")
        service = await tenant_b(live)
        session = await service.create(SessionCreateInput())
        answered = await service.prompt(session.id, prompt("hello from B"))
        assert answered.info.role == "assistant"

        default_request, b_request = live.fake.requests
        assert default_request["model"] == "test-model"
        assert B_PROMPT not in system_text(default_request)
        assert "webfetch" in tool_names(default_request)
        assert b_request["model"] == "b-model"
        assert B_PROMPT in system_text(b_request)
        assert "webfetch" not in tool_names(b_request)

        # Listings answer from the caller's tenant: B's agent is not the default tenant's.
        agents = {agent["name"] for agent in (await live.client.get("/agent")).json()}
        assert "auditor" not in agents
        assert "auditor" in {agent.name for agent in (await service.scope()).agents.list()}
        defaults = (await live.client.get("/config/providers")).json()["default"]
        assert defaults == {"fake": "test-model"}


async def test_a_tenants_mcp_server_runs_in_its_workspace_and_only_its_sessions_see_it(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    config = tenancy_config(
        fake_openai,
        mcp={"echo": {"type": "local", "command": [sys.executable, str(ECHO_SERVER)]}},
        permission={"echo_*": "allow"},
    )
    async with start_live_server(tmp_path, fake_openai, config) as live:
        live.fake.enqueue(reply("no MCP here"))
        await http_prompt(live, "which tools?")
        assert not {name for name in tool_names(live.fake.requests[0]) if name.startswith("echo_")}
        assert (await live.runtime.scope("default")).mcp is None

        service = await tenant_b(live)
        session = await service.create(SessionCreateInput())
        live.fake.enqueue(call("echo_whereami", {"variable": "HOME"}), reply("found it"))
        await service.prompt(session.id, prompt("where does your server run?"))
        assert "echo_whereami" in tool_names(live.fake.requests[1])
        history, _ = await service.messages(session.id, limit=None, before=None)
        (part,) = [p for item in history for p in item.parts if isinstance(p, ToolPart)]
        assert isinstance(part.state, ToolStateCompleted)
        root = (await service.scope()).settings.directory
        assert part.state.output.startswith(str(root.resolve()))
        assert root == tmp_path / "data" / "tenants" / TENANT / "workspace"


async def test_a_tenants_tools_cannot_read_another_tenants_workspace_without_permission(
    tmp_path: Path, fake_openai: FakeOpenAI, database_url: str
) -> None:
    config = tenancy_config(fake_openai)
    # Granted by the server config, or the path would be refused without any ask (test_confinement).
    config["tenancy"]["external_directories"] = {TENANT: [str(tmp_path / "workspace")]}
    async with start_live_server(tmp_path, fake_openai, config, database_url=database_url) as live:
        secret = live.workspace / "secret.txt"
        secret.write_text("the default tenant's secret\n")
        service = await tenant_b(live)
        session = await service.create(SessionCreateInput())
        live.fake.enqueue(call("read", {"filePath": str(secret)}))
        turn = asyncio.create_task(service.prompt(session.id, prompt("read the other tenant's file")))

        request = await first_pending(live.runtime.permissions, TENANT)
        assert request.permission == "external_directory"
        assert any(str(live.workspace.resolve()) in pattern for pattern in request.patterns)
        # The default tenant neither sees nor can answer B's request: unknown to it, like any id.
        assert (await live.client.get("/permission")).json() == []
        foreign = await live.client.post(f"/permission/{request.id}/reply", json={"reply": "once"})
        unknown = await live.client.post("/permission/per_unknown/reply", json={"reply": "once"})
        assert foreign.status_code == unknown.status_code == 404
        assert foreign.json()["name"] == unknown.json()["name"] == "NotFoundError"
        assert foreign.json()["data"]["message"] == f"Permission request not found: {request.id}"

        await live.runtime.permissions.reply(TENANT, request.id, "reject")
        await turn  # a rejection ends the turn: the model is not called again
        history, _ = await service.messages(session.id, limit=None, before=None)
        (part,) = [p for item in history for p in item.parts if isinstance(p, ToolPart)]
        assert isinstance(part.state, ToolStateError)
        assert "rejected" in part.state.error
        assert len(live.fake.requests) == 1


async def test_a_tenants_tool_output_spills_into_its_own_data_directory(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    async with start_live_server(tmp_path, fake_openai, tenancy_config(fake_openai)) as live:
        service = await tenant_b(live)
        session = await service.create(SessionCreateInput())
        # More lines than a tool may hand the model (2000): the full output is saved to a file.
        live.fake.enqueue(call("bash", {"command": "seq 1 3000", "description": "Count"}), reply("counted"))
        await service.prompt(session.id, prompt("count to three thousand"))

        history, _ = await service.messages(session.id, limit=None, before=None)
        (part,) = [p for item in history for p in item.parts if isinstance(p, ToolPart)]
        assert isinstance(part.state, ToolStateCompleted)
        spilled = list(output_dir(tmp_path / "data" / "tenants" / TENANT).iterdir())
        assert len(spilled) == 1
        assert spilled[0].read_text().split() == [str(n) for n in range(1, 3001)]
        assert str(spilled[0]) in part.state.output
        assert not output_dir(tmp_path / "data").exists()  # the default tenant's spill directory


async def test_a_tenants_sessions_must_lie_in_its_own_workspace(
    tmp_path: Path, fake_openai: FakeOpenAI, database_url: str
) -> None:
    async with start_live_server(
        tmp_path, fake_openai, tenancy_config(fake_openai), database_url=database_url
    ) as live:
        service = await tenant_b(live)
        root = (await service.scope()).settings.directory
        assert Path((await service.create(SessionCreateInput())).directory) == root
        (root / "project").mkdir()
        inside = await service.create(SessionCreateInput(directory=str(root / "project")))
        assert inside.directory == str(root / "project")

        with pytest.raises(InvalidInputError, match="outside the server's workspace for this tenant"):
            await service.create(SessionCreateInput(directory=str(live.workspace)))
        stored = await live.runtime.store.list_sessions(TENANT)
        assert sorted(s.directory for s in stored) == sorted([str(root), str(root / "project")])

        # Over HTTP the default tenant cannot open a session in B's workspace either.
        response = await live.client.post("/session", json={"directory": str(root)})
        assert response.status_code == 400
        assert "outside the server's workspace for this tenant" in response.json()["data"]["message"]
        assert (await live.client.get("/session")).json() == []


async def test_ids_from_another_tenant_answer_404_exactly_like_unknown_ids(
    tmp_path: Path, fake_openai: FakeOpenAI, database_url: str
) -> None:
    async with start_live_server(
        tmp_path, fake_openai, tenancy_config(fake_openai), database_url=database_url
    ) as live:
        mine = await live.create_session()
        service = await tenant_b(live)
        theirs = (await service.create(SessionCreateInput())).id
        unknown = "ses_0000000000000000000000000a"

        for method, suffix, body in [
            ("GET", "", None),
            ("GET", "/message", None),
            ("PATCH", "", {"title": "taken over"}),
            ("DELETE", "", None),
            ("POST", "/message", {"parts": [{"type": "text", "text": "hi"}]}),
        ]:
            foreign = await live.client.request(method, f"/session/{theirs}{suffix}", json=body)
            missing = await live.client.request(method, f"/session/{unknown}{suffix}", json=body)
            assert foreign.status_code == missing.status_code == 404, (method, suffix)
            assert foreign.json() == {
                **missing.json(),
                "data": {"message": missing.json()["data"]["message"].replace(unknown, theirs)},
            }
        assert [s["id"] for s in (await live.client.get("/session")).json()] == [mine["id"]]

        with pytest.raises(NotFoundError) as from_b:
            await service.get(mine["id"])
        with pytest.raises(NotFoundError) as missing_for_b:
            await service.get(unknown)
        assert str(from_b.value) == str(missing_for_b.value).replace(unknown, mine["id"])
        assert (await service.get(theirs)).title.startswith("New session")  # untouched by the PATCH
