from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from agentforge.model.events import DEFAULT_TENANT, TODO_UPDATED, Event
from agentforge.session.channels.todos import StoreTodos
from agentforge.store import Store, sqlite_url
from agentforge.tools.base import ToolError
from agentforge.tools.builtin.todo import TodoReadTool, TodoWriteTool
from agentforge.tools.services import ToolServices
from tests.store.builders import new_session, session_created
from tests.tools.harness import Harness

TODOS = [
    {"content": "Write the parser", "status": "completed", "priority": "high"},
    {"content": "Write the tool", "status": "in_progress", "priority": "high"},
    {"content": "Document it", "status": "pending", "priority": "low"},
    {"content": "Old idea", "status": "cancelled", "priority": "medium"},
]


@pytest.fixture
def published() -> list[Event]:
    return []


@pytest_asyncio.fixture
async def store(tmp_path: Path, published: list[Event]) -> AsyncIterator[Store]:
    opened = await Store.open(sqlite_url(tmp_path / "db"), publish=published.extend)
    try:
        yield opened
    finally:
        await opened.close()


@pytest_asyncio.fixture
async def todo_harness(harness: Harness, store: Store) -> Harness:
    session = new_session()
    await store.write(session_created(session))
    harness.session_id = session.id
    harness.services = ToolServices(todos=StoreTodos(store, DEFAULT_TENANT))
    return harness


async def test_todowrite_stores_the_list_and_publishes_it(
    todo_harness: Harness, store: Store, published: list[Event]
) -> None:
    result = await todo_harness.run(TodoWriteTool(), todos=TODOS)
    assert json.loads(result.output) == TODOS
    assert result.title == "3 todos"  # everything not completed, cancelled included
    assert result.metadata["todos"] == TODOS
    assert await store.todos(DEFAULT_TENANT, todo_harness.session_id) == TODOS
    [event] = [e for e in published if e.type == TODO_UPDATED]
    assert event.properties == {"sessionID": todo_harness.session_id, "todos": TODOS}
    assert event.session_id == todo_harness.session_id and event.seq is not None
    [ask] = todo_harness.asked("todowrite")
    assert ask.patterns == ["*"] and ask.always == ["*"]


async def test_each_write_replaces_the_whole_list(todo_harness: Harness, store: Store) -> None:
    await todo_harness.run(TodoWriteTool(), todos=TODOS)
    await todo_harness.run(TodoWriteTool(), todos=[])
    assert await store.todos(DEFAULT_TENANT, todo_harness.session_id) == []


async def test_todoread_returns_the_current_list(todo_harness: Harness) -> None:
    empty = await todo_harness.run(TodoReadTool())
    assert json.loads(empty.output) == [] and empty.title == "0 todos"
    await todo_harness.run(TodoWriteTool(), todos=TODOS[:2])
    result = await todo_harness.run(TodoReadTool())
    assert json.loads(result.output) == TODOS[:2]
    assert result.title == "1 todos"
    assert len(todo_harness.asked("todoread")) == 2


@pytest.mark.parametrize(
    "bad",
    [
        {"content": "x", "status": "done", "priority": "high"},
        {"content": "x", "status": "pending", "priority": "urgent"},
        {"content": "", "status": "pending", "priority": "low"},
        {"status": "pending", "priority": "low"},
    ],
)
async def test_malformed_todos_are_refused(todo_harness: Harness, store: Store, bad: dict[str, str]) -> None:
    with pytest.raises(ToolError, match="The todowrite tool was called with invalid arguments"):
        await todo_harness.run(TodoWriteTool(), todos=[bad])
    assert await store.todos(DEFAULT_TENANT, todo_harness.session_id) == []


async def test_outside_a_session_the_tools_say_so(harness: Harness) -> None:
    with pytest.raises(ToolError, match="todo list is not available"):
        await harness.run(TodoWriteTool(), todos=TODOS)
    with pytest.raises(ToolError, match="todo list is not available"):
        await harness.run(TodoReadTool())
