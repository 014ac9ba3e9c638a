"""The file, find, vcs, path and project routes on a server with several tenants, one of whose
workspaces lies inside another's: each tenant browses only its own files, whatever path it names."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import httpx2

from agentforge.identity.apikeys import mint_api_key
from agentforge.identity.model import MEMBER
from tests.e2e.harness import LiveServer, fake_provider_config, start_live_server
from tests.fakes.openai_server import FakeOpenAI
from tests.sandboxing import requires_sandbox
from tests.workspace.test_git import git

SECRET = "acme-only launch plan"


@dataclass
class Forge:
    live: LiveServer
    default: httpx2.AsyncClient
    acme: httpx2.AsyncClient

    @property
    def acme_workspace(self) -> Path:
        return self.live.workspace / "tenants" / "acme"


@contextlib.asynccontextmanager
async def forge(tmp_path: Path, fake: FakeOpenAI, database_url: str) -> AsyncIterator[Forge]:
    workspace = tmp_path / "workspace"
    config = {
        **fake_provider_config(fake),
        "auth": {"required": True},
        # acme's workspace lies inside the default tenant's (allowed with authentication on).
        "tenancy": {"workspace_root": str(workspace / "tenants" / "{tenant}")},
    }
    async with (
        start_live_server(tmp_path, fake, config, database_url=database_url) as live,
        contextlib.AsyncExitStack() as stack,
    ):
        clients = []
        for tenant in ("default", "acme"):
            minted = mint_api_key(tenant, "workspace-test", frozenset({MEMBER}), "test")
            await live.runtime.store.create_api_key(minted.stored)
            client = httpx2.AsyncClient(
                base_url=live.url, headers={"Authorization": f"Bearer {minted.token}"}, timeout=30
            )
            clients.append(await stack.enter_async_context(client))
        yield Forge(live, *clients)


async def test_each_tenant_browses_only_its_own_workspace(
    tmp_path: Path, fake_openai: FakeOpenAI, database_url: str
) -> None:
    async with forge(tmp_path, fake_openai, database_url) as f:
        acme_path = (await f.acme.get("/path")).json()  # serves acme: its workspace now exists
        assert acme_path == {
            "home": str(f.acme_workspace),
            "state": "",
            "config": "",
            "worktree": str(f.acme_workspace),
            "directory": str(f.acme_workspace),
        }
        (f.acme_workspace / "plan.txt").write_text(f"{SECRET}\n")
        (f.live.workspace / "readme.md").write_text("default's own readme\n")

        # The default tenant's workspace holds acme's, which it neither lists, reads nor searches.
        listing = (await f.default.get("/file", params={"path": ""})).json()
        assert [node["name"] for node in listing] == ["readme.md"]
        for params in ({"path": "tenants/acme/plan.txt"}, {"path": str(f.acme_workspace / "plan.txt")}):
            refused = await f.default.get("/file/content", params=params)
            assert refused.status_code == 403 and SECRET not in refused.text
        assert (await f.default.get("/file", params={"path": "tenants"})).status_code == 403
        assert (await f.default.get("/find", params={"pattern": SECRET})).json() == []
        assert (await f.default.get("/find/file", params={"query": "plan"})).json() == []
        assert (await f.default.get("/file", params={"directory": str(f.acme_workspace)})).status_code == 403

        # acme reaches its own files, and none of the default tenant's.
        own = (await f.acme.get("/file/content", params={"path": "plan.txt"})).json()
        assert own["content"] == f"{SECRET}\n"
        assert (await f.acme.get("/find", params={"pattern": "launch"})).json()[0]["path"][
            "text"
        ] == "plan.txt"
        for raw in ("../../readme.md", str(f.live.workspace / "readme.md")):
            refused = await f.acme.get("/file/content", params={"path": raw})
            assert refused.status_code == 403 and "default's own readme" not in refused.text
        assert (await f.acme.get("/find/file", params={"query": "readme"})).json() == []


async def test_projects_are_per_tenant(tmp_path: Path, fake_openai: FakeOpenAI, database_url: str) -> None:
    async with forge(tmp_path, fake_openai, database_url) as f:
        mine = (await f.default.get("/project/current")).json()
        theirs = (await f.acme.get("/project/current")).json()
        assert mine["id"] != theirs["id"]
        assert (mine["worktree"], theirs["worktree"]) == (str(f.live.workspace), str(f.acme_workspace))
        assert (await f.acme.get("/project")).json() == [theirs]
        own = await f.acme.get(f"/project/{theirs['id']}/directories")
        assert own.json() == [{"directory": str(f.acme_workspace)}]
        other = await f.acme.get(f"/project/{mine['id']}/directories")
        assert other.status_code == 404 and other.json()["name"] == "NotFoundError"


async def test_terminals_need_the_shell_grant(
    tmp_path: Path, fake_openai: FakeOpenAI, database_url: str
) -> None:
    async with forge(tmp_path, fake_openai, database_url) as f:
        for client in (f.default, f.acme):  # with authentication on, default is confined too
            refused = await client.post("/pty", json={})
            assert refused.status_code == 403 and "tenancy.shell" in refused.json()["data"]["message"]
            assert (await client.get("/pty")).status_code == 403
            assert (await client.get("/pty/shells")).status_code == 403


@requires_sandbox
async def test_a_tenant_sees_only_its_own_repository(
    tmp_path: Path, fake_openai: FakeOpenAI, database_url: str
) -> None:
    async with forge(tmp_path, fake_openai, database_url) as f:
        await f.acme.get("/path")  # serves acme: its workspace now exists
        # The default tenant's workspace is a repository; its history holds what acme must not read.
        readme = f.live.workspace / "readme.md"
        readme.write_text(f"{SECRET}\n")
        git(f.live.workspace, "init", "-q", "-b", "main")
        git(f.live.workspace, "add", "readme.md")
        git(f.live.workspace, "commit", "-q", "-m", "init")
        readme.write_text("default's own readme, changed\n")
        # Its own repository, read in its sandbox: branch, changes, a file's diff against HEAD.
        assert (await f.default.get("/vcs")).json()["branch"] == "main"
        [changed] = (await f.default.get("/vcs/status")).json()
        assert changed["file"] == "readme.md" and changed["status"] == "modified"
        diff = (await f.default.get("/file/content", params={"path": "readme.md"})).json()["diff"]
        assert f"-{SECRET}" in diff

        # acme's `.git` takes its objects and branches from the default tenant's repository: read by
        # the server's own process, acme's files would show as a diff against that history.
        (f.acme_workspace / "readme.md").write_text("acme's readme\n")
        (f.acme_workspace / ".git").mkdir()
        (f.acme_workspace / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
        (f.acme_workspace / ".git" / "commondir").write_text(f"{f.live.workspace / '.git'}\n")
        assert (await f.acme.get("/vcs")).json() == {}
        assert (await f.acme.get("/vcs/status")).json() == []
        assert (await f.acme.get("/vcs/diff")).json() == []
        content = (await f.acme.get("/file/content", params={"path": "readme.md"})).json()
        assert content == {"type": "text", "content": "acme's readme\n"}
        project = (await f.acme.get("/project/current")).json()
        assert project.get("vcs") is None
