"""The pydantic base all wire types share."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict


class Wire(BaseModel):
    """A JSON shape on the wire: Python names inside, KERNEL's field names outside."""

    model_config = ConfigDict(
        populate_by_name=True,
        serialize_by_alias=True,
        extra="ignore",
    )

    def wire(self) -> dict[str, Any]:
        """The JSON-ready dict clients see (absent optionals are left out)."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)
