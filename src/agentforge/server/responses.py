"""Fast JSON responses for wire types (serialised once with orjson, field names as on the wire)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import orjson
from fastapi import Response

from agentforge.model.base import Wire


def _plain(value: Any) -> Any:
    if isinstance(value, Wire):
        return value.wire()
    if isinstance(value, Mapping):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, Sequence) and not isinstance(value, str | bytes):
        return [_plain(item) for item in value]
    return value


class WireResponse(Response):
    media_type = "application/json"

    def __init__(
        self, content: Any, status_code: int = 200, headers: Mapping[str, str] | None = None
    ) -> None:
        super().__init__(content=content, status_code=status_code, headers=headers)

    def render(self, content: Any) -> bytes:
        return orjson.dumps(_plain(content))


def error_body(name: str, message: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "data": {"message": message, **extra}}
