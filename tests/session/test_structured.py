"""Structured output pieces: the format check, the tool, and counting rejected calls."""

from __future__ import annotations

from pathlib import Path

from agentforge.llm.messages import ModelRequest
from agentforge.model.message import OutputFormatJsonSchema, OutputFormatText
from agentforge.session.structured import (
    CAPTURED,
    STRUCTURED_TOOL,
    SYSTEM_LINE,
    StructuredOutputTool,
    StructuredTurn,
    failed_calls,
    schema_problem,
)
from agentforge.testing.tools import allow_all, tool_context, unconfined
from agentforge.tools.base import ToolError
from agentforge.tools.execute import run_tool
from agentforge.tools.truncation import TruncationLimits
from tests.session.builders import tool_completed, tool_error

SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "properties": {"n": {"type": "integer"}},
    "required": ["n"],
}


def test_schema_problem() -> None:
    assert schema_problem(None) is None
    assert schema_problem(OutputFormatText()) is None
    assert schema_problem(OutputFormatJsonSchema(schema_=SCHEMA)) is None
    broken = schema_problem(OutputFormatJsonSchema(schema_={"type": "nope"}))
    assert broken is not None and "not a valid JSON Schema" in broken
    negative = OutputFormatJsonSchema.model_validate({"schema": SCHEMA, "retryCount": -1})
    assert schema_problem(negative) == "format.retryCount must be 0 or more"


async def test_tool_shows_the_schema_without_dollar_schema_and_captures_valid_args(tmp_path: Path) -> None:
    tool = StructuredOutputTool(SCHEMA)
    assert tool.json_schema() == {k: v for k, v in SCHEMA.items() if k != "$schema"}
    ctx = tool_context(tmp_path, tmp_path, confinement=unconfined(), ask=allow_all)
    limits = TruncationLimits(max_lines=100, max_bytes=10_000)
    try:
        await run_tool(tool, {"n": "one"}, ctx, limits=limits)
    except ToolError as exc:
        assert "`n` is invalid" in str(exc)
    else:
        raise AssertionError("invalid arguments were accepted")
    assert tool.captured is None
    result = await run_tool(tool, {"n": 1}, ctx, limits=limits)
    assert result.output == CAPTURED and tool.captured == {"n": 1}


def test_prepare_adds_the_system_line_and_requires_a_tool_call() -> None:
    turn = StructuredTurn(OutputFormatJsonSchema(schema_=SCHEMA), StructuredOutputTool(SCHEMA), 0)
    request = ModelRequest(system=["base", "env"], messages=[])
    turn.prepare(request)
    assert request.system == ["base", f"env\n{SYSTEM_LINE}"] and request.tool_choice == "required"


def test_failed_calls_counts_rejected_structured_output_calls_only() -> None:
    parts = [
        tool_error(STRUCTURED_TOOL, {"n": "x"}, "invalid"),
        tool_error(STRUCTURED_TOOL, {}, "Tool execution aborted", metadata={"interrupted": True}),
        tool_error("read", {}, "missing"),
        tool_completed(STRUCTURED_TOOL, {"n": 1}, CAPTURED),
    ]
    assert failed_calls(parts) == 1


def test_the_structured_output_tool_never_writes_a_file() -> None:
    """A step answering through it takes no snapshot (session/snapshots.py); it still waits for its
    start to be stored, as any tool that does not say it only reads."""
    tool = StructuredOutputTool({"type": "object"})
    assert not tool.changes_files and tool.has_effects
