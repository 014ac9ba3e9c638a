"""Building what one tenant runs with (ARCHITECTURE "Tenancy"): its effective settings, models,
agents, tools, confinement and MCP servers, kept per tenant in a `ScopeCache`. The scope itself
(session/scope.py `TenantScope`) is what the session layer receives.

A tenant's settings are the server's with the tenant's config overlays merged in (config.py,
`tenancy`), its workspace root as `directory` and its own data directory as `data_dir` (tool-output
spill files, plans). The tenant `default` (local mode) keeps the server's own directory and data
directory, so a single-tenant server behaves exactly as before tenancy existed. Other tenants' roots
are created on first use, private to the server's user (0700).

A tenant's `confinement` (tools/confinement.py) is what its tools run with: the environment of the
processes they start, the fence of roots that are not its own (other tenants', the server's data and
database) and, for confined tenants, the hard boundary of the paths they reach (its workspace, its
own tool-output, plans and temp directories, and the directories the server config grants it in
`tenancy.external_directories`), the OS sandbox its commands run in (sandboxing.py) and whether it
may run commands at all (only with the server's `tenancy.shell` grant, and only inside the sandbox
unless the operator turned it off). It is built here only, and every tool context carries it.
Confined are all tenants but `default` in local mode (authentication off): with authentication on,
whoever holds a `default` credential is a tenant like any other, kept inside the server's directory.

Everything here is derived from config and files; the services every tenant shares (store, bus,
permissions, plugins, runners) stay on the Runtime.
"""

from __future__ import annotations

import asyncio
import logging
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from agentforge.agents.registry import PLANS_DIR, AgentRegistry, load_agents
from agentforge.config import (
    CONFIG_FILENAME,
    TENANT_PLACEHOLDER,
    Config,
    ConfigError,
    Settings,
    read_overlay_file,
    tenant_config,
)
from agentforge.identity.model import InvalidTenantId, validate_tenant_id
from agentforge.llm.provider import ProviderCatalog
from agentforge.model.events import DEFAULT_TENANT
from agentforge.runtime.sandboxing import command_ledger, tenant_sandbox
from agentforge.session.scope import TenantScope
from agentforge.store.engine import parse_database_url
from agentforge.store.private import make_private_dir
from agentforge.tools.confinement import Confinement, ProcessEnv, WorkspaceBoundary
from agentforge.tools.fence import Fence
from agentforge.tools.mcp import McpManager
from agentforge.tools.registry import ToolRegistry, ToolSource
from agentforge.tools.truncation import output_dir

log = logging.getLogger(__name__)

TENANTS_DIR = "tenants"
TMP_DIR = "tmp"  # under the tenant's data directory: TMPDIR of its tool processes


class TenantScopeError(Exception):
    """A tenant's scope cannot be built: its config overlay or roots are unusable."""

    def __init__(self, tenant_id: str, reason: str) -> None:
        super().__init__(f"tenant {tenant_id!r} cannot be served: {reason}")
        self.tenant_id = tenant_id


@dataclass(frozen=True, slots=True)
class TenantRoots:
    workspace: Path  # where the tenant's sessions, tools and MCP servers work
    data_dir: Path  # tool-output spill files, plans, the overlay file


def tenant_data_dir(server: Settings, tenant_id: str) -> Path:
    return server.data_dir / TENANTS_DIR / tenant_id


def overlay_path(server: Settings, tenant_id: str) -> Path:
    """The tenant's optional overlay file (for `default` too)."""
    return tenant_data_dir(server, tenant_id) / CONFIG_FILENAME


def tenant_roots(server: Settings, tenant_id: str) -> TenantRoots:
    """The tenant's workspace and data directory (not created here)."""
    validate_tenant_id(tenant_id)
    if tenant_id == DEFAULT_TENANT:
        return TenantRoots(workspace=server.directory, data_dir=server.data_dir)
    workspace = server.config.tenancy.workspace_for(tenant_id, server.data_dir)
    return TenantRoots(workspace=workspace, data_dir=tenant_data_dir(server, tenant_id))


def _workspaces_base(server: Settings) -> Path | None:
    """The directory under which every tenant's configured workspace lies (None: in the data dir)."""
    configured = server.config.tenancy.workspace_root
    if configured is None:
        return None
    root = Path(os.path.abspath(Path(configured).expanduser()))
    if TENANT_PLACEHOLDER in configured:
        # The parent of the first component naming the tenant (`/srv/ws-{tenant}/code` -> `/srv`).
        parts = root.parts
        first = next(i for i, part in enumerate(parts) if TENANT_PLACEHOLDER in part)
        return Path(*parts[:first])
    return root


def database_files(server: Settings) -> tuple[Path, ...]:
    """The SQLite database and its journal files, wherever `--db` put them (none on Postgres)."""
    try:
        target = parse_database_url(server.database_url)
    except ValueError:
        return ()  # the store refuses it at start-up
    if target.dialect != "sqlite":
        return ()
    database = str(target.sqlite_path)
    return tuple(Path(database + suffix) for suffix in ("", "-wal", "-shm", "-journal"))


def tenant_fence(server: Settings, tenant_id: str) -> Fence:
    """What the tenant's tools never reach, whatever is approved: the other tenants' roots, the
    database and, for a tenant other than `default`, the server's own data and the default tenant's
    workspace. The tenant's own roots are carved back out (they may lie in the fenced ones)."""
    base = _workspaces_base(server)
    shared = (server.data_dir / TENANTS_DIR, *([base] if base is not None else []), *database_files(server))
    if tenant_id == DEFAULT_TENANT:
        return Fence(closed=tuple(p.resolve() for p in shared))
    roots = tenant_roots(server, tenant_id)
    closed = (server.data_dir, server.directory, *shared)
    return Fence(
        closed=tuple(p.resolve() for p in closed),
        open=(roots.workspace.resolve(), roots.data_dir.resolve()),
    )


def _overlapping(a: Path, b: Path) -> bool:
    return a == b or a.is_relative_to(b) or b.is_relative_to(a)


def is_local_mode(server: Settings) -> bool:
    """Authentication is off: every request is the local user of tenant `default`."""
    return not server.config.auth.enabled(server.host)


def _check_apart(server: Settings, tenant_id: str, roots: TenantRoots) -> None:
    """In local mode, a tenant's roots must not overlap the default tenant's workspace: the default
    tenant is unconfined there, and its tools would reach the other tenant's files without any
    permission ask (or the other way round). With authentication on the default tenant is confined:
    its boundary excludes the other tenants' roots and the server's data inside its workspace, and
    the fence keeps every tenant out of the others' roots, so a server run from a parent of the
    workspaces (`/` under systemd or Docker, `/srv/forge` with `/srv/forge/tenants/{tenant}`) is fine."""
    shared = server.directory.resolve()
    for path in (roots.workspace, roots.data_dir):
        if _overlapping(path.resolve(), shared):
            raise ConfigError(
                f"{path} overlaps the default tenant's workspace {shared}; "
                "set tenancy.workspace_root (and the data directory) outside it"
            )


def _make_private_dir(path: Path) -> None:
    try:
        make_private_dir(path)
    except OSError as exc:  # a file in the way, no permission, ...
        raise ConfigError(f"cannot create {path}: {exc.strerror or exc}") from exc


def _effective_config(server: Settings, tenant_id: str) -> Config:
    """The server's config with the tenant's overlays: the config section, then the overlay file."""
    overlays: list[tuple[dict[str, Any], str]] = []
    configured = server.config.tenancy.overlays.get(tenant_id)
    if configured is not None:
        overlays.append((configured, f"tenancy.overlays.{tenant_id}"))
    path = overlay_path(server, tenant_id)
    from_file = read_overlay_file(path)
    if from_file is not None:
        overlays.append((from_file, str(path)))
    return tenant_config(server.config, *overlays)


def tenant_settings(server: Settings, tenant_id: str) -> Settings:
    """The tenant's effective settings, its roots created. Blocking file IO: run it in a thread."""
    roots = tenant_roots(server, tenant_id)
    if tenant_id != DEFAULT_TENANT:
        if is_local_mode(server):
            _check_apart(server, tenant_id, roots)
        _make_private_dir(roots.data_dir)
        _make_private_dir(roots.workspace)
    config = _effective_config(server, tenant_id)
    return replace(server, config=config, directory=roots.workspace, data_dir=roots.data_dir)


def is_local_user(server: Settings, tenant_id: str) -> bool:
    """The local user of local mode: the one tenant trusted with the server's own directory and
    commands without any grant."""
    return tenant_id == DEFAULT_TENANT and is_local_mode(server)


def is_confined(server: Settings, tenant_id: str) -> bool:
    """Whether the tenant's processes get a clean environment: every tenant but the local user, and
    the local user too when `tools.inherit_env` is false (read from the server's config: no overlay
    can set it)."""
    return not is_local_user(server, tenant_id) or not server.config.tools.inherit_env


def _not_its_own(server: Settings, tenant_id: str) -> tuple[Path, ...]:
    """What a confined tenant's workspace may contain but its tools must not reach. The default
    tenant's workspace is the server directory: the server's data, the database and the other
    tenants' roots may lie in it (a server run from `/` or from a parent of the workspaces). Another
    tenant's workspace is its own, but `--db` may still point into it. The fence only sees paths
    outside a workspace, so the boundary must."""
    if tenant_id != DEFAULT_TENANT:
        return tuple(path.resolve() for path in database_files(server))
    return (server.data_dir.resolve(), *tenant_fence(server, tenant_id).closed)


def tenant_confinement(server: Settings, tenant_id: str, settings: Settings) -> Confinement:
    """What the tenant's tools run with, and what bounds the paths its users name: the one place a
    `Confinement` is built. Creates its temp directory when it gets a clean environment. Blocking
    file IO (mkdir, resolving symlinks, probing the sandbox): run it in a thread."""
    declared = dict(settings.config.shell_env)
    fence = tenant_fence(server, tenant_id)
    local_user = is_local_user(server, tenant_id)
    tmpdir = settings.data_dir / TMP_DIR
    granted = server.config.tenancy.external_directories_for(tenant_id)
    sandbox = tenant_sandbox(
        server,
        tenant_id,
        settings,
        local_user=local_user,
        tmpdir=tmpdir,
        granted=granted,
        hidden=fence.closed,
    )
    sandbox = replace(sandbox, ledger=command_ledger(server))
    # Without a working sandbox where one is needed, no command runs at all (sandboxing.py).
    refusal = sandbox.note if sandbox.kind == "refused" else None
    if not is_confined(server, tenant_id):
        return Confinement(
            env=ProcessEnv(inherit=True, declared=declared),
            boundary=None,
            fence=fence,
            sandbox=sandbox,
            shell_denied=tenant_id if refusal else None,
            shell_refusal=refusal,
        )
    _make_private_dir(tmpdir)
    env = ProcessEnv(inherit=False, home=settings.directory, tmpdir=tmpdir, declared=declared)
    if local_user:
        # Local mode: a clean environment, the usual permission asks.
        return Confinement(
            env=env,
            boundary=None,
            fence=fence,
            sandbox=sandbox,
            shell_denied=tenant_id if refusal else None,
            shell_refusal=refusal,
        )
    own = (output_dir(settings.data_dir), settings.data_dir / PLANS_DIR, tmpdir)
    boundary = WorkspaceBoundary(
        workspace=settings.directory.resolve(),
        also=tuple(path.resolve() for path in (*own, *granted)),
        excluded=_not_its_own(server, tenant_id),
    )
    # Only the operator can allow commands (tenancy.shell); granted, they run in the sandbox.
    granted_shell = server.config.tenancy.shell_granted(tenant_id)
    return Confinement(
        env=env,
        boundary=boundary,
        fence=fence,
        sandbox=sandbox,
        shell_denied=None if granted_shell and refusal is None else tenant_id,
        shell_refusal=refusal if granted_shell else None,
    )


def check_configured_overlays(server: Settings) -> None:
    """Fail at start-up on an overlay in the server config that could never be served: its merged
    config and its agents must be valid (agent files and overlay files are read per tenant later)."""
    for tenant_id, overlay in server.config.tenancy.overlays.items():
        AgentRegistry(tenant_config(server.config, (overlay, f"tenancy.overlays.{tenant_id}")))


async def start_mcp(scope: TenantScope) -> None:
    """Connect the tenant's MCP servers (working in its workspace); their tools join its registry as
    `<server>_<tool>`. A server that is down is reported in its status and by its tools, never fatal."""
    servers = (scope.settings.config.model_extra or {}).get("mcp")
    if not servers:
        return
    scope.mcp = McpManager(
        servers,
        directory=scope.settings.directory,
        env=scope.confinement.env,
        sandbox=scope.confinement.sandbox,
    )
    await scope.mcp.start()
    for name, status in scope.mcp.status().items():
        if status["status"] == "failed":
            error = status.get("error")
            log.warning("MCP server %s of tenant %s failed to start: %s", name, scope.tenant_id, error)
    for tool in scope.mcp.tools():
        if scope.tools.get(tool.id) is None:  # never let a server shadow a built-in
            scope.tools.register(tool)


def _prepare(server: Settings, tenant_id: str) -> tuple[Settings, AgentRegistry, Confinement]:
    settings = tenant_settings(server, tenant_id)
    confinement = tenant_confinement(server, tenant_id, settings)
    return settings, load_agents(settings), confinement


async def open_scope(server: Settings, tenant_id: str, tools: ToolSource) -> TenantScope:
    """Build the tenant's scope and start its MCP servers. Raises ConfigError (or InvalidTenantId)
    when the tenant's config or roots are unusable."""
    # Creating roots, reading the overlay and agent files: off the event loop.
    settings, agents, confinement = await asyncio.to_thread(_prepare, server, tenant_id)
    scope = TenantScope(
        tenant_id=tenant_id,
        settings=settings,
        catalog=ProviderCatalog(settings.config),
        agents=agents,
        tools=ToolRegistry.from_plugins(tools),
        confinement=confinement,
    )
    try:
        await start_mcp(scope)
    except BaseException:
        await scope.close()
        raise
    return scope


class ScopeCache:
    """Each tenant's scope, built on first use and kept until `close`. Concurrent first calls share
    one build; a failed build is not kept, so fixing a tenant's overlay file needs no restart."""

    def __init__(self, server: Settings, tools: ToolSource) -> None:
        self._server = server
        self._tools = tools
        self._scopes: dict[str, TenantScope] = {}
        self._building: dict[str, asyncio.Task[TenantScope]] = {}
        self._closed = False

    def add(self, scope: TenantScope) -> None:
        self._scopes[scope.tenant_id] = scope

    async def get(self, tenant_id: str) -> TenantScope:
        found = self._scopes.get(tenant_id)
        if found is not None:
            return found
        if self._closed:
            raise TenantScopeError(tenant_id, "the server is shutting down")
        building = self._building.get(tenant_id)
        if building is None:
            building = asyncio.create_task(self._build(tenant_id))
            building.add_done_callback(_retrieve_failure)
            self._building[tenant_id] = building
        # Shielded: a caller that goes away must not cancel the build other callers wait for.
        return await asyncio.shield(building)

    async def _build(self, tenant_id: str) -> TenantScope:
        try:
            scope = await open_scope(self._server, tenant_id, self._tools)
        except (ConfigError, InvalidTenantId) as exc:
            log.warning("Tenant %s cannot be served: %s", tenant_id, exc)
            raise TenantScopeError(tenant_id, str(exc)) from exc
        finally:
            self._building.pop(tenant_id, None)
        if self._closed:  # closed while building: nobody would close this one
            await scope.close()
            raise TenantScopeError(tenant_id, "the server is shutting down")
        self._scopes[tenant_id] = scope
        log.info("Tenant %s served from %s", tenant_id, scope.settings.directory)
        return scope

    async def close(self) -> None:
        self._closed = True
        builds = list(self._building.values())
        for build in builds:
            build.cancel()
        await asyncio.gather(*builds, return_exceptions=True)
        scopes, self._scopes = list(self._scopes.values()), {}
        await asyncio.gather(*(scope.close() for scope in scopes))


def _retrieve_failure(task: asyncio.Task[TenantScope]) -> None:
    """Every waiter may have gone: mark the failure seen so asyncio does not log it as lost."""
    if not task.cancelled():
        task.exception()
