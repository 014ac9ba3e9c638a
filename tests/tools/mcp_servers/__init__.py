"""MCP servers the MCP tool tests talk to (real servers built with the `mcp` SDK)."""
