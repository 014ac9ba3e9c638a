"""The `mcp` config key: one entry per MCP server, a local command (stdio) or a remote URL.

    "mcp": {
      "files": {"type": "local", "command": ["python", "server.py"], "environment": {"K": "v"},
                "enabled": true, "timeout": 10},
      "docs":  {"type": "remote", "url": "https://example.com/mcp", "headers": {"Authorization": "..."}}
    }

`timeout` (seconds) bounds starting the server and listing its tools; `call_timeout` (seconds) bounds
one tool call, so a server that stops answering cannot hold a turn forever. A local server runs in
the workspace directory with the SDK's minimal inherited environment (HOME, PATH, SHELL, TERM, USER,
LOGNAME), the tenant's clean base (tools/confinement.py: HOME and TMPDIR of a tenant are its own)
and `shell_env`, plus `environment`: our own secrets are not handed to third-party servers unless the
config passes them (`"environment": {"TOKEN": "{env:TOKEN}"}`). A confined tenant's servers run in
its OS sandbox (tools/sandbox.py: they see what its commands see, and the network only where
`sandbox.network` grants it); the local user's own servers run outside it.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

DEFAULT_CONNECT_TIMEOUT = 30.0
DEFAULT_CALL_TIMEOUT = 300.0


class _ServerConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    timeout: float = Field(default=DEFAULT_CONNECT_TIMEOUT, gt=0)
    call_timeout: float = Field(default=DEFAULT_CALL_TIMEOUT, gt=0)


class LocalServerConfig(_ServerConfig):
    """A server we start ourselves and talk to over its stdin/stdout."""

    type: Literal["local"]
    command: list[str] = Field(min_length=1)
    environment: dict[str, str] = Field(default_factory=dict)


class RemoteServerConfig(_ServerConfig):
    """A server reached over streamable HTTP."""

    type: Literal["remote"]
    url: str = Field(pattern=r"^https?://")
    headers: dict[str, str] = Field(default_factory=dict)


ServerConfig = Annotated[LocalServerConfig | RemoteServerConfig, Field(discriminator="type")]
_server_config: TypeAdapter[LocalServerConfig | RemoteServerConfig] = TypeAdapter(ServerConfig)


class McpConfigError(Exception):
    """One `mcp` entry does not match the schema; the message says what is wrong."""


def parse_server_config(name: str, raw: Any) -> LocalServerConfig | RemoteServerConfig:
    try:
        return _server_config.validate_python(raw)
    except ValidationError as error:
        problems = "; ".join(_describe(item["loc"], item["msg"]) for item in error.errors())
        raise McpConfigError(f"invalid config for MCP server {name!r}: {problems}") from None


def _describe(location: tuple[str | int, ...], message: str) -> str:
    # The union's tag leads the location ("local"/"remote"); the user only cares about the field.
    if location and location[0] in ("local", "remote"):
        location = location[1:]
    fields = [str(part) for part in location]
    return f"{'.'.join(fields)}: {message}" if fields else message
