"""Console benchmark, in headless Chromium against the server (in this process; the browser has its
own). Prints JSON.

- `open_ms_*`: from navigation to a session of `--messages` stored messages (user / assistant with a
  tool part each) until its last message is on screen, median and best of `--rounds` page loads;
  `rows_in_dom`: how many messages the virtualised transcript actually rendered.
- `stream_*`: a reply streamed as `--deltas` one-character deltas at about 100 a second: deltas the
  page received per second, and the browser's long tasks (> 50 ms, PerformanceObserver) meanwhile:
  jank shows up as long tasks.

    python bench/console_open.py [--messages 2000] [--rounds 5] [--deltas 300]

Target: opens in under a second; no long task while 100 deltas a second stream.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from playwright.async_api import Page
from tests.console.browser import chromium, open_page
from tests.e2e.harness import LiveServer, start_live_server
from tests.fakes.openai_server import FakeOpenAI, Script

from bench.long_session import write_long_session

LONG_TASKS = """
window.__longTasks = [];
new PerformanceObserver((list) => {
  for (const entry of list.getEntries()) window.__longTasks.push(entry.duration);
}).observe({ type: "longtask" });
"""


async def time_open(page: Page, base: str, session_id: str) -> float:
    await page.goto("about:blank")  # a real load each round, not a same-page hash change
    started = time.perf_counter()
    await page.goto(f"{base}/#{session_id}")
    await page.get_by_text("Ask me anything.").wait_for(timeout=60_000)
    return (time.perf_counter() - started) * 1000


async def stream(page: Page, live: LiveServer, deltas: int) -> dict[str, Any]:
    text = "".join(chr(ord("a") + i % 26) for i in range(deltas))
    live.fake.chunk_delay = 0.01  # ~100 deltas a second
    live.fake.enqueue(Script().text(text, chunk_size=1).finish())
    await page.evaluate(LONG_TASKS)
    box = page.get_by_role("textbox", name="Message")
    await box.fill("stream")
    started = time.perf_counter()
    await box.press("Enter")
    await page.get_by_text(text).wait_for(timeout=120_000)
    seconds = time.perf_counter() - started
    long_tasks: list[float] = await page.evaluate("window.__longTasks")
    return {
        "stream_deltas": deltas,
        "stream_deltas_per_s": round(deltas / seconds, 1),
        "stream_long_tasks": len(long_tasks),
        "stream_longest_task_ms": round(max(long_tasks, default=0.0), 1),
    }


async def main(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        database = f"sqlite:///{root / 'forge.db'}"
        session, _ = await write_long_session(database, root / "workspace", args.messages)
        async with (
            FakeOpenAI() as fake,
            start_live_server(root, fake) as live,
            chromium() as browser,
            open_page(browser, live.url) as watched,
        ):
            page = watched.page
            times = [await time_open(page, live.url, session.id) for _ in range(args.rounds)]
            rows = await page.get_by_role("list", name="Transcript").get_by_role("listitem").count()
            streamed = await stream(page, live, args.deltas)
    return {
        "messages": args.messages,
        "open_ms_median": round(statistics.median(times), 1),
        "open_ms_best": round(min(times), 1),
        "rows_in_dom": rows,
        **streamed,
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--deltas", type=int, default=300)
    result = asyncio.run(main(parser.parse_args()))
    print(orjson.dumps(result, option=orjson.OPT_INDENT_2).decode())
