"""The console in real headless Chromium against the real server and the fake provider.

Each test starts its own server (SQLite) and opens its own browser context (nothing shared: storage,
cookies, sessionStorage) in the module's one Chromium (conftest.py: launching it is a second a test),
and drives the page the way a person does: by accessible names. The page's uncaught errors, console
errors (CSP violations included) and script-opened dialogs are collected and must stay empty.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx2
import pytest
from playwright.async_api import Browser, Page, Request, Route, expect

from agentforge.identity.apikeys import mint_api_key
from agentforge.identity.model import ADMIN
from tests.console.browser import Watched, open_page, screenshot
from tests.console.proxy import dropping_proxy
from tests.e2e.harness import EventCollector, Frame, LiveServer, fake_provider_config, start_live_server
from tests.e2e.server_process import ServerProcess, serve_process
from tests.fakes.faults import rate_limited
from tests.fakes.openai_server import FakeOpenAI, Script, call, reply
from tests.session.builders import Conversation
from tests.session.stored import store_conversation
from tests.store.builders import new_session as new_session_row

# One event loop for the module, so every test can use the module's browser.
pytestmark = pytest.mark.asyncio(loop_scope="module")

TIMEOUT_MS = 15_000
# Assertions wait as long as page actions (Playwright's own default, 5 s, is short on a loaded CI machine).
expect.set_options(timeout=TIMEOUT_MS)


@contextlib.asynccontextmanager
async def console(
    browser: Browser, tmp_path: Path, fake: FakeOpenAI, config: dict[str, Any] | None = None, **page: bool
) -> AsyncIterator[tuple[LiveServer, Watched]]:
    """A server and a page of its own (a fresh browser context); on the way out, the page must have
    logged no error."""
    async with (
        start_live_server(tmp_path, fake, config) as live,
        open_page(browser, live.url, **page) as watched,
    ):
        watched.page.set_default_timeout(TIMEOUT_MS)
        yield live, watched
        assert watched.errors == [] and watched.dialogs == []


async def new_session(page: Page) -> None:
    await page.goto("/")
    await page.get_by_role("button", name="New session").click()
    await page.get_by_role("button", name="Create").click()
    await expect(page.get_by_role("textbox", name="Message")).to_be_visible()


async def send(page: Page, text: str) -> None:
    await page.get_by_role("textbox", name="Message").fill(text)
    await page.get_by_role("button", name="Send").click()


def transcript(page: Page) -> Any:
    return page.get_by_role("list", name="Transcript")


async def test_a_prompt_streams_its_reply_as_markdown(
    browser: Browser, tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    gate = asyncio.Event()
    answer = "Here is **bold** text and code:\n\n```python\ndef add(a, b):\n    return a + b\n```\n"
    fake_openai.enqueue(Script().text("Streaming part one. ").pause(gate).text(answer).usage(12, 30).finish())
    async with console(browser, tmp_path, fake_openai) as (_live, watched):
        page = watched.page
        await new_session(page)
        box = page.get_by_role("textbox", name="Message")
        await box.fill("first line")
        await box.press("Shift+Enter")  # a newline, not a send
        await box.press_sequentially("second line")
        assert await box.input_value() == "first line\nsecond line"
        await box.press("Enter")
        # The first half is on screen while the model is still held mid-reply: streamed, not at the end.
        await expect(transcript(page).get_by_text("Streaming part one.")).to_be_visible()
        await expect(page.get_by_role("button", name="Stop")).to_be_visible()
        gate.set()
        await expect(transcript(page).locator("strong", has_text="bold")).to_be_visible()
        keyword = transcript(page).locator("pre code.language-python .hljs-keyword").first
        await expect(keyword).to_have_text("def")  # highlighted
        await expect(transcript(page).get_by_text("12 in · 30 out")).to_be_visible()
        await expect(page.get_by_role("button", name="Stop")).to_have_count(0)
        user = transcript(page).get_by_role("article", name="You")
        await expect(user).to_contain_text("first line")
        assert "first line\\nsecond line" in str(fake_openai.requests[0]["messages"][-1])


def sections(count: int) -> str:
    """Markdown as a model writes it: a paragraph, a list and a fenced code block (with a blank line
    inside), `count` times, each numbered once."""
    return "".join(
        f"Section {n} reads the **input**.\n\n- split it\n- fold it\n\n"
        f"```python\ndef step_{n}():\n\n    return {n}\n```\n\n"
        for n in range(1, count + 1)
    )


async def test_a_long_fast_reply_is_rendered_whole_and_once(
    browser: Browser, tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    """Hundreds of small deltas: every character arrives, nothing is shown twice, whether the part
    is still streaming (rendered block by block) or finished (rendered whole)."""
    held = asyncio.Event()
    first, second = sections(12), sections(24)[len(sections(12)) :]
    fake_openai.enqueue(Script().text(first, chunk_size=3).pause(held).text(second, chunk_size=3).finish())
    async with console(browser, tmp_path, fake_openai) as (_live, watched):
        page = watched.page
        await new_session(page)
        await send(page, "Write a lot")
        markdown = transcript(page).get_by_role("article", name="Assistant").locator(".markdown")
        code = markdown.locator("pre code.language-python")
        await expect(code).to_have_count(12)
        # Mid-part: the closed blocks are kept and only the last is rendered again.
        assert await markdown.locator(".markdown-block").count() > 1
        assert re.findall(r"Section (\d+)", await markdown.inner_text()) == [str(n) for n in range(1, 13)]
        assert await code.nth(11).inner_text() == "def step_12():\n\n    return 12"
        held.set()
        await expect(page.get_by_role("button", name="Stop")).to_have_count(0)
        await expect(code).to_have_count(24)
        await expect(markdown.locator(".markdown-block")).to_have_count(0)  # finished: one render
        assert re.findall(r"Section (\d+)", await markdown.inner_text()) == [str(n) for n in range(1, 25)]
        assert await markdown.locator("li").count() == 48
        assert await markdown.locator("strong").count() == 24


async def test_screenshots_desktop_and_mobile_light_and_dark(
    browser: Browser, tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    """Saved to docs/screenshots/ for reviewers (the README shows one) with AGENTFORGE_SCREENSHOTS=1."""
    fake_openai.enqueue(
        reply("Sure. The **files** here:\n\n```bash\nls -la src/\n```\n\n- `app.py`: the entry point\n"),
    )
    async with start_live_server(tmp_path, fake_openai) as live:
        created = await live.create_session(title="Tour of the repository")
        prompted = await live.prompt(created["id"], "What is in this repository?")
        assert prompted.status_code == 200, prompted.text
        for mobile in (False, True):
            for dark in (False, True):
                async with open_page(browser, live.url, mobile=mobile, dark=dark) as watched:
                    page = watched.page
                    page.set_default_timeout(TIMEOUT_MS)
                    await page.goto(f"/#{created['id']}")
                    await expect(transcript(page).get_by_text("the entry point")).to_be_visible()
                    size = "mobile" if mobile else "desktop"
                    await screenshot(page, f"console-{size}-{'dark' if dark else 'light'}")
                    if mobile:
                        # The session list folds away at 375 px and opens from the menu.
                        await expect(page.get_by_role("button", name="New session")).to_be_hidden()
                        await page.get_by_role("button", name="Sessions").click()
                        await expect(page.get_by_role("button", name="New session")).to_be_visible()
                    assert watched.errors == [] and watched.dialogs == []


async def test_a_long_session_opens_at_its_end_and_pages_back(
    browser: Browser, tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    async with console(browser, tmp_path, fake_openai) as (live, watched):
        session = new_session_row(directory=str(live.workspace), title="A long one")
        chat = Conversation(session_id=session.id)
        for index in range(224):
            chat.user(f"question {index}: please look at file_{index}.py")
            chat.assistant(f"file_{index}.py defines f{index}.")
        chat.user("What next?")
        chat.assistant("Ask me anything.")
        await store_conversation(live.runtime.store, session, chat.messages)  # 450 messages
        page = watched.page
        await page.goto(f"/#{session.id}")
        view = transcript(page)
        await expect(view.get_by_text("Ask me anything.")).to_be_visible()
        # Virtualised: a screenful of rows in the DOM, not the 200 messages of the page loaded.
        assert await view.get_by_role("listitem").count() < 40
        earlier = page.get_by_role("button", name="Load earlier messages")
        await page.locator(".scroller").evaluate("el => { el.scrollTop = 0; }")
        await earlier.click()  # 400 of 450
        await page.locator(".scroller").evaluate("el => { el.scrollTop = 0; }")
        await earlier.click()  # all
        await expect(earlier).to_have_count(0)
        await page.locator(".scroller").evaluate("el => { el.scrollTop = 0; }")
        await expect(view.get_by_text("question 0: please look at file_0.py")).to_be_visible()


class HeldRead:
    """The console's second read of a list (`GET path`, when its event stream goes live) answered as
    it stood when asked, but only once `release` is set: an older answer arriving late."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.reads = 0
        self.release = asyncio.Event()
        self.answered = asyncio.Event()

    async def route(self, route: Route) -> None:
        if route.request.method != "GET" or urlsplit(route.request.url).path != self.path:
            await route.continue_()
            return
        self.reads += 1
        if self.reads != 2:
            await route.continue_()
            return
        older = await route.fetch()  # read now, before what the test makes next
        await self.release.wait()
        await route.fulfill(response=older)
        self.answered.set()

    async def deliver(self, page: Page) -> None:
        """Let the older answer through, and wait until the page has drawn twice after it."""
        self.release.set()
        await self.answered.wait()
        await page.evaluate("() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)))")
        assert self.reads == 2


async def test_a_session_created_while_the_list_is_read_again_stays_listed_and_open(
    browser: Browser, tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    """The lists are read again when the event stream goes live; a session created while that answer
    is on its way must not be dropped by it (the older answer lacks it): it stays listed and open."""
    async with console(browser, tmp_path, fake_openai) as (_live, watched):
        page = watched.page
        held = HeldRead("/session")
        await page.route(re.compile(r"/session$"), held.route)
        await new_session(page)
        await held.deliver(page)
        await expect(page.get_by_role("textbox", name="Message")).to_be_visible()
        sidebar = page.get_by_role("complementary", name="Sessions")
        await expect(sidebar.get_by_role("button", name=re.compile("New session - "))).to_have_count(1)


async def test_a_permission_asked_while_the_requests_are_read_again_stays_to_answer(
    browser: Browser, tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    """Likewise a permission request asked while the pending requests are read again stays on screen,
    and can be answered."""
    config = fake_provider_config(fake_openai)
    config["permission"] = {"edit": "ask"}
    fake_openai.enqueue(call("write", {"filePath": "a.txt", "content": "a\n"}), reply("Wrote it."))
    async with console(browser, tmp_path, fake_openai, config) as (live, watched):
        page = watched.page
        held = HeldRead("/permission")
        await page.route(re.compile(r"/permission$"), held.route)
        await new_session(page)
        await send(page, "Write a.txt")
        await expect(page.get_by_role("button", name="Allow once")).to_be_visible()
        await held.deliver(page)
        await expect(page.get_by_role("button", name="1 pending request")).to_be_visible()
        await page.get_by_role("button", name="Allow once").click()
        await expect(transcript(page).get_by_text("Wrote it.")).to_be_visible()
        assert (live.workspace / "a.txt").read_text() == "a\n"


async def test_sessions_list_as_a_tree_and_rename_and_fork(
    browser: Browser, tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    fake_openai.enqueue(reply("Parent reply."))
    async with console(browser, tmp_path, fake_openai) as (live, watched):
        parent = await live.create_session(title="Parent work")
        assert (await live.prompt(parent["id"], "start")).status_code == 200
        await live.create_session(title="Subagent child", parentID=parent["id"])
        await live.create_session(title="Unrelated")
        page = watched.page
        await page.goto("/")
        sessions = page.get_by_role("complementary", name="Sessions")
        # The child is listed inside its parent's item.
        parent_item = sessions.get_by_role("listitem").filter(has_text="Parent work")
        await expect(
            parent_item.get_by_role("group").get_by_role("button", name=re.compile("Subagent child"))
        ).to_be_visible()
        await page.get_by_role("searchbox", name="Search sessions").fill("unrel")
        await expect(sessions.get_by_role("button", name=re.compile("Parent work"))).to_have_count(0)
        await page.get_by_role("searchbox", name="Search sessions").fill("")
        await sessions.get_by_role("button", name=re.compile("Parent work")).click()
        await expect(transcript(page).get_by_text("Parent reply.")).to_be_visible()
        await page.get_by_role("button", name="Rename").click()
        await page.get_by_role("textbox", name="Session title").fill("Renamed work")
        await page.get_by_role("button", name="Save").click()
        await expect(page.get_by_role("heading", name="Renamed work")).to_be_visible()
        assert (await live.client.get(f"/session/{parent['id']}")).json()["title"] == "Renamed work"
        await page.get_by_role("button", name="Fork").click()
        await expect(page.get_by_role("heading", name=re.compile("fork", re.I))).to_be_visible()
        await expect(transcript(page).get_by_text("Parent reply.")).to_be_visible()
        assert len((await live.client.get("/session")).json()) == 4


async def test_a_tool_call_is_approved_inline(
    browser: Browser, tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    config = fake_provider_config(fake_openai)
    config["permission"] = {"edit": "ask"}
    fake_openai.enqueue(
        call("write", {"filePath": "hello.txt", "content": "hello from the console\n"}),
        reply("Wrote the file."),
    )
    async with console(browser, tmp_path, fake_openai, config) as (live, watched):
        page = watched.page
        await new_session(page)
        await send(page, "Write hello.txt")
        await expect(page.get_by_role("button", name="1 pending request")).to_be_visible()
        await expect(page.get_by_role("button", name="Allow always")).to_be_visible()
        await expect(page.get_by_role("button", name="Reject")).to_be_visible()
        await screenshot(page, "console-approval-desktop-light")
        await page.get_by_role("button", name="Allow once").click()
        await expect(transcript(page).get_by_text("Wrote the file.")).to_be_visible()
        await expect(page.get_by_role("button", name="Allow once")).to_have_count(0)
        assert (live.workspace / "hello.txt").read_text() == "hello from the console\n"
        await expect(transcript(page).locator(".tool .badge-completed")).to_have_text("completed")


async def test_a_question_is_answered_inline(
    browser: Browser, tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    questions = [
        {
            "question": "Which database should we use?",
            "header": "Database",
            "options": [
                {"label": "Postgres", "description": "for production"},
                {"label": "SQLite", "description": "for one machine"},
            ],
        }
    ]
    fake_openai.enqueue(call("question", {"questions": questions}), reply("Postgres it is."))
    async with console(browser, tmp_path, fake_openai) as (_live, watched):
        page = watched.page
        await new_session(page)
        await send(page, "Pick a database")
        await page.get_by_role("radio", name="Postgres").check()
        await page.get_by_role("button", name="Answer").click()
        await expect(transcript(page).get_by_text("Postgres it is.")).to_be_visible()
        assert '"Which database should we use?"="Postgres"' in str(fake_openai.requests[-1]["messages"])


async def test_a_retry_shows_while_the_turn_waits(
    browser: Browser, tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    fake_openai.enqueue(rate_limited(retry_after_ms=1500), reply("Answered after a retry."))
    async with console(browser, tmp_path, fake_openai) as (_live, watched):
        page = watched.page
        await new_session(page)
        await send(page, "Hello?")
        await expect(page.get_by_role("status").filter(has_text="Retrying (attempt 1)").first).to_be_visible()
        await expect(transcript(page).get_by_text("Answered after a retry.")).to_be_visible()


async def test_stop_aborts_the_running_turn(
    browser: Browser, tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    never = asyncio.Event()
    fake_openai.enqueue(Script().text("Thinking about it").pause(never).text("never shown").finish())
    async with console(browser, tmp_path, fake_openai) as (_live, watched):
        page = watched.page
        await new_session(page)
        await send(page, "Take your time")
        await expect(transcript(page).get_by_text("Thinking about it")).to_be_visible()
        await page.get_by_role("button", name="Stop").click()
        await expect(transcript(page).get_by_text("Stopped")).to_be_visible()
        await expect(page.get_by_role("button", name="Stop")).to_have_count(0)
        await expect(transcript(page).get_by_text("never shown")).to_have_count(0)


async def test_reloading_mid_stream_shows_the_whole_text_once(
    browser: Browser, tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    gate = asyncio.Event()
    first, second = "Alpha beta gamma delta. ", "Epsilon zeta eta theta."
    fake_openai.enqueue(Script().text(first).pause(gate).text(second).finish())
    async with console(browser, tmp_path, fake_openai) as (_live, watched):
        page = watched.page
        await new_session(page)
        await send(page, "Stream something")
        await expect(transcript(page).get_by_text(first.strip())).to_be_visible()
        await page.reload()
        # Mid-part after the reload: the text so far, from the server's in-flight state.
        assistant = transcript(page).get_by_role("article", name="Assistant")
        await expect(assistant.locator(".markdown")).to_have_text(first.strip())
        gate.set()
        await expect(assistant.locator(".markdown")).to_have_text((first + second).strip())
        await expect(page.get_by_role("button", name="Stop")).to_have_count(0)
        await expect(assistant.locator(".markdown")).to_have_text((first + second).strip())


async def test_opening_a_session_mid_part_shows_its_text_once(
    browser: Browser, tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    """The page's stream is already open when a session streaming elsewhere is opened: what the
    store holds of the part (its last checkpoint: here none yet, the burst was too short) is not
    continued by deltas; the stream's snapshot of the part is, so the text is whole and once."""
    held = asyncio.Event()
    first, second = "Streaming elsewhere: one two three. ", "Four five six."
    fake_openai.enqueue(Script().text(first).pause(held).text(second).finish())
    async with console(browser, tmp_path, fake_openai) as (live, watched):
        busy = await live.create_session(title="Busy one")
        await live.create_session(title="Quiet one")
        page = watched.page
        await page.goto("/")
        sessions = page.get_by_role("complementary", name="Sessions")
        await sessions.get_by_role("button", name=re.compile("Quiet one")).click()
        await expect(page.locator(".link-state")).to_have_text("live")
        watcher = EventCollector()
        await watcher.start(live.client)
        prompted = await live.client.post(
            f"/session/{busy['id']}/prompt_async", json={"parts": [{"type": "text", "text": "go"}]}
        )
        assert prompted.status_code == 204, prompted.text
        streamed = ""

        def all_of_first(frame: Frame) -> bool:
            nonlocal streamed
            if frame.type == "message.part.delta":
                streamed += frame.properties["delta"]
            return streamed == first

        await watcher.wait_for(all_of_first)
        await watcher.stop()
        await sessions.get_by_role("button", name=re.compile("Busy one")).click()
        assistant = transcript(page).get_by_role("article", name="Assistant").locator(".markdown")
        await expect(assistant).to_have_text(first.strip())
        held.set()
        await expect(assistant).to_have_text((first + second).strip())
        await expect(page.get_by_role("button", name="Stop")).to_have_count(0)
        await expect(assistant).to_have_text((first + second).strip())


def event_streams(page: Page) -> list[tuple[str, str | None]]:
    """Every `GET /event` the page sends, as (query, Last-Event-ID)."""
    sent: list[tuple[str, str | None]] = []

    async def on_request(request: Request) -> None:
        if urlsplit(request.url).path == "/event":
            sent.append((urlsplit(request.url).query, await request.header_value("last-event-id")))

    page.on("request", on_request)
    return sent


def assert_resumed(streams: list[tuple[str, str | None]]) -> None:
    """One stream, the tenant-wide one: its first connection had nothing to resume from, and a
    reconnect resumed from a tenant position."""
    assert {query for query, _ in streams} == {""}, streams
    assert streams[0][1] is None
    assert any(last is not None and last.isdigit() for _, last in streams[1:]), streams


async def test_a_dropped_stream_resumes_without_a_seam(
    browser: Browser, tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    held, more = asyncio.Event(), asyncio.Event()
    one, two, three = "One two three. ", "Four five six. ", "Seven eight."
    fake_openai.enqueue(Script().text(one).pause(held).text(two).pause(more).text(three).finish())
    async with (
        start_live_server(tmp_path, fake_openai) as live,
        dropping_proxy(live.url) as proxy,
        open_page(browser, proxy.url) as watched,
    ):
        page = watched.page
        page.set_default_timeout(TIMEOUT_MS)
        streams = event_streams(page)
        await new_session(page)
        watcher = EventCollector()  # hears the model go on while the console cannot
        await watcher.start(live.client)
        await send(page, "Count slowly")
        assistant = transcript(page).get_by_role("article", name="Assistant").locator(".markdown")
        await expect(assistant).to_have_text(one.strip())
        proxy.cut()  # the network goes; the model goes on while the console cannot hear it
        await expect(page.locator(".link-state")).to_have_text("offline")
        held.set()
        streamed = ""

        def caught_up(frame: Frame) -> bool:
            nonlocal streamed
            if frame.type == "message.part.delta":
                streamed += frame.properties["delta"]
            return streamed.endswith(two)

        await watcher.wait_for(caught_up)
        await watcher.stop()
        proxy.restore()
        await expect(page.locator(".link-state")).to_have_text("live")
        # Resumed with Last-Event-ID: the text written while away, once, before any new delta.
        await expect(assistant).to_have_text((one + two).strip())
        more.set()
        await expect(assistant).to_have_text((one + two + three).strip())
        await expect(page.get_by_role("button", name="Stop")).to_have_count(0)
        assert_resumed(streams)
        # The refused reconnects are logged by the browser; nothing else may be.
        assert [e for e in watched.errors if "ERR_" not in e and "Failed to fetch" not in e] == []
        assert watched.dialogs == []


async def test_a_server_restart_mid_part_resumes_to_the_stored_text(
    browser: Browser, tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    """kill -9 mid-part, a new process on the same data: the console resumes its stream with the
    last position it saw, and the replay (start-up recovery closing the turn) makes the screen show
    exactly what was stored, which may be less than was streamed (the last checkpoint)."""
    held = asyncio.Event()
    fake_openai.enqueue(Script().text("Before the crash: alpha beta. ").pause(held).text("never").finish())
    workspace = tmp_path / "workspace"
    workspace.mkdir()

    def serve() -> contextlib.AbstractAsyncContextManager[ServerProcess]:
        """The same config and data each time: a restart."""
        database = f"sqlite:///{tmp_path / 'forge.db'}"
        config = fake_provider_config(fake_openai)
        return serve_process(tmp_path, config, database_url=database, workspace=workspace)

    async with (
        serve() as first,
        dropping_proxy(first.url) as proxy,
        open_page(browser, proxy.url) as watched,
    ):
        page = watched.page
        page.set_default_timeout(TIMEOUT_MS)
        streams = event_streams(page)
        await new_session(page)
        await send(page, "Crash while you talk")
        assistant = transcript(page).get_by_role("article", name="Assistant")
        await expect(assistant.locator(".markdown")).to_have_text("Before the crash: alpha beta.")
        first.kill()
        await first.process.wait()
        await expect(page.locator(".link-state")).to_have_text("offline")
        async with serve() as second:
            proxy.retarget(second.url)
            await expect(page.locator(".link-state")).to_have_text("live")
            await expect(assistant.get_by_text("Stopped")).to_be_visible()  # recovery's close, replayed
            async with httpx2.AsyncClient(base_url=second.url) as client:
                (session,) = (await client.get("/session")).json()
                stored = (await client.get(f"/session/{session['id']}/message")).json()
            (text,) = [
                p["text"]
                for m in stored
                for p in m["parts"]
                if p["type"] == "text" and m["info"]["role"] == "assistant"
            ]
            assert "Before the crash: alpha beta. ".startswith(text)
            await expect(assistant.locator(".markdown")).to_have_text(text.strip())
            await expect(page.get_by_role("button", name="Stop")).to_have_count(0)
        held.set()
        assert_resumed(streams)
        assert [e for e in watched.errors if "ERR_" not in e and "Failed to fetch" not in e] == []
        assert watched.dialogs == []


async def test_signing_in_with_an_api_key(browser: Browser, tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    config = fake_provider_config(fake_openai)
    config["auth"] = {"required": True}
    fake_openai.enqueue(reply("Signed in and answering."))
    async with console(browser, tmp_path, fake_openai, config) as (live, watched):
        minted = mint_api_key("default", "console-test", frozenset({ADMIN}), "test")
        await live.runtime.store.create_api_key(minted.stored)
        page = watched.page
        refused: list[str | None] = []
        page.on(
            "response",
            lambda r: refused.append(r.request.headers.get("authorization")) if r.status == 401 else None,
        )
        await page.goto("/")
        key = page.get_by_label("API key")
        await key.fill("af_not_a_real_key")
        await page.get_by_role("button", name="Sign in").click()
        await expect(page.get_by_text("That key was not accepted.")).to_be_visible()
        await key.fill(minted.token)
        await page.get_by_role("button", name="Sign in").click()
        await new_session_after_sign_in(page)
        await send(page, "hello")
        await expect(transcript(page).get_by_text("Signed in and answering.")).to_be_visible()
        assert minted.token not in page.url
        stored = await page.evaluate("sessionStorage.getItem('agentforge.apiKey')")
        assert stored == minted.token
        # An admin sees the audit log, its chain checked in the browser.
        await page.get_by_role("button", name="Audit").click()
        await expect(page.get_by_role("status")).to_have_text(re.compile(r"^Chain intact \(\d+ entries\)$"))
        # The browser logs each refused request (401) as a console error, whenever it gets to it.
        # Every refused request was sent without a key or with the wrong one, so those are expected.
        assert refused and all(sent in (None, "Bearer af_not_a_real_key") for sent in refused)
        watched.errors[:] = [error for error in watched.errors if "status of 401" not in error]


async def new_session_after_sign_in(page: Page) -> None:
    await page.get_by_role("button", name="New session").click()
    await page.get_by_role("button", name="Create").click()
    await expect(page.get_by_role("textbox", name="Message")).to_be_visible()


XSS = """Payloads, all inert:

<img src=x onerror="window.__pwned='img'; alert('img')">

<svg onload="window.__pwned='svg'"><script>window.__pwned='svg-script'</script></svg>

<script>window.__pwned='script'</script>

<a href="javascript:window.__pwned='a'">raw link</a>

[markdown link](javascript:window.__pwned='md') and [data link](data:text/html,<script>alert(1)</script>)

<iframe src="javascript:alert('frame')"></iframe>

<div style="background:url(javascript:alert(1))" onmouseover="window.__pwned='hover'">hover me</div>

[safe link](https://example.com/)
"""


async def test_model_and_tool_output_cannot_run_script(
    browser: Browser, tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    (tmp_path / "workspace").mkdir()
    (tmp_path / "workspace" / "evil.md").write_text("<img src=x onerror=\"window.__pwned='tool'\">\n")
    fake_openai.enqueue(call("read", {"filePath": "evil.md"}), reply(XSS))
    async with console(browser, tmp_path, fake_openai) as (_live, watched):
        page = watched.page
        await new_session(page)
        await send(page, "<img src=x onerror=\"window.__pwned='user'\">")
        view = transcript(page)
        await expect(view.get_by_text("safe link")).to_be_visible()
        await view.get_by_text("hover me").hover()
        await view.get_by_text("raw link").click()
        await view.get_by_text("markdown link").click()
        await view.locator(".tool summary").first.click()
        await expect(view.locator(".tool pre").last).to_contain_text("onerror")  # shown as text
        assert await page.evaluate("window.__pwned") is None
        assert await view.locator("img, svg, script, iframe, [onerror], [onload], [onmouseover]").count() == 0
        hrefs = await view.locator("a[href]").evaluate_all("links => links.map(a => a.getAttribute('href'))")
        assert hrefs == ["https://example.com/"]
        assert await view.locator("a[href]").get_attribute("rel") == "noopener noreferrer nofollow"
        # The sanitiser parses the payloads in an inert document, where Chromium reports the inline
        # handlers and styles as refused by the CSP: a second lock, not a fault. Nothing else may be
        # logged.
        blocked = "violates the following Content Security Policy directive"
        assert [e for e in watched.errors if blocked not in e] == []
        watched.errors.clear()


async def test_a_rejection_with_a_message_reaches_the_model(
    browser: Browser, tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    config = fake_provider_config(fake_openai)
    config["permission"] = {"edit": "ask"}
    fake_openai.enqueue(
        call("write", {"filePath": "hello.txt", "content": "hello\n"}),
        reply("Understood, no file."),
    )
    async with console(browser, tmp_path, fake_openai, config) as (live, watched):
        page = watched.page
        await new_session(page)
        await send(page, "Write hello.txt")
        await page.get_by_label("Message with a rejection (optional)").fill("Use notes.md instead")
        await page.get_by_role("button", name="Reject").click()
        tool = transcript(page).locator(".tool")
        await expect(tool.locator(".badge-error")).to_have_text("error")
        await expect(tool.locator("pre.error")).to_contain_text(
            "with the following feedback: Use notes.md instead"
        )
        await expect(page.get_by_role("button", name="Stop")).to_have_count(0)
        assert not (live.workspace / "hello.txt").exists()
        # A rejection stops the loop after its step; the model hears the feedback on the next turn.
        assert len(fake_openai.requests) == 1
        await send(page, "Go on")
        await expect(transcript(page).get_by_text("Understood, no file.")).to_be_visible()
        tool_results = [m for m in fake_openai.requests[-1]["messages"] if m["role"] == "tool"]
        assert "Use notes.md instead" in str(tool_results)


async def test_slash_commands_are_listed_and_run(
    browser: Browser, tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    config = fake_provider_config(fake_openai)
    config["command"] = {
        "review": {"template": "Review $ARGUMENTS with care", "description": "Review some files"},
        "explain": {"template": "Explain $1 simply", "description": "Explain a concept"},
    }
    fake_openai.enqueue(reply("Reviewed main.py."))
    async with console(browser, tmp_path, fake_openai, config) as (live, watched):
        page = watched.page
        await new_session(page)
        box = page.get_by_role("textbox", name="Message")
        await box.press_sequentially("/ex")
        await box.press("Tab")  # completes the first command listed, the focus stays
        await expect(box).to_have_value("/explain ")
        await expect(box).to_be_focused()
        await box.fill("")
        await box.press_sequentially("/")
        commands = page.get_by_role("list", name="Commands")
        await expect(commands.get_by_role("button", name="/review")).to_contain_text("Review some files")
        await expect(commands.get_by_role("button", name="/explain")).to_be_visible()
        await box.press_sequentially("rev")  # narrows the list as the name is typed
        await expect(commands.get_by_role("button")).to_have_count(1)
        await commands.get_by_role("button", name="/review").click()
        await expect(box).to_have_value("/review ")
        await expect(commands).to_have_count(0)
        # Chosen, the command leaves the focus in the box: the arguments are typed straight on.
        await expect(box).to_be_focused()
        await page.keyboard.type("main.py")
        await page.keyboard.press("Enter")
        await expect(transcript(page).get_by_text("Reviewed main.py.")).to_be_visible()
        await expect(box).to_have_value("")
        assert "Review main.py with care" in str(fake_openai.requests[-1]["messages"][-1])
        (session,) = (await live.client.get("/session")).json()
        messages = (await live.client.get(f"/session/{session['id']}/message")).json()
        texts = [
            p["text"]
            for m in messages
            if m["info"]["role"] == "user"
            for p in m["parts"]
            if p["type"] == "text"
        ]
        assert texts == ["Review main.py with care"]


async def test_an_attached_file_is_sent_with_the_prompt(
    browser: Browser, tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    fake_openai.enqueue(reply("I read your notes."))
    async with console(browser, tmp_path, fake_openai) as (live, watched):
        page = watched.page
        await new_session(page)
        async with page.expect_file_chooser() as chosen:
            await page.get_by_role("button", name="Attach").click()
        chooser = await chosen.value
        await chooser.set_files(
            {"name": "notes.txt", "mimeType": "text/plain", "buffer": b"remember the milk\n"}
        )
        attachments = page.get_by_role("list", name="Attachments")
        await expect(attachments).to_contain_text("notes.txt")
        await expect(attachments.get_by_role("button", name="Remove notes.txt")).to_be_visible()
        await send(page, "Read my notes")
        await expect(transcript(page).get_by_text("I read your notes.")).to_be_visible()
        await expect(attachments).to_have_count(0)  # cleared once sent
        (session,) = (await live.client.get("/session")).json()
        messages = (await live.client.get(f"/session/{session['id']}/message")).json()
        (user,) = [m for m in messages if m["info"]["role"] == "user"]
        files = [p for p in user["parts"] if p["type"] == "file"]
        assert [(f["filename"], f["mime"]) for f in files] == [("notes.txt", "text/plain")]
        assert files[0]["url"].startswith("data:text/plain;base64,")
        assert "remember the milk" in str(fake_openai.requests[-1]["messages"])


async def test_deleting_a_session_asks_first(
    browser: Browser, tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    async with console(browser, tmp_path, fake_openai) as (live, watched):
        doomed = await live.create_session(title="Doomed work")
        await live.create_session(title="Kept work")
        page = watched.page
        await page.goto("/")
        sessions = page.get_by_role("complementary", name="Sessions")
        await sessions.get_by_role("button", name=re.compile("Doomed work")).click()
        await expect(page.get_by_role("heading", name="Doomed work")).to_be_visible()
        question = 'Delete "Doomed work"?'
        watched.answers[question] = False  # cancelled: nothing happens
        await page.get_by_role("button", name="Delete").click()
        assert watched.answered == [question]
        await expect(page.get_by_role("heading", name="Doomed work")).to_be_visible()
        assert (await live.client.get(f"/session/{doomed['id']}")).status_code == 200
        watched.answers[question] = True
        await page.get_by_role("button", name="Delete").click()
        await expect(sessions.get_by_role("button", name=re.compile("Doomed work"))).to_have_count(0)
        await expect(page.get_by_role("heading", name="Doomed work")).to_have_count(0)
        await expect(sessions.get_by_role("button", name=re.compile("Kept work"))).to_be_visible()
        assert watched.answered == [question, question]
        assert (await live.client.get(f"/session/{doomed['id']}")).status_code == 404
        assert [s["title"] for s in (await live.client.get("/session")).json()] == ["Kept work"]


async def tab_to(page: Page, target: Any, *, limit: int = 40) -> None:
    """Moves the focus with Tab alone until it is on `target`, as a keyboard user would."""
    for _ in range(limit):
        if await target.evaluate("el => el === document.activeElement"):
            return
        await page.keyboard.press("Tab")
    raise AssertionError(f"{target} cannot be reached with Tab")


async def test_a_prompt_and_an_approval_by_keyboard_alone(
    browser: Browser, tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    config = fake_provider_config(fake_openai)
    config["permission"] = {"edit": "ask"}
    fake_openai.enqueue(
        call("write", {"filePath": "typed.txt", "content": "typed, not clicked\n"}),
        reply("Done by keyboard."),
    )
    async with console(browser, tmp_path, fake_openai, config) as (live, watched):
        page = watched.page
        await page.goto("/")
        await tab_to(page, page.get_by_role("button", name="New session", exact=True))
        await page.keyboard.press("Enter")
        await tab_to(page, page.get_by_role("button", name="Create"))
        await page.keyboard.press("Enter")
        box = page.get_by_role("textbox", name="Message")
        await tab_to(page, box)
        await page.keyboard.type("Write typed.txt")
        await page.keyboard.press("Enter")
        # The names the issue lists, with the turn waiting for the approval.
        await expect(page.get_by_role("button", name="Stop")).to_be_visible()
        await expect(page.get_by_role("button", name="Send")).to_be_visible()
        await expect(page.get_by_role("button", name="New session", exact=True)).to_be_visible()
        await expect(page.get_by_role("button", name="Allow always")).to_be_visible()
        await expect(page.get_by_role("button", name="Reject")).to_be_visible()
        allow = page.get_by_role("button", name="Allow once")
        await tab_to(page, allow)
        await page.keyboard.press("Enter")
        await expect(transcript(page).get_by_text("Done by keyboard.")).to_be_visible()
        await expect(allow).to_have_count(0)
        assert (live.workspace / "typed.txt").read_text() == "typed, not clicked\n"
        assert watched.answered == []
