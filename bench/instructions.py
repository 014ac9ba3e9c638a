"""Instructions the server executes per turn, counted by valgrind's callgrind. Prints JSON.

    python bench/instructions.py [SRC[,python=PATH] ...] [--turns 40] [--kind plain|tool|async|deltas]
                                 [--deltas 2000] [--db postgresql://…]

Each SRC (a source tree's `src`, `-` for this checkout's; default `-`; `,python=PATH`: served by
that interpreter, another virtualenv's, when the trees differ in their dependencies) is served by
`agentforge serve` under `valgrind --tool=callgrind` (SQLite in a temporary directory, or a fresh
schema of `--db`'s Postgres) against the fake OpenAI provider; after 5 warm-up turns, instruction
counting is switched on (`callgrind_control -i on`) for `--turns` turns and off again, and the count
is divided by the turns. Every thread of the server counts (the event loop, the store's writer and
readers); the preparing child of a first start does not, nor does Postgres. Kinds: `plain` and
`tool` turns through POST /session/{id}/message, `async` plain turns through `prompt_async`,
`deltas` turns each streaming `--deltas` one-character chunks (also counted per delta).

Why: wall-clock and CPU-time figures on this shared machine swing by 1.5-2x with its load and its
speed; an instruction count does not (two runs of one tree agree within ~0.5%), so it shows changes
of a few percent in the work a turn costs. It says nothing about waits or their order (callgrind runs
the threads one at a time): latency is bench/compare.py's. Needs valgrind (Debian's package).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, os.environ.get("BENCH_REPO", str(Path(__file__).resolve().parents[1])))

from tests.e2e.harness import EventCollector, LiveServer
from tests.fakes.openai_server import FakeOpenAI, Script, call, reply

from bench.turns import PLAIN_TEXT, ServerTree, database, start_server

WARM_UP_TURNS = 5
# valgrind runs the server ~50x slower: generous timeouts for its start and its turns.
SLOW_SECONDS = 600.0


def _counted(out: Path) -> int:
    """The instructions callgrind counted, over every dump file it wrote for the process."""
    total = 0
    for dump in out.parent.glob(out.name + "*"):
        for line in dump.read_text(errors="replace").splitlines():
            found = re.match(r"(?:summary|totals): (\d+)", line)
            if found:
                total = max(total, int(found[1]))
    return total


def _control(*args: str) -> None:
    subprocess.run(["callgrind_control", *args], check=True, capture_output=True)


async def measure(args: argparse.Namespace, spec: str) -> dict[str, Any]:
    tree, turns = ServerTree.parse(spec), args.turns
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        out = tmp / "callgrind.out"
        async with FakeOpenAI() as fake, database(args.db) as url:
            wrapper = ("valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}")
            process, live, client = await start_server(
                tree, tmp, fake, url, wrapper=wrapper, start_timeout=SLOW_SECONDS
            )
            try:
                async with client:
                    await _turns(live, WARM_UP_TURNS, args)
                    _control("-i", "on", str(process.pid))
                    await _turns(live, turns, args)
                    _control("-i", "off", str(process.pid))
                    _control("-d", str(process.pid))
            finally:
                process.terminate()
                await process.wait()
            counted = _counted(out)
    result = {
        "src": tree.describe(),
        "kind": args.kind,
        "database": "postgresql" if args.db else "sqlite",
        "turns": turns,
        "instructions_per_turn": counted // turns,
    }
    if args.kind == "deltas":
        result["instructions_per_delta"] = counted // (turns * args.deltas)
    return result


async def _turns(live: LiveServer, turns: int, args: argparse.Namespace) -> None:
    """`turns` turns, each waited for until its session is idle again (its last writes published)."""
    session_id, events = "", EventCollector()
    for number in range(turns):
        if number % args.session_turns == 0:
            await events.stop()
            session_id = (await live.create_session())["id"]
            events = EventCollector()
            await events.start(live.client, f"/event?sessionID={session_id}")
        if args.kind == "tool":
            live.fake.enqueue(call("read", {"filePath": "notes.txt"}), reply(PLAIN_TEXT))
        elif args.kind == "deltas":
            live.fake.enqueue(Script().text("x" * args.deltas, chunk_size=1).finish("stop"))
        else:
            live.fake.enqueue(reply(PLAIN_TEXT))
        seen = len(events.frames)
        if args.kind == "async":
            body = {"parts": [{"type": "text", "text": "hi"}]}
            (await live.client.post(f"/session/{session_id}/prompt_async", json=body)).raise_for_status()
        else:
            (await live.prompt(session_id, "hi")).raise_for_status()
        await events.wait_for(lambda f: f.type == "session.idle", start=seen, timeout=SLOW_SECONDS)
    await events.stop()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("src", nargs="*", default=["-"], help="source trees ('-': this checkout)")
    parser.add_argument("--turns", type=int, default=40)
    parser.add_argument("--kind", choices=("plain", "tool", "async", "deltas"), default="plain")
    parser.add_argument("--deltas", type=int, default=2000, help="chunks per turn of --kind deltas")
    parser.add_argument("--session-turns", type=int, default=40, help="turns before a new session")
    parser.add_argument("--db", default=None, help="a Postgres URL (default: SQLite in a temp dir)")
    args = parser.parse_args()
    results = [asyncio.run(measure(args, spec)) for spec in args.src]
    print(orjson.dumps(results, option=orjson.OPT_INDENT_2).decode())


if __name__ == "__main__":
    main()
