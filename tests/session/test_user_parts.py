"""Files a prompt attaches go through the read tool's check with the request's rules; nobody can be
asked mid-request, so what would be asked is refused, and a refused request stores nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agentforge.model.part import FilePart, TextPart
from agentforge.session.errors import InvalidInputError
from agentforge.session.inputs import PromptInput
from tests.session.conftest import Forge, MakeForge


def attach(path: Path, mime: str = "text/plain") -> PromptInput:
    parts: list[dict[str, Any]] = [{"type": "file", "mime": mime, "url": path.as_uri()}]
    return PromptInput.model_validate({"parts": parts, "noReply": True})


async def test_a_file_in_the_workspace_becomes_the_read_tools_output(forge: Forge) -> None:
    (forge.workspace / "notes.txt").write_text("one\ntwo\n")
    session = await forge.session()
    stored = await forge.prompts.prompt(session.id, attach(forge.workspace / "notes.txt"))
    call, content, file = stored.parts
    assert isinstance(call, TextPart) and call.synthetic and "notes.txt" in call.text
    assert isinstance(content, TextPart) and "1: one" in content.text
    assert isinstance(file, FilePart) and file.url == (forge.workspace / "notes.txt").as_uri()


async def test_outside_the_workspace_is_refused_unless_a_rule_allows_the_directory(
    make_forge: MakeForge, tmp_path: Path
) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "spec.txt").write_text("the spec\n")
    async with make_forge() as forge:
        session = await forge.session()
        with pytest.raises(
            InvalidInputError, match=f"Refusing to access {shared / 'spec.txt'}: it is outside"
        ):
            await forge.prompts.prompt(session.id, attach(shared / "spec.txt"))
        assert await forge.history(session.id) == []
        assert forge.rt.permissions.pending("default") == []  # refused, not asked
    allow = {"external_directory": {f"{shared}/*": "allow"}}
    async with make_forge(permission=allow) as forge:
        session = await forge.session()
        stored = await forge.prompts.prompt(session.id, attach(shared / "spec.txt"))
        assert any(isinstance(p, TextPart) and "the spec" in p.text for p in stored.parts)


async def test_what_a_person_would_be_asked_about_is_refused_and_a_deny_rule_holds(
    make_forge: MakeForge, tmp_path: Path
) -> None:
    secret = tmp_path / "workspace" / "secret"
    async with make_forge(permission={"read": {f"{secret}/*": "deny"}}) as forge:
        (forge.workspace / ".env").write_text("TOKEN=abc\n")  # reading .env files asks by default
        (forge.workspace / "secret").mkdir()
        (forge.workspace / "secret" / "key.txt").write_text("k\n")
        session = await forge.session()
        with pytest.raises(InvalidInputError, match="needs a person's approval"):
            await forge.prompts.prompt(session.id, attach(forge.workspace / ".env"))
        with pytest.raises(InvalidInputError, match=f"rule: read '{secret}/\\*' deny"):
            await forge.prompts.prompt(
                session.id, attach(forge.workspace / "secret" / "key.txt", "image/png")
            )
        assert await forge.history(session.id) == []


async def test_one_bad_file_fails_the_whole_message(forge: Forge) -> None:
    (forge.workspace / "good.txt").write_text("fine\n")
    session = await forge.session()
    body = PromptInput.model_validate(
        {
            "parts": [
                {"type": "text", "text": "compare these"},
                {"type": "file", "mime": "text/plain", "url": (forge.workspace / "good.txt").as_uri()},
                {"type": "file", "mime": "text/plain", "url": (forge.workspace / "gone.txt").as_uri()},
            ]
        }
    )
    with pytest.raises(InvalidInputError, match="File not found"):
        await forge.prompts.prompt(session.id, body)
    assert await forge.history(session.id) == []
    assert forge.model.requests == []
