"""The README's "Try it without a model provider" script runs as written, with only the package."""

from __future__ import annotations

import contextlib
import io
import re
import tempfile
from pathlib import Path

import pytest

from agentforge.testing import ScriptedModel

README = Path(__file__).resolve().parents[1] / "README.md"


def _try_it_script() -> str:
    section = README.read_text().split("## Try it without a model provider", 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert match is not None, "the section has no Python block"
    return match.group(1)


def test_the_try_it_script_runs_a_tool_turn_against_the_scripted_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # its directories, inside this test's
    namespace: dict[str, object] = {"__name__": "readme"}
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(_try_it_script(), str(README), "exec"), namespace)

    assert printed.getvalue().splitlines() == [
        "answer: The command printed a greeting.",
        "user ['text']",
        "assistant ['step-start', 'tool', 'step-finish']",
        "assistant ['step-start', 'text', 'step-finish']",
    ]
    # The bash tool really ran: its output went back to the model with the second call.
    model = namespace["model"]
    assert isinstance(model, ScriptedModel)
    assert "hello from bash" in repr(model.requests[1].messages)
