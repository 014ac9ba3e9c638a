"""Console jank benchmark: a reply streamed at `--rate` deltas a second for `--seconds`, watched by
headless Chromium (the server runs in this process; the browser has its own).

The page records, while the reply streams:
- long tasks (PerformanceObserver "longtask": the main thread busy > 50 ms, which a reader sees as a
  stutter) with their start and duration;
- frame gaps: the time between consecutive requestAnimationFrame callbacks (16.7 ms at 60 Hz; a gap
  of 50 ms or more is a visibly dropped frame run);
- every 100 ms, how many characters of the reply are on screen (rendered text, so the chart scales it
  to the Markdown's length), against how many the server had sent (an `/event` reader in this
  process counts the deltas).

The reply is Markdown with lists and highlighted code, in 4-character deltas (about a token each).
Writes `console_stream.json` and `console_stream.png` into `--out` and prints the JSON.

    python bench/console_stream.py [--rate 120] [--seconds 30] [--out docs/bench]

Target: 100 deltas a second render without jank: no long task, frame gaps p99 under 50 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from playwright.async_api import Page
from tests.console.browser import chromium, open_page
from tests.e2e.harness import EventCollector, Frame, LiveServer, start_live_server
from tests.fakes.openai_server import FakeOpenAI, Script

CHUNK = 4  # characters per delta
# Sleeping 1/rate per delta overshoots (timer granularity, the loop's own work): aim a little higher.
PACE = 1.15

WATCH = """
() => {
  const jank = { longTasks: [], frames: [], shown: [] };
  window.__jank = jank;
  new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) jank.longTasks.push([entry.startTime, entry.duration]);
  }).observe({ type: "longtask" });
  const tick = (now) => {
    jank.frames.push(now);
    if (!jank.stopped) requestAnimationFrame(tick);
  };
  requestAnimationFrame(tick);
  const sample = () => {
    const parts = document.querySelectorAll("article[aria-label='Assistant'] .markdown");
    const last = parts[parts.length - 1];
    jank.shown.push([performance.now(), last ? last.textContent.length : 0]);
  };
  jank.sampler = setInterval(sample, 100);
  return performance.now();
}
"""

STOP = """
() => {
  const jank = window.__jank;
  jank.stopped = true;
  clearInterval(jank.sampler);
  return { longTasks: jank.longTasks, frames: jank.frames, shown: jank.shown, now: performance.now() };
}
"""


def reply_text(characters: int) -> str:
    """Markdown of about `characters`: paragraphs, lists and Python code blocks, repeated."""
    block = (
        "The **parser** reads the input in one pass and keeps a small table of `symbols`.\n\n"
        "- first, it splits the line into tokens\n- then it folds constants\n- last, it emits code\n\n"
        "```python\ndef fold(tokens: list[str]) -> int:\n    total = 0\n    for token in tokens:\n"
        "        total += int(token)\n    return total\n```\n\n"
    )
    text = ""
    while len(text) < characters:
        text += block.replace("parser", f"parser #{len(text) // len(block) + 1}")
    return text[:characters]


async def measure(page: Page, live: LiveServer, rate: float, seconds: float) -> dict[str, Any]:
    deltas = int(rate * seconds)
    text = reply_text(deltas * CHUNK)
    live.fake.chunk_delay = 1 / (rate * PACE)
    live.fake.enqueue(Script().text(text, chunk_size=CHUNK).finish())
    watcher = EventCollector()
    await watcher.start(live.client)
    page_start: float = await page.evaluate(WATCH)
    wall_start = asyncio.get_running_loop().time()  # the clock EventCollector stamps frames with
    box = page.get_by_role("textbox", name="Message")
    await box.fill("stream")
    await box.press("Enter")
    stop = page.get_by_role("button", name="Stop")
    await stop.wait_for()
    await stop.wait_for(state="detached", timeout=seconds * 10_000)
    await page.locator("article[aria-label='Assistant'] .markdown").last.wait_for()
    recorded: dict[str, Any] = await page.evaluate(STOP)
    await watcher.stop()
    sent = [f for f in watcher.frames if f.type == "message.part.delta"]
    return summarise(recorded, sent, page_start, wall_start, len(text), rate, seconds)


def summarise(
    recorded: dict[str, Any],
    sent: list[Frame],
    page_start: float,
    wall_start: float,
    characters: int,
    rate: float,
    seconds: float,
) -> dict[str, Any]:
    frames = [t - page_start for t in recorded["frames"]]
    gaps = [b - a for a, b in itertools.pairwise(frames)]
    streaming = (sent[-1].received_at - sent[0].received_at) if len(sent) > 1 else 0.0
    long_tasks = [
        [round(start - page_start, 1), round(duration, 1)] for start, duration in recorded["longTasks"]
    ]
    ordered = sorted(gaps)
    return {
        "target_deltas_per_s": rate,
        "seconds": seconds,
        "characters": characters,
        "deltas": len(sent),
        "deltas_per_s": round(len(sent) / streaming, 1) if streaming else None,
        "long_tasks": len(long_tasks),
        "longest_task_ms": max((d for _, d in long_tasks), default=0.0),
        "frames": len(frames),
        "frame_gap_ms_median": round(statistics.median(gaps), 1) if gaps else None,
        "frame_gap_ms_p99": round(ordered[int(len(ordered) * 0.99)], 1) if ordered else None,
        "frame_gap_ms_max": round(max(gaps), 1) if gaps else None,
        "frame_gaps_over_50ms": sum(1 for g in gaps if g > 50),
        "long_task_list": long_tasks,
        # For the chart: (ms since start, gap ms), and (ms, characters on screen / sent).
        "frame_gaps": [[round(t, 1), round(g, 1)] for t, g in zip(frames[1:], gaps, strict=False)],
        "shown": [[round(t - page_start, 1), n] for t, n in recorded["shown"]],
        "sent": _sent_series(sent, wall_start),
    }


def _sent_series(sent: list[Frame], wall_start: float) -> list[list[float]]:
    """Characters the server had sent, every 100 ms (times relative to the start, like the page's)."""
    series: list[list[float]] = []
    total, step = 0, 0.1
    at = step
    for frame in sent:
        while frame.received_at - wall_start > at:
            series.append([round(at * 1000, 1), total])
            at += step
        total += len(frame.properties["delta"])
    series.append([round(at * 1000, 1), total])
    return series


def draw(summary: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (frames, text) = plt.subplots(2, 1, figsize=(9, 7), sharex=True)
    seconds = [t / 1000 for t, _ in summary["frame_gaps"]]
    frames.plot(seconds, [g for _, g in summary["frame_gaps"]], linewidth=0.8, label="frame gap")
    for start, duration in summary["long_task_list"]:
        frames.axvspan(start / 1000, (start + duration) / 1000, color="tab:red", alpha=0.3)
    frames.axhline(50, color="tab:red", linestyle="--", linewidth=0.8, label="50 ms (jank)")
    frames.axhline(1000 / 60, color="tab:green", linestyle=":", linewidth=0.8, label="60 Hz")
    frames.set_ylabel("ms between frames")
    frames.set_title(
        f"Console, {summary['deltas_per_s']} deltas/s for {summary['seconds']:.0f} s: "
        f"{summary['long_tasks']} long tasks, frame gap p99 {summary['frame_gap_ms_p99']} ms"
    )
    frames.legend(loc="upper right")
    frames.grid(alpha=0.3)
    text.plot(
        [t / 1000 for t, _ in summary["sent"]], [n for _, n in summary["sent"]], label="sent by the server"
    )
    # The page counts rendered text (no Markdown markup): scaled to the source's length to compare.
    final = max((n for _, n in summary["shown"]), default=0) or 1
    scale = summary["characters"] / final
    shown = [n * scale for _, n in summary["shown"]]
    text.plot([t / 1000 for t, _ in summary["shown"]], shown, label="on screen (rendered, scaled)")
    text.set_ylabel("characters")
    text.set_xlabel("seconds")
    text.legend(loc="upper left")
    text.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


async def main(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        async with (
            FakeOpenAI() as fake,
            start_live_server(Path(tmp), fake) as live,
            chromium() as browser,
            open_page(browser, live.url) as watched,
        ):
            page = watched.page
            page.set_default_timeout(30_000)
            session = await live.create_session(title="Streaming")
            await page.goto(f"/#{session['id']}")
            await page.get_by_role("textbox", name="Message").wait_for()
            summary = await measure(page, live, args.rate, args.seconds)
            assert watched.errors == [], watched.errors
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "console_stream.json").write_bytes(orjson.dumps(summary, option=orjson.OPT_INDENT_2))
    draw(summary, args.out / "console_stream.png")
    return summary


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=120.0, help="deltas a second the model sends")
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--out", type=Path, default=Path("docs/bench"))
    result = asyncio.run(main(parser.parse_args()))
    brief = {k: v for k, v in result.items() if k not in ("frame_gaps", "shown", "sent", "long_task_list")}
    print(orjson.dumps(brief, option=orjson.OPT_INDENT_2).decode())
