"""The fence: outside paths no rule or person may open (the server's data, other tenants' roots)."""

from __future__ import annotations

from pathlib import Path

from agentforge.tools.base import PermissionRequest
from agentforge.tools.fence import Fence


def outside(path: Path, *, directory: bool = False) -> PermissionRequest:
    """The request `guard_path` makes: a file names its parent, a directory itself."""
    parent = path if directory else path.parent
    pattern = f"{parent}/*"
    metadata = {"filepath": str(path), "parentDir": str(parent)}
    return PermissionRequest("external_directory", [pattern], [pattern], metadata)


def fence(tmp_path: Path) -> Fence:
    data = tmp_path / "data"
    own = data / "tenants" / "globex"
    own.mkdir(parents=True)
    return Fence(closed=(data, tmp_path / "workspace"), open=(own,))


def test_paths_inside_a_closed_root_are_refused_but_the_tenants_own_roots_are_not(tmp_path: Path) -> None:
    walls = fence(tmp_path)
    other = tmp_path / "data" / "tenants" / "acme" / "workspace" / "plan.txt"
    assert walls.refusal(outside(other)) == (
        f"Refusing to access {other}: it belongs to the server or to another tenant."
    )
    assert walls.refusal(outside(tmp_path / "workspace" / "src", directory=True)) is not None
    assert walls.refusal(outside(tmp_path / "data" / "tenants" / "globex" / "plans" / "a.md")) is None
    assert walls.refusal(outside(tmp_path / "elsewhere" / "notes.txt")) is None


def test_a_directory_holding_a_closed_root_is_refused_a_file_beside_it_is_not(tmp_path: Path) -> None:
    walls = fence(tmp_path)
    assert walls.refusal(outside(tmp_path, directory=True)) == (
        f"Refusing to access {tmp_path}: it contains the server's or other tenants' files."
    )
    assert walls.refusal(outside(tmp_path / "notes.txt")) is None  # names tmp_path, reads one file
    # A closed root that does not exist holds nothing to walk into.
    assert walls.refusal(outside(tmp_path / "workspace-parent", directory=True)) is None


def test_a_symlink_is_judged_by_where_it_leads(tmp_path: Path) -> None:
    walls = fence(tmp_path)
    (tmp_path / "data" / "tenants" / "acme").mkdir(parents=True)
    # guard_path puts the resolved path in `filepath`; the pattern names the link's real parent.
    real = (tmp_path / "data" / "tenants" / "acme" / "plan.txt").resolve()
    request = PermissionRequest("external_directory", ["/tmp/innocent/*"], [], {"filepath": str(real)})
    assert walls.refusal(request) is not None


def test_other_permissions_and_an_empty_fence_are_never_refused(tmp_path: Path) -> None:
    walls = fence(tmp_path)
    bash = PermissionRequest("bash", [f"cat {tmp_path}/data/forge.db"], [], {})
    assert not walls.applies_to(bash)
    assert walls.refusal(bash) is None
    assert Fence().refusal(outside(tmp_path / "data" / "forge.db")) is None
