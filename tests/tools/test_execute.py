from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, ClassVar

import pytest
from pydantic import BaseModel, Field

from agentforge.tools.base import Tool, ToolContext, ToolError, ToolResult
from agentforge.tools.builtin.read import ReadTool
from agentforge.tools.execute import run_tool
from agentforge.tools.params import ToolParams
from agentforge.tools.truncation import TruncationLimits
from tests.tools.harness import Harness, text_of


class EchoParams(ToolParams):
    text: str
    repeat: int = Field(default=1, ge=1)
    mode: str | None = None


class EchoTool(Tool[EchoParams]):
    """Repeats its input; `mode` picks a failure to exercise run_tool's handling."""

    id = "echo"
    description = "Echo text"
    parameters: ClassVar[type[BaseModel]] = EchoParams

    def __init__(self) -> None:
        self.started = asyncio.Event()

    async def execute(self, args: EchoParams, ctx: ToolContext) -> ToolResult:
        self.started.set()
        if args.mode == "crash":
            raise KeyError("missing-key")
        if args.mode == "tool-error":
            raise ToolError("a message for the model")
        if args.mode == "hang":
            await asyncio.Event().wait()  # never set: only cancellation ends it
        metadata: dict[str, Any] = {"truncated": False} if args.mode == "self-truncated" else {}
        return ToolResult(title="echo", output="\n".join([args.text] * args.repeat), metadata=metadata)


async def test_missing_field_is_named_in_the_validation_message(harness: Harness) -> None:
    with pytest.raises(ToolError) as caught:
        await run_tool(EchoTool(), {}, harness.context(), limits=TruncationLimits())
    assert str(caught.value) == (
        "The echo tool was called with invalid arguments: `text` is required.\n"
        "Please rewrite the input so it satisfies the expected schema."
    )


async def test_wrong_types_name_field_problem_and_value(harness: Harness) -> None:
    with pytest.raises(ToolError) as caught:
        await run_tool(
            EchoTool(), {"text": 3, "repeat": "many"}, harness.context(), limits=TruncationLimits()
        )
    message = str(caught.value)
    assert message.startswith("The echo tool was called with invalid arguments: ")
    assert "`text` should be a valid string (got 3)" in message
    assert "`repeat` should be a valid integer" in message and "(got 'many')" in message
    assert "Traceback" not in message


async def test_constraint_violation_is_explained(harness: Harness) -> None:
    with pytest.raises(ToolError, match=r"`repeat` should be greater than or equal to 1 \(got 0\)"):
        await run_tool(EchoTool(), {"text": "x", "repeat": 0}, harness.context(), limits=TruncationLimits())


async def test_aliased_fields_are_reported_by_their_wire_name(harness: Harness) -> None:
    with pytest.raises(ToolError, match="`filePath` is required"):
        await harness.run(ReadTool())


async def test_output_within_limits_gets_truncated_false(harness: Harness) -> None:
    result = await harness.run(EchoTool(), text="hi", repeat=2)
    assert result.output == "hi\nhi"
    assert result.metadata == {"truncated": False}


async def test_long_output_is_truncated_and_saved(harness: Harness) -> None:
    harness.limits = TruncationLimits(max_lines=3, max_bytes=10_000)
    result = await harness.run(EchoTool(), text="row", repeat=10)
    assert result.metadata["truncated"] is True
    saved = Path(result.metadata["outputPath"])
    assert text_of(saved) == "\n".join(["row"] * 10)
    assert result.output.startswith("row\nrow\nrow\n\n...7 lines truncated...")


async def test_tool_that_capped_its_own_output_is_left_alone(harness: Harness) -> None:
    harness.limits = TruncationLimits(max_lines=3, max_bytes=10_000)
    result = await harness.run(EchoTool(), text="row", repeat=10, mode="self-truncated")
    assert result.output == "\n".join(["row"] * 10)
    assert "outputPath" not in result.metadata


async def test_unexpected_exception_becomes_readable_tool_error(harness: Harness) -> None:
    with pytest.raises(ToolError) as caught:
        await harness.run(EchoTool(), text="x", mode="crash")
    assert str(caught.value) == "The echo tool failed: KeyError: 'missing-key'"
    assert isinstance(caught.value.__cause__, KeyError)


async def test_tool_error_passes_through_unchanged(harness: Harness) -> None:
    with pytest.raises(ToolError) as caught:
        await harness.run(EchoTool(), text="x", mode="tool-error")
    assert str(caught.value) == "a message for the model"


async def test_cancellation_propagates(harness: Harness) -> None:
    tool = EchoTool()
    task = asyncio.create_task(harness.run(tool, text="x", mode="hang"))
    await tool.started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
