"""Per-event cost of durable writes through the store's ordered writer. Prints JSON.

- `awaited_us_*`: each `message.part.updated` awaited before the next: the latency a producer that
  needs durability sees (one transaction per event, plus the hop to the writer and back).
- `batched_us_*`: all events submitted without awaiting, then gathered: throughput under load, where
  group commit puts up to 256 events in one transaction (`batched_transactions_median` per round).
Each is measured over several rounds: the median is what to expect, the best what the code costs
when nothing else competes for the CPU.

SQLite always (in a temp dir); Postgres too when AGENTFORGE_TEST_DATABASE_URL is set (in a scratch
schema, dropped afterwards). Usage: python bench/store_write.py [--events N] [--rounds R]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import sqlite3
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import orjson
import sqlalchemy
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine

from agentforge.model import events as ev
from agentforge.model import ids
from agentforge.model.events import Event
from agentforge.model.message import UserMessage, UserTime
from agentforge.model.part import ModelRef, TextPart
from agentforge.model.session import Session, SessionTime
from agentforge.store import Store, parse_database_url, sqlite_url

POSTGRES_URL_ENV = "AGENTFORGE_TEST_DATABASE_URL"


def now_ms() -> int:
    return int(time.time() * 1000)


def session_events() -> tuple[Session, UserMessage, list[Event]]:
    """A session and a message to hang parts on."""
    stamp = now_ms()
    session = Session(
        id=ids.descending("ses"),
        slug="bench",
        directory="/bench",
        title="bench",
        version="0",
        time=SessionTime(created=stamp, updated=stamp),
    )
    message = UserMessage(
        id=ids.ascending("msg"),
        session_id=session.id,
        time=UserTime(created=stamp),
        agent="build",
        model=ModelRef(provider_id="p", model_id="m"),
    )
    setup = [
        Event(ev.SESSION_CREATED, {"sessionID": session.id, "info": session.wire()}, session_id=session.id),
        Event(ev.MESSAGE_UPDATED, {"sessionID": session.id, "info": message.wire()}, session_id=session.id),
    ]
    return session, message, setup


def part_event(message: UserMessage, index: int) -> Event:
    """A typical streaming-text part update (~200 bytes of text)."""
    part = TextPart(
        id=ids.ascending("prt"), session_id=message.session_id, message_id=message.id, text=f"{index} " * 60
    )
    props = {"sessionID": message.session_id, "part": part.wire(), "time": now_ms()}
    return Event(ev.PART_UPDATED, props, session_id=message.session_id)


async def measure(url: str, events: int, rounds: int) -> dict[str, Any]:
    published = 0

    def publish(batch: list[Event]) -> None:
        nonlocal published
        published += len(batch)

    store = await Store.open(url, publish=publish)
    awaited_us: list[float] = []
    batched_us: list[float] = []
    transactions: list[int] = []
    try:
        _, message, setup = session_events()
        for item in setup:
            await store.write(item)
        for index in range(50):  # warm up the statement cache and the seq cache
            await store.write(part_event(message, index))
        for _ in range(rounds):
            awaited_us.append(await awaited_one_by_one(store, message, events))
            batch_us, batch_count = await submitted_together(store, message, events * 10)
            batched_us.append(batch_us)
            transactions.append(batch_count)
    finally:
        await store.close()
    return {
        "awaited_events": events,
        "awaited_us_median": round(statistics.median(awaited_us), 1),
        "awaited_us_best": round(min(awaited_us), 1),
        "batched_events": events * 10,
        "batched_us_median": round(statistics.median(batched_us), 1),
        "batched_us_best": round(min(batched_us), 1),
        "batched_transactions_median": statistics.median(transactions),
        "rounds": rounds,
        "published": published,
    }


async def awaited_one_by_one(store: Store, message: UserMessage, count: int) -> float:
    items = [part_event(message, index) for index in range(count)]
    start = time.perf_counter()
    for item in items:
        await store.write(item)
    return (time.perf_counter() - start) / count * 1e6


async def submitted_together(store: Store, message: UserMessage, count: int) -> tuple[float, int]:
    items = [part_event(message, index) for index in range(count)]
    batches_before = store.committed_batches
    start = time.perf_counter()
    await asyncio.gather(*(store.submit(item) for item in items))
    elapsed = time.perf_counter() - start
    return elapsed / count * 1e6, store.committed_batches - batches_before


async def postgres_scratch(base: str, events: int, rounds: int) -> dict[str, Any]:
    schema = f"bench_{uuid.uuid4().hex[:12]}"
    url = make_url(base).update_query_dict({"schema": schema}).render_as_string(hide_password=False)
    try:
        return await measure(url, events, rounds)
    finally:
        admin = create_async_engine(parse_database_url(base).url)
        async with admin.begin() as conn:
            await conn.exec_driver_sql(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        await admin.dispose()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=500, help="awaited events per round (batched: 10x)")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    results: dict[str, Any] = {
        "python": platform.python_version(),
        "sqlalchemy": sqlalchemy.__version__,
        "sqlite": sqlite3.sqlite_version,
    }
    with tempfile.TemporaryDirectory() as scratch:
        results["sqlite_file"] = await measure(sqlite_url(Path(scratch)), args.events, args.rounds)
    base = os.environ.get(POSTGRES_URL_ENV)
    results["postgres"] = (
        await postgres_scratch(base, args.events, args.rounds) if base else f"{POSTGRES_URL_ENV} not set"
    )
    print(orjson.dumps(results, option=orjson.OPT_INDENT_2).decode())


if __name__ == "__main__":
    asyncio.run(main())
