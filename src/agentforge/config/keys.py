"""Config keys nobody reads: a typo (`permision`) would otherwise be silently ignored.

The config model keeps unknown keys (features read theirs from the extras), so validation cannot
catch them. `unknown_keys` lists the keys that neither a section's fields nor `EXTRA_KEYS` know,
each with the closest known key as a suggestion. The CLI warns; `doctor` and `serve --production`
fail on them.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Final

from pydantic import BaseModel

from agentforge.config.sections import Config

# Top-level keys read from the extras, and opencode's keys that its TUI may write (accepted, unused).
# A typo is matched against the keys we use before opencode's unused ones ("modle" is "model").
UNUSED_KEYS: Final = frozenset(
    {
        "autoshare",
        "autoupdate",
        "disabled_providers",
        "enabled_providers",
        "experimental",
        "formatter",
        "keybinds",
        "layout",
        "lsp",
        "mode",
        "share",
        "theme",
        "tui",
        "username",
        "watcher",
    }
)
EXTRA_KEYS: Final = UNUSED_KEYS | frozenset(
    {
        "$schema",
        "agent",
        "command",
        "compaction",
        "instructions",
        "mcp",
        "permission",
        "permission_default",
        "permission_timeout",
        "plugin",
        "question_timeout",
        "snapshot",
        "title",
    }
)


@dataclass(frozen=True, slots=True)
class UnknownKey:
    path: str  # dotted, e.g. "server.prot"
    suggestion: str | None

    def describe(self) -> str:
        hint = f" (did you mean {self.suggestion!r}?)" if self.suggestion else ""
        return f"unknown config key {self.path!r}{hint}"


def unknown_keys(config: Config) -> list[UnknownKey]:
    return _unknown_in(config, prefix="", extra_known=EXTRA_KEYS)


def _unknown_in(section: BaseModel, *, prefix: str, extra_known: frozenset[str]) -> list[UnknownKey]:
    known = set(extra_known) | _field_names(type(section))
    found = [
        UnknownKey(prefix + key, _closest(key, known))
        for key in sorted(section.model_extra or {})
        if key not in known
    ]
    # Sections (not maps such as `provider`, whose keys are names the user chooses).
    for name in type(section).model_fields:
        value = getattr(section, name)
        if isinstance(value, BaseModel):
            found += _unknown_in(
                value, prefix=f"{prefix}{_wire_name(type(section), name)}.", extra_known=frozenset()
            )
    return found


def _field_names(model: type[BaseModel]) -> set[str]:
    names = set()
    for name, field in model.model_fields.items():
        names.add(name)
        if field.alias:
            names.add(field.alias)
    return names


def _wire_name(model: type[BaseModel], name: str) -> str:
    return model.model_fields[name].alias or name


def _closest(key: str, known: set[str]) -> str | None:
    for candidates in (known - UNUSED_KEYS, known & UNUSED_KEYS):
        matches = difflib.get_close_matches(key, sorted(candidates), n=1, cutoff=0.6)
        if matches:
            return matches[0]
    return None
