"""The paths a shell command names, found with a real bash parser (tree-sitter-bash), for the
`external_directory` ask of the bash tool (KERNEL 7.7).

What counts, in every command of the line (pipelines, lists, subshells, `$(...)`, functions, `if`
and loop bodies, and the text of `bash -c '...'` and `eval '...'`, parsed in turn):
- the static arguments of every command but a few that take no paths (`echo`, `printf`, ...):
  relative ones too (a symlink may lead out, `..` does); options are skipped, but the value of
  `--opt=/abs` and `if=/abs` is taken; the first operand of a pattern-first command (`grep`, `sed`,
  `awk`, ...) is its pattern, not a path, unless `-e`/`-f` gave the pattern;
- redirection targets (`> /x`, `>> /x`, `< /etc/passwd`, `&> /x`), the standard devices excepted;
- quoted literals that look like paths (`'/etc/passwd'`, `"~/x"`, `'../y'`) in an interpreter's
  inline code (`python3 -c`, `node -e`, `perl -e`, ...) and in heredocs fed to an interpreter;
- variables: `x=/etc; cat $x/passwd` (simple assignments earlier in the line, `export` too), and the
  variables of the environment the command runs with (`$HOME`, `$TMPDIR`).

What static analysis cannot see, it leaves out: globs, command substitutions, variables set by
other means, paths computed by a program. The OS sandbox (tools/sandbox.py) is the real boundary.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tree_sitter import Node, Parser

# Commands whose arguments are never paths they open.
NO_PATH_COMMANDS = frozenset(
    {
        "echo",
        "printf",
        "true",
        "false",
        ":",
        "test",
        "[",
        "[[",
        "export",
        "declare",
        "local",
        "readonly",
        "typeset",
        "unset",
        "alias",
        "type",
        "which",
        "hash",
        "help",
        "sleep",
        "kill",
        "set",
        "shopt",
        "trap",
        "exit",
        "return",
        "seq",
        "expr",
        "let",
        "read",
        "wait",
    }
)
# Commands whose first operand is a pattern or program, not a file (unless given by -e / -f).
PATTERN_FIRST = frozenset(
    {"grep", "egrep", "fgrep", "rg", "ag", "ack", "sed", "awk", "gawk", "mawk", "nawk", "jq", "yq"}
)
_PATTERN_OPTIONS = frozenset({"-e", "-f", "--regexp", "--expression", "--file"})
# Options of those whose next word is the pattern itself.
_PATTERN_VALUE_OPTIONS = frozenset({"-e", "--regexp", "--expression"})
# Commands whose first operand is a mode or an owner.
MODE_FIRST = frozenset({"chmod", "chown", "chgrp"})
SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "mksh", "ash", "busybox"})
_INTERPRETER = re.compile(
    r"^(python[0-9.]*|pypy[0-9.]*|node|nodejs|deno|bun|perl[0-9.]*|ruby|php|lua[0-9.]*|luajit)$"
)
# Flags after which an interpreter takes code.
_CODE_FLAGS = frozenset({"-c", "-e", "-E", "--eval", "-p", "--print", "-r", "--command"})
# Quoted literals in code that look like paths: absolute, home-relative or climbing out.
_PATH_LITERAL = re.compile(r"""(['"`])((?:/|~/|\.\./)[\w.~@%+-][^'"`\n\\]*)\1""")
# Devices a command may always read or write, and bash's network redirections (not files: the
# sandbox decides about the network).
_DEVICES = re.compile(r"^/dev/(null|zero|u?random|full|stdin|stdout|stderr|tty|fd/\d+|tcp/.+|udp/.+)$")
_REDIRECT_TO_FD = re.compile(r"^&?-?\d*-?$")
_MAX_DEPTH = 4  # nested `bash -c` / `eval` levels parsed


@functools.cache
def _parser() -> Parser:
    # Imported here: the grammar is only needed once a command is checked, not to start a server.
    import tree_sitter_bash
    from tree_sitter import Language, Parser

    return Parser(Language(tree_sitter_bash.language()))


def referenced_paths(command: str, env: Mapping[str, str] | None = None) -> list[str]:
    """The static paths `command` names, in order, each once (see the module docstring). `env`:
    the variables the command starts with (assignments in the command line override them)."""
    walker = _Walker(dict(env or {}))
    walker.script(command, depth=0)
    return list(dict.fromkeys(walker.paths))


@dataclass
class _Walker:
    variables: dict[str, str]
    paths: list[str] = field(default_factory=list)

    def script(self, source: str, *, depth: int) -> None:
        if depth > _MAX_DEPTH:
            return
        tree = _parser().parse(source.encode())
        self._visit(tree.root_node, depth)

    def _visit(self, node: Node, depth: int) -> None:
        kind = node.type
        if kind == "variable_assignment":
            self._assign(node)
        elif kind == "command":
            self._command_node(node, depth, heredocs=[])
            return
        elif kind == "redirected_statement":
            self._redirected(node, depth)
            return
        elif kind == "file_redirect":
            self._redirect(node)
        for child in node.named_children:
            self._visit(child, depth)

    def _command_node(self, node: Node, depth: int, *, heredocs: list[str]) -> None:
        # Prefix assignments (`X=/etc cat $X`) are taken first: over-reading is the safe side.
        for child in node.named_children:
            if child.type == "variable_assignment":
                self._assign(child)
        self._command(node, depth, heredocs=heredocs)
        for child in node.named_children:  # `$(...)` inside the arguments
            if child.type not in ("command_name", "variable_assignment"):
                self._visit(child, depth)

    def _redirected(self, node: Node, depth: int) -> None:
        body = node.child_by_field_name("body")
        heredocs = [_text(n) for n in _descendants(node) if n.type == "heredoc_body"]
        for child in node.named_children:
            if body is not None and child.id == body.id and body.type == "command":
                self._command_node(body, depth, heredocs=heredocs)
            else:
                self._visit(child, depth)

    def _assign(self, node: Node) -> None:
        name = node.child_by_field_name("name")
        value = node.child_by_field_name("value")
        if name is None:
            return
        resolved = self._value(value) if value is not None else ""
        if resolved is None:
            self.variables.pop(_text(name), None)  # unknown from here on
        else:
            self.variables[_text(name)] = resolved

    def _redirect(self, node: Node) -> None:
        destination = node.child_by_field_name("destination")
        if destination is None or destination.type in ("number", "file_descriptor"):
            return
        target = self._value(destination)
        if target and not _DEVICES.match(target) and not _REDIRECT_TO_FD.match(target):
            self.paths.append(target)

    def _command(self, node: Node, depth: int, *, heredocs: list[str]) -> None:
        name_node = node.child_by_field_name("name")
        name = self._value(name_node) if name_node is not None else None
        program = os.path.basename(name) if name else ""
        words = [self._value(argument) for argument in node.children_by_field_name("argument")]
        if program in NO_PATH_COMMANDS:
            return
        if program in SHELLS or program == "eval" or _INTERPRETER.match(program):
            self._code(program, words, heredocs, depth)
            return
        self.paths.extend(_operands(program, words))

    def _code(self, program: str, words: list[str | None], heredocs: list[str], depth: int) -> None:
        """An interpreter or shell: its inline code and heredocs are code, its other operands paths."""
        shell = program in SHELLS or program == "eval"
        code: list[str] = list(heredocs)
        operands: list[str | None] = []
        if program == "eval":
            code.append(" ".join(word for word in words if word is not None))
        else:
            taking_code = False
            for word in words:
                if taking_code:
                    if word is not None:
                        code.append(word)
                    taking_code = False
                elif word in _CODE_FLAGS:
                    taking_code = True
                else:
                    operands.append(word)
        for text in code:
            if shell:
                self.script(text, depth=depth + 1)
            else:
                self.paths.extend(match.group(2) for match in _PATH_LITERAL.finditer(text))
        self.paths.extend(_operands(program, operands))

    def _value(self, node: Node) -> str | None:
        """The static string a word stands for, or None when it depends on the run (globs,
        substitutions, unknown variables)."""
        kind = node.type
        if kind in ("word", "command_name"):
            if kind == "command_name":
                return self._value(node.named_children[0]) if node.named_children else None
            text = _text(node)
            if re.search(r"(?<!\\)[*?\[]", text):
                return None  # a glob
            return re.sub(r"\\(.)", r"\1", text)
        if kind in ("number", "string_content"):
            return _text(node)
        if kind == "raw_string":
            return _text(node)[1:-1]
        if kind in ("simple_expansion", "expansion"):
            return self._variable(node)
        if kind in ("string", "concatenation"):
            parts = [self._value(child) for child in node.named_children]
            if any(part is None for part in parts):
                return None
            return "".join(part for part in parts if part is not None)
        return None

    def _variable(self, node: Node) -> str | None:
        # Only plain `$name` / `${name}`: `${name:-x}`, `${#name}` and the like are not followed.
        names = [child for child in node.named_children if child.type == "variable_name"]
        if len(names) != 1 or len(node.named_children) != 1:
            return None
        return self.variables.get(_text(names[0]))


def _operands(program: str, words: list[str | None]) -> Iterator[str]:
    """The path operands among a command's arguments (static ones only)."""
    operands: list[str | None] = []  # None: a dynamic operand (still takes its place)
    pattern_given = False
    options_done = False
    skip_next = False
    for word in words:
        if skip_next:
            skip_next = False  # `-e PATTERN`
        elif word is None:
            operands.append(None)
        elif not options_done and word == "--":
            options_done = True
        elif not options_done and word.startswith("-") and word != "-":
            pattern_given = pattern_given or word in _PATTERN_OPTIONS or word[:2] in ("-e", "-f")
            skip_next = program in PATTERN_FIRST and word in _PATTERN_VALUE_OPTIONS
            value = word.partition("=")[2]
            if value and _looks_like_path(value):
                yield value
        elif "=" in word and not word.startswith(("/", ".", "~")):
            value = word.partition("=")[2]  # `if=/dev/sda`, `key=value`: the value may be a path
            if _looks_like_path(value):
                yield value
        else:
            operands.append(word)
    if (program in PATTERN_FIRST and not pattern_given) or program in MODE_FIRST:
        operands = operands[1:]
    for operand in operands:
        if operand is not None and operand != "-" and not _DEVICES.match(operand):
            yield operand


def _looks_like_path(value: str) -> bool:
    return value.startswith(("/", "~/", "../")) or value in ("~", "..")


def _text(node: Node) -> str:
    return (node.text or b"").decode(errors="replace")


def _descendants(node: Node) -> Iterator[Node]:
    for child in node.named_children:
        yield child
        yield from _descendants(child)
