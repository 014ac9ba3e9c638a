"""The Tool contract (KERNEL 7.1): parameters as a pydantic model (its JSON Schema is what the model
sees and what we validate against), a typed context (the caller's confinement, the permission `ask`
seam and the services the session lends, all required; an abort signal and live metadata updates),
and a result with title, metadata and output. The permission request and the refusals live in
tools/asking.py and are re-exported here.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

from pydantic import BaseModel

from agentforge.tools.asking import AskPermission as AskPermission
from agentforge.tools.asking import OutsideWorkspaceError as OutsideWorkspaceError
from agentforge.tools.asking import PermissionDeniedError as PermissionDeniedError
from agentforge.tools.asking import PermissionRequest as PermissionRequest
from agentforge.tools.asking import ToolError as ToolError
from agentforge.tools.confinement import Confinement
from agentforge.tools.services import ToolServices

if TYPE_CHECKING:
    import jsonschema


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


async def _ignore_metadata(_title: str | None, _metadata: dict[str, Any]) -> None:
    return None


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolContext:
    """What a running tool may see and do.

    `directory` is the session's workspace root: tools resolve relative paths against it and
    refuse paths outside it. `confinement` is the caller's tenant confinement (environment,
    boundary, fence, command grant) and `ask` the permission seam (it raises PermissionDeniedError
    to refuse): both are required, so no context exists that forgot either. `services` are what the
    session lends the tools (todos, questions, subagents, the plugins' shell environment). `abort`
    is set when the turn is aborted; tasks running tools are also cancelled, so a tool only needs
    the event for cooperative checks. `metadata` publishes live progress on the tool part.
    """

    session_id: str
    message_id: str
    call_id: str
    agent: str
    directory: Path
    data_dir: Path
    confinement: Confinement
    ask: AskPermission
    services: ToolServices
    abort: asyncio.Event = field(default_factory=asyncio.Event)
    metadata: MetadataUpdate = _ignore_metadata

    async def process_env(self, cwd: Path) -> dict[str, str]:
        """The environment of a process a tool starts in `cwd`: the tenant's base plus what plugins
        add (KERNEL 9 `shell.env`)."""
        hook = self.services.shell_env
        additions = {} if hook is None else await hook(cwd, session_id=self.session_id, call_id=self.call_id)
        return self.confinement.env.build(additions)


P = TypeVar("P", bound=BaseModel)


class Tool(Generic[P]):
    """A built-in or custom tool. Subclasses set `id`, `description`, `parameters` and `execute`."""

    # Plain (not ClassVar) so tools discovered at run time (MCP) can set them per instance.
    id: str
    description: str
    parameters: ClassVar[type[BaseModel]]
    # Whether a call may change anything (files, processes, the world): such a call runs only once
    # the store knows it runs (write-ahead, session/tool_calls.py). A tool says False only when its
    # calls just read; any other tool (custom, MCP, a subclass that does not say) has effects.
    has_effects: bool = True
    # Whether a call may change the workspace's files: a step's first such call waits for the
    # step's snapshot (what revert restores, session/snapshots.py). As `has_effects`: a tool says
    # False only when its calls never write a file, and a subclass that does not say may.
    changes_files: bool = True

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # Not inherited: what a subclass adds may have effects, and write files.
        for flag in ("has_effects", "changes_files"):
            if flag not in cls.__dict__:
                setattr(cls, flag, True)

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
        import jsonschema  # here, not at start-up: only MCP tools and structured output need it

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
