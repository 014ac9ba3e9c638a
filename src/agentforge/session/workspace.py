"""A tenant's workspace as clients browse it and as snapshots track it: its root, and the directories
inside it that are not the tenant's (its own data directory, the fence's closed roots and, for a
confined tenant, its boundary's exclusions)."""

from __future__ import annotations

from agentforge.session.scope import TenantScope
from agentforge.workspace.access import WorkspaceAccess, tenant_workspace


def workspace_access(scope: TenantScope) -> WorkspaceAccess:
    """Blocking (resolves symlinks): run it in a thread."""
    boundary = scope.confinement.boundary
    not_its_own = [scope.settings.data_dir.resolve(), *scope.confinement.fence.closed]
    if boundary is not None:
        not_its_own += boundary.excluded
    # Only the local user (no boundary) owns the checkout around the workspace; a confined
    # tenant's repository is read inside its sandbox.
    return tenant_workspace(
        scope.settings.directory,
        not_its_own=not_its_own,
        its_own=scope.confinement.fence.open,
        repo_above=boundary is None,
        sandbox=None if boundary is None else scope.confinement.sandbox,
    )
