"""The server's version: the package metadata reads it (pyproject.toml `[tool.hatch.version]`).

`agentforge` is a namespace package shared with the `agentforge-client` distribution (which holds
`agentforge.client` and `agentforge.model`), so it has no `__init__.py` to carry it.
"""

__version__ = "0.1.0"
