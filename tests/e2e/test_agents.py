"""Agents and the system prompt through HTTP: `GET /agent`, the system messages the model receives,
plan mode's rules and reminders, and per-agent request settings."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from agentforge.session.context import prompts
from agentforge.session.context.reminders import BUILD_SWITCH, PLAN_MODE
from tests.e2e.harness import LiveServer, fake_provider_config, start_live_server
from tests.fakes.openai_server import FakeOpenAI, call, reply

MODELS = ("claude-sonnet-4", "gpt-5-mini")


@pytest.fixture(autouse=True)
def isolated_config_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The user config dir (global agents, global AGENTS.md) lives in the test's tmp dir."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    config_dir = tmp_path / "xdg" / "agentforge"
    config_dir.mkdir(parents=True)
    return config_dir


@contextlib.asynccontextmanager
async def server(
    tmp_path: Path, fake: FakeOpenAI, database_url: str, **config: Any
) -> AsyncIterator[LiveServer]:
    base = fake_provider_config(fake)
    models = base["provider"]["fake"]["models"]
    for name in MODELS:
        models[name] = dict(models["test-model"])
    async with start_live_server(tmp_path, fake, {**base, **config}, database_url=database_url) as live:
        yield live


def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "workspace"
    path.mkdir(exist_ok=True)
    return path


def model(name: str) -> dict[str, str]:
    return {"providerID": "fake", "modelID": name}


def system_messages(request: dict[str, Any]) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "system"]


def last_user_text(request: dict[str, Any]) -> str:
    content = [m for m in request["messages"] if m["role"] == "user"][-1]["content"]
    return content if isinstance(content, str) else "\n".join(p.get("text", "") for p in content)


async def ok(response: Any) -> Any:
    assert response.status_code == 200, response.text
    return response.json()


async def test_agents_are_listed_with_config_and_markdown_ones(
    tmp_path: Path, fake_openai: FakeOpenAI, database_url: str, isolated_config_dir: Path
) -> None:
    (isolated_config_dir / "agents").mkdir()
    (isolated_config_dir / "agents" / "docs.md").write_text("---\ndescription: Writes docs\n---\nWrite docs.")
    agents_dir = workspace(tmp_path) / ".agentforge" / "agents"
    agents_dir.mkdir(parents=True)
    (agents_dir / "reviewer.md").write_text(
        "---\nmode: subagent\ndescription: Reviews changes\nmodel: fake/claude-sonnet-4\n"
        "permission:\n  edit: deny\n---\nYou review changes.\n"
    )
    config = {"default_agent": "plan", "agent": {"general": {"disable": True}, "plan": {"temperature": 0.1}}}
    async with server(tmp_path, fake_openai, database_url, **config) as live:
        agents = await ok(await live.client.get("/agent"))
        names = [a["name"] for a in agents]
        assert names == ["plan", "build", "compaction", "docs", "explore", "reviewer", "summary", "title"]
        by_name = {a["name"]: a for a in agents}
        reviewer = by_name["reviewer"]
        assert reviewer["mode"] == "subagent" and reviewer["description"] == "Reviews changes"
        assert reviewer["prompt"] == "You review changes."
        assert reviewer["model"] == {"providerID": "fake", "modelID": "claude-sonnet-4"}
        assert {"permission": "edit", "pattern": "*", "action": "deny"} in reviewer["permission"]
        assert by_name["docs"]["mode"] == "all" and by_name["docs"]["prompt"] == "Write docs."
        assert by_name["plan"]["temperature"] == 0.1
        assert by_name["title"]["hidden"] is True and by_name["build"]["native"] is True

        session = await live.create_session()
        response = await live.prompt(session["id"], "hi", agent="general")
        assert response.status_code == 400
        assert 'Agent not found: "general"' in response.json()["data"]["message"]
        # The default agent answers a prompt that names none.
        live.fake.enqueue(reply("planned"))
        answer = await ok(await live.prompt(session["id"], "hi"))
        assert answer["info"]["agent"] == "plan"
        assert live.fake.requests[0]["temperature"] == 0.1


async def test_system_prompt_by_model_family_with_instruction_files(
    tmp_path: Path, fake_openai: FakeOpenAI, database_url: str, isolated_config_dir: Path
) -> None:
    root = workspace(tmp_path)
    (root / "AGENTS.md").write_text("Always run the tests with `make test`.")
    (root / "docs").mkdir()
    (root / "docs" / "style.md").write_text("Use British spelling.")
    (isolated_config_dir / "AGENTS.md").write_text("Global: be brief.")
    nested = root / "pkg" / "sub"
    nested.mkdir(parents=True)
    async with server(tmp_path, fake_openai, database_url, instructions=["docs/*.md"]) as live:
        session = await live.create_session(directory=str(nested))
        live.fake.enqueue(reply("one"), reply("two"))
        await ok(await live.prompt(session["id"], "first", model=model("claude-sonnet-4")))
        await ok(
            await live.prompt(session["id"], "second", model=model("gpt-5-mini"), system="Answer in French.")
        )

        claude, gpt = live.fake.requests
        assert len(system_messages(claude)) == 2 and len(system_messages(gpt)) == 2
        assert claude["messages"][0] == {"role": "system", "content": prompts.ANTHROPIC}
        assert gpt["messages"][0] == {"role": "system", "content": prompts.CODEX}

        context = claude["messages"][1]["content"]
        assert "The exact model ID is fake/claude-sonnet-4" in context
        assert f"Working directory: {nested}" in context
        assert f"Workspace root folder: {root}" in context
        assert f"Instructions from: {root / 'AGENTS.md'}\nAlways run the tests with `make test`." in context
        assert f"Instructions from: {isolated_config_dir / 'AGENTS.md'}\nGlobal: be brief." in context
        assert f"Instructions from: {root / 'docs' / 'style.md'}\nUse British spelling." in context
        assert context.index("make test") < context.index("Global: be brief.") < context.index("British")
        assert gpt["messages"][1]["content"].endswith("Answer in French.")
        assert "The exact model ID is fake/gpt-5-mini" in gpt["messages"][1]["content"]


async def test_agent_prompt_replaces_the_provider_prompt_and_settings_reach_the_request(
    tmp_path: Path, fake_openai: FakeOpenAI, database_url: str
) -> None:
    careful = {
        "mode": "primary",
        "prompt": "You are careful.",
        "model": "fake/claude-sonnet-4",
        "temperature": 0.25,
        "top_p": 0.5,
        "steps": 1,
        "options": {"seed": 7},
    }
    async with server(tmp_path, fake_openai, database_url, agent={"careful": careful}) as live:
        session = await live.create_session()
        live.fake.enqueue(reply("Done, carefully."))
        answer = await ok(await live.prompt(session["id"], "do it", agent="careful"))
        assert answer["info"]["agent"] == "careful" and answer["info"]["modelID"] == "claude-sonnet-4"
        [request] = live.fake.requests
        assert request["messages"][0]["content"] == "You are careful."
        assert (request["model"], request["temperature"], request["top_p"]) == ("claude-sonnet-4", 0.25, 0.5)
        assert request["seed"] == 7
        # One step allowed: it is the last, so no tools and the step-limit prefill.
        assert not request.get("tools")
        assert "MAXIMUM STEPS REACHED" in request["messages"][-1]["content"]


async def test_plan_is_read_only_reminded_and_build_is_told_of_the_switch(
    tmp_path: Path, fake_openai: FakeOpenAI, database_url: str
) -> None:
    async with server(tmp_path, fake_openai, database_url) as live:
        session = await live.create_session()
        live.fake.enqueue(
            call("write", {"filePath": "app.py", "content": "print('hi')\n"}),
            call("write", {"filePath": ".agentforge/plans/refactor.md", "content": "# Plan\n"}),
            reply("Plan: rewrite app.py."),
        )
        answer = await ok(await live.prompt(session["id"], "plan the change", agent="plan"))
        assert answer["info"]["agent"] == "plan"
        assert not (live.workspace / "app.py").exists()
        assert (live.workspace / ".agentforge" / "plans" / "refactor.md").read_text() == "# Plan\n"

        first = live.fake.requests[0]
        assert last_user_text(first).endswith(PLAN_MODE)
        tool_names = [t["function"]["name"] for t in first.get("tools") or []]
        assert "write" in tool_names and "question" in tool_names
        planned = await ok(await live.client.get(f"/session/{session['id']}/message"))
        writes = [p["state"] for m in planned for p in m["parts"] if p["type"] == "tool"]
        assert [w["status"] for w in writes] == ["error", "completed"]
        assert "rule: edit '*' deny" in writes[0]["error"]

        live.fake.enqueue(reply("Building now."))
        await ok(await live.prompt(session["id"], "go ahead", agent="build"))
        build = live.fake.requests[-1]
        assert last_user_text(build).endswith(BUILD_SWITCH)
        user_texts = [m["content"] for m in build["messages"] if m["role"] == "user"]
        assert PLAN_MODE not in "".join(str(t) for t in user_texts), "reminders are never stored"

        stored = await ok(await live.client.get(f"/session/{session['id']}/message"))
        texts = [p.get("text", "") for m in stored for p in m["parts"] if p["type"] == "text"]
        assert not any("system-reminder" in t for t in texts)
