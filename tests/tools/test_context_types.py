"""A tool context cannot be built without the caller's confinement and permission seam.

Type-level: mypy (strict, with `warn_unused_ignores`) checks this file in CI. The ignores below are
needed only while `confinement` and `ask` have no default: give either a default and mypy fails on
an unused ignore. At run time the same construction raises TypeError.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agentforge.testing.tools import allow_all, unconfined
from agentforge.tools.base import ToolContext
from agentforge.tools.services import NO_SERVICES


def test_a_context_without_confinement_does_not_type_check_nor_build(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="confinement"):
        ToolContext(  # type: ignore[call-arg]
            session_id="ses_1",
            message_id="msg_1",
            call_id="call_1",
            agent="build",
            directory=tmp_path,
            data_dir=tmp_path,
            ask=allow_all,
            services=NO_SERVICES,
        )


def test_a_context_without_an_ask_does_not_type_check_nor_build(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="ask"):
        ToolContext(  # type: ignore[call-arg]
            session_id="ses_1",
            message_id="msg_1",
            call_id="call_1",
            agent="build",
            directory=tmp_path,
            data_dir=tmp_path,
            confinement=unconfined(),
            services=NO_SERVICES,
        )
