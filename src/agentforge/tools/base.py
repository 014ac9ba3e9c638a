"""The Tool contract (KERNEL 7.1): parameters as a pydantic model (its JSON Schema is what the model
sees and what we validate against), a context with abort signal, live metadata updates and the
permission `ask` seam, and a result with title, metadata and output.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Generic, TypeVar

import jsonschema
from pydantic import BaseModel


class ToolError(Exception):
    """A failure the model can act on: its message becomes the tool part's `error`."""


class PermissionDeniedError(ToolError):
    """A permission rule or a person said no. The loop stops after this step when `blocks_loop`.

    `refused_by` names what refused without asking anyone ("rule", a policy's name, "fence",
    "workspace"); it goes into the failed tool part's metadata, so the audit log records the denial.
    A person's answer is recorded with the permission reply instead (None here).
    """

    blocks_loop = True
    refused_by: str | None = None


@dataclass(slots=True)
class PermissionRequest:
    """What a tool asks permission for (KERNEL 7.4): a permission key and the concrete patterns."""

    permission: str
    patterns: list[str]
    always: list[str] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class Attachment:
    """A file a tool hands back to the model (images, PDFs): `url` is a data: URL."""

    mime: str
    url: str
    filename: str | None = None


@dataclass(slots=True)
class ToolResult:
    output: str
    title: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)
    attachments: list[Attachment] = field(default_factory=list)


MetadataUpdate = Callable[[str | None, dict[str, Any]], Awaitable[None]]
AskPermission = Callable[[PermissionRequest], Awaitable[None]]


class OutsideWorkspaceError(PermissionDeniedError):
    """A path outside the workspace, where no permission service can approve it."""

    refused_by = "workspace"


async def workspace_only(request: PermissionRequest) -> None:
    """The `ask` of a context built without the permission service (e.g. files a user attached):
    everything is allowed except paths outside the workspace, which nobody could approve here."""
    if request.permission == "external_directory":
        where = request.metadata.get("filepath") or ", ".join(request.patterns)
        raise OutsideWorkspaceError(f"Refusing to access {where}: it is outside the workspace.")


async def _ignore_metadata(_title: str | None, _metadata: dict[str, Any]) -> None:
    return None


@dataclass(slots=True)
class ToolContext:
    """What a running tool may see and do.

    `directory` is the session's workspace root: tools resolve relative paths against it and
    refuse paths outside it. `abort` is set when the turn is aborted; tasks running tools are also
    cancelled, so a tool only needs the event for cooperative checks. `ask` is the permission seam
    (it raises PermissionDeniedError to refuse); `metadata` publishes live progress on the tool part.
    """

    session_id: str
    message_id: str
    call_id: str
    agent: str
    directory: Path
    data_dir: Path
    abort: asyncio.Event = field(default_factory=asyncio.Event)
    extra: dict[str, Any] = field(default_factory=dict)
    ask: AskPermission = workspace_only
    metadata: MetadataUpdate = _ignore_metadata


P = TypeVar("P", bound=BaseModel)


class Tool(Generic[P]):
    """A built-in or custom tool. Subclasses set `id`, `description`, `parameters` and `execute`."""

    # Plain (not ClassVar) so tools discovered at run time (MCP) can set them per instance.
    id: str
    description: str
    parameters: ClassVar[type[BaseModel]]

    async def execute(self, args: P, ctx: ToolContext) -> ToolResult:
        raise NotImplementedError

    def json_schema(self) -> dict[str, Any]:
        """The parameters' JSON Schema, built once per parameters model (it is sent every step)."""
        return _schema_of(self.parameters)


class RawSchemaTool(Tool[Any]):
    """A tool whose parameters are a plain JSON Schema (MCP tools), not a pydantic model.

    The model sees the schema as given; arguments are checked against it with `jsonschema` and
    `execute` receives them as a dict. `parameters` is not set: there is no pydantic model.
    """

    def __init__(self, *, id: str, description: str, schema: dict[str, Any]) -> None:
        validator_class = jsonschema.validators.validator_for(schema)
        validator_class.check_schema(schema)  # a broken schema fails here, not on every call
        self.id = id
        self.description = description
        self._schema = schema
        self._validator = validator_class(schema)

    def json_schema(self) -> dict[str, Any]:
        return self._schema

    def schema_errors(self, raw_input: dict[str, Any]) -> list[jsonschema.ValidationError]:
        """Every way `raw_input` breaks the schema, in argument order (empty when it is valid)."""
        errors = self._validator.iter_errors(raw_input)
        return sorted(errors, key=lambda error: [str(part) for part in error.absolute_path])


@functools.cache
def _schema_of(parameters: type[BaseModel]) -> dict[str, Any]:
    schema = parameters.model_json_schema()
    schema.pop("title", None)
    return schema


# The key in `ToolContext.extra` under which the session layer puts a `ShellEnvHook`: variables
# plugins add to shell commands (KERNEL 9 `shell.env`). Tools depend on this seam, not on plugins.
SHELL_ENV_EXTRA = "shell_env"
ShellEnvHook = Callable[[ToolContext, Path], Awaitable[dict[str, str]]]


async def shell_env(ctx: ToolContext, cwd: Path) -> dict[str, str]:
    """Extra environment for a shell command run in `cwd`: empty when nothing provides it."""
    hook = ctx.extra.get(SHELL_ENV_EXTRA)
    if hook is None:
        return {}
    env: dict[str, str] = await hook(ctx, cwd)
    return env
