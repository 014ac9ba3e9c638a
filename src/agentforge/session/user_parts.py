"""Normalising user input parts before they are stored (KERNEL 4.2).

`file:` URLs to text files and directories are expanded by running the read tool, so the model sees
their content as synthetic text; other files become `data:` URLs; `data:` text becomes synthetic text.

Every file goes through the read tool's check first (session/access.py), text or binary, named
directly or through a symlink. A file the request may not read, a missing one and a malformed URL
fail the whole request with InvalidInputError (400) before anything is stored: the caller learns at
once, instead of finding a failure note in the history after the turn ran without the file.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import mimetypes
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from agentforge.model import ids
from agentforge.model.part import AgentPart, FilePart, Part, SubtaskPart, TextPart
from agentforge.session.access import RequestAccess
from agentforge.session.errors import InvalidInputError
from agentforge.session.inputs import AgentPartInput, FilePartInput, PartInput, TextPartInput
from agentforge.tools import pinned
from agentforge.tools.base import Tool, ToolError
from agentforge.tools.execute import run_tool
from agentforge.tools.truncation import TruncationLimits

DIRECTORY_MIME = "application/x-directory"


@dataclass(slots=True)
class PartContext:
    session_id: str
    message_id: str
    access: RequestAccess  # what this request may read
    read_tool: Tool[Any] | None
    limits: TruncationLimits

    @property
    def directory(self) -> Path:
        return self.access.directory


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


async def resolve_parts(ctx: PartContext, inputs: list[PartInput]) -> list[Part]:
    """The parts to store, in order. Raises InvalidInputError when a file cannot be attached."""
    resolved = await asyncio.gather(*(_resolve_one(ctx, part) for part in inputs))
    return [part for items in resolved for part in items]


async def _resolve_one(ctx: PartContext, part: PartInput) -> list[Part]:
    if isinstance(part, TextPartInput):
        return [_text(ctx, part)]
    if isinstance(part, AgentPartInput):
        return _agent(ctx, part)
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
    ]


def _text(ctx: PartContext, part: TextPartInput) -> TextPart:
    return TextPart.model_validate(
        {
            # A client's `time` is not kept: only the processor's parts have a span (and a started,
            # unended one is what the in-flight view streams).
            **part.model_dump(by_alias=True, exclude_none=True, exclude={"time"}),
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


async def _file(ctx: PartContext, part: FilePartInput) -> list[Part]:
    url = part.url
    if url.startswith("data:"):
        return _data_url(ctx, part)
    if url.startswith("file:"):
        return await _local_file(ctx, part)
    return [_file_part(ctx, part)]


def _data_url(ctx: PartContext, part: FilePartInput) -> list[Part]:
    if part.mime != "text/plain":
        return [_file_part(ctx, part)]
    header, _, payload = part.url.partition(",")
    try:
        raw = (
            base64.b64decode(payload, validate=True)
            if header.endswith(";base64")
            else urllib.parse.unquote(payload).encode()
        )
    except binascii.Error:
        name = part.filename or "a file part"
        raise InvalidInputError(f"parts: the data URL of {name} is not valid base64") from None
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


async def _local_file(ctx: PartContext, part: FilePartInput) -> list[Part]:
    try:
        raw, line_range = _file_path_and_range(part.url)
    except ValueError:
        raise InvalidInputError(f"parts: invalid file URL {part.url}") from None
    # Checked before anything looks at the file: whether it exists is the caller's business only
    # when the caller may read it.
    path, real = await ctx.access.readable(raw)
    is_dir = await asyncio.to_thread(path.is_dir)
    mime = DIRECTORY_MIME if is_dir else part.mime
    if is_dir or mime == "text/plain":
        return await _read_with_tool(ctx, part, path, line_range, mime)  # which checks it again
    return await _binary_file(ctx, part, path, real, mime)


async def _read_with_tool(
    ctx: PartContext, part: FilePartInput, path: Path, line_range: dict[str, int], mime: str
) -> list[Part]:
    arguments: dict[str, Any] = {"filePath": str(path), **line_range}
    if ctx.read_tool is None:
        raise InvalidInputError(f"Cannot read {path}: the read tool is not available")
    try:
        result = await run_tool(ctx.read_tool, arguments, ctx.access.context, limits=ctx.limits)
    except ToolError as exc:
        raise InvalidInputError(f"Cannot attach {path}: {exc}") from None
    parts: list[Part] = [_synthetic(ctx, _read_call_text(arguments)), _synthetic(ctx, result.output)]
    parts.append(_file_part(ctx, part, mime=mime))
    return parts


async def _binary_file(
    ctx: PartContext, part: FilePartInput, path: Path, real: Path, mime: str
) -> list[Part]:
    try:
        # Opened where the check saw the path lead (tools/pinned.py), not wherever it leads now.
        found = await asyncio.to_thread(pinned.read_file, path, real)
    except OSError as exc:
        raise InvalidInputError(f"Cannot attach {path}: {exc.strerror or exc}") from None
    except ToolError as exc:
        raise InvalidInputError(f"Cannot attach {path}: {exc}") from None
    if found is None:
        raise InvalidInputError(f"Cannot attach {path}: No such file or directory")
    data = found[0]
    mime = mime or mimetypes.guess_type(path.name)[0] or "application/octet-stream"
    url = f"data:{mime};base64,{base64.b64encode(data).decode()}"
    arguments = {"filePath": str(path)}
    return [_synthetic(ctx, _read_call_text(arguments)), _file_part(ctx, part, url=url, mime=mime)]
