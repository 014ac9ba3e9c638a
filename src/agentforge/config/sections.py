"""The config file's schema: `Config` and its sections (auth and tenancy have modules of their own)."""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from agentforge.config.audit import AuditConfig
from agentforge.config.auth import AuthConfig, strong_secret
from agentforge.config.sandbox import SandboxConfig
from agentforge.config.tenancy import TenancyConfig
from agentforge.config.webhooks import WebhookDeliveryConfig, WebhookEndpoint

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 4096
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class _Section(BaseModel):
    # Keys we do not know yet are kept: later features read them.
    model_config = ConfigDict(extra="allow", populate_by_name=True, serialize_by_alias=True)


class ModelLimit(_Section):
    context: int | None = Field(default=None, ge=0)
    output: int | None = Field(default=None, ge=0)
    input: int | None = Field(default=None, ge=0)


class ModelCostTier(_Section):
    """USD per 1M tokens for requests whose prompt exceeds 200K tokens; unset fields keep the base price."""

    input: float | None = Field(default=None, ge=0)
    output: float | None = Field(default=None, ge=0)
    cache_read: float | None = Field(default=None, ge=0)
    cache_write: float | None = Field(default=None, ge=0)


class ModelCost(ModelCostTier):
    """USD per 1M tokens; `context_over_200k` overrides (field by field) the long-prompt tier."""

    context_over_200k: ModelCostTier | None = None


class ModelConfig(_Section):
    id: str | None = None  # the id sent to the provider, when it differs from the key
    name: str | None = None
    limit: ModelLimit | None = None
    cost: ModelCost | None = None
    options: dict[str, Any] = Field(default_factory=dict)
    headers: dict[str, str] = Field(default_factory=dict)
    # Named option sets a prompt or an agent selects with `variant` (e.g. {"high": {"reasoning_effort":
    # "high"}}), merged over `options` (KERNEL 5.6).
    variants: dict[str, dict[str, Any]] = Field(default_factory=dict)


class ProviderOptions(_Section):
    base_url: str | None = Field(default=None, alias="baseURL")
    api_key: str | None = Field(default=None, alias="apiKey")
    headers: dict[str, str] = Field(default_factory=dict)
    timeout: float | None = Field(default=None, gt=0)  # seconds
    # Seconds without a streamed chunk before the attempt fails as stalled (retryable); default 120.
    chunk_timeout: float | None = Field(default=None, gt=0, alias="chunkTimeout")


# The wire protocols a provider may speak (each has an adapter in agentforge.llm).
PROVIDER_APIS = (
    "openai",
    "azure",
    "openai-responses",
    "google",
    "anthropic",
    "anthropic-bedrock",
    "anthropic-vertex",
)


class ProviderConfig(_Section):
    api: str = "openai"
    name: str | None = None
    options: ProviderOptions = Field(default_factory=ProviderOptions)
    models: dict[str, ModelConfig] = Field(default_factory=dict)

    @field_validator("api")
    @classmethod
    def _known_api(cls, value: str) -> str:
        # Caught when the config loads, not at the first model call in the middle of a turn.
        if value not in PROVIDER_APIS:
            raise ValueError(f"unknown api {value!r}; use one of {', '.join(PROVIDER_APIS)}")
        return value


class ToolOutputConfig(_Section):
    max_lines: int = Field(default=2000, gt=0)
    max_bytes: int = Field(default=51200, gt=0)


class RetryConfig(_Section):
    max_attempts: int = Field(default=5, ge=1)


class ServerConfig(_Section):
    host: str = DEFAULT_HOST
    port: int = Field(default=DEFAULT_PORT, ge=0, le=65535)
    # Larger request bodies answer 413 (server/input_guard.py), chunked ones included.
    max_body_bytes: int = Field(default=10 * 1024 * 1024, ge=1)
    # Seconds a SIGTERM leaves running turns to finish before they are closed as interrupted.
    shutdown_grace: float = Field(default=30.0, ge=0)


class ToolsConfig(_Section):
    # Whether the default tenant's tool processes inherit the server's environment (local mode: the
    # user's own machine). Other tenants never do. Server-wide.
    inherit_env: bool = True


def _check_env_names(value: dict[str, str]) -> dict[str, str]:
    bad = sorted(name for name in value if not _ENV_NAME.match(name))
    if bad:
        raise ValueError(f"not valid environment variable names: {', '.join(bad)}")
    return value


class DatabaseConfig(_Section):
    """Where the store lives. `url`: what the server connects as (default: SQLite in the data dir).
    `owner_url` (Postgres): the role that owns the tables and runs the migrations, so the server
    itself can run as a role bound by row-level security (see store/privileges.py)."""

    url: str | None = None
    owner_url: str | None = None


class TelemetryConfig(_Section):
    """What the server's logs, metrics and traces may carry. `log_content`: message content (replies,
    tool inputs) in the logs and spans, off unless set: it is the users' data. `metrics_token`: the
    bearer token that reads `/metrics` when authentication is on (they count every tenant's work, so
    no tenant's credential reads them); unset, /metrics is refused on an authenticated server."""

    log_content: bool = False
    metrics_token: str | None = Field(default=None, repr=False)

    @field_validator("metrics_token")
    @classmethod
    def _token_is_strong(cls, value: str | None) -> str | None:
        return strong_secret(value, "telemetry.metrics_token")


class Config(_Section):
    """The merged config file. Unknown top-level keys (permission, agent, mcp, ...) are kept."""

    model: str | None = None
    small_model: str | None = None
    default_agent: str | None = None
    provider: dict[str, ProviderConfig] = Field(default_factory=dict)
    tool_output: ToolOutputConfig = Field(default_factory=ToolOutputConfig)
    retry: RetryConfig = Field(default_factory=RetryConfig)
    server: ServerConfig = Field(default_factory=ServerConfig)
    tenancy: TenancyConfig = Field(default_factory=TenancyConfig)
    auth: AuthConfig = Field(default_factory=AuthConfig)
    database: DatabaseConfig = Field(default_factory=DatabaseConfig)
    tools: ToolsConfig = Field(default_factory=ToolsConfig)
    sandbox: SandboxConfig = Field(default_factory=SandboxConfig)
    audit: AuditConfig = Field(default_factory=AuditConfig)
    webhooks: list[WebhookEndpoint] = Field(default_factory=list)  # the tenant's (config/webhooks.py)
    webhook_delivery: WebhookDeliveryConfig = Field(default_factory=WebhookDeliveryConfig)
    telemetry: TelemetryConfig = Field(default_factory=TelemetryConfig)
    shell_env: dict[str, str] = Field(default_factory=dict)  # added to tool processes' environment

    @field_validator("shell_env")
    @classmethod
    def _env_names(cls, value: dict[str, str]) -> dict[str, str]:
        return _check_env_names(value)
