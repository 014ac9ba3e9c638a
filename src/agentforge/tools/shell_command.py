"""Just enough shell parsing for permissions (KERNEL 7.7, bash).

A command line is split into simple commands on `&&`, `||`, `;`, `|`, `&` and newlines (outside
quotes). Each simple command (except `cd`) is a permission pattern; its "arity prefix" (the tokens
that name the command: `git checkout`, `npm run build`) plus " *" is what an "always" approval
covers. The paths a command names are found by a real bash parser (shell_paths.py), so paths
outside the workspace go through the external-directory guard.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass

from agentforge.tools.shell_paths import referenced_paths

# How many leading tokens identify a command (default 1). Longest prefix wins.
ARITY: dict[str, int] = {
    "git": 2,
    "npm": 2,
    "npm run": 3,
    "npm exec": 3,
    "pnpm": 2,
    "pnpm run": 3,
    "yarn": 2,
    "yarn run": 3,
    "bun": 2,
    "bun run": 3,
    "npx": 2,
    "cargo": 2,
    "go": 2,
    "docker": 2,
    "docker compose": 3,
    "kubectl": 2,
    "helm": 2,
    "pip": 2,
    "pip3": 2,
    "uv": 2,
    "uv run": 3,
    "poetry": 2,
    "poetry run": 3,
    "python -m": 3,
    "python3 -m": 3,
    "make": 2,
    "gh": 3,
    "terraform": 2,
    "dotnet": 2,
    "brew": 2,
    "apt": 2,
    "apt-get": 2,
    "systemctl": 2,
}

_OPERATORS = ("&&", "||", ";", "|", "&", "\n")
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_REDIRECTION = re.compile(r"^(\d*|&)(>>?|<|>&|<&)")


@dataclass(frozen=True, slots=True)
class SimpleCommand:
    text: str
    tokens: list[str]

    @property
    def name(self) -> str:
        words = command_words(self.tokens)
        return words[0] if words else ""


def split_commands(command: str) -> list[SimpleCommand]:
    """The simple commands of a command line, in order (empty ones dropped)."""
    commands: list[SimpleCommand] = []
    for segment in _split_on_operators(command):
        text = segment.strip().strip("()").strip()
        if text:
            commands.append(SimpleCommand(text=text, tokens=_tokenize(text)))
    return commands


def _split_on_operators(command: str) -> list[str]:
    segments: list[str] = []
    current: list[str] = []
    quote: str | None = None
    i = 0
    while i < len(command):
        char = command[i]
        if char == "\\" and quote != "'" and i + 1 < len(command):
            current.append(command[i : i + 2])
            i += 2
            continue
        if quote:
            quote = None if char == quote else quote
        elif char in ("'", '"'):
            quote = char
        else:
            operator = _operator_at(command, i)
            if operator:
                segments.append("".join(current))
                current = []
                i += len(operator)
                continue
        current.append(char)
        i += 1
    segments.append("".join(current))
    return segments


def _operator_at(command: str, i: int) -> str | None:
    for operator in _OPERATORS:
        if command.startswith(operator, i):
            # `2>&1`, `>&2` and `&>` are redirections, not the background operator.
            if operator == "&" and (command[i - 1 : i] in (">", "<") or command[i + 1 : i + 2] == ">"):
                return None
            return operator
    return None


def _tokenize(text: str) -> list[str]:
    try:
        return shlex.split(text, comments=True)
    except ValueError:
        return text.split()  # unbalanced quotes: still give a best-effort pattern


def command_words(tokens: list[str]) -> list[str]:
    """Tokens without leading `VAR=value` assignments and without redirections."""
    words: list[str] = []
    skip_next = False
    for token in tokens:
        if skip_next:
            skip_next = False
            continue
        if not words and _ASSIGNMENT.match(token):
            continue
        redirection = _REDIRECTION.match(token)
        if redirection:
            skip_next = redirection.end() == len(token)  # `> file`: the target is the next token
            continue
        words.append(token)
    return words


def arity_prefix(tokens: list[str]) -> str:
    words = command_words(tokens)
    for size in range(len(words), 0, -1):
        arity = ARITY.get(" ".join(words[:size]))
        if arity is not None:
            return " ".join(words[:arity])
    return words[0] if words else ""


def permission_patterns(command: str) -> tuple[list[str], list[str]]:
    """(patterns, always) for the `bash` permission; `cd` alone asks nothing."""
    patterns: list[str] = []
    always: list[str] = []
    for simple in split_commands(command):
        if simple.name == "cd":
            continue
        patterns.append(simple.text)
        prefix = arity_prefix(simple.tokens)
        if prefix and f"{prefix} *" not in always:
            always.append(f"{prefix} *")
    return patterns, always


def static_path_arguments(command: str, env: Mapping[str, str] | None = None) -> list[str]:
    """The static paths the command names (arguments, redirections, interpreter code), variables
    from earlier assignments and `env` expanded; globs, substitutions and unknown variables left
    out: those cannot be resolved without running the shell."""
    return referenced_paths(command, env)
