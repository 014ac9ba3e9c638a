"""Paths a user's request names go through the read tool's check, through HTTP with authentication on.

The server runs from the parent of everything (`/` under systemd or Docker, `/srv/forge` with the
tenants' workspaces in `/srv/forge/tenants/{tenant}`): its own directory, the default tenant's
workspace, contains the other tenants' workspaces, its data directory and its database. A user of the
tenant `default` names such a path in a prompt (an attached `file:` URL, as text or binary, directly
or through a symlink) or in a command (`@path`): the request answers 400 with a message naming the
path, and nothing is stored, published or sent to the model.
"""

from __future__ import annotations

import contextlib
import urllib.parse
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agentforge.identity.apikeys import mint_api_key
from agentforge.identity.model import MEMBER
from agentforge.store import sqlite_url
from tests.e2e.harness import EventCollector, LiveServer, fake_provider_config, start_live_server
from tests.fakes.openai_server import FakeOpenAI, call, reply

ACME = "acme"
PLANS = "acme's launch plans: 7-7-4-1\n"


@dataclass
class Forge:
    live: LiveServer
    root: Path  # the server's directory: the default tenant's workspace, parent of everything
    headers: dict[str, dict[str, str]]

    @property
    def acme_plans(self) -> Path:
        return self.root / "tenants" / ACME / "plans.txt"

    @property
    def data_dir(self) -> Path:
        return self.live.settings.data_dir

    async def session(self, tenant: str = "default") -> str:
        response = await self.live.client.post("/session", json={}, headers=self.headers[tenant])
        assert response.status_code == 200, response.text
        session_id: str = response.json()["id"]
        return session_id

    async def post(self, path: str, body: dict[str, Any], tenant: str = "default") -> Any:
        return await self.live.client.post(path, json=body, headers=self.headers[tenant])

    async def messages(self, session_id: str, tenant: str = "default") -> list[Any]:
        response = await self.live.client.get(f"/session/{session_id}/message", headers=self.headers[tenant])
        assert response.status_code == 200, response.text
        found: list[Any] = response.json()
        return found


@contextlib.asynccontextmanager
async def forge_from_the_root(
    tmp_path: Path, fake: FakeOpenAI, database_url: str, **config: Any
) -> AsyncIterator[Forge]:
    settings = {
        **fake_provider_config(fake),
        "auth": {"required": True},
        "tenancy": {"workspace_root": str(tmp_path / "tenants" / "{tenant}")},
        **config,
    }
    async with start_live_server(
        tmp_path, fake, settings, database_url=database_url, directory=tmp_path
    ) as live:
        headers = {}
        for tenant in ("default", ACME):
            minted = mint_api_key(tenant, "test", frozenset({MEMBER}), "test")
            await live.runtime.store.create_api_key(minted.stored)
            headers[tenant] = {"Authorization": f"Bearer {minted.token}"}
        forge = Forge(live, tmp_path, headers)
        await forge.session(ACME)  # creates acme's workspace
        forge.acme_plans.write_text(PLANS)
        yield forge


def file_part(path: Path, mime: str = "text/plain") -> dict[str, Any]:
    return {"type": "file", "mime": mime, "url": path.as_uri()}


async def assert_refused_and_nothing_stored(
    forge: Forge, body: dict[str, Any], route: str, named: Path
) -> None:
    session_id = await forge.session()
    events = EventCollector()
    await events.start(forge.live.client, f"/event?sessionID={session_id}", **forge.headers["default"])
    requests_before = len(forge.live.fake.requests)
    try:
        response = await forge.post(f"/session/{session_id}/{route}", body)
        assert response.status_code == 400, response.text
        error = response.json()
        assert error["name"] == "BadRequestError"
        assert str(named) in error["data"]["message"], error
        assert "launch plans" not in response.text
        assert await forge.messages(session_id) == []
        assert len(forge.live.fake.requests) == requests_before
        # Nothing was published either: no message, part or session.error reached the session's stream.
        assert [frame.type for frame in events.frames] == ["server.connected"]
    finally:
        await events.stop()


async def test_another_tenants_file_attached_as_text_or_binary_is_refused(
    tmp_path: Path, fake_openai: FakeOpenAI, database_url: str
) -> None:
    async with forge_from_the_root(tmp_path, fake_openai, database_url) as forge:
        for mime in ("text/plain", "image/png", "application/octet-stream"):
            body = {"parts": [{"type": "text", "text": "summarise"}, file_part(forge.acme_plans, mime)]}
            await assert_refused_and_nothing_stored(forge, body, "message", forge.acme_plans)
        body = {"parts": [file_part(forge.acme_plans)]}
        await assert_refused_and_nothing_stored(forge, body, "prompt_async", forge.acme_plans)
        # Another tenant's whole workspace, as a directory listing.
        acme_root = forge.acme_plans.parent
        body = {"parts": [file_part(acme_root, "application/x-directory")]}
        await assert_refused_and_nothing_stored(forge, body, "message", acme_root)


async def test_the_servers_data_directory_and_database_are_refused_directly_and_through_symlinks(
    tmp_path: Path, fake_openai: FakeOpenAI, database_url: str
) -> None:
    async with forge_from_the_root(tmp_path, fake_openai, database_url) as forge:
        database = forge.data_dir / "agentforge.db"
        database.touch()  # on Postgres too: whatever the data directory holds stays the server's
        (tmp_path / "db-link").symlink_to(database)
        (tmp_path / "data-link").symlink_to(forge.data_dir)
        (tmp_path / "plans-link.txt").symlink_to(forge.acme_plans)
        cases = [
            (file_part(forge.data_dir, "application/x-directory"), forge.data_dir),
            (file_part(database, "application/octet-stream"), database),
            (file_part(database), database),
            (file_part(tmp_path / "db-link", "application/octet-stream"), tmp_path / "db-link"),
            (file_part(tmp_path / "data-link", "application/x-directory"), tmp_path / "data-link"),
            (file_part(tmp_path / "plans-link.txt"), tmp_path / "plans-link.txt"),
        ]
        for part, named in cases:
            await assert_refused_and_nothing_stored(forge, {"parts": [part]}, "message", named)
        # Nor may a session work there: its tools would resolve relative paths inside it.
        for directory in (forge.data_dir, forge.acme_plans.parent):
            response = await forge.post("/session", {"directory": str(directory)})
            assert response.status_code == 400, response.text
            assert "is not this tenant's to work in" in response.json()["data"]["message"]


async def test_a_database_file_configured_inside_the_workspace_is_refused(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    # `--db sqlite:///<server directory>/forge.db`: outside the data directory, inside every workspace
    # the default tenant reaches.
    database_dir = tmp_path / "db"
    database_dir.mkdir()
    async with forge_from_the_root(tmp_path, fake_openai, sqlite_url(database_dir)) as forge:
        database = database_dir / "agentforge.db"
        assert database.exists()
        for suffix in ("", "-wal"):
            named = database.with_name(database.name + suffix)
            part = file_part(named, "application/octet-stream")
            await assert_refused_and_nothing_stored(forge, {"parts": [part]}, "message", named)

        # The model's tools are held to the same boundary.
        session_id = await forge.session()
        forge.live.fake.enqueue(call("read", {"filePath": str(database)}), reply("done"))
        response = await forge.post(
            f"/session/{session_id}/message", {"parts": [{"type": "text", "text": "x"}]}
        )
        assert response.status_code == 200, response.text
        (tool,) = [p for m in await forge.messages(session_id) for p in m["parts"] if p["type"] == "tool"]
        assert tool["state"]["status"] == "error"
        assert "outside this tenant's workspace" in tool["state"]["error"]


async def test_an_at_reference_in_a_command_is_refused(
    tmp_path: Path, fake_openai: FakeOpenAI, database_url: str
) -> None:
    config = {"command": {"peek": {"template": "Look at @$1 and tell me what it says"}}}
    async with forge_from_the_root(tmp_path, fake_openai, database_url, **config) as forge:
        for named in (forge.acme_plans, forge.data_dir / "agentforge.db", forge.data_dir):
            relative = named.relative_to(tmp_path)
            for argument in (str(named), str(relative)):
                body = {"command": "peek", "arguments": argument}
                await assert_refused_and_nothing_stored(forge, body, "command", named)


async def test_the_same_files_inside_the_callers_own_workspace_are_attached(
    tmp_path: Path, fake_openai: FakeOpenAI, database_url: str
) -> None:
    async with forge_from_the_root(tmp_path, fake_openai, database_url) as forge:
        notes = tmp_path / "notes.txt"
        notes.write_text("the default tenant's notes\n")
        session_id = await forge.session()
        body = {"parts": [file_part(notes), file_part(notes, "application/octet-stream")], "noReply": True}
        response = await forge.post(f"/session/{session_id}/message", body)
        assert response.status_code == 200, response.text
        parts = response.json()["parts"]
        assert "the default tenant's notes" in parts[1]["text"]
        assert parts[-1]["url"].startswith("data:application/octet-stream;base64,")

        # Acme attaches its own plans: its workspace is its own.
        acme_session = await forge.session(ACME)
        body = {"parts": [file_part(forge.acme_plans)], "noReply": True}
        response = await forge.post(f"/session/{acme_session}/message", body, tenant=ACME)
        assert response.status_code == 200, response.text
        assert PLANS in response.json()["parts"][1]["text"]


async def test_the_shell_route_and_command_snippets_naming_such_paths_are_refused(
    tmp_path: Path, fake_openai: FakeOpenAI, database_url: str
) -> None:
    config = {
        "tenancy": {"workspace_root": str(tmp_path / "tenants" / "{tenant}"), "shell": ["default"]},
        "command": {"peek": {"template": "Here it is: !`cat $1`"}},
    }
    async with forge_from_the_root(tmp_path, fake_openai, database_url, **config) as forge:
        for named in (forge.acme_plans, forge.data_dir / "agentforge.db"):
            body = {"agent": "build", "command": f"cat {named}"}
            await assert_refused_and_nothing_stored(forge, body, "shell", named)
            await assert_refused_and_nothing_stored(
                forge, {"command": "peek", "arguments": str(named)}, "command", named
            )
        # A command in the caller's own workspace runs.
        session_id = await forge.session()
        response = await forge.post(f"/session/{session_id}/shell", {"agent": "build", "command": "echo ok"})
        assert response.status_code == 200, response.text
        assert response.json()["parts"][0]["state"]["output"].strip() == "ok"


def unreadable_name(tmp_path: Path, case: str) -> Path:
    """A path that names no file a request could read: missing, a symlink loop, too long, a NUL."""
    if case == "loop":
        (tmp_path / "loop").symlink_to(tmp_path / "loop")
    return (
        tmp_path / {"missing": "missing.txt", "loop": "loop", "too-long": "a" * 5000, "nul": "b\x00c"}[case]
    )


@pytest.mark.parametrize("mime", ["text/plain", "application/octet-stream"])
@pytest.mark.parametrize("case", ["missing", "loop", "too-long", "nul"])
async def test_a_path_naming_no_readable_file_is_refused_and_nothing_stored(
    tmp_path: Path, fake_openai: FakeOpenAI, database_url: str, case: str, mime: str
) -> None:
    async with forge_from_the_root(tmp_path, fake_openai, database_url) as forge:
        named = unreadable_name(tmp_path, case)
        url = "file://" + urllib.parse.quote(str(named))
        body = {"parts": [{"type": "text", "text": "read it"}, {"type": "file", "mime": mime, "url": url}]}
        await assert_refused_and_nothing_stored(forge, body, "message", named)
