"""The per-step tool table: specs the model sees, and tool-call repair (KERNEL 5.6)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from agentforge.permission.gate import TurnPermissions
from agentforge.permission.rules import Ruleset
from agentforge.permission.service import PermissionService
from agentforge.plugins.manager import PluginManager
from agentforge.session.turn_tools import (
    DOOM_LOOP_THRESHOLD,
    INVALID_TOOL,
    TurnTools,
    calls_since,
    is_doom_loop,
)
from agentforge.store import sqlite_url
from agentforge.store.store import Store
from agentforge.testing.tools import unconfined
from agentforge.tools.base import Tool
from agentforge.tools.builtin import GrepTool, InvalidTool, ReadTool, WriteTool
from agentforge.tools.services import NO_SERVICES
from tests.session.builders import Conversation, step_start, tool_completed, tool_error, tool_pending


@pytest_asyncio.fixture
async def turn_tools(tmp_path: Path) -> AsyncIterator[TurnTools]:
    tools: list[Tool[Any]] = [ReadTool(), WriteTool(), InvalidTool(), GrepTool()]
    store = await Store.open(sqlite_url(tmp_path))
    try:
        yield TurnTools(
            tools={tool.id: tool for tool in tools},
            directory=tmp_path / "workspace",
            data_dir=tmp_path / "data",
            agent="build",
            permissions=TurnPermissions(PermissionService(store), "default", "ses_1", Ruleset()),
            confinement=unconfined(),
            services=NO_SERVICES,
            plugins=PluginManager(builtin=False),
        )
    finally:
        await store.close()


def test_specs_list_every_tool_but_invalid_in_order(turn_tools: TurnTools) -> None:
    specs = turn_tools.specs()
    assert [s.name for s in specs] == ["read", "write", "grep"]
    read = specs[0]
    assert read.description == ReadTool.description
    assert read.parameters == ReadTool().json_schema()
    assert "filePath" in read.parameters["properties"]


def test_exact_name_passes_through_with_parsed_arguments(turn_tools: TurnTools) -> None:
    assert turn_tools.repair("read", '{"filePath": "a.txt", "offset": 3}') == (
        "read",
        {"filePath": "a.txt", "offset": 3},
    )


def test_empty_arguments_mean_an_empty_object(turn_tools: TurnTools) -> None:
    assert turn_tools.repair("grep", "") == ("grep", {})
    assert turn_tools.repair("grep", "  \n") == ("grep", {})


def test_case_only_mismatch_is_renamed_to_the_lower_case_tool(turn_tools: TurnTools) -> None:
    assert turn_tools.repair("Read", '{"filePath": "a.txt"}') == ("read", {"filePath": "a.txt"})
    assert turn_tools.repair("WRITE", "{}") == ("write", {})


def test_unknown_tool_goes_to_invalid_with_the_available_list(turn_tools: TurnTools) -> None:
    name, args = turn_tools.repair("fetch_url", '{"url": "https://example.com"}')
    assert name == INVALID_TOOL
    assert args["tool"] == "fetch_url"
    assert args["error"] == (
        "Model tried to call unavailable tool 'fetch_url'. Available tools: grep, read, write."
    )


def test_calling_invalid_directly_is_itself_invalid(turn_tools: TurnTools) -> None:
    name, args = turn_tools.repair("invalid", '{"tool": "x", "error": "y"}')
    assert name == INVALID_TOOL
    assert args["tool"] == "invalid"
    assert "unavailable tool 'invalid'" in args["error"]
    assert "invalid," not in args["error"].split("Available tools:")[1]


def test_bad_json_goes_to_invalid(turn_tools: TurnTools) -> None:
    name, args = turn_tools.repair("read", '{"filePath": "a.txt"')
    assert name == INVALID_TOOL
    assert args["tool"] == "read"
    assert args["error"].startswith("arguments are not valid JSON (")


@pytest.mark.parametrize("payload", ['["a.txt"]', '"a.txt"', "42", "null", "true"])
def test_non_object_json_goes_to_invalid(turn_tools: TurnTools, payload: str) -> None:
    assert turn_tools.repair("read", payload) == (
        INVALID_TOOL,
        {"tool": "read", "error": "arguments must be a JSON object"},
    )


def test_repaired_arguments_are_valid_input_for_the_invalid_tool(turn_tools: TurnTools) -> None:
    _, args = turn_tools.repair("nope", "{}")
    validated = InvalidTool.parameters.model_validate(args)
    assert validated.model_dump() == args


# --- doom-loop bookkeeping (KERNEL 5.7) -------------------------------------------------------------


def test_calls_since_collects_this_turns_calls_across_steps() -> None:
    talk = Conversation()
    talk.user("earlier question")
    talk.assistant(tool_completed("read", {"filePath": "old.txt"}, "old"))
    user = talk.user("now this")
    talk.assistant(
        step_start(), tool_completed("read", {"filePath": "a"}, "x"), "thinking", finish="tool-calls"
    )
    talk.assistant(tool_error("bash", {"command": "ls"}, "boom"), tool_pending("grep"))
    assert calls_since(talk.messages, user.info.id) == [
        ("read", {"filePath": "a"}),
        ("bash", {"command": "ls"}),
    ]


def test_three_identical_calls_in_a_row_are_a_loop() -> None:
    same = ("read", {"filePath": "a"})
    assert not is_doom_loop([same, same])
    assert is_doom_loop([same, same, same])
    assert is_doom_loop([("bash", {"command": "ls"}), same, same, same])
    assert not is_doom_loop([same, same, ("read", {"filePath": "b"})])
    assert not is_doom_loop([same, ("grep", {"filePath": "a"}), same, same])
    assert DOOM_LOOP_THRESHOLD == 3
