"""Plugin hooks that plug into services below the session layer."""

from __future__ import annotations

from agentforge.model.permission import PermissionRequestInfo
from agentforge.permission.service import PolicyDecision, PolicyHook
from agentforge.plugins import calls
from agentforge.plugins.manager import PluginManager
from agentforge.tools.base import PermissionRequest


def plugin_policy(plugins: PluginManager) -> PolicyHook:
    """The `permission_ask` hook as a permission policy: a plugin's allow or deny decides a request
    before a person is asked; "ask" leaves it to them."""

    async def decide(info: PermissionRequestInfo) -> PolicyDecision | None:
        if not plugins.implements("permission_ask"):
            return None
        request = PermissionRequest(
            permission=info.permission,
            patterns=list(info.patterns),
            always=list(info.always),
            metadata=dict(info.metadata),
        )
        status = await calls.permission_status(plugins, request, info.session_id)
        if status == "ask":
            return None
        return PolicyDecision(action=status, by="plugin")

    return decide
