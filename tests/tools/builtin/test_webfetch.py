from __future__ import annotations

import asyncio
import base64
import re
import time
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from agentforge.tools.base import ToolError
from agentforge.tools.builtin.webfetch import (
    ACCEPT,
    BROWSER_USER_AGENT,
    MAX_RESPONSE_BYTES,
    PLAIN_USER_AGENT,
    WebFetchTool,
)
from tests.tools.builtin.web_server import IMAGE_BYTES, SeenRequest, WebServer, respond, web_server
from tests.tools.harness import Harness

PAGE = b"""<!doctype html><html><head><title>Guide</title>
<style>body { color: red }</style><script>alert("no")</script></head>
<body><h1>Install</h1><p>Run <code>pip install forge</code> and <a href="/docs">read the docs</a>.</p>
<ul><li>fast</li><li>small</li></ul></body></html>"""


async def _slow(_request: SeenRequest, writer: asyncio.StreamWriter) -> None:
    await asyncio.Event().wait()  # never answers


async def _challenge(request: SeenRequest, writer: asyncio.StreamWriter) -> None:
    if request.headers.get("user-agent") == BROWSER_USER_AGENT:
        await respond(403, b"checking your browser", "text/html", **{"cf-mitigated": "challenge"})(
            request, writer
        )
    else:
        await respond(200, b"welcome, bot", "text/plain")(request, writer)


@pytest_asyncio.fixture
async def web() -> AsyncIterator[WebServer]:
    async with web_server() as server:
        server.routes.update(
            {
                "/page": respond(200, PAGE, "text/html; charset=utf-8"),
                "/notes.txt": respond(
                    200, "caf\u00e9 notes".encode("latin-1"), "text/plain; charset=latin-1"
                ),
                "/logo.png": respond(200, IMAGE_BYTES, "image/png"),
                "/drawing.svg": respond(200, b"<svg></svg>", "image/svg+xml"),
                "/moved": respond(302, b"", "text/plain", location="/page"),
                "/declared-huge": respond(200, b"", "text/plain", **{"content-length": str(10**9)}),
                "/endless": server.endless,
                "/slow": _slow,
                "/challenge": _challenge,
            }
        )
        yield server


async def test_html_becomes_markdown_by_default(harness: Harness, web: WebServer) -> None:
    url = web.url("/page")
    result = await harness.run(WebFetchTool(), url=url)
    assert "# Install" in result.output
    assert "Run `pip install forge` and [read the docs](/docs)." in result.output
    assert "- fast\n- small" in result.output
    assert "alert" not in result.output and "color: red" not in result.output
    assert result.title == f"{url} (text/html; charset=utf-8)"
    [request] = web.requests
    assert request.headers["accept"] == ACCEPT["markdown"]
    assert request.headers["user-agent"] == BROWSER_USER_AGENT
    [ask] = harness.asked("webfetch")
    assert ask.patterns == [url] and ask.always == ["*"]


async def test_text_format_keeps_only_visible_text(harness: Harness, web: WebServer) -> None:
    result = await harness.run(WebFetchTool(), url=web.url("/page"), format="text")
    assert result.output == "Guide\nInstall\nRun pip install forge and read the docs.\nfast\nsmall"
    assert web.requests[0].headers["accept"] == ACCEPT["text"]


async def test_html_format_returns_the_page_as_is(harness: Harness, web: WebServer) -> None:
    result = await harness.run(WebFetchTool(), url=web.url("/page"), format="html")
    assert result.output == PAGE.decode()
    assert web.requests[0].headers["accept"] == ACCEPT["html"]


async def test_non_html_text_is_decoded_with_its_charset_and_not_converted(
    harness: Harness, web: WebServer
) -> None:
    result = await harness.run(WebFetchTool(), url=web.url("/notes.txt"))
    assert result.output == "caf\u00e9 notes"


async def test_images_come_back_as_attachments_but_svg_as_text(harness: Harness, web: WebServer) -> None:
    image = await harness.run(WebFetchTool(), url=web.url("/logo.png"))
    assert image.output == "Image fetched successfully"
    [attachment] = image.attachments
    assert attachment.mime == "image/png"
    assert attachment.url == "data:image/png;base64," + base64.b64encode(IMAGE_BYTES).decode()
    svg = await harness.run(WebFetchTool(), url=web.url("/drawing.svg"))
    assert svg.output == "<svg></svg>" and svg.attachments == []


async def test_redirects_are_followed(harness: Harness, web: WebServer) -> None:
    result = await harness.run(WebFetchTool(), url=web.url("/moved"))
    assert "# Install" in result.output
    assert [r.path for r in web.requests] == ["/moved", "/page"]


async def test_a_bot_challenge_is_retried_with_a_plain_user_agent(harness: Harness, web: WebServer) -> None:
    result = await harness.run(WebFetchTool(), url=web.url("/challenge"))
    assert result.output == "welcome, bot"
    assert [r.headers["user-agent"] for r in web.requests] == [BROWSER_USER_AGENT, PLAIN_USER_AGENT]


async def test_http_errors_name_the_status(harness: Harness, web: WebServer) -> None:
    with pytest.raises(ToolError, match="Request failed with status code: 404"):
        await harness.run(WebFetchTool(), url=web.url("/nowhere"))


async def test_responses_over_the_limit_are_refused(harness: Harness, web: WebServer) -> None:
    with pytest.raises(ToolError, match=r"Response too large \(exceeds 5 MB limit\)"):
        await harness.run(WebFetchTool(), url=web.url("/declared-huge"))
    with pytest.raises(ToolError, match=r"Response too large \(exceeds 5 MB limit\)"):
        await harness.run(WebFetchTool(), url=web.url("/endless"))
    # The body was not read to its end: the client hung up soon after the limit.
    await asyncio.wait_for(web.endless_ended.wait(), 5)
    assert MAX_RESPONSE_BYTES < web.streamed_bytes < 4 * MAX_RESPONSE_BYTES


async def test_timeouts_end_the_request(harness: Harness, web: WebServer) -> None:
    started = time.monotonic()
    with pytest.raises(ToolError, match=r"Request timed out after 0\.2 seconds"):
        await harness.run(WebFetchTool(), url=web.url("/slow"), timeout=0.2)
    assert time.monotonic() - started < 2


@pytest.mark.parametrize("url", ["file:///etc/passwd", "ftp://example.com/x", "example.com", "http://"])
async def test_only_http_and_https_urls_are_fetched(harness: Harness, url: str) -> None:
    with pytest.raises(ToolError, match="URL must start with http:// or https://"):
        await harness.run(WebFetchTool(), url=url)
    assert harness.asks == []


async def test_format_and_timeout_are_validated(harness: Harness) -> None:
    with pytest.raises(ToolError, match="invalid arguments"):
        await harness.run(WebFetchTool(), url="http://127.0.0.1/", format="pdf")
    with pytest.raises(ToolError, match="invalid arguments"):
        await harness.run(WebFetchTool(), url="http://127.0.0.1/", timeout=0)


async def test_unreachable_hosts_are_reported(harness: Harness) -> None:
    with pytest.raises(ToolError, match=re.escape("Request to http://127.0.0.1:1/ failed")):
        await harness.run(WebFetchTool(), url="http://127.0.0.1:1/")
