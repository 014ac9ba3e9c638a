"""Structured output (KERNEL 4.4 steps 13 and 19): `format: {type: "json_schema", schema}` on a prompt.

The turn gets a `StructuredOutput` tool whose parameters are the user's schema, the model is told
(system line, `tool_choice: "required"`) to answer through it, and the arguments it passes, once they
validate against the schema, become the reply's `structured` field. Arguments that do not validate go
back to the model as a tool error so it can try again, up to `retryCount` times; a reply that ends
without ever calling the tool fails with StructuredOutputError.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from agentforge.llm.messages import ModelRequest
from agentforge.model.errors import StructuredOutputError, StructuredOutputErrorData
from agentforge.model.message import (
    AssistantMessage,
    OutputFormat,
    OutputFormatJsonSchema,
    UserMessage,
    WithParts,
)
from agentforge.model.part import Part, ToolPart, ToolStateError
from agentforge.session.events import SessionEvents
from agentforge.session.processor import Processor
from agentforge.session.turn_tools import TurnTools
from agentforge.tools.base import RawSchemaTool, ToolContext, ToolResult

STRUCTURED_TOOL: Final = "StructuredOutput"
CAPTURED: Final = "Structured output captured successfully."
NOT_PRODUCED: Final = "Model did not produce structured output"
SYSTEM_LINE: Final = (
    "IMPORTANT: The user has requested structured output. You MUST use the StructuredOutput tool to "
    "provide your final response. Do NOT respond with plain text: call the StructuredOutput tool with "
    "your answer formatted according to its schema."
)
_DESCRIPTION: Final = (
    "Use this tool to return your final response in the requested structured format. "
    "Call it exactly once, when you have the answer; its parameters are the required output schema."
)


def schema_problem(output_format: OutputFormat | None) -> str | None:
    """Why a prompt's format cannot be used (None when it can): the schema must be a valid JSON
    Schema, so a broken one is refused with the prompt instead of failing the turn."""
    if not isinstance(output_format, OutputFormatJsonSchema):
        return None
    if output_format.retry_count < 0:
        return "format.retryCount must be 0 or more"
    import jsonschema  # here, not at start-up: only a prompt with a schema needs it

    try:
        jsonschema.validators.validator_for(output_format.schema_).check_schema(output_format.schema_)
    except jsonschema.SchemaError as exc:
        return f"format.schema is not a valid JSON Schema: {exc.message}"
    return None


class StructuredOutputTool(RawSchemaTool):
    """Validates its arguments against the user's schema (as given, `$schema` included, so the right
    draft applies) but shows the model the schema without `$schema`; keeps what it was called with."""

    changes_files = False  # it keeps its arguments: a step answering through it takes no snapshot

    def __init__(self, schema: dict[str, Any]) -> None:
        super().__init__(id=STRUCTURED_TOOL, description=_DESCRIPTION, schema=schema)
        shown = copy.deepcopy(schema)
        shown.pop("$schema", None)
        self._shown = shown
        self.captured: dict[str, Any] | None = None

    def json_schema(self) -> dict[str, Any]:
        return self._shown

    async def execute(self, args: Any, ctx: ToolContext) -> ToolResult:
        self.captured = args
        return ToolResult(output=CAPTURED, title="Structured Output", metadata={})


@dataclass(slots=True)
class StructuredTurn:
    """One step of a turn that asked for structured output."""

    output_format: OutputFormatJsonSchema
    tool: StructuredOutputTool
    # Rejected StructuredOutput calls in the turn's earlier steps.
    earlier_failures: int

    def prepare(self, request: ModelRequest) -> None:
        """The system line (joined to the last system piece: at most two system messages) and
        `tool_choice: "required"`."""
        if request.system:
            request.system[-1] = f"{request.system[-1]}\n{SYSTEM_LINE}" if request.system[-1] else SYSTEM_LINE
        else:
            request.system.append(SYSTEM_LINE)
        request.tool_choice = "required"

    async def settle(self, processor: Processor, events: SessionEvents) -> bool:
        """After the step: record the captured output or the failure. True when the turn ends here."""
        message = processor.message
        if self.tool.captured is not None:
            message.structured = self.tool.captured
            message.finish = "stop"
            await events.update_message(message)
            return True
        if message.error is not None:
            return False  # the loop stops on its own error
        failures = self.earlier_failures + failed_calls(processor.result().parts)
        if failures > self.output_format.retry_count:
            reason = f"Model did not produce valid structured output after {failures} attempts"
            await self._fail(message, events, reason, failures)
            return True
        if message.finish is not None and message.finish not in ("tool-calls", "unknown"):
            await self._fail(message, events, NOT_PRODUCED, failures)
            return True
        return False

    @staticmethod
    async def _fail(message: AssistantMessage, events: SessionEvents, reason: str, retries: int) -> None:
        error = StructuredOutputError(data=StructuredOutputErrorData(message=reason, retries=retries))
        message.error = error
        await events.update_message(message)
        events.session_error(message.session_id, error.wire())


def attach(tools: TurnTools, user: UserMessage, history: Sequence[WithParts]) -> StructuredTurn | None:
    """Add the StructuredOutput tool to this step's tools when the turn asked for json_schema output."""
    output_format = user.format
    if not isinstance(output_format, OutputFormatJsonSchema):
        return None
    tool = StructuredOutputTool(output_format.schema_)
    tools.tools[STRUCTURED_TOOL] = tool
    earlier = sum(
        failed_calls(item.parts)
        for item in history
        if isinstance(item.info, AssistantMessage) and item.info.parent_id == user.id
    )
    return StructuredTurn(output_format=output_format, tool=tool, earlier_failures=earlier)


def failed_calls(parts: Sequence[Part]) -> int:
    """StructuredOutput calls that were rejected (arguments not matching the schema)."""
    return sum(
        1
        for part in parts
        if isinstance(part, ToolPart)
        and part.tool == STRUCTURED_TOOL
        and isinstance(part.state, ToolStateError)
        and not (part.state.metadata or {}).get("interrupted")
    )
