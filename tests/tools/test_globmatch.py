from __future__ import annotations

import pytest

from agentforge.tools.globmatch import glob_matches


@pytest.mark.parametrize(
    ("pattern", "path", "expected"),
    [
        ("*.py", "a.py", True),
        ("*.py", "src/deep/a.py", True),  # no slash: any depth
        ("*.py", "a.pyc", False),
        ("src/*.py", "src/a.py", True),
        ("src/*.py", "src/deep/a.py", False),  # `*` stays in one segment
        ("src/*.py", "other/src/a.py", False),  # a slash anchors at the root
        ("**/*.py", "a.py", True),
        ("**/*.py", "x/y/z.py", True),
        ("src/**/test_*.py", "src/test_a.py", True),
        ("src/**/test_*.py", "src/a/b/test_c.py", True),
        ("src/**", "src/a/b.txt", True),
        ("*.{ts,tsx}", "ui/app.tsx", True),
        ("*.{ts,tsx}", "ui/app.js", False),
        ("file?.txt", "file1.txt", True),
        ("file?.txt", "file10.txt", False),
        ("[ab].txt", "a.txt", True),
        ("[!ab].txt", "a.txt", False),
        ("[!ab].txt", "c.txt", True),
        ("./docs/*.md", "docs/readme.md", True),
        ("/docs/*.md", "docs/readme.md", True),
        ("a+b(1).txt", "a+b(1).txt", True),
    ],
)
def test_glob_semantics(pattern: str, path: str, expected: bool) -> None:
    assert glob_matches(pattern, path) is expected
