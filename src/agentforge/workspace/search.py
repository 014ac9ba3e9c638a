"""Searching the workspace the way opencode's `/find` routes do: text with ripgrep (its JSON matches as
they are, paths relative to the workspace), and paths by a fuzzy query over the files ripgrep lists
(so `.gitignore` applies, and symlinked directories are not followed out of the workspace).

ripgrep walks the tree by path: a directory swapped for a symlink while it walks is followed. A
confined tenant's commands could so race it into another tenant's files, so for a confined tenant
it runs inside the tenant's sandbox (`WorkspaceAccess.program_sandbox`), where those files are not
there to be found."""

from __future__ import annotations

import asyncio
import contextlib
from asyncio.subprocess import Process
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import orjson

from agentforge.tools.builtin.grep import find_ripgrep
from agentforge.tools.sandbox import OWN_PROGRAM_ENV, SandboxRefusedError
from agentforge.workspace import programs
from agentforge.workspace.access import WorkspaceAccess

TEXT_LIMIT = 10
SEARCH_TIMEOUT_SECONDS = 30.0
# What one line of ripgrep's output may hold (a match's line with its JSON around it).
MAX_LINE_BYTES = 4 * 1024 * 1024
# The fuzzy search ranks at most this many paths: a huge tree answers from its first part.
MAX_LISTED_PATHS = 100_000
SKIPPED = (".git",)


class SearchUnavailableError(Exception):
    """ripgrep is not installed."""


class InvalidPatternError(Exception):
    pass


def _ripgrep() -> str:
    found = find_ripgrep()
    if found is None:
        raise SearchUnavailableError("ripgrep (rg) is not installed on the server")
    return found


def _base_argv(access: WorkspaceAccess, base: Path) -> list[str]:
    argv = [_ripgrep(), "--no-config", "--hidden", "--no-messages", "--color=never"]
    for skipped in SKIPPED:
        argv += ["--glob", f"!{skipped}"]
    for inside in access.excluded_inside(base):
        argv += ["--glob", f"!/{inside}"]
    return argv


async def _start_ripgrep(access: WorkspaceAccess, base: Path, args: list[str], *, stderr: int) -> Process:
    """ripgrep started on `base` with `args` after the common ones, in the tenant's sandbox when it
    has one to run in."""
    argv, env = await asyncio.to_thread(_command_line, access, base, args)
    return await asyncio.create_subprocess_exec(
        *argv,
        cwd=base,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=stderr,
        env=env,
        limit=MAX_LINE_BYTES,
    )


def _command_line(
    access: WorkspaceAccess, base: Path, args: list[str]
) -> tuple[list[str], dict[str, str] | None]:
    """ripgrep's command line and environment (None: the server's). Blocking (resolves paths)."""
    argv = [*_base_argv(access, base), *args]
    try:
        sandbox = access.program_sandbox()
        if sandbox is None:
            return argv, None
        reading = sandbox.reading([Path(argv[0]).resolve()])  # the program alone, not its directory
        return reading.command(network=False).wrap(argv, base), dict(OWN_PROGRAM_ENV)
    except SandboxRefusedError as exc:
        reason = f"a confined tenant's workspace is searched in its sandbox: {exc}"
        raise SearchUnavailableError(reason) from None


async def find_text(access: WorkspaceAccess, pattern: str, limit: int = TEXT_LIMIT) -> list[dict[str, Any]]:
    """The first `limit` matching lines under the access's base directory: ripgrep's `match` objects
    (path, lines, line_number, absolute_offset, submatches), paths relative to the workspace root."""
    async with programs.turn_of(access.root):
        found, stderr = await _matches(access, pattern, limit)
    # Told by its message rather than the exit status, which a reaped child may not report.
    if not found and b"regex parse error" in stderr:
        raise InvalidPatternError(stderr.decode("utf-8", errors="replace").strip())
    return found


async def _matches(access: WorkspaceAccess, pattern: str, limit: int) -> tuple[list[dict[str, Any]], bytes]:
    base = access.base or access.root
    proc = await _start_ripgrep(
        access, base, ["--json", "--regexp", pattern, "--", "."], stderr=asyncio.subprocess.PIPE
    )
    assert proc.stdout is not None and proc.stderr is not None
    found: list[dict[str, Any]] = []
    try:
        async with _in_time():
            async for line in proc.stdout:
                message = orjson.loads(line)
                if message.get("type") != "match":
                    continue
                data = message["data"]
                relative = access.relative(base / data["path"].get("text", ""))
                data["path"] = {"text": relative}
                found.append(data)
                if len(found) >= limit:
                    break
    except ValueError:  # a line longer than MAX_LINE_BYTES: the matches before it are the answer
        pass
    finally:
        _stop(proc)
        stderr = await proc.stderr.read()
        await proc.wait()
    return found, stderr


async def list_paths(access: WorkspaceAccess) -> list[str]:
    """Every file ripgrep sees under the base directory (relative to it), then the directories
    holding them (ending in "/")."""
    base = access.base or access.root
    files: list[str] = []
    async with programs.turn_of(access.root):
        proc = await _start_ripgrep(access, base, ["--files"], stderr=asyncio.subprocess.DEVNULL)
        assert proc.stdout is not None
        try:
            async with _in_time():
                async for line in proc.stdout:
                    files.append(line.decode("utf-8", errors="replace").rstrip("\n").removeprefix("./"))
                    if len(files) >= MAX_LISTED_PATHS:
                        break
        except ValueError:  # a path longer than MAX_LINE_BYTES: the paths before it are the answer
            pass
        finally:
            _stop(proc)
            await proc.wait()
    directories = sorted({parent for path in files for parent in _parents(path)})
    return sorted(files) + directories


def _stop(proc: Process) -> None:
    """ripgrep stopped when what it found so far is all that is wanted (or it took too long)."""
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()


@contextlib.asynccontextmanager
async def _in_time() -> AsyncIterator[None]:
    """A search that has not ended after SEARCH_TIMEOUT_SECONDS is given up (503): a FIFO where
    ripgrep reads a `.gitignore` would hold it, and its request, forever."""
    try:
        async with asyncio.timeout(SEARCH_TIMEOUT_SECONDS):
            yield
    except TimeoutError:
        raise SearchUnavailableError(f"the search took longer than {SEARCH_TIMEOUT_SECONDS:g} s") from None


def _parents(path: str) -> list[str]:
    parts = path.split("/")[:-1]
    return ["/".join(parts[: i + 1]) + "/" for i in range(len(parts))]


@dataclass(frozen=True, slots=True)
class _Scored:
    score: float
    path: str


def fuzzy_filter(
    paths: Sequence[str],
    query: str,
    *,
    kind: Literal["file", "directory"] | None,
    limit: int,
) -> list[str]:
    """The `limit` paths that best match `query` as a case-insensitive subsequence, best first: a
    match in the file name, in one run, near the start and in a short path ranks higher. An empty
    query keeps the listing order."""
    wanted = [p for p in paths if kind is None or (kind == "directory") == p.endswith("/")]
    if not query:
        return wanted[:limit]
    needle = query.lower()
    scored = [_Scored(score, path) for path in wanted if (score := _score(path.lower(), needle)) is not None]
    scored.sort(key=lambda item: (-item.score, len(item.path), item.path))
    return [item.path for item in scored[:limit]]


def _score(haystack: str, needle: str) -> float | None:
    name_start = haystack.rstrip("/").rfind("/") + 1
    position = -1
    previous = -2
    score = 0.0
    for char in needle:
        position = haystack.find(char, position + 1)
        if position < 0:
            return None
        score += 1.0
        if position == previous + 1:
            score += 2.0  # a run of consecutive characters
        if position >= name_start:
            score += 1.0  # in the file name rather than the directories
        if position == name_start or (position > 0 and haystack[position - 1] in "/_-. "):
            score += 1.5  # at the start of a word
        previous = position
    if needle in haystack[name_start:]:
        score += 3.0 * len(needle)
    return score
