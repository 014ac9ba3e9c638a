"""The calling side of each hook, typed: build the output object from what the caller has, run the hook,
hand back the result. The session layer calls these (see the table in `plugins/manager.py`)."""

from __future__ import annotations

import copy
import dataclasses
import logging
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, get_args

from agentforge.llm.messages import ModelRequest, ToolSpec
from agentforge.llm.provider import ResolvedModel
from agentforge.model.message import UserMessage, WithParts
from agentforge.model.part import ModelRef, Part
from agentforge.plugins.errors import PluginError
from agentforge.plugins.hookspecs import (
    ChatHeaders,
    ChatMessage,
    ChatParams,
    Messages,
    PermissionDecision,
    PermissionStatus,
    ShellEnv,
    SystemPrompt,
    ToolArgs,
    ToolDefinition,
    ToolOutput,
)
from agentforge.plugins.manager import PluginManager
from agentforge.tools.base import PermissionRequest, Tool, ToolContext, ToolError, ToolResult
from agentforge.tools.execute import describe_exception, run_tool
from agentforge.tools.services import ShellEnvHook
from agentforge.tools.truncation import TruncationLimits

log = logging.getLogger(__name__)

_STATUSES = frozenset(get_args(PermissionStatus))


async def user_message(
    plugins: PluginManager,
    *,
    session_id: str,
    agent: str,
    model: ModelRef,
    message: UserMessage,
    parts: Sequence[Part],
) -> ChatMessage:
    """`chat_message`: the user message and parts to save, as the plugins left them."""
    output = ChatMessage(message=message, parts=list(parts))
    await plugins.acall("chat_message", session_id=session_id, agent=agent, model=model, output=output)
    return output


async def history(
    plugins: PluginManager, *, session_id: str, messages: Sequence[WithParts]
) -> list[WithParts]:
    """`messages_transform`: the history a model call is built from. Plugins get copies they may
    change in place: the loop's history objects are shared with later reads (store/parsed.py)."""
    if not plugins.implements("messages_transform"):
        return list(messages)
    output = Messages(messages=[item.model_copy(deep=True) for item in messages])
    await plugins.acall("messages_transform", session_id=session_id, output=output)
    return output.messages


async def model_request(
    plugins: PluginManager, request: ModelRequest, *, session_id: str, agent: str, model: ResolvedModel
) -> None:
    """`system_transform`, `chat_params`, `chat_headers`, applied to `request` in place."""
    system = SystemPrompt(system=list(request.system))
    await plugins.acall("system_transform", session_id=session_id, model=model, output=system)
    request.system = _at_most_two(system.system)

    params = ChatParams(
        temperature=request.temperature,
        top_p=request.top_p,
        max_output_tokens=request.max_output_tokens,
        options=dict(request.options),
    )
    await plugins.acall("chat_params", session_id=session_id, agent=agent, model=model, output=params)
    request.temperature = params.temperature
    request.top_p = params.top_p
    request.max_output_tokens = params.max_output_tokens
    request.options = params.options

    headers = ChatHeaders(headers=dict(request.headers))
    await plugins.acall("chat_headers", session_id=session_id, agent=agent, model=model, output=headers)
    request.headers = headers.headers


def _at_most_two(system: list[str]) -> list[str]:
    """The base prompt, then everything else joined (KERNEL 5.6): a stable first system message keeps
    provider prompt caches warm, whatever pieces a plugin added."""
    if len(system) <= 2:
        return system
    return [system[0], "\n".join(system[1:])]


async def tool_specs(plugins: PluginManager, tools: Iterable[Tool[Any]]) -> list[ToolSpec]:
    """`tool_definition`: what the model is told about each tool."""
    if not plugins.implements("tool_definition"):
        return [
            ToolSpec(name=tool.id, description=tool.description, parameters=tool.json_schema())
            for tool in tools
        ]
    specs: list[ToolSpec] = []
    for tool in tools:
        # A deep copy: schemas are cached per parameters model, and plugins may edit nested fields.
        definition = ToolDefinition(
            description=tool.description, parameters=copy.deepcopy(tool.json_schema())
        )
        await plugins.acall("tool_definition", tool_id=tool.id, output=definition)
        specs.append(
            ToolSpec(name=tool.id, description=definition.description, parameters=definition.parameters)
        )
    return specs


async def run_tool_with_hooks(
    plugins: PluginManager,
    tool: Tool[Any],
    raw_input: dict[str, Any],
    ctx: ToolContext,
    *,
    limits: TruncationLimits,
) -> ToolResult:
    """`tool_execute_before` → `run_tool` (validate, execute, truncate) → `tool_execute_after`.

    A hook that raises `ToolError` fails the call with its message (that is how a plugin blocks a
    call); any other exception from a hook becomes a `ToolError` too, so the turn goes on.
    """
    before = ToolArgs(args=dict(raw_input))
    await _tool_hook(
        plugins,
        "tool_execute_before",
        tool=tool.id,
        session_id=ctx.session_id,
        call_id=ctx.call_id,
        output=before,
    )
    result = await run_tool(tool, before.args, ctx, limits=limits)
    after = ToolOutput(title=result.title, output=result.output, metadata=dict(result.metadata))
    await _tool_hook(
        plugins,
        "tool_execute_after",
        tool=tool.id,
        session_id=ctx.session_id,
        call_id=ctx.call_id,
        args=before.args,
        output=after,
    )
    return dataclasses.replace(result, title=after.title, output=after.output, metadata=after.metadata)


async def _tool_hook(plugins: PluginManager, hook: str, **kwargs: Any) -> None:
    try:
        await plugins.acall(hook, **kwargs)
    except ToolError:
        raise
    except Exception as exc:
        log.exception("Plugin hook %s failed for tool %s", hook, kwargs["tool"])
        raise ToolError(f"A plugin failed in {hook}: {describe_exception(exc)}") from exc


async def permission_status(
    plugins: PluginManager, request: PermissionRequest, session_id: str
) -> PermissionStatus:
    """`permission_ask`: "allow" or "deny" decides without a person; "ask" leaves it to them."""
    decision = PermissionDecision()
    await plugins.acall("permission_ask", request=request, session_id=session_id, output=decision)
    if decision.status not in _STATUSES:
        raise PluginError(
            f"permission_ask left status {decision.status!r}; expected one of {sorted(_STATUSES)}"
        )
    return decision.status


async def shell_env(
    plugins: PluginManager, *, cwd: Path, session_id: str | None, call_id: str | None
) -> dict[str, str]:
    """`shell_env`: variables to add to a shell command's environment."""
    output = ShellEnv()
    await plugins.acall("shell_env", cwd=cwd, session_id=session_id, call_id=call_id, output=output)
    for key, value in output.env.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise PluginError(f"shell_env must leave strings in env, got {key!r}: {value!r}")
    return dict(output.env)


def shell_env_hook(plugins: PluginManager) -> ShellEnvHook:
    """`shell_env` as the tools' service (`ToolServices.shell_env`): bash calls it before spawning."""

    async def hook(cwd: Path, *, session_id: str, call_id: str | None) -> dict[str, str]:
        return await shell_env(plugins, cwd=cwd, session_id=session_id, call_id=call_id)

    return hook
