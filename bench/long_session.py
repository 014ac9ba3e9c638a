"""Long-session benchmark: per-turn overhead of a session with 10,000 stored messages behind a
compaction, against a fresh session, through the server. Prints JSON.

    python bench/long_session.py [--messages 10000] [--turns 30]

The long session is written with the store API before the server starts (fast): `--messages` user /
assistant messages with text and tool parts, then a completed compaction (request + summary) and
one turn after it. The server runs in its own process (as in bench/turns.py); turns alternate
between the two sessions so drift hits both alike. Also reported: the store's read of the whole
session against the loop's read from the compaction boundary, timed directly.
Target: the same per-turn time for both sessions within measurement noise.
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

from tests.e2e.harness import LiveServer
from tests.fakes.openai_server import FakeOpenAI, reply
from tests.session.builders import Conversation, compaction, tool_completed
from tests.session.stored import store_conversation
from tests.store.builders import new_session

from agentforge.model.events import DEFAULT_TENANT
from agentforge.model.session import Session
from agentforge.store import Store
from bench.turns import PLAIN_TEXT, server_process


def long_conversation(session_id: str, messages: int) -> Conversation:
    """`messages` messages in all: old turns, a completed compaction, and one turn after it."""
    chat = Conversation(session_id=session_id)
    for index in range((messages - 4) // 2):
        chat.user(f"question {index}: please look at file_{index}.py")
        read = tool_completed(
            "read", {"filePath": f"file_{index}.py"}, f"def f{index}():\n    return {index}\n"
        )
        chat.assistant(read, f"file_{index}.py defines f{index}.")
    request = chat.user(compaction(auto=True))
    chat.assistant("SUMMARY: the user went through many files one by one.", parent=request, summary=True)
    chat.user("What next?")
    chat.assistant("Ask me anything.")
    return chat


async def write_long_session(url: str, directory: Path, messages: int) -> tuple[Session, dict[str, float]]:
    store = await Store.open(url)
    try:
        session = new_session(directory=str(directory), title="long")
        started = time.perf_counter()
        await store_conversation(store, session, long_conversation(session.id, messages).messages)
        written = time.perf_counter() - started
        reads = await time_reads(store, session.id)
    finally:
        await store.close()
    return session, {"write_s": round(written, 3), **reads}


async def time_reads(store: Store, session_id: str, repeat: int = 5) -> dict[str, float]:
    """Median ms of the loop's boundary read and of a whole-session read (boundary reads first, so
    the big reads' garbage does not land on them)."""
    boundary = []
    for _ in range(repeat * 4):
        started = time.perf_counter()
        since = await store.history_since_compaction(DEFAULT_TENANT, session_id)
        boundary.append(time.perf_counter() - started)
    whole = []
    for _ in range(repeat):
        started = time.perf_counter()
        full = await store.history(DEFAULT_TENANT, session_id)
        whole.append(time.perf_counter() - started)
    return {
        "stored_messages": len(full),
        "messages_read_per_turn": len(since),
        "read_whole_session_ms": round(statistics.median(whole) * 1000, 3),
        "read_from_boundary_ms": round(statistics.median(boundary) * 1000, 3),
    }


async def turn(live: LiveServer, session_id: str) -> float:
    live.fake.enqueue(reply(PLAIN_TEXT))
    started = time.perf_counter()
    response = await live.prompt(session_id, "hi")
    elapsed = time.perf_counter() - started
    response.raise_for_status()
    return elapsed


async def main(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        url = f"sqlite:///{root / 'forge.db'}"
        long, store_numbers = await write_long_session(url, root / "workspace", args.messages)
        async with FakeOpenAI() as fake, server_process(root, fake) as (live, _server):
            fresh = await live.create_session()
            for _ in range(3):  # warm up both
                await turn(live, long.id)
                await turn(live, fresh["id"])
            long_times, fresh_times = [], []
            for _ in range(args.turns):
                long_times.append(await turn(live, long.id))
                fresh_times.append(await turn(live, fresh["id"]))
            requests = live.fake.requests
        long_ms = statistics.median(long_times) * 1000
        fresh_ms = statistics.median(fresh_times) * 1000
        return {
            "python": sys.version.split()[0],
            "server": "separate process, SQLite",
            **store_numbers,
            "turns_each": args.turns,
            "long_session_turn_ms": round(long_ms, 3),
            "fresh_session_turn_ms": round(fresh_ms, 3),
            "long_minus_fresh_ms": round(long_ms - fresh_ms, 3),
            "fresh_turn_stdev_ms": round(statistics.stdev(fresh_times) * 1000, 3),
            "model_messages_last_long_turn": len(requests[-2]["messages"]),
        }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument("--turns", type=int, default=30)
    print(orjson.dumps(asyncio.run(main(parser.parse_args())), option=orjson.OPT_INDENT_2).decode())
