"""The `mcp` config entries."""

from __future__ import annotations

import pytest

from agentforge.tools.mcp_config import McpConfigError, parse_server_config


def test_config_entries_are_validated() -> None:
    local_config = parse_server_config("a", {"type": "local", "command": ["run"], "timeout": 3})
    assert local_config.timeout == 3
    assert local_config.enabled
    with pytest.raises(McpConfigError, match="url"):
        parse_server_config("b", {"type": "remote", "url": "ftp://example.com"})
    with pytest.raises(McpConfigError, match="command"):
        parse_server_config("c", {"type": "local", "command": []})
    with pytest.raises(McpConfigError, match="'d'"):
        parse_server_config("d", {"type": "carrier-pigeon"})
