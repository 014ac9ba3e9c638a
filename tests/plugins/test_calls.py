from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, ClassVar

import pytest
from pydantic import BaseModel

from agentforge.llm.messages import ModelRequest, UserModelMessage
from agentforge.llm.provider import ResolvedModel
from agentforge.model.message import UserMessage, UserTime, WithParts
from agentforge.model.part import ModelRef, TextPart
from agentforge.plugins import (
    ChatHeaders,
    ChatMessage,
    ChatParams,
    Messages,
    PermissionDecision,
    PluginError,
    PluginManager,
    ShellEnv,
    SystemPrompt,
    ToolArgs,
    ToolDefinition,
    ToolOutput,
    calls,
    hookimpl,
)
from agentforge.testing.tools import unconfined
from agentforge.tools.base import PermissionRequest, Tool, ToolContext, ToolError, ToolResult
from agentforge.tools.builtin import ReadTool
from agentforge.tools.registry import specs
from agentforge.tools.services import ToolServices
from tests.tools.harness import Harness

MODEL = ResolvedModel(
    provider_id="fake",
    model_id="fake-model",
    api="openai",
    base_url="http://127.0.0.1:9/v1",
    api_key="",
    headers={},
    timeout=None,
    limit_context=100_000,
    limit_output=4_000,
    limit_input=None,
    options={"store": False},
)


def manager_with(*plugins: object) -> PluginManager:
    manager = PluginManager(builtin=False)
    for plugin in plugins:
        manager.register(plugin)
    return manager


class RequestShaper:
    @hookimpl
    def system_transform(self, model: ResolvedModel, output: SystemPrompt) -> None:
        output.system.append(f"Answer as {model.model_id}.")

    @hookimpl
    async def chat_params(self, agent: str, output: ChatParams) -> None:
        await asyncio.sleep(0)
        output.temperature = 0.2
        output.options["reasoning"] = agent

    @hookimpl
    def chat_headers(self, session_id: str, output: ChatHeaders) -> None:
        output.headers["x-session"] = session_id


async def test_model_request_applies_system_params_and_headers_in_place() -> None:
    options = dict(MODEL.options)
    request = ModelRequest(
        system=["base"],
        messages=[UserModelMessage(content=[])],
        temperature=0.9,
        top_p=0.5,
        options=options,
        headers={"x-existing": "1"},
    )
    await calls.model_request(
        manager_with(RequestShaper()), request, session_id="ses_1", agent="build", model=MODEL
    )
    assert request.system == ["base", "Answer as fake-model."]
    assert (request.temperature, request.top_p) == (0.2, 0.5)
    assert request.options == {"store": False, "reasoning": "build"}
    assert request.headers == {"x-existing": "1", "x-session": "ses_1"}
    assert options == {"store": False}  # the caller's dict was not edited behind its back


def user_message(text: str = "hello") -> tuple[UserMessage, TextPart]:
    message = UserMessage(
        id="msg_1",
        session_id="ses_1",
        time=UserTime(created=1),
        agent="build",
        model=ModelRef(provider_id="fake", model_id="fake-model"),
    )
    part = TextPart(id="prt_1", session_id="ses_1", message_id="msg_1", text=text)
    return message, part


async def test_user_message_lets_plugins_edit_the_message_and_add_parts() -> None:
    class Stamper:
        @hookimpl
        def chat_message(self, model: ModelRef, output: ChatMessage) -> None:
            output.message.system = f"Routed to {model.model_id}"
            output.parts.append(
                TextPart(id="prt_2", session_id="ses_1", message_id="msg_1", text="[stamped]", synthetic=True)
            )

    message, part = user_message()
    parts = [part]
    hooked = await calls.user_message(
        manager_with(Stamper()),
        session_id="ses_1",
        agent="build",
        model=message.model,
        message=message,
        parts=parts,
    )
    assert hooked.message.system == "Routed to fake-model"
    assert [p.text for p in hooked.parts if isinstance(p, TextPart)] == ["hello", "[stamped]"]
    assert parts == [part]


async def test_history_lets_plugins_drop_messages() -> None:
    class KeepLast:
        @hookimpl
        def messages_transform(self, output: Messages) -> None:
            output.messages[:] = output.messages[-1:]

    first, second = user_message("one"), user_message("two")
    history = [WithParts(info=first[0], parts=[first[1]]), WithParts(info=second[0], parts=[second[1]])]
    kept = await calls.history(manager_with(KeepLast()), session_id="ses_1", messages=history)
    assert kept == history[1:]
    assert len(history) == 2


async def test_history_plugins_change_copies_not_the_shared_history() -> None:
    # The loop's history objects are shared with later reads (store/parsed.py): a plugin that edits a
    # part in place changes what this model call sees, never what the next read returns.
    class Redact:
        @hookimpl
        def messages_transform(self, output: Messages) -> None:
            for item in output.messages:
                for part in item.parts:
                    if isinstance(part, TextPart):
                        part.text = "[redacted]"

    message, part = user_message("secret")
    history = [WithParts(info=message, parts=[part])]
    changed = await calls.history(manager_with(Redact()), session_id="ses_1", messages=history)
    assert [p.text for p in changed[0].parts if isinstance(p, TextPart)] == ["[redacted]"]
    assert part.text == "secret" and history[0].parts[0] is part


class Describer:
    @hookimpl
    def tool_definition(self, tool_id: str, output: ToolDefinition) -> None:
        if tool_id == "read":
            output.description = "Read, audited"
            output.parameters["properties"]["filePath"]["description"] = "Audited path"


async def test_tool_specs_apply_tool_definition_without_touching_the_cached_schema() -> None:
    tool = ReadTool()
    original = specs([tool])
    hooked = await calls.tool_specs(manager_with(Describer()), [tool])
    assert hooked[0].description == "Read, audited"
    assert hooked[0].parameters["properties"]["filePath"]["description"] == "Audited path"
    assert specs([tool]) == original
    assert await calls.tool_specs(PluginManager(builtin=False), [tool]) == original


class EchoParams(BaseModel):
    text: str


class Echo(Tool[EchoParams]):
    id = "echo"
    description = "Echo"
    parameters: ClassVar[type[BaseModel]] = EchoParams

    async def execute(self, args: EchoParams, ctx: ToolContext) -> ToolResult:
        return ToolResult(title="echo", output=args.text)


class Rewriter:
    def __init__(self) -> None:
        self.after_args: dict[str, Any] = {}

    @hookimpl
    def tool_execute_before(self, tool: str, output: ToolArgs) -> None:
        output.args["text"] = output.args["text"].replace("secret", "[redacted]")

    @hookimpl
    async def tool_execute_after(self, args: dict[str, Any], output: ToolOutput) -> None:
        self.after_args = args
        output.title = "echo (audited)"
        output.metadata["audited"] = True


async def test_run_tool_with_hooks_rewrites_args_before_and_output_after(harness: Harness) -> None:
    rewriter = Rewriter()
    result = await calls.run_tool_with_hooks(
        manager_with(rewriter), Echo(), {"text": "my secret"}, harness.context(), limits=harness.limits
    )
    assert result.output == "my [redacted]"
    assert result.title == "echo (audited)"
    assert result.metadata == {"truncated": False, "audited": True}
    assert rewriter.after_args == {"text": "my [redacted]"}


async def test_a_plugin_bug_in_a_tool_hook_becomes_a_tool_error(harness: Harness) -> None:
    class Buggy:
        @hookimpl
        def tool_execute_after(self, output: ToolOutput) -> None:
            raise KeyError("oops")

    with pytest.raises(ToolError, match="A plugin failed in tool_execute_after: KeyError: 'oops'"):
        await calls.run_tool_with_hooks(
            manager_with(Buggy()), Echo(), {"text": "x"}, harness.context(), limits=harness.limits
        )


async def test_permission_status_defaults_to_ask_and_rejects_unknown_answers() -> None:
    request = PermissionRequest(permission="bash", patterns=["ls"])
    assert await calls.permission_status(PluginManager(builtin=False), request, "ses_1") == "ask"

    class Confused:
        @hookimpl
        def permission_ask(self, output: PermissionDecision) -> None:
            output.status = "maybe"  # type: ignore[assignment]

    with pytest.raises(PluginError, match="permission_ask left status 'maybe'"):
        await calls.permission_status(manager_with(Confused()), request, "ses_1")


class EnvAdder:
    @hookimpl
    def shell_env(self, cwd: Path, call_id: str | None, output: ShellEnv) -> None:
        output.env["PROJECT_ROOT"] = str(cwd)
        output.env["CALL"] = call_id or ""


async def test_the_shell_env_hook_is_the_tools_service_for_plugin_variables(harness: Harness) -> None:
    assert await harness.context().process_env(harness.workspace) == unconfined().env.build()
    harness.services = ToolServices(shell_env=calls.shell_env_hook(manager_with(EnvAdder())))
    env = await harness.context().process_env(harness.workspace)
    assert (env["PROJECT_ROOT"], env["CALL"]) == (str(harness.workspace), "call_1")


async def test_shell_env_values_must_be_strings() -> None:
    class Numeric:
        @hookimpl
        def shell_env(self, output: ShellEnv) -> None:
            output.env["PORT"] = 8080  # type: ignore[assignment]

    with pytest.raises(PluginError, match="shell_env must leave strings in env"):
        await calls.shell_env(manager_with(Numeric()), cwd=Path("."), session_id=None, call_id=None)
