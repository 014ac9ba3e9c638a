"""The `webfetch` tool (KERNEL 7.7): fetch a URL as Markdown, text or HTML; images as attachments."""

from __future__ import annotations

import asyncio
import base64
import urllib.parse
from dataclasses import dataclass
from typing import Literal

import httpx2
from pydantic import Field

from agentforge.tools.base import Attachment, PermissionRequest, Tool, ToolContext, ToolError, ToolResult
from agentforge.tools.params import ToolParams
from agentforge.tools.webpage import html_to_markdown, html_to_text, is_html
from agentforge.version import __version__

MAX_RESPONSE_BYTES = 5 * 1024 * 1024
MAX_RESPONSE_LABEL = "5 MB"
DEFAULT_TIMEOUT_SECONDS = 30.0
MAX_TIMEOUT_SECONDS = 120.0

BROWSER_USER_AGENT = (
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) "
    "Chrome/143.0.0.0 Safari/537.36"
)
# Sites behind a Cloudflare challenge refuse browser-looking clients that run no JavaScript, but
# often let an honest bot through.
PLAIN_USER_AGENT = f"agentforge/{__version__}"

Format = Literal["text", "markdown", "html"]

ACCEPT: dict[Format, str] = {
    "markdown": "text/markdown;q=1.0, text/x-markdown;q=0.9, text/plain;q=0.8, text/html;q=0.7, */*;q=0.1",
    "text": "text/plain;q=1.0, text/markdown;q=0.9, text/html;q=0.8, */*;q=0.1",
    "html": "text/html;q=1.0, application/xhtml+xml;q=0.9, text/plain;q=0.8, text/markdown;q=0.7, */*;q=0.1",
}

# Image types a model can look at (an SVG is markup, returned as text).
_NOT_VIEWABLE_IMAGES = frozenset({"image/svg+xml", "image/vnd.fastbidsheet"})

DESCRIPTION = """Fetches content from a URL and returns it in the requested format.

Usage:
- The URL must be a fully-formed http:// or https:// URL.
- format is "markdown" (default), "text" or "html"; HTML pages are converted to Markdown or plain \
text accordingly.
- Images are returned as attachments you can see.
- Responses larger than 5 MB are refused.
- timeout is in seconds (default 30, at most 120).
- This tool is read-only: it does not modify any files.
- Prefer a more specific tool for searching when one is available."""


class WebFetchParams(ToolParams):
    url: str = Field(description="The URL to fetch content from")
    format: Format = Field(
        default="markdown",
        description='The format to return the content in: "text", "markdown" or "html" (default markdown)',
    )
    timeout: float | None = Field(
        default=None, gt=0, description="Optional timeout in seconds (default 30, max 120)"
    )


@dataclass(frozen=True, slots=True)
class _Fetched:
    body: bytes
    content_type: str  # the header as sent
    charset: str | None

    @property
    def mime(self) -> str:
        return self.content_type.split(";", 1)[0].strip().lower()

    def text(self) -> str:
        try:
            return self.body.decode(self.charset or "utf-8", errors="replace")
        except LookupError:  # an unknown charset name
            return self.body.decode("utf-8", errors="replace")


class WebFetchTool(Tool[WebFetchParams]):
    id = "webfetch"
    changes_files = False  # it fetches a page: no file changes
    description = DESCRIPTION
    parameters = WebFetchParams

    async def execute(self, args: WebFetchParams, ctx: ToolContext) -> ToolResult:
        _require_http_url(args.url)
        timeout = min(args.timeout or DEFAULT_TIMEOUT_SECONDS, MAX_TIMEOUT_SECONDS)
        await ctx.ask(
            PermissionRequest(
                permission="webfetch",
                patterns=[args.url],
                always=["*"],
                metadata={"url": args.url, "format": args.format, "timeout": timeout},
            )
        )
        try:
            async with asyncio.timeout(timeout):
                fetched = await _fetch(args.url, args.format, timeout)
        except TimeoutError:
            raise ToolError(f"Request timed out after {timeout:g} seconds: {args.url}") from None
        title = f"{args.url} ({fetched.content_type})"
        if fetched.mime.startswith("image/") and fetched.mime not in _NOT_VIEWABLE_IMAGES:
            encoded = base64.b64encode(fetched.body).decode("ascii")
            return ToolResult(
                title=title,
                output="Image fetched successfully",
                attachments=[Attachment(mime=fetched.mime, url=f"data:{fetched.mime};base64,{encoded}")],
            )
        output = await asyncio.to_thread(_render, fetched, args.format)
        return ToolResult(title=title, output=output)


def _require_http_url(url: str) -> None:
    parts = urllib.parse.urlsplit(url)
    if parts.scheme.lower() not in ("http", "https") or not parts.netloc:
        raise ToolError(f"URL must start with http:// or https:// and name a host, got: {url}")


async def _fetch(url: str, fmt: Format, timeout: float) -> _Fetched:
    headers = {"Accept": ACCEPT[fmt], "Accept-Language": "en-US,en;q=0.9"}
    async with httpx2.AsyncClient(follow_redirects=True, timeout=timeout) as client:
        try:
            fetched = await _get(client, url, {**headers, "User-Agent": BROWSER_USER_AGENT})
            if fetched is None:
                fetched = await _get(client, url, {**headers, "User-Agent": PLAIN_USER_AGENT})
        except httpx2.TimeoutException:
            raise TimeoutError from None
        except httpx2.HTTPError as error:
            raise ToolError(f"Request to {url} failed: {str(error) or type(error).__name__}") from None
    if fetched is None:
        raise ToolError("Request failed with status code: 403 (blocked by a bot challenge)")
    return fetched


async def _get(client: httpx2.AsyncClient, url: str, headers: dict[str, str]) -> _Fetched | None:
    """The response body, read up to the size limit; None for a Cloudflare challenge."""
    async with client.stream("GET", url, headers=headers) as response:
        if response.status_code == 403 and response.headers.get("cf-mitigated") == "challenge":
            return None
        if response.status_code >= 400:
            raise ToolError(f"Request failed with status code: {response.status_code}")
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > MAX_RESPONSE_BYTES:
            raise _too_large()
        body = bytearray()
        async for chunk in response.aiter_bytes():
            body.extend(chunk)
            if len(body) > MAX_RESPONSE_BYTES:
                raise _too_large()  # leaving the block closes the stream: the rest is never read
        return _Fetched(
            body=bytes(body),
            content_type=response.headers.get("content-type", ""),
            charset=response.charset_encoding,
        )


def _too_large() -> ToolError:
    return ToolError(f"Response too large (exceeds {MAX_RESPONSE_LABEL} limit)")


def _render(fetched: _Fetched, fmt: Format) -> str:
    text = fetched.text()
    if fmt == "html" or not is_html(fetched.mime):
        return text
    if fmt == "markdown":
        return html_to_markdown(text)
    return html_to_text(text)
