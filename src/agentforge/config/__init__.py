"""Configuration: the JSON config file (discovery, merge, substitution) and the settings the server runs with.

Config files are merged, later winning (deep merge of objects): the user config dir's
`agentforge.json`, then every `agentforge.json` from the repository root down to the working
directory (outside a repository only the working directory's), then the file named by
`AGENTFORGE_CONFIG`, then an explicit path (`--config`). String values may contain `{env:NAME}`
(missing variable → "") and `{file:path}` (relative to the config file, `~` expanded, stripped).

Loading happens once at start-up, before the event loop serves anything, so plain file IO is fine here.

Tenancy (the optional `tenancy` section) gives each tenant its own workspace and config:

    "tenancy": {
      "workspace_root": "/srv/forge/{tenant}/workspace",
      "overlays": {"acme": {"model": "anthropic/claude-sonnet-4", "agent": {...}, "mcp": {...}}}
    }

- `workspace_root` (absolute, `~` expanded): where a tenant's tools work. `{tenant}` is replaced by the
  tenant id; without it each tenant gets `<workspace_root>/<tenant>`. Unset: `<data_dir>/tenants/<tenant>/
  workspace`. The tenant `default` (local mode) always works in the server's own directory.
- `overlays`: per tenant id, a partial config deep-merged over this one for that tenant only. Keys that
  configure the process rather than a tenant (`SERVER_WIDE_KEYS`) are refused.
- `<data_dir>/tenants/<tenant>/agentforge.json`, when it exists, is merged over that tenant's overlay
  when the tenant is first served. It is read as is: no `{env:}`/`{file:}` substitution, so a tenant
  overlay can never pull the server's environment or files into a tenant's config.
- `external_directories`: per tenant id, absolute directories outside its workspace that its tools may
  still reach (after the usual `external_directory` permission ask). Every other path outside a
  tenant's workspace is refused outright: a tenant's own user cannot approve their way out of it.
- `shell`: the tenants that may run commands at all (the bash tool, the shell route, `!`cmd`` snippets
  of commands), as a list of tenant ids or `"*"` for all. Default: none. Granted, a tenant's commands
  run only inside the OS sandbox (`sandbox`, config/sandbox.py), which keeps the other tenants' files
  and the server's data out of their sight; where there is none they are refused, unless
  `sandbox.mode` is "off" (for a server that runs inside a sandbox of its own).

Confined tenants are every tenant other than `default`, and `default` too when authentication is on:
only the local user of local mode is trusted with the server's environment, its own directory without
a boundary and commands (`tenancy.shell` does not apply to it).

The processes a tenant's tools start (bash, the shell route, command snippets, MCP stdio servers) get
a clean environment (tools/confinement.py): the server's secrets never reach them. `shell_env`
(`{NAME: value}`, settable per tenant) adds variables to it. The tenant `default` in local mode
inherits the server's environment unless `tools.inherit_env` is false (server-wide).

Authentication (section `auth`, see `AuthConfig`) is ON, meaning every request must carry valid
credentials, when any of these holds:
- `auth.required` is true;
- `auth.jwt` is set (JWT bearer tokens);
- `auth.gateway` is set (signed identity headers from a trusted gateway);
- `auth.api_keys` is explicitly true and the server binds a non-loopback address.
Otherwise the server runs in local mode: requests without credentials run as the local user of tenant
`default`. Credentials that are presented are verified in every mode (a bad key is a 401 even in local
mode). `agentforge serve` refuses a non-loopback bind while authentication is off.
"""

from __future__ import annotations

from agentforge.config.audit import AuditConfig
from agentforge.config.auth import MIN_SECRET_LENGTH, AuthConfig, GatewayConfig, JwtConfig, is_loopback
from agentforge.config.errors import ConfigError
from agentforge.config.loading import (
    APP_NAME,
    CONFIG_FILENAME,
    ENV_CONFIG,
    ENV_DATA_DIR,
    ENV_DATABASE_OWNER_URL,
    ENV_DATABASE_URL,
    ENV_HOST,
    ENV_PORT,
    Settings,
    config_files,
    deep_merge,
    load_config,
    load_settings,
    read_overlay_file,
    tenant_config,
    user_config_file,
)
from agentforge.config.sandbox import SandboxConfig, SandboxLimits
from agentforge.config.sections import (
    DEFAULT_HOST,
    DEFAULT_PORT,
    Config,
    DatabaseConfig,
    ModelConfig,
    ModelCost,
    ModelCostTier,
    ModelLimit,
    ProviderConfig,
    ProviderOptions,
    RetryConfig,
    ServerConfig,
    ToolOutputConfig,
    ToolsConfig,
)
from agentforge.config.tenancy import SERVER_WIDE_KEYS, TENANT_PLACEHOLDER, TenancyConfig, check_overlay

__all__ = [
    "APP_NAME",
    "CONFIG_FILENAME",
    "DEFAULT_HOST",
    "DEFAULT_PORT",
    "ENV_CONFIG",
    "ENV_DATABASE_OWNER_URL",
    "ENV_DATABASE_URL",
    "ENV_DATA_DIR",
    "ENV_HOST",
    "ENV_PORT",
    "MIN_SECRET_LENGTH",
    "SERVER_WIDE_KEYS",
    "TENANT_PLACEHOLDER",
    "AuditConfig",
    "AuthConfig",
    "Config",
    "ConfigError",
    "DatabaseConfig",
    "GatewayConfig",
    "JwtConfig",
    "ModelConfig",
    "ModelCost",
    "ModelCostTier",
    "ModelLimit",
    "ProviderConfig",
    "ProviderOptions",
    "RetryConfig",
    "SandboxConfig",
    "SandboxLimits",
    "ServerConfig",
    "Settings",
    "TenancyConfig",
    "ToolOutputConfig",
    "ToolsConfig",
    "check_overlay",
    "config_files",
    "deep_merge",
    "is_loopback",
    "load_config",
    "load_settings",
    "read_overlay_file",
    "tenant_config",
    "user_config_file",
]
