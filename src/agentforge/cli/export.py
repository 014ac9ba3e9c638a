"""`agentforge session export`: a conversation as JSON (what the API returns) or Markdown to read."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from agentforge.cli.render import error_text, format_time, short_input
from agentforge.model.message import WithParts
from agentforge.model.session import Session


def as_json(session: Session, messages: Sequence[WithParts]) -> str:
    wire = {"session": session.wire(), "messages": [message.wire() for message in messages]}
    return json.dumps(wire, indent=2, ensure_ascii=False) + "\n"


def as_markdown(session: Session, messages: Sequence[WithParts]) -> str:
    lines = [
        f"# {session.title}",
        "",
        f"`{session.id}` · {session.directory} · {format_time(session.time.updated)}",
    ]
    for message in messages:
        wire = message.wire()
        lines.extend(["", *_message(wire["info"], wire.get("parts", []))])
    return "\n".join(lines) + "\n"


def _message(info: Mapping[str, Any], parts: Sequence[Mapping[str, Any]]) -> list[str]:
    role = str(info.get("role", "?"))
    heading = f"## {role.capitalize()}"
    if role == "assistant":
        heading += f" ({info.get('providerID')}/{info.get('modelID')})"
    lines = [heading]
    for part in parts:
        lines.extend(_part(part))
    if info.get("error"):
        lines.extend(["", f"**Error:** {error_text(info['error'])}"])
    return lines


def _part(part: Mapping[str, Any]) -> list[str]:
    kind = part.get("type")
    if kind == "text" and not part.get("synthetic"):
        return ["", str(part.get("text", ""))]
    if kind == "reasoning" and part.get("text"):
        return ["", *("> " + line for line in str(part["text"]).splitlines())]
    if kind == "file":
        return ["", f"📎 {part.get('filename') or part.get('url')} ({part.get('mime')})"]
    if kind == "tool":
        return _tool(part)
    return []


def _tool(part: Mapping[str, Any]) -> list[str]:
    state = part.get("state") or {}
    lines = ["", f"**Tool `{part.get('tool')}`** {short_input(state.get('input') or {}, 200)}"]
    if state.get("status") == "error":
        return [*lines, "", f"Failed: {state.get('error', '')}"]
    output = str(state.get("output", ""))
    if output:
        fence = "````" if "```" in output else "```"
        lines.extend(["", fence, output.rstrip("\n"), fence])
    return lines
