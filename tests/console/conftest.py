"""One Chromium for a console test module, and the fakes its tests use, on the module's event loop.

Launching Chromium (and Playwright's driver) takes about a second; each test still gets a browser
context of its own (browser.py `open_page`), so nothing a page stores outlives its test.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest_asyncio
from playwright.async_api import Browser

from tests.console.browser import chromium
from tests.fakes.openai_server import FakeOpenAI


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def browser() -> AsyncIterator[Browser]:
    async with chromium() as shared:
        yield shared


@pytest_asyncio.fixture(loop_scope="module")
async def fake_openai() -> AsyncIterator[FakeOpenAI]:
    """The fake provider of tests/fakes/fixtures.py, started on the module's loop (the tests run
    there, and so must the server they talk to)."""
    async with FakeOpenAI() as fake:
        yield fake
