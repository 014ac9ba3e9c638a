"""Subagents against a scripted model: the task tool and subtask parts run child sessions."""

from __future__ import annotations

import asyncio

from agentforge.llm.messages import TextContent, UserModelMessage
from agentforge.model.message import AssistantMessage
from agentforge.model.part import TextPart, ToolStateCompleted, ToolStateError
from agentforge.session.inputs import PromptInput
from agentforge.testing import Turn
from tests.session.conftest import MakeForge, texts

HELPER = {"mode": "subagent", "description": "Digs through the code for answers"}
TASK = {"description": "Find the parser", "prompt": "Where is the parser?", "subagent_type": "helper"}


async def test_the_task_tool_runs_the_subagent_in_a_child_session(make_forge: MakeForge) -> None:
    async with make_forge(agent={"helper": HELPER}) as forge:
        forge.model.respond(
            Turn().tool_call("task", TASK),
            Turn().text("The parser is in src/parse.py"),  # the child's turn
            Turn().text("It is in src/parse.py."),  # the parent goes on with the result
        )
        parent = await forge.session()
        reply = await forge.prompt(parent.id, "find the parser")
        (child,) = await forge.rt.store.children("default", parent.id)
        (call,) = await forge.tool_parts(parent.id)
        child_history = await forge.history(child.id)

    assert texts(reply.parts) == ["It is in src/parse.py."]
    assert isinstance(call.state, ToolStateCompleted)
    assert call.state.metadata["sessionId"] == child.id
    assert call.state.output.endswith("<task_result>\nThe parser is in src/parse.py\n</task_result>")
    assert child.title == "Find the parser (@helper subagent)"
    assert isinstance(child_history[1].info, AssistantMessage) and child_history[1].info.agent == "helper"
    child_request = forge.model.requests[1]
    assert {"task", "todowrite", "todoread"}.isdisjoint(tool.name for tool in child_request.tools)


async def test_a_subtask_part_runs_before_the_model_is_asked(make_forge: MakeForge) -> None:
    async with make_forge(agent={"helper": HELPER}) as forge:
        forge.model.respond(Turn().text("Found it in src/parse.py"), Turn().text("Done."))
        parent = await forge.session()
        body = PromptInput.model_validate(
            {
                "parts": [
                    {
                        "type": "subtask",
                        "prompt": "Where is the parser?",
                        "description": "Find",
                        "agent": "helper",
                    }
                ]
            }
        )
        reply = await forge.prompts.prompt(parent.id, body)
        (call,) = await forge.tool_parts(parent.id)
    assert isinstance(call.state, ToolStateCompleted) and call.tool == "task"
    assert "Found it in src/parse.py" in call.state.output
    assert texts(reply.parts) == ["Done."]
    asked = forge.model.requests[0].messages[-1]  # the child's turn, asked first
    assert isinstance(asked, UserModelMessage) and isinstance(asked.content[0], TextContent)
    assert asked.content[0].text == "Where is the parser?"


async def test_aborting_the_parent_cancels_the_child_and_fails_the_call(make_forge: MakeForge) -> None:
    async with make_forge(agent={"helper": HELPER}) as forge:
        never = asyncio.Event()
        forge.model.respond(Turn().tool_call("task", TASK), Turn().text("Looking").pause(never))
        parent = await forge.session()
        prompt = asyncio.create_task(forge.prompt(parent.id, "find the parser"))
        await forge.until(
            lambda: len(forge.model.requests) == 2 and bool(forge.events_of("message.part.delta"))
        )
        assert await forge.sessions.abort(parent.id)
        reply = await asyncio.wait_for(prompt, 5)
        (child,) = await forge.rt.store.children("default", parent.id)
        (call,) = await forge.tool_parts(parent.id)
        child_reply = (await forge.history(child.id))[1]
    assert isinstance(reply.info, AssistantMessage) and reply.info.error is not None
    assert isinstance(call.state, ToolStateError)
    assert isinstance(child_reply.info, AssistantMessage) and child_reply.info.error is not None
    assert [p.text for p in child_reply.parts if isinstance(p, TextPart)] == ["Looking"]
    assert not forge.rt.runners.is_busy(child.id)
