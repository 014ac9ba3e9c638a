"""Running one tool call: validate the arguments, execute, truncate the output (KERNEL 7.1)."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from agentforge.tools.base import RawSchemaTool, Tool, ToolContext, ToolError, ToolResult
from agentforge.tools.truncation import TruncationLimits, truncate_output

if TYPE_CHECKING:
    import jsonschema

_MAX_SHOWN_INPUT = 80


async def run_tool(
    tool: Tool[Any],
    raw_input: dict[str, Any],
    ctx: ToolContext,
    *,
    limits: TruncationLimits,
) -> ToolResult:
    """Validate `raw_input`, run the tool, and cap what goes back to the model.

    Every failure the model should see is a ToolError with a readable message; cancellation
    propagates untouched so the turn can stop.
    """
    args = validate_arguments(tool, raw_input)
    try:
        result = await tool.execute(args, ctx)
    except (ToolError, asyncio.CancelledError):
        raise
    except Exception as error:
        raise ToolError(f"The {tool.id} tool failed: {describe_exception(error)}") from error
    if "truncated" in result.metadata:
        return result  # the tool capped its own output (read, bash, glob...)
    return await _truncated(result, ctx, limits)


def validate_arguments(tool: Tool[Any], raw_input: dict[str, Any]) -> Any:
    if isinstance(tool, RawSchemaTool):
        return _validate_against_schema(tool, raw_input)
    try:
        return tool.parameters.model_validate(raw_input)
    except ValidationError as error:
        details = "; ".join(_describe_error(item) for item in error.errors())
        raise _invalid_arguments(tool, details) from None


def _validate_against_schema(tool: RawSchemaTool, raw_input: dict[str, Any]) -> dict[str, Any]:
    errors = tool.schema_errors(raw_input)
    if errors:
        raise _invalid_arguments(tool, "; ".join(_describe_schema_error(error) for error in errors))
    return raw_input


def _invalid_arguments(tool: Tool[Any], details: str) -> ToolError:
    return ToolError(
        f"The {tool.id} tool was called with invalid arguments: {details}.\n"
        "Please rewrite the input so it satisfies the expected schema."
    )


async def _truncated(result: ToolResult, ctx: ToolContext, limits: TruncationLimits) -> ToolResult:
    output, path = await truncate_output(result.output, limits=limits, data_dir=ctx.data_dir)
    metadata = {**result.metadata, "truncated": path is not None}
    if path is not None:
        metadata["outputPath"] = path
    return dataclasses.replace(result, output=output, metadata=metadata)


def _describe_error(error: ErrorDetails) -> str:
    """One validation problem in plain words: which field, and what is wrong with it."""
    field = ".".join(str(part) for part in error["loc"])
    if not field:
        return f"the input {_lowercase_first(error['msg'])}"
    kind = error["type"]
    if kind == "missing":
        return f"`{field}` is required"
    if kind == "extra_forbidden":
        return f"`{field}` is not a known parameter"
    message = error["msg"].removeprefix("Value error, ")
    if message.startswith("Input "):
        message = message.removeprefix("Input ")
    else:
        message = "is invalid: " + _lowercase_first(message)
    return f"`{field}` {message} (got {_short_repr(error.get('input'))})"


def _describe_schema_error(error: jsonschema.ValidationError) -> str:
    """A JSON Schema violation in the same words as a pydantic one."""
    field = ".".join(str(part) for part in error.absolute_path)
    required = error.validator_value
    if error.validator == "required" and isinstance(required, list) and isinstance(error.instance, dict):
        missing = [name for name in required if name not in error.instance]
        prefix = f"{field}." if field else ""
        return "; ".join(f"`{prefix}{name}` is required" for name in missing)
    if not field:
        return f"the input is invalid: {error.message}"
    return f"`{field}` is invalid: {error.message}"


def _lowercase_first(text: str) -> str:
    return text[:1].lower() + text[1:]


def _short_repr(value: Any) -> str:
    shown = repr(value)
    if len(shown) > _MAX_SHOWN_INPUT:
        return shown[: _MAX_SHOWN_INPUT - 3] + "..."
    return shown


def describe_exception(error: BaseException) -> str:
    """A one-line account of an unexpected exception, without a traceback."""
    text = str(error).strip()
    name = type(error).__name__
    return f"{name}: {text}" if text else name
