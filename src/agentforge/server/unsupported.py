"""What an opencode client hears when it calls a route of opencode's server that Agent Forge
deliberately does not offer: 501 with opencode's error shape (`{name, data: {message}}`) and a
message saying why and what to do instead, so the client shows a reason rather than failing on a
bare 404. A path neither server knows gets a 404 naming it."""

from __future__ import annotations

import re
from typing import Final

# (method or "*", path pattern) -> why it is not offered. First match wins.
_NOT_OFFERED: Final[list[tuple[str, str, str]]] = [
    (
        "*",
        r"/auth/[^/]+",
        "Provider credentials are part of the server's config "
        "(`provider.<id>.options.apiKey`, or the provider's environment variable); "
        "they cannot be set over HTTP.",
    ),
    (
        "*",
        r"/provider/[^/]+/oauth/.*",
        "Provider login (OAuth) is not offered: the server's config holds each provider's key.",
    ),
    (
        "*",
        r"/mcp/[^/]+/auth(/.*)?",
        "MCP OAuth is not offered: configure the server's headers in the "
        "`mcp` section of the server's config.",
    ),
    (
        "*",
        r"/global/config",
        "The config cannot be read or changed as a whole over HTTP: `GET /config` "
        "shows the caller's effective config; the operator edits agentforge.json.",
    ),
    (
        "*",
        r"/global/(dispose|upgrade)",
        "The server is not disposed or upgraded over HTTP: its operator restarts or upgrades it.",
    ),
    (
        "*",
        r"/instance/dispose",
        "Instances are not disposed over HTTP: a tenant's config is read when the "
        "tenant is first served; restart the server to read it again.",
    ),
    (
        "*",
        r"/tui/.*",
        "Remote control of a terminal UI is not offered: this server has no UI of its own to control.",
    ),
    (
        "*",
        r"/sync/.*",
        "opencode's workspace sync is not offered: sessions live in this server's "
        "database, and clients resume them with Last-Event-ID on GET /event.",
    ),
    (
        "*",
        r"/experimental/(worktree|workspace|project|control-plane|session)(/.*)?",
        "Worktrees, remote "
        "workspaces and moving sessions between projects are not offered: each tenant works in its one "
        "workspace.",
    ),
    ("*", r"/experimental/console/.*", "opencode's hosted console is not used by this server."),
    ("*", r"/project/git/init", "Projects are not created over HTTP: a tenant's project is its workspace."),
    ("PATCH", r"/project/[^/]+", "Projects are not edited over HTTP: a tenant's project is its workspace."),
    (
        "*",
        r"/vcs/(apply|diff/raw)",
        "Applying patches to the workspace over HTTP is not offered: changes "
        "are made by a session's tools, under its permissions.",
    ),
    (
        "*",
        r"/api/.*",
        "opencode's v2 API (/api/...) is not served, but for /api/location and /api/fs/find: "
        "Agent Forge serves opencode's session API (the routes without /api).",
    ),
]
_COMPILED = [(method, re.compile(pattern), why) for method, pattern, why in _NOT_OFFERED]


def not_offered(method: str, path: str) -> str | None:
    """Why `method path` (an opencode route) is not offered, or None when it is no known route."""
    for allowed, pattern, why in _COMPILED:
        if (allowed == "*" or allowed == method) and pattern.fullmatch(path):
            return f"{method} {path} is not offered by Agent Forge. {why}"
    return None
