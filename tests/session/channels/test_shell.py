"""The user's shell route in-process: the command's part, its output, abort, and the path check."""

from __future__ import annotations

import asyncio

import pytest

from agentforge.model.part import ToolStateCompleted, ToolStateRunning
from agentforge.session.channels.shell import ABORTED_NOTE, ShellInput, run_shell
from agentforge.session.errors import InvalidInputError
from agentforge.session.runner import SessionBusyError
from tests.session.conftest import Forge


async def shell(forge: Forge, session_id: str, command: str) -> ToolStateCompleted:
    session = await forge.sessions.get(session_id)
    scope = await forge.sessions.scope()
    body = ShellInput.model_validate({"agent": "build", "command": command})
    result = await run_shell(forge.rt.sessions, scope, session, body)
    (part,) = result.parts
    assert part.type == "tool" and isinstance(part.state, ToolStateCompleted)
    return part.state


async def test_a_command_runs_in_the_session_directory_as_a_completed_bash_part(forge: Forge) -> None:
    session = await forge.session()
    state = await shell(forge, session.id, "echo hello; pwd")
    assert state.output.splitlines() == ["hello", str(forge.workspace)]
    assert state.input == {"command": "echo hello; pwd"}
    assert state.metadata == {"output": state.output, "description": ""}
    assert forge.model.requests == []  # the model is not asked
    history = await forge.history(session.id)
    assert [item.info.role for item in history] == ["user", "assistant"]


async def test_abort_kills_the_command_and_still_completes_the_part(forge: Forge) -> None:
    session = await forge.session()
    running = asyncio.create_task(shell(forge, session.id, "echo started; sleep 30"))

    def previewed() -> bool:
        parts = [e.properties["part"] for e in forge.events_of("message.part.updated")]
        return any("started" in (p.get("state", {}).get("metadata") or {}).get("output", "") for p in parts)

    await forge.until(previewed)
    with pytest.raises(SessionBusyError):
        await shell(forge, session.id, "echo second")
    assert await forge.sessions.abort(session.id)
    state = await asyncio.wait_for(running, 10)
    assert state.output.startswith("started") and state.output.endswith(ABORTED_NOTE)
    (part,) = await forge.tool_parts(session.id)
    assert isinstance(part.state, ToolStateCompleted) and not isinstance(part.state, ToolStateRunning)


async def test_a_command_naming_a_path_outside_the_workspace_is_refused_before_it_runs(forge: Forge) -> None:
    outside = forge.workspace.parent / "outside.txt"
    outside.write_text("secret\n")
    session = await forge.session()
    with pytest.raises(InvalidInputError, match="outside the workspace"):
        await shell(forge, session.id, f"cat {outside}")
    assert await forge.history(session.id) == []
