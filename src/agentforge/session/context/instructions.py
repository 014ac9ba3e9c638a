"""Instruction files for the system prompt (KERNEL 7.8): AGENTS.md and friends, the global AGENTS.md,
and the config's `instructions` entries.

Found anew for every model call (a file added mid-session counts from the next call on; see
`surroundings.py` for how a model call learns cheaply that nothing changed), read in a worker thread, and
cached per file by modification time and size so an unchanged file is not read again.
"""

from __future__ import annotations

import asyncio
import glob
import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from agentforge.tools.confinement import WorkspaceBoundary

log = logging.getLogger(__name__)

# Looked for in this order; the first name found anywhere up the tree wins, with all its copies.
PROJECT_FILES: Final = ("AGENTS.md", "CLAUDE.md", "CONTEXT.md")
GLOBAL_FILE: Final = "AGENTS.md"
_CACHE_SIZE: Final = 256


@dataclass(frozen=True, slots=True)
class InstructionSources:
    """`directory` is the session's; the search up the tree stops at `workspace`. `patterns` are the
    config's `instructions` entries: globs relative to the workspace, or absolute. A confined tenant's
    `boundary` keeps every file outside it (absolute patterns, symlinks, the server user's global
    AGENTS.md) out of its prompt."""

    directory: Path
    workspace: Path
    config_dir: Path
    patterns: tuple[str, ...] = ()
    boundary: WorkspaceBoundary | None = None


def configured_patterns(value: Any) -> tuple[str, ...]:
    """The config's `instructions` value (a list of paths or globs) as patterns."""
    if value is None:
        return ()
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list):
        log.warning("config `instructions` must be a list of paths or globs; ignoring %r", value)
        return ()
    return tuple(item for item in items if isinstance(item, str) and item.strip())


async def instructions(sources: InstructionSources) -> list[str]:
    """Each found file as "Instructions from: <path>\\n<content>", project files first."""
    return await asyncio.to_thread(read_instructions, sources)


def read_instructions(sources: InstructionSources) -> list[str]:
    """`instructions`, blocking: call it from a thread."""
    return instruction_texts(instruction_paths(sources))


def instruction_texts(paths: Iterable[Path]) -> list[str]:
    """The prompt text of each of these files that has content. Blocking: call from a thread."""
    texts: list[str] = []
    for path in paths:
        content = _CACHE.read(path)
        if content and content.strip():
            texts.append(f"Instructions from: {path}\n{content}")
    return texts


def instruction_paths(sources: InstructionSources) -> list[Path]:
    """Existing instruction files in prompt order, each once. Blocking: call from a thread."""
    found = [
        *_project_files(sources.directory, sources.workspace),
        *_existing([sources.config_dir / GLOBAL_FILE]),
        *_configured_files(sources.patterns, sources.workspace),
    ]
    return [path for path in _unique(found) if _inside(sources.boundary, path)]


def _inside(boundary: WorkspaceBoundary | None, path: Path) -> bool:
    if boundary is None or boundary.contains(path.resolve()):
        return True
    log.info("Skipping instruction file %s: outside the tenant's workspace", path)
    return False


def _project_files(directory: Path, workspace: Path) -> list[Path]:
    """Every copy of the first instruction file name found from `directory` up to the workspace root
    (only `directory` itself when it lies outside the workspace), nearest first."""
    chain = search_chain(directory, workspace)
    for name in PROJECT_FILES:
        found = _existing(folder / name for folder in chain)
        if found:
            return found
    return []


def search_chain(directory: Path, workspace: Path) -> list[Path]:
    """The folders searched for project files: `directory` up to the workspace root (only `directory`
    when it lies outside the workspace)."""
    if not directory.is_relative_to(workspace):
        return [directory]
    chain = [directory]
    while chain[-1] != workspace and chain[-1].parent != chain[-1]:
        chain.append(chain[-1].parent)
    return chain


def _configured_files(patterns: Sequence[str], workspace: Path) -> list[Path]:
    files: list[Path] = []
    for pattern in patterns:
        if pattern.startswith(("http://", "https://")):
            _skip_url(pattern)
            continue
        expanded = os.path.expanduser(pattern)
        if os.path.isabs(expanded):
            matches = [Path(m) for m in glob.glob(expanded, recursive=True)]
        else:
            matches = [workspace / m for m in glob.glob(expanded, root_dir=workspace, recursive=True)]
        files.extend(_existing(sorted(matches)))
    return files


_skipped_urls: set[str] = set()


def _skip_url(url: str) -> None:
    if url not in _skipped_urls:  # once per URL, not once per model call
        _skipped_urls.add(url)
        log.info("Skipping instructions URL %s: only local files are read", url)


def _existing(paths: Iterable[Path]) -> list[Path]:
    return [path for path in paths if path.is_file()]


def _unique(paths: Iterable[Path]) -> list[Path]:
    seen: set[Path] = set()
    unique: list[Path] = []
    for path in paths:
        key = path.resolve()
        if key not in seen:
            seen.add(key)
            unique.append(path)
    return unique


class _FileCache:
    """File contents by path, valid while the file's modification time and size are unchanged."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._entries: OrderedDict[Path, tuple[tuple[int, int], str]] = OrderedDict()
        self._lock = threading.Lock()  # readers run in worker threads

    def read(self, path: Path) -> str | None:
        try:
            stat = path.stat()
        except OSError:
            return None
        version = (stat.st_mtime_ns, stat.st_size)
        with self._lock:
            cached = self._entries.get(path)
            if cached is not None and cached[0] == version:
                self._entries.move_to_end(path)
                return cached[1]
        try:
            content = path.read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            log.warning("Cannot read instructions file %s: %s", path, exc)
            return None
        with self._lock:
            self._entries[path] = (version, content)
            self._entries.move_to_end(path)
            while len(self._entries) > self._size:
                self._entries.popitem(last=False)
        return content


_CACHE = _FileCache(_CACHE_SIZE)
