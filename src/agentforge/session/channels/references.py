"""`@` references in prompt text (KERNEL 4.8 `resolvePromptParts`): `@path` of an existing file or
directory becomes a file part, `@name` of an agent becomes an agent part.

Commands and the task tool use this; the resulting inputs go through the usual user-part
resolution, which reads text files and lists directories for the model. Every reference that could
name a path is checked against the request's access (session/access.py) before the filesystem is
looked at, so a reference the caller may not name fails the request (400) whether or not it exists.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Collection
from pathlib import Path

from agentforge.model.part import FileSource, TextRange
from agentforge.session.access import RequestAccess
from agentforge.session.inputs import AgentPartInput, FilePartInput, PartInput, TextPartInput
from agentforge.session.user_parts import DIRECTORY_MIME

# "@" not inside a word or code span, then a path-like run; a trailing "." (end of sentence) is left out.
_REFERENCE = re.compile(r"(?<![\w`])@(\.?[^\s`,.]*(?:\.[^\s`,.]+)*)")


def _locate(path: Path) -> tuple[str | None, Path]:
    """Whether `path` is a directory, a file or nothing, and its resolved form."""
    resolved = path.resolve()
    if resolved.is_dir():
        return "directory", resolved
    if resolved.is_file():
        return "file", resolved
    return None, resolved


async def prompt_parts(text: str, *, access: RequestAccess, agents: Collection[str]) -> list[PartInput]:
    """The text itself, then one part per distinct reference that names a file or an agent.
    Raises InvalidInputError for a reference to a path the request may not name."""
    parts: list[PartInput] = [TextPartInput(type="text", text=text)]
    seen: set[str] = set()
    for match in _REFERENCE.finditer(text):
        name = match.group(1)
        if not name or name in seen:
            continue
        seen.add(name)
        span = TextRange(value=match.group(0), start=match.start(), end=match.end())
        kind, path = await asyncio.to_thread(_locate, await access.path(name))
        if kind is not None:
            parts.append(
                FilePartInput(
                    type="file",
                    mime=DIRECTORY_MIME if kind == "directory" else "text/plain",
                    filename=name,
                    url=path.as_uri(),
                    source=FileSource(type="file", path=name, text=span),
                )
            )
        elif name in agents:
            parts.append(AgentPartInput(type="agent", name=name, source=span))
    return parts
