"""Headless Chromium (the system's, never a downloaded one) driven by Playwright, for console tests.

Every page records what would mean the console is broken or unsafe: uncaught errors, console
errors (CSP violations among them) and dialogs opened by script (an `alert` from an XSS payload).
A test expecting a `confirm()` names its message and answer in `Watched.answers`; any other dialog
is dismissed and recorded.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from playwright.async_api import Browser, ConsoleMessage, Dialog, Page, ViewportSize, async_playwright

REPOSITORY = Path(__file__).resolve().parents[2]
SCREENSHOTS = REPOSITORY / "docs" / "screenshots"
DESKTOP: ViewportSize = {"width": 1280, "height": 800}
MOBILE: ViewportSize = {"width": 375, "height": 740}


def chromium_path() -> str:
    found = os.environ.get("AGENTFORGE_CHROMIUM") or shutil.which("chromium")
    if found is None:
        pytest.skip("no system Chromium (apt-get install -y chromium; .ci/run installs it)")
    return found


@dataclass
class Watched:
    page: Page
    errors: list[str] = field(default_factory=list)
    dialogs: list[str] = field(default_factory=list)
    # confirm() messages the test expects, with the answer to give (True accepts); each is used once.
    answers: dict[str, bool] = field(default_factory=dict)
    answered: list[str] = field(default_factory=list)


@contextlib.asynccontextmanager
async def chromium() -> AsyncIterator[Browser]:
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(
            executable_path=chromium_path(), args=["--no-sandbox", "--disable-gpu"]
        )
        try:
            yield browser
        finally:
            await browser.close()


@contextlib.asynccontextmanager
async def open_page(
    browser: Browser, base_url: str, *, mobile: bool = False, dark: bool = False
) -> AsyncIterator[Watched]:
    context = await browser.new_context(
        base_url=base_url,
        viewport=MOBILE if mobile else DESKTOP,
        color_scheme="dark" if dark else "light",
        is_mobile=mobile,
        has_touch=mobile,
    )
    page = await context.new_page()
    watched = Watched(page)
    page.on("pageerror", lambda exc: watched.errors.append(f"pageerror: {exc}"))

    def on_console(msg: ConsoleMessage) -> None:
        if msg.type == "error":
            watched.errors.append(f"console: {msg.text} at {msg.location}")

    page.on("console", on_console)

    async def on_dialog(dialog: Dialog) -> None:
        if dialog.type == "confirm" and dialog.message in watched.answers:
            watched.answered.append(dialog.message)
            accept = watched.answers.pop(dialog.message)
            await (dialog.accept() if accept else dialog.dismiss())
            return
        watched.dialogs.append(dialog.message)
        await dialog.dismiss()

    page.on("dialog", on_dialog)
    try:
        yield watched
    finally:
        await context.close()


async def screenshot(page: Page, name: str) -> Path | None:
    """Renders the page as a PNG; saved as `docs/screenshots/<name>.png` only when
    `AGENTFORGE_SCREENSHOTS=1`, so an ordinary test run leaves the checkout clean."""
    image = await page.screenshot()
    assert image.startswith(b"\x89PNG"), "Chromium rendered no image"
    if os.environ.get("AGENTFORGE_SCREENSHOTS") != "1":
        return None
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    path.write_bytes(image)
    return path
