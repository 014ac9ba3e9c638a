"""The package's import rules (docs/architecture.md), checked on the source itself.

Every `import` and `from ... import` of every module under src/agentforge and
clients/python/src/agentforge (the two distributions of the `agentforge` namespace package) counts,
wherever it stands (module level, inside a function, under TYPE_CHECKING): a rule that an import
hidden in a function may break is no rule. `from package import submodule` is an import of the submodule.
"""

from __future__ import annotations

import ast
import functools
import re
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SERVER_SRC = REPO / "src"
CLIENT_SRC = REPO / "clients" / "python" / "src"
ROOT = "agentforge"
# Modules that may talk to a database directly: the store, and the deployment checks and the `db`
# command, which inspect a database before any store runs on it.
SQL_LIBRARIES = ("sqlalchemy", "asyncpg", "sqlite3", "aiosqlite", "alembic")
MAY_USE_SQL = ("store", "doctor", "cli")


def _module_name(path: Path, src: Path) -> str:
    parts = list(path.relative_to(src).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@functools.cache
def modules() -> dict[str, Path]:
    return {
        _module_name(path, src): path
        for src in (SERVER_SRC, CLIENT_SRC)
        for path in sorted((src / ROOT).rglob("*.py"))
    }


def _imported_names(name: str, path: Path) -> Iterator[str]:
    """Every dotted name the module imports, relative imports made absolute."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                source = ".".join([*base, *([node.module] if node.module else [])])
            else:
                source = node.module or ""
            submodules = [
                f"{source}.{alias.name}" for alias in node.names if f"{source}.{alias.name}" in modules()
            ]
            # `from package import submodule` imports the submodule; anything else, the module named.
            yield from submodules if len(submodules) == len(node.names) else [source, *submodules]


def _ours(imported: str) -> str | None:
    """The module of ours `imported` names (the closest enclosing one), or None."""
    while imported and imported not in modules():
        imported = imported.rpartition(".")[0]
    return imported or None


@functools.cache
def graph() -> dict[str, frozenset[str]]:
    edges: dict[str, frozenset[str]] = {}
    for name, path in modules().items():
        found = {_ours(imported) for imported in _imported_names(name, path)}
        edges[name] = frozenset(m for m in found if m is not None and m != name)
    return edges


def package(module: str) -> str:
    """The first-level package under agentforge (`session` for agentforge.session.loop)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ROOT


def imports_of(source_package: str) -> dict[str, set[str]]:
    """For each module of `source_package`, the modules of other packages it imports."""
    return {
        module: {target for target in targets if package(target) != source_package}
        for module, targets in graph().items()
        if package(module) == source_package
    }


def breaking(source_package: str, allowed: set[str]) -> list[str]:
    return sorted(
        f"{module} imports {target}"
        for module, targets in imports_of(source_package).items()
        for target in targets
        if package(target) not in allowed
    )


def test_the_graph_sees_the_imports_it_should() -> None:
    # A guard against a walker that finds nothing and so passes every rule.
    assert len(modules()) > 150
    assert "agentforge.session.processor" in graph()["agentforge.session.loop"]
    assert "agentforge.plugins.hookspecs" in graph()["agentforge.plugins.manager"]
    assert "agentforge.plugins" not in graph()["agentforge.plugins.manager"]  # a submodule import


def test_model_imports_nothing_of_ours() -> None:
    assert breaking("model", set()) == []


@pytest.mark.parametrize("layer", ["store", "bus"])
def test_store_and_bus_import_only_the_model_and_the_config(layer: str) -> None:
    assert breaking(layer, {"model", "config"}) == []


def test_the_session_never_imports_the_runtime_the_server_or_the_cli() -> None:
    above = {"runtime", "server", "cli", "testing"}
    assert breaking("session", {package(m) for m in modules()} - above) == []


def test_only_the_cli_imports_the_server() -> None:
    offenders = sorted(
        f"{module} imports {target}"
        for module, targets in graph().items()
        if package(module) not in ("server", "cli")
        for target in targets
        if package(target) == "server"
    )
    assert offenders == []


def test_the_client_sdk_imports_only_the_model() -> None:
    assert breaking("client", {"model"}) == []


def test_the_client_distribution_imports_only_itself_the_stdlib_and_its_dependencies() -> None:
    """What `pip install agentforge-client` brings must be enough for every module it holds."""
    project = tomllib.loads((CLIENT_SRC.parent / "pyproject.toml").read_text())["project"]
    declared = {re.split(r"[^A-Za-z0-9_.-]", dep, maxsplit=1)[0].lower() for dep in project["dependencies"]}
    ours = {name for name, path in modules().items() if path.is_relative_to(CLIENT_SRC)}
    assert {"agentforge.client", "agentforge.model.event_types"} <= ours
    offenders = sorted(
        f"{name} imports {imported}"
        for name in ours
        for imported in _imported_names(name, modules()[name])
        if not _client_may_import(imported, ours, declared)
    )
    assert offenders == []


def _client_may_import(imported: str, ours: set[str], declared: set[str]) -> bool:
    top = imported.split(".")[0]
    if top == ROOT:
        return _ours(imported) in ours
    return top in sys.stdlib_module_names or top == "__future__" or top.replace("_", "-") in declared


def test_no_sql_above_the_store() -> None:
    offenders = sorted(
        f"{name} imports {imported}"
        for name, path in modules().items()
        if package(name) not in MAY_USE_SQL
        for imported in _imported_names(name, path)
        if imported.split(".")[0] in SQL_LIBRARIES
    )
    assert offenders == []


def cycles(edges: dict[str, frozenset[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in edges:
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, targets = work[-1]
            target = next(targets, None)
            if target is not None:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(edges[target]))))
                elif target in on_stack:
                    low[node] = min(low[node], index[target])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_module_imports_itself_back_through_others() -> None:
    assert cycles(graph()) == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    edges = {"a": frozenset({"b"}), "b": frozenset({"c"}), "c": frozenset({"a"}), "d": frozenset({"a"})}
    assert cycles(edges) == [["a", "b", "c"]]
