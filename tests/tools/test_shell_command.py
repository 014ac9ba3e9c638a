from __future__ import annotations

from agentforge.tools.shell_command import (
    arity_prefix,
    permission_patterns,
    split_commands,
    static_path_arguments,
)


def test_split_on_operators_outside_quotes() -> None:
    texts = [c.text for c in split_commands("ls -la && echo 'a && b' | wc -l; git status || true & sleep 1")]
    assert texts == ["ls -la", "echo 'a && b'", "wc -l", "git status", "true", "sleep 1"]


def test_redirections_are_not_split() -> None:
    texts = [c.text for c in split_commands("make 2>&1 | tee log; cmd &> out")]
    assert texts == ["make 2>&1", "tee log", "cmd &> out"]


def test_newlines_and_subshell_parens() -> None:
    texts = [c.text for c in split_commands("(cd src && make)\npytest -q")]
    assert texts == ["cd src", "make", "pytest -q"]


def test_arity_prefix() -> None:
    assert arity_prefix(["git", "checkout", "-b", "x"]) == "git checkout"
    assert arity_prefix(["npm", "run", "build", "--", "--watch"]) == "npm run build"
    assert arity_prefix(["npm", "install", "left-pad"]) == "npm install"
    assert arity_prefix(["ls", "-la"]) == "ls"
    assert arity_prefix(["FOO=1", "python", "-m", "pytest", "-q"]) == "python -m pytest"


def test_permission_patterns_skip_cd_and_dedupe_always() -> None:
    patterns, always = permission_patterns("cd src && git add . && git add -A && ls")
    assert patterns == ["git add .", "git add -A", "ls"]
    assert always == ["git add *", "ls *"]


def test_only_cd_asks_nothing() -> None:
    assert permission_patterns("cd somewhere") == ([], [])


def test_static_path_arguments_of_file_commands() -> None:
    command = "rm -rf build ../other && cat notes.txt 2>/dev/null && echo /etc && chmod 755 bin/run"
    assert static_path_arguments(command) == ["build", "../other", "notes.txt", "bin/run"]


def test_dynamic_arguments_are_skipped() -> None:
    assert static_path_arguments('rm -f "$TMP"/x *.log `pwd`/y') == []
    assert static_path_arguments("cd ~/projects") == ["~/projects"]


def test_unbalanced_quotes_still_give_a_pattern() -> None:
    patterns, always = permission_patterns("echo 'unterminated")
    assert patterns == ["echo 'unterminated"]
    assert always == ["echo *"]
