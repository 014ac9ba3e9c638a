"""Normalising user input parts before they are stored (KERNEL 4.2).

`file:` URLs to text files and directories are expanded by running the read tool, so the model sees
their content as synthetic text; other files become `data:` URLs; `data:` text becomes synthetic text.
"""

from __future__ import annotations

import asyncio
import base64
import mimetypes
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from agentforge.model import ids
from agentforge.model.part import AgentPart, FilePart, Part, SubtaskPart, TextPart
from agentforge.session.inputs import AgentPartInput, FilePartInput, PartInput, TextPartInput
from agentforge.tools.base import Tool, ToolContext, ToolError
from agentforge.tools.execute import run_tool
from agentforge.tools.truncation import TruncationLimits

DIRECTORY_MIME = "application/x-directory"


@dataclass(slots=True)
class PartContext:
    session_id: str
    message_id: str
    agent: str
    directory: Path
    data_dir: Path
    read_tool: Tool[Any] | None
    limits: TruncationLimits


class UserPartError(Exception):
    """A file the user referenced could not be read; reported as `session.error`, not fatal."""


def _synthetic(ctx: PartContext, text: str) -> TextPart:
    return TextPart(
        id=ids.ascending("prt"),
        session_id=ctx.session_id,
        message_id=ctx.message_id,
        text=text,
        synthetic=True,
    )


def _file_part(
    ctx: PartContext, part: FilePartInput, url: str | None = None, mime: str | None = None
) -> FilePart:
    return FilePart(
        id=part.id or ids.ascending("prt"),
        session_id=ctx.session_id,
        message_id=ctx.message_id,
        mime=mime or part.mime,
        filename=part.filename,
        url=url or part.url,
        source=part.source,
    )


def _read_call_text(arguments: dict[str, Any]) -> str:
    return "Called the Read tool with the following input: " + orjson.dumps(arguments).decode()


async def resolve_parts(ctx: PartContext, inputs: list[PartInput]) -> tuple[list[Part], list[str]]:
    """Returns the parts to store, in order, and the errors to report for files that failed."""
    resolved = await asyncio.gather(*(_resolve_one(ctx, part) for part in inputs))
    parts: list[Part] = []
    errors: list[str] = []
    for items, error in resolved:
        parts.extend(items)
        if error:
            errors.append(error)
    return parts, errors


async def _resolve_one(ctx: PartContext, part: PartInput) -> tuple[list[Part], str | None]:
    if isinstance(part, TextPartInput):
        return [_text(ctx, part)], None
    if isinstance(part, AgentPartInput):
        return _agent(ctx, part), None
    if isinstance(part, FilePartInput):
        return await _file(ctx, part)
    return [
        SubtaskPart(
            id=part.id or ids.ascending("prt"),
            session_id=ctx.session_id,
            message_id=ctx.message_id,
            prompt=part.prompt,
            description=part.description,
            agent=part.agent,
            model=part.model,
            command=part.command,
        )
    ], None


def _text(ctx: PartContext, part: TextPartInput) -> TextPart:
    return TextPart.model_validate(
        {
            **part.model_dump(by_alias=True, exclude_none=True),
            "id": part.id or ids.ascending("prt"),
            "sessionID": ctx.session_id,
            "messageID": ctx.message_id,
        }
    )


def _agent(ctx: PartContext, part: AgentPartInput) -> list[Part]:
    stored = AgentPart(
        id=part.id or ids.ascending("prt"),
        session_id=ctx.session_id,
        message_id=ctx.message_id,
        name=part.name,
        source=part.source,
    )
    hint = (
        " Use the above message and context to generate a prompt and call the task tool with "
        f"subagent: {part.name}"
    )
    return [stored, _synthetic(ctx, hint)]


async def _file(ctx: PartContext, part: FilePartInput) -> tuple[list[Part], str | None]:
    url = part.url
    if url.startswith("data:"):
        return _data_url(ctx, part), None
    if url.startswith("file:"):
        return await _local_file(ctx, part)
    return [_file_part(ctx, part)], None


def _data_url(ctx: PartContext, part: FilePartInput) -> list[Part]:
    if part.mime != "text/plain":
        return [_file_part(ctx, part)]
    header, _, payload = part.url.partition(",")
    raw = base64.b64decode(payload) if header.endswith(";base64") else urllib.parse.unquote(payload).encode()
    text = raw.decode("utf-8", errors="replace")
    name = part.filename or "attachment.txt"
    return [
        _synthetic(ctx, _read_call_text({"filePath": name})),
        _synthetic(ctx, text),
        _file_part(ctx, part),
    ]


def _file_path_and_range(url: str) -> tuple[Path, dict[str, int]]:
    parsed = urllib.parse.urlparse(url)
    path = Path(urllib.parse.unquote(parsed.path))
    query = urllib.parse.parse_qs(parsed.query)
    arguments: dict[str, int] = {}
    if "start" in query:
        start = int(query["start"][0])
        arguments["offset"] = max(1, start)
        if "end" in query:
            arguments["limit"] = max(1, int(query["end"][0]) - start + 1)
    return path, arguments


async def _local_file(ctx: PartContext, part: FilePartInput) -> tuple[list[Part], str | None]:
    try:
        path, line_range = _file_path_and_range(part.url)
    except ValueError:
        return [_synthetic(ctx, f"Could not parse file URL {part.url}")], f"Invalid file URL: {part.url}"
    if not path.is_absolute():
        path = ctx.directory / path
    is_dir = await asyncio.to_thread(path.is_dir)
    mime = DIRECTORY_MIME if is_dir else part.mime
    if is_dir or mime == "text/plain":
        return await _read_with_tool(ctx, part, path, line_range, mime)
    return await _binary_file(ctx, part, path, mime)


async def _read_with_tool(
    ctx: PartContext, part: FilePartInput, path: Path, line_range: dict[str, int], mime: str
) -> tuple[list[Part], str | None]:
    arguments: dict[str, Any] = {"filePath": str(path), **line_range}
    if ctx.read_tool is None:
        return [_synthetic(ctx, f"Cannot read {path}: the read tool is not available")], "read tool missing"
    tool_ctx = ToolContext(
        session_id=ctx.session_id,
        message_id=ctx.message_id,
        call_id="user-file",
        agent=ctx.agent,
        directory=ctx.directory,
        data_dir=ctx.data_dir,
    )
    try:
        result = await run_tool(ctx.read_tool, arguments, tool_ctx, limits=ctx.limits)
    except ToolError as exc:
        message = f"Read tool failed to read {path} with the following error: {exc}"
        return [_synthetic(ctx, message)], message
    parts: list[Part] = [_synthetic(ctx, _read_call_text(arguments)), _synthetic(ctx, result.output)]
    parts.append(_file_part(ctx, part, mime=mime))
    return parts, None


async def _binary_file(
    ctx: PartContext, part: FilePartInput, path: Path, mime: str
) -> tuple[list[Part], str | None]:
    resolved = await asyncio.to_thread(path.resolve)
    root = await asyncio.to_thread(ctx.directory.resolve)
    if not resolved.is_relative_to(root):
        message = f"Cannot attach {path}: it is outside the workspace {root}"
        return [_synthetic(ctx, message)], message
    try:
        data = await asyncio.to_thread(resolved.read_bytes)
    except OSError as exc:
        message = f"Cannot attach {path}: {exc.strerror or exc}"
        return [_synthetic(ctx, message)], message
    mime = mime or mimetypes.guess_type(path.name)[0] or "application/octet-stream"
    url = f"data:{mime};base64,{base64.b64encode(data).decode()}"
    arguments = {"filePath": str(path)}
    return [_synthetic(ctx, _read_call_text(arguments)), _file_part(ctx, part, url=url, mime=mime)], None
