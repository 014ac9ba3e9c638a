"""The paths a shell command names, found by the bash parser (tools/shell_paths.py)."""

from __future__ import annotations

import pytest

from agentforge.tools.shell_paths import referenced_paths


@pytest.mark.parametrize(
    ("command", "paths"),
    [
        ("echo x > /outside/file", ["/outside/file"]),
        ("cat < /etc/passwd", ["/etc/passwd"]),
        ("sort data.txt >> /var/log/x 2>&1 &> /o", ["data.txt", "/var/log/x", "/o"]),
        ("head -n 1 /etc/passwd | tail -c 5", ["1", "/etc/passwd", "5"]),
        ("less ../secrets", ["../secrets"]),
        ("cd ~/projects", ["~/projects"]),
        ("x=/etc; cat $x/passwd", ["/etc/passwd"]),
        ('export D=/srv; ls "${D}/data"', ["/srv/data"]),
        ("X=/etc cat $X/hosts", ["/etc/hosts"]),
        ("echo $(cat /etc/hosts) `head /etc/motd`", ["/etc/hosts", "/etc/motd"]),
        ("(cd /tmp && rm -rf build) || true", ["/tmp", "build"]),
        ("if true; then touch /x; fi; f() { cat /y; }", ["/x", "/y"]),
        ("bash -c 'cat /etc/shadow'", ["/etc/shadow"]),
        ('eval "cp a /b"', ["a", "/b"]),
        ("dd if=/dev/sda of=../disk.img bs=1M", ["/dev/sda", "../disk.img"]),
        ("tar --directory=/etc -czf out.tgz .", ["/etc", "out.tgz", "."]),
        ("cat a\\ b 'c d'", ["a b", "c d"]),
    ],
)
def test_paths_of_commands(command: str, paths: list[str]) -> None:
    assert referenced_paths(command) == paths


@pytest.mark.parametrize(
    ("command", "paths"),
    [
        ("python3 -c \"print(open('/etc/passwd').read())\"", ["/etc/passwd"]),
        ("node -e \"require('fs').readFileSync('/etc/shadow')\"", ["/etc/shadow"]),
        ("perl -e 'open(F, \"~/.ssh/id_rsa\")'", ["~/.ssh/id_rsa"]),
        ("python3 script.py '../data.csv'", ["script.py", "../data.csv"]),
        ("python3 - <<EOF\nprint(open('/etc/hosts').read())\nEOF\n", ["/etc/hosts"]),
        ("bash <<'EOF'\ncat /etc/group\nEOF\n", ["/etc/group"]),
        # Not paths: a bare slash, a regex, text in a message.
        ("python3 -c \"print('a/b'.split('/'))\"", []),
    ],
)
def test_path_literals_in_interpreter_code(command: str, paths: list[str]) -> None:
    assert referenced_paths(command) == paths


@pytest.mark.parametrize(
    ("command", "paths"),
    [
        ("echo /etc/passwd; printf '%s' /x", []),  # they only print
        ("grep -r pattern /etc", ["/etc"]),  # the pattern is not a path
        ("grep -e /not/a/path -- file", ["file"]),  # -e gave the pattern: the rest are files
        ("sed -n '/start/p' notes.txt", ["notes.txt"]),
        ("chmod 755 bin/run", ["bin/run"]),
        ("cat notes.txt 2>/dev/null >/dev/stderr < /dev/null", ["notes.txt"]),
        ("exec 3<>/dev/tcp/example.com/80", []),  # bash's network redirection: not a file
        ('rm -f "$UNSET"/x *.log `pwd`/y', []),  # unknown variable, glob, substitution
        ("cat ${x:-/etc}/passwd", []),  # only plain $name is followed
    ],
)
def test_what_is_not_a_path_is_left_out(command: str, paths: list[str]) -> None:
    assert referenced_paths(command) == paths


def test_the_commands_environment_supplies_variables() -> None:
    assert referenced_paths("cat $HOME/.netrc", {"HOME": "/home/u"}) == ["/home/u/.netrc"]
    # An assignment in the line wins over the environment; an unknown value forgets the variable.
    assert referenced_paths("HOME=/x; cat $HOME/a", {"HOME": "/home/u"}) == ["/x/a"]
    assert referenced_paths("D=$(pwd); cat $D/a", {"D": "/etc"}) == []
