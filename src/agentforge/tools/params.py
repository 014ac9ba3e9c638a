"""Base class for built-in tool parameter models.

Fields use Python names with the camelCase aliases models are prompted with (`filePath`); the JSON
Schema the model sees carries descriptions but not pydantic's generated per-field titles, which
only cost tokens.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict


def _drop_property_titles(schema: dict[str, Any], _model: type[Any]) -> None:
    for prop in schema.get("properties", {}).values():
        if isinstance(prop, dict):
            prop.pop("title", None)


class ToolParams(BaseModel):
    model_config = ConfigDict(
        populate_by_name=True,
        json_schema_extra=_drop_property_titles,
    )
