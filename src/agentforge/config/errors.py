"""The one error every config problem becomes: unreadable, not JSON, or not matching the schema."""

from __future__ import annotations

from pathlib import Path


class ConfigError(Exception):
    """A config file (or override) is unreadable, not JSON, or does not match the schema."""

    def __init__(self, message: str, *, path: Path | None = None) -> None:
        super().__init__(f"{path}: {message}" if path is not None else message)
        self.path = path
