"""MCP servers as tool sources, against real servers written with the `mcp` SDK
(tests/tools/mcp_servers/echo_server.py): over stdio as a subprocess, and over streamable HTTP
served in-process by uvicorn.

Every test in this module shares one event loop so the stdio server most tests use starts once.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import socket
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import uvicorn
from starlette.types import ASGIApp, Receive, Scope, Send

from agentforge.tools.base import PermissionRequest, Tool, ToolError
from agentforge.tools.confinement import ProcessEnv
from agentforge.tools.mcp import McpManager
from agentforge.tools.mcp_tool import McpTool
from agentforge.tools.truncation import TruncationLimits
from tests.tools.harness import Harness, text_of
from tests.tools.mcp_servers.echo_server import ARCHIVE_BYTES, PNG_BYTES, build_server

pytestmark = pytest.mark.asyncio(loop_scope="module")

ECHO_SERVER = Path(__file__).parent / "mcp_servers" / "echo_server.py"
ECHO_COMMAND = [sys.executable, str(ECHO_SERVER)]
CALL_TIMEOUT = 1.0
TOOL_NAMES = {
    "echo_echo",
    "echo_picture",
    "echo_archive",
    "echo_fail",
    "echo_slow",
    "echo_exit",
    "echo_whereami",
    "echo_get_weather",
}


def local(**extra: Any) -> dict[str, Any]:
    return {"type": "local", "command": ECHO_COMMAND, **extra}


def tool_named(manager: McpManager, name: str) -> Tool[Any]:
    return next(tool for tool in manager.tools() if tool.id == name)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def echo(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[McpManager]:
    workspace = tmp_path_factory.mktemp("mcp")
    config = local(call_timeout=CALL_TIMEOUT, environment={"ECHO_GREETING": "hej"})
    manager = McpManager({"echo": config}, directory=workspace)
    await manager.start()
    yield manager
    await manager.close()


async def wait_until(condition: Callable[[], bool], *, timeout: float = 10.0) -> None:
    async with asyncio.timeout(timeout):
        while True:
            if condition():
                return
            await asyncio.sleep(0.02)


# --- the stdio server ---------------------------------------------------------------------------


async def test_lists_the_servers_tools_under_sanitised_keys(echo: McpManager) -> None:
    assert echo.status() == {"echo": {"status": "connected"}}
    assert {tool.id for tool in echo.tools()} == TOOL_NAMES
    tool = tool_named(echo, "echo_echo")
    assert tool.description == "Repeat the text back."
    schema = tool.json_schema()
    assert schema["type"] == "object"
    assert schema["required"] == ["text"]
    assert set(schema["properties"]) == {"text", "times"}
    assert "title" not in schema
    weather = tool_named(echo, "echo_get_weather")
    assert isinstance(weather, McpTool)
    assert weather.remote_name == "get.weather"


async def test_a_call_returns_the_text_and_asks_permission_under_the_tool_key(
    echo: McpManager, harness: Harness
) -> None:
    result = await harness.run(tool_named(echo, "echo_echo"), text="hi", times=2)
    assert result.output == "echo: hi echo: hi"
    assert result.title == ""
    assert result.attachments == []
    assert harness.asks == [PermissionRequest(permission="echo_echo", patterns=["*"], always=["*"])]
    weather = await harness.run(tool_named(echo, "echo_get_weather"), city="Oslo")
    assert weather.output == "sunny in Oslo"


async def test_the_server_runs_in_the_workspace_with_only_the_configured_environment(
    echo: McpManager, harness: Harness
) -> None:
    result = await harness.run(tool_named(echo, "echo_whereami"), variable="ECHO_GREETING")
    workspace, greeting = result.output.rsplit(" ", 1)
    assert workspace == str(echo.directory)
    assert greeting == "ECHO_GREETING=hej"
    # Our environment is not inherited wholesale: pytest had set this one when the fixture started the server.
    leaked = await harness.run(tool_named(echo, "echo_whereami"), variable="PYTEST_CURRENT_TEST")
    assert leaked.output.endswith("PYTEST_CURRENT_TEST=<unset>")


async def test_a_tenants_server_gets_its_home_and_declared_variables_never_the_servers(
    harness: Harness, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FORGE_TEST_SERVER_SECRET", "hunter2")
    tenant_env = ProcessEnv(
        inherit=False, home=tmp_path, tmpdir=tmp_path / "tmp", declared={"REGION": "eu-1"}
    )
    manager = McpManager(
        {"echo": local(environment={"ECHO_GREETING": "hej"})}, directory=tmp_path, env=tenant_env
    )
    await manager.start()
    try:
        whereami = tool_named(manager, "echo_whereami")
        seen = {}
        for variable in ("HOME", "TMPDIR", "REGION", "ECHO_GREETING", "FORGE_TEST_SERVER_SECRET"):
            result = await harness.run(whereami, variable=variable)
            seen[variable] = result.output.rsplit("=", 1)[1]
        assert seen == {
            "HOME": str(tmp_path),
            "TMPDIR": str(tmp_path / "tmp"),
            "REGION": "eu-1",
            "ECHO_GREETING": "hej",
            "FORGE_TEST_SERVER_SECRET": "<unset>",
        }
    finally:
        await manager.close()


async def test_a_refused_permission_never_reaches_the_server(echo: McpManager, harness: Harness) -> None:
    async def refuse(request: PermissionRequest) -> None:
        raise ToolError(f"{request.permission} is not allowed")

    ctx = dataclasses.replace(harness.context(), ask=refuse)
    with pytest.raises(ToolError, match="echo_slow is not allowed"):
        await tool_named(echo, "echo_slow").execute({"seconds": 0, "marker": "/nonexistent/x"}, ctx)


async def test_an_image_result_becomes_an_attachment(echo: McpManager, harness: Harness) -> None:
    result = await harness.run(tool_named(echo, "echo_picture"))
    assert result.output == ""
    [image] = result.attachments
    assert image.mime == "image/png"
    assert image.url == "data:image/png;base64," + base64.b64encode(PNG_BYTES).decode()


async def test_an_embedded_blob_becomes_an_attachment_next_to_the_text(
    echo: McpManager, harness: Harness
) -> None:
    result = await harness.run(tool_named(echo, "echo_archive"))
    assert result.output == "here is the archive"
    [archive] = result.attachments
    assert archive.mime == "application/zip"
    assert archive.filename == "report.zip"
    assert archive.url == "data:application/zip;base64," + base64.b64encode(ARCHIVE_BYTES).decode()


async def test_an_is_error_result_is_a_tool_error_with_its_text(echo: McpManager, harness: Harness) -> None:
    with pytest.raises(ToolError) as raised:
        await harness.run(tool_named(echo, "echo_fail"), reason="the disk is full")
    assert "the disk is full" in str(raised.value)


async def test_arguments_are_checked_against_the_servers_schema(echo: McpManager, harness: Harness) -> None:
    with pytest.raises(ToolError) as raised:
        await harness.run(tool_named(echo, "echo_echo"), times="many")
    message = str(raised.value)
    assert message.startswith("The echo_echo tool was called with invalid arguments: ")
    assert "`text` is required" in message
    assert "`times` is invalid: 'many' is not of type 'integer'" in message
    assert message.endswith("Please rewrite the input so it satisfies the expected schema.")
    assert harness.asks == []  # rejected before anything ran


async def test_long_output_is_truncated_like_any_tool(echo: McpManager, harness: Harness) -> None:
    harness.limits = TruncationLimits(max_lines=2000, max_bytes=200)
    result = await harness.run(tool_named(echo, "echo_echo"), text="x" * 50, times=20)
    assert result.metadata["truncated"] is True
    assert "x" * 50 in text_of(result.metadata["outputPath"])  # the full output was kept
    assert len(result.output) < 1000


async def test_cancelling_the_call_cancels_the_request_on_the_server(
    echo: McpManager, harness: Harness, tmp_path: Path
) -> None:
    marker = tmp_path / "slow.marker"
    call = asyncio.create_task(harness.run(tool_named(echo, "echo_slow"), seconds=30, marker=str(marker)))
    await wait_until(lambda: marker.exists())
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    await wait_until(lambda: text_of(marker) == "cancelled")
    # The connection is still usable after a cancelled request.
    assert (await harness.run(tool_named(echo, "echo_echo"), text="still here")).output == "echo: still here"


async def test_a_call_that_outlives_the_call_timeout_is_cancelled_with_a_clear_error(
    echo: McpManager, harness: Harness, tmp_path: Path
) -> None:
    marker = tmp_path / "slow.marker"
    with pytest.raises(ToolError) as raised:
        await harness.run(tool_named(echo, "echo_slow"), seconds=30, marker=str(marker))
    assert str(raised.value) == (
        "MCP server echo did not answer the slow call within 1s (the call was cancelled)"
    )
    await wait_until(lambda: text_of(marker) == "cancelled")
    assert echo.status() == {"echo": {"status": "connected"}}


# --- failures -----------------------------------------------------------------------------------


async def test_a_server_that_fails_to_start_is_reported_while_the_others_work(
    harness: Harness, tmp_path: Path
) -> None:
    config = {
        "broken": {"type": "local", "command": [sys.executable, str(tmp_path / "missing_server.py")]},
        "ghost": {"type": "local", "command": ["agentforge-no-such-command"]},
        "off": local(enabled=False),
        "typo": {"type": "local", "comand": ECHO_COMMAND},
        "echo": local(),
    }
    manager = McpManager(config, directory=tmp_path)
    await manager.start()
    try:
        status = manager.status()
        assert status["echo"] == {"status": "connected"}
        assert status["off"] == {"status": "disabled"}
        assert status["broken"]["status"] == "failed"
        assert "missing_server.py" in status["broken"]["error"]  # the server's own stderr says why
        assert "No such file or directory" in status["broken"]["error"]
        assert status["ghost"] == {
            "status": "failed",
            "error": "command not found: agentforge-no-such-command",
        }
        assert status["typo"]["status"] == "failed"
        assert "'typo'" in status["typo"]["error"]
        assert "command: Field required" in status["typo"]["error"]
        assert {tool.id for tool in manager.tools()} == TOOL_NAMES
        assert (await harness.run(tool_named(manager, "echo_echo"), text="ok")).output == "echo: ok"
    finally:
        await manager.close()


async def test_a_server_that_does_not_answer_in_time_fails_with_the_timeout(tmp_path: Path) -> None:
    silent = tmp_path / "silent.py"
    silent.write_text("import sys\nsys.stdin.read()\n")  # never answers, but leaves when stdin closes
    manager = McpManager(
        {"silent": {"type": "local", "command": [sys.executable, str(silent)], "timeout": 0.5}},
        directory=tmp_path,
    )
    started = time.monotonic()
    await manager.start()
    try:
        assert time.monotonic() - started < 10
        assert manager.status() == {"silent": {"status": "failed", "error": "no answer within 0.5s"}}
        assert manager.tools() == []
    finally:
        await manager.close()


async def test_a_tool_of_a_server_that_exited_gives_a_clear_error(harness: Harness, tmp_path: Path) -> None:
    manager = McpManager({"echo": local()}, directory=tmp_path)
    await manager.start()
    try:
        with pytest.raises(ToolError) as died:
            await harness.run(tool_named(manager, "echo_exit"))
        message = str(died.value)
        assert message.startswith("MCP server echo is not connected: ")
        assert "exiting on request" in message  # its last words on stderr
        assert "mcp.echo" in message
        status = manager.status()["echo"]
        assert status["status"] == "failed"
        async with asyncio.timeout(5):  # later calls fail at once instead of hanging
            with pytest.raises(ToolError, match=r"^MCP server echo is not connected: "):
                await harness.run(tool_named(manager, "echo_echo"), text="anyone?")
    finally:
        await manager.close()


async def test_tools_of_a_closed_manager_give_a_clear_error(harness: Harness, tmp_path: Path) -> None:
    manager = McpManager({"echo": local()}, directory=tmp_path)
    await manager.start()
    echo_tool = tool_named(manager, "echo_echo")
    await manager.close()
    with pytest.raises(ToolError, match=r"^MCP server echo is not connected"):
        await harness.run(echo_tool, text="late")


# --- streamable HTTP ----------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def recording_headers(app: ASGIApp, seen: list[dict[str, str]]) -> ASGIApp:
    async def recorded(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            seen.append({key.decode(): value.decode() for key, value in scope["headers"]})
        await app(scope, receive, send)

    return recorded


async def serve_http(app: ASGIApp, port: int) -> tuple[uvicorn.Server, asyncio.Task[None]]:
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    await wait_until(lambda: server.started)
    return server, task


async def stop_http(server: uvicorn.Server, task: Awaitable[None]) -> None:
    server.should_exit = True
    await task


async def test_a_streamable_http_server_works_with_its_headers(harness: Harness, tmp_path: Path) -> None:
    seen: list[dict[str, str]] = []
    port = free_port()
    server, serving = await serve_http(recording_headers(build_server().streamable_http_app(), seen), port)
    config = {"type": "remote", "url": f"http://127.0.0.1:{port}/mcp", "headers": {"X-Api-Key": "k-123"}}
    manager = McpManager({"web": config}, directory=tmp_path)
    try:
        await manager.start()
        assert manager.status() == {"web": {"status": "connected"}}
        assert "web_echo" in {tool.id for tool in manager.tools()}
        result = await harness.run(tool_named(manager, "web_echo"), text="over http")
        assert result.output == "echo: over http"
        assert harness.asks[-1].permission == "web_echo"
        assert seen and all(headers.get("x-api-key") == "k-123" for headers in seen)

        await stop_http(server, serving)
        async with asyncio.timeout(10):
            with pytest.raises(ToolError, match=r"^MCP server web is not connected: http://127\.0\.0\.1:"):
                await harness.run(tool_named(manager, "web_echo"), text="anyone?")
        assert manager.status()["web"]["status"] == "failed"
    finally:
        await manager.close()
        await stop_http(server, serving)


async def test_an_unreachable_http_server_is_reported(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}/mcp"
    manager = McpManager({"web": {"type": "remote", "url": url, "timeout": 5}}, directory=tmp_path)
    await manager.start()
    try:
        status = manager.status()["web"]
        assert status["status"] == "failed"
        assert status["error"].startswith(f"{url}: ")
        assert manager.tools() == []
    finally:
        await manager.close()
