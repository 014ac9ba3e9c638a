"""The `task` tool (KERNEL 8.3): run a subagent in a child session and hand back its answer.

The tool itself knows nothing about sessions: it talks to the `Subagents` service the session layer
lends it (`ctx.services.subagents`, implemented in `session/channels/subtask.py`), which creates or
resumes the child session and runs the subagent's turn there.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from pydantic import Field

from agentforge.tools.base import PermissionRequest, Tool, ToolContext, ToolError, ToolResult
from agentforge.tools.params import ToolParams
from agentforge.tools.services import ChildSession as ChildSession

TASK_TOOL = "task"

DESCRIPTION = """Launch a new agent to handle complex, multistep tasks autonomously.

Available agent types and the tools they have access to:
{agents}

When using the task tool, you must specify a subagent_type parameter to select which agent type to use.

When to use the task tool:
- When you are instructed to execute custom slash commands. Use the task tool with the slash command \
invocation as the entire prompt.
- For open-ended searches and multi-step research that would take many rounds of tool calls.

When NOT to use the task tool:
- To read a specific file path, use the read or glob tool instead: it is faster.
- To search for a specific class or function definition, use the glob or grep tool instead.
- For tasks that are not related to the agent descriptions above.

Usage notes:
1. Launch multiple agents concurrently whenever possible, to maximize performance; to do that, use \
one message with multiple tool uses.
2. When the agent is done, it returns a single message back to you, which the user does not see: \
tell the user what they need to know from it in your own words.
3. Each call starts a fresh agent unless you pass task_id: the agent's output starts with the \
task_id to pass to continue the same agent session with its earlier context.
4. Write the prompt as a complete, self-contained task: say exactly what the agent should do and \
what information it should return in its final message.
5. The agent's outputs should generally be trusted.
6. Tell the agent whether you expect it to write code or only to do research (search, read files, \
fetch pages), since it does not know the user's intent."""

NO_AGENTS = "(none: no subagent is available to you)"
MANUAL_ONLY = "This subagent should only be called manually by the user."


class TaskParams(ToolParams):
    description: str = Field(description="A short (3-5 words) description of the task")
    prompt: str = Field(description="The task for the agent to perform")
    subagent_type: str = Field(description="The type of specialized agent to use for this task")
    task_id: str | None = Field(
        default=None,
        description="Only to resume an earlier task: the task_id a previous task call returned. "
        "The agent then continues that session with its earlier context.",
    )
    command: str | None = Field(default=None, description="The command that triggered this task")


def describe(agents: Sequence[tuple[str, str]]) -> str:
    """The tool description listing the subagents the caller may use, as (name, description)."""
    lines = [f"- {name}: {text or MANUAL_ONLY}" for name, text in agents]
    return DESCRIPTION.format(agents="\n".join(lines) or NO_AGENTS)


def task_output(child_id: str, text: str) -> str:
    return (
        f"task_id: {child_id} (for resuming to continue this task if needed)\n\n"
        f"<task_result>\n{text}\n</task_result>"
    )


class TaskTool(Tool[TaskParams]):
    id = TASK_TOOL
    description = describe(())
    parameters = TaskParams

    def with_agents(self, agents: Sequence[tuple[str, str]]) -> TaskTool:
        """A copy whose description lists `agents` (the tool is described per calling agent)."""
        tool = TaskTool()
        tool.description = describe(agents)
        return tool

    async def execute(self, args: TaskParams, ctx: ToolContext) -> ToolResult:
        subagents = ctx.services.subagents
        if subagents is None:
            raise ToolError("Subagents cannot be started from here")
        if not ctx.services.subagent_chosen:
            await ctx.ask(
                PermissionRequest(
                    permission=TASK_TOOL,
                    patterns=[args.subagent_type],
                    always=["*"],
                    metadata={"description": args.description, "subagent_type": args.subagent_type},
                )
            )
        if not subagents.exists(args.subagent_type):
            raise ToolError(f"Unknown agent type: {args.subagent_type} is not a valid agent type")
        child = await subagents.open_child(
            parent_id=ctx.session_id,
            task_id=args.task_id,
            description=args.description,
            agent=args.subagent_type,
        )
        metadata = {
            "sessionId": child.id,
            "model": {"modelID": child.model_id, "providerID": child.provider_id},
        }
        # At once, so a client can follow the child session while it runs.
        await ctx.metadata(args.description, metadata)
        try:
            text = await subagents.run(child, agent=args.subagent_type, prompt=args.prompt)
        except asyncio.CancelledError:
            await subagents.cancel(child.id)
            raise
        return ToolResult(output=task_output(child.id, text), title=args.description, metadata=metadata)
