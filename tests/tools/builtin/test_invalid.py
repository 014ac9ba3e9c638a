from __future__ import annotations

import pytest

from agentforge.tools.base import ToolError
from agentforge.tools.builtin.invalid import InvalidTool
from tests.tools.harness import Harness


async def test_explains_the_invalid_call(harness: Harness) -> None:
    result = await harness.run(
        InvalidTool(), tool="reed", error="Model tried to call unavailable tool 'reed'"
    )
    assert result.output == (
        "The arguments provided to the tool are invalid: Model tried to call unavailable tool 'reed'"
    )
    assert result.title == "Invalid Tool"
    assert result.metadata == {"truncated": False}


async def test_requires_tool_and_error(harness: Harness) -> None:
    with pytest.raises(ToolError, match="`error` is required"):
        await harness.run(InvalidTool(), tool="x")
