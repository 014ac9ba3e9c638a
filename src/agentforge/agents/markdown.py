"""Markdown definition files: YAML front matter between `---` lines, then a body.

Agent files live in `<config dir>/agents/*.md` and `<workspace>/.agentforge/agents/*.md`; the file name
is the agent's name and the body its prompt. The same format serves other Markdown definitions
(commands), hence `parse_front_matter` on its own.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentforge.config import ConfigError

_FRONT_MATTER = re.compile(r"\A---[ \t]*\r?\n(.*?)^---[ \t]*(?:\r?\n|\Z)", re.DOTALL | re.MULTILINE)


@dataclass(frozen=True, slots=True)
class MarkdownDefinition:
    name: str
    path: Path
    fields: dict[str, Any]
    body: str


def parse_front_matter(text: str, where: str) -> tuple[dict[str, Any], str]:
    """(front matter fields, body). No front matter → no fields and the whole text as body."""
    text = text.removeprefix("\ufeff")
    match = _FRONT_MATTER.match(text)
    if match is None:
        return {}, text.strip()
    import yaml  # here: only Markdown agents and commands with front matter need a YAML parser

    try:
        fields = yaml.safe_load(match.group(1))
    except yaml.YAMLError as exc:
        raise ConfigError(f"{where}: invalid front matter: {exc}") from None
    if fields is None:
        fields = {}
    if not isinstance(fields, dict):
        raise ConfigError(f"{where}: front matter must be a mapping of keys to values")
    return {str(key): value for key, value in fields.items()}, text[match.end() :].strip()


def read_definitions(directory: Path) -> list[MarkdownDefinition]:
    """Every `*.md` directly in `directory`, sorted by name (a missing directory has none).

    Blocking file IO: call it from a thread, or before the event loop serves anything."""
    if not directory.is_dir():
        return []
    found: list[MarkdownDefinition] = []
    for path in sorted(directory.glob("*.md")):
        if not path.is_file():
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"cannot read {path}: {exc}") from None
        fields, body = parse_front_matter(text, str(path))
        found.append(MarkdownDefinition(name=path.stem, path=path, fields=fields, body=body))
    return found


def agent_entry(definition: MarkdownDefinition) -> dict[str, Any]:
    """The file as an `agent.<name>` config entry: the body, when there is one, is the prompt. A `name`
    key is dropped: the file name is the agent's name (and unknown keys would become provider options)."""
    entry = {key: value for key, value in definition.fields.items() if key != "name"}
    if definition.body:
        entry["prompt"] = definition.body
    return entry
