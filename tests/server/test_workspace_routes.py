"""opencode's file, find and vcs routes through a live server: what they answer inside the workspace,
and that nothing outside it (written, through a symlink, or as `?directory=`) is reachable."""

from __future__ import annotations

import base64
import os
import subprocess
from pathlib import Path
from typing import Any

import httpx2
import pytest

from tests.e2e.harness import LiveServer


def _json(response: httpx2.Response, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    return response.json()


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.email=t@example.com", "-c", "user.name=t", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
    )


@pytest.fixture
def files(live: LiveServer) -> Path:
    root = live.workspace
    (root / "src").mkdir()
    (root / "src" / "main.py").write_text("print('needle')\n")
    (root / "notes.md").write_text("first\n")
    (root / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    (root / ".gitignore").write_text("build/\n")
    (root / "build").mkdir()
    (root / "build" / "out.txt").write_text("needle in build\n")
    _git(root, "init", "-q", "-b", "main")
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "init")
    (live.workspace.parent / "secret.txt").write_text("outside the workspace\n")
    return root


async def test_file_lists_a_directory_and_reads_files(live: LiveServer, files: Path) -> None:
    listing = _json(await live.client.get("/file", params={"path": ""}))
    assert [(n["name"], n["type"], n["ignored"]) for n in listing] == [
        ("build", "directory", True),
        ("src", "directory", False),
        (".gitignore", "file", False),
        ("logo.png", "file", False),
        ("notes.md", "file", False),
    ]
    src = next(n for n in listing if n["name"] == "src")
    assert src["path"] == "src/" and src["absolute"] == str(files / "src")
    assert [n["path"] for n in _json(await live.client.get("/file", params={"path": "src"}))] == [
        "src/main.py"
    ]

    (files / "notes.md").write_text("first\nsecond\n")
    text = _json(await live.client.get("/file/content", params={"path": "notes.md"}))
    assert text["type"] == "text" and text["content"] == "first\nsecond\n"
    assert "+second" in text["diff"]
    image = _json(await live.client.get("/file/content", params={"path": "logo.png"}))
    assert (image["type"], image["encoding"], image["mimeType"]) == ("binary", "base64", "image/png")
    assert base64.b64decode(image["content"]) == (files / "logo.png").read_bytes()
    missing = await live.client.get("/file/content", params={"path": "nope.txt"})
    assert missing.status_code == 404 and missing.json()["name"] == "NotFoundError"


async def test_file_status_and_vcs_report_git_state(live: LiveServer, files: Path) -> None:
    (files / "notes.md").write_text("changed\n")
    (files / "new.txt").write_text("a\nb\n")
    status = _json(await live.client.get("/file/status"))
    assert sorted((s["path"], s["status"], s["added"], s["removed"]) for s in status) == [
        ("new.txt", "added", 2, 0),
        ("notes.md", "modified", 1, 1),
    ]
    assert _json(await live.client.get("/vcs")) == {"branch": "main", "default_branch": "main"}
    vcs_status = _json(await live.client.get("/vcs/status"))
    assert {s["file"] for s in vcs_status} == {"new.txt", "notes.md"}
    diffs = _json(await live.client.get("/vcs/diff", params={"mode": "git"}))
    notes = next(d for d in diffs if d["file"] == "notes.md")
    assert "-first" in notes["patch"] and "+changed" in notes["patch"]


async def test_find_searches_text_and_paths(live: LiveServer, files: Path) -> None:
    found = _json(await live.client.get("/find", params={"pattern": "needle"}))
    assert [(m["path"]["text"], m["line_number"]) for m in found] == [("src/main.py", 1)]  # build/ is ignored
    paths = _json(await live.client.get("/find/file", params={"query": "main"}))
    assert paths[0] == "src/main.py"
    dirs = _json(await live.client.get("/find/file", params={"query": "s", "type": "directory"}))
    assert dirs == ["src/"]
    only_files = _json(
        await live.client.get("/find/file", params={"query": "", "dirs": "false", "limit": 50})
    )
    assert "src/" not in only_files and "notes.md" in only_files
    assert _json(await live.client.get("/find/symbol", params={"query": "main"})) == []
    bad = await live.client.get("/find", params={"pattern": "("})
    assert bad.status_code == 400 and bad.json()["data"]["message"].startswith("pattern:")


async def test_the_v2_location_and_file_search_the_tui_uses(live: LiveServer, files: Path) -> None:
    project = _json(await live.client.get("/project/current"))["id"]
    location = _json(await live.client.get("/api/location"))
    assert location == {"directory": str(files), "project": {"id": project, "directory": str(files)}}
    found = _json(await live.client.get("/api/fs/find", params={"query": "main", "limit": "20"}))
    assert found["location"] == location and found["data"][0] == {"path": "src/main.py", "type": "file"}
    in_src = {"location[directory]": str(files / "src"), "query": ""}
    found = _json(await live.client.get("/api/fs/find", params=in_src))
    assert found["location"]["directory"] == str(files / "src") and found["data"] == [
        {"path": "main.py", "type": "file"}
    ]
    outside = await live.client.get(
        "/api/fs/find", params={"location[directory]": str(files.parent), "query": ""}
    )
    assert outside.status_code == 403
    other = await live.client.get("/api/session")
    assert other.status_code == 501 and "v2 API" in other.json()["data"]["message"]


@pytest.mark.parametrize(
    ("route", "param"),
    [("/file", "path"), ("/file/content", "path")],
)
async def test_paths_outside_the_workspace_are_refused(
    live: LiveServer, files: Path, route: str, param: str
) -> None:
    os.symlink(files.parent / "secret.txt", files / "link.txt")
    os.symlink(files.parent, files / "up")
    for raw in ("../secret.txt", str(files.parent / "secret.txt"), "link.txt", "up/secret.txt", "/etc"):
        refused = await live.client.get(route, params={param: raw})
        assert refused.status_code == 403, (raw, refused.text)
        body = refused.json()
        assert body["name"] == "ForbiddenError" and "outside the workspace" in body["data"]["message"]
        assert "outside the workspace\n" not in refused.text


async def test_a_directory_outside_the_workspace_is_refused_everywhere(live: LiveServer, files: Path) -> None:
    outside = str(files.parent)
    for route, params in [
        ("/file", {"path": ""}),
        ("/file/status", {}),
        ("/find", {"pattern": "outside"}),
        ("/find/file", {"query": "secret"}),
        ("/vcs", {}),
        ("/path", {}),
    ]:
        refused = await live.client.get(route, params={**params, "directory": outside})
        assert refused.status_code == 403, (route, refused.text)
    inside = _json(await live.client.get("/file", params={"path": "", "directory": str(files / "src")}))
    assert [n["name"] for n in inside] == ["main.py"]


async def test_path_tells_the_local_user_where_the_server_keeps_things(live: LiveServer, files: Path) -> None:
    path = _json(await live.client.get("/path"))
    assert path["worktree"] == str(files) and path["directory"] == str(files)
    assert path["state"] == str(live.settings.data_dir) and path["home"] == str(Path.home())
    inside = _json(await live.client.get("/path", params={"directory": str(files / "src")}))
    assert inside["directory"] == str(files / "src") and inside["worktree"] == str(files)
