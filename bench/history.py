"""The history of bench/turns.py: medians of repeated runs per change, and a chart of them.

    python bench/history.py add LABEL RUN.json [RUN.json ...] [--note TEXT]
    python bench/history.py plot
    python bench/history.py table [LABEL ...]

`add` appends the medians (and min-max spread) of the given runs of bench/turns.py to
docs/bench/turns.json under LABEL; `plot` draws docs/bench/turns.png from that file, one panel per
figure, one point per entry in the order they were added; `table` prints the entries (all, or the
given ones) as a Markdown table of medians with their spread, for bench/README.md. The machine is
shared and noisy: give several runs per entry, taken alternately with the entry they are compared
with.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parents[1]
HISTORY = ROOT / "docs" / "bench" / "turns.json"
CHART = ROOT / "docs" / "bench" / "turns.png"

# (figure, axis label, goal of the turn-path work or None, whether lower is better)
FIGURES: list[tuple[str, str, float | None, bool]] = [
    ("first_delta_overhead_ms", "first delta overhead (ms)", 5.0, True),
    ("async_first_delta_overhead_ms", "first delta overhead, prompt_async (ms)", 5.0, True),
    ("turn_overhead_ms", "plain turn overhead (ms)", 8.0, True),
    ("server_cpu_per_turn_ms", "server CPU per plain turn (ms)", 10.0, True),
    ("tool_turn_overhead_ms", "tool turn overhead (ms)", 15.0, True),
    ("server_cpu_per_delta_us", "server CPU per delta (us)", None, True),
    ("server_deltas_per_second", "deltas/s over SSE", 45_000.0, False),
    ("concurrent_wall_ms", "50 concurrent turns, wall (ms)", 500.0, True),
    ("concurrent_server_cpu_ms", "50 concurrent turns, server CPU (ms)", None, True),
    ("rss_after_sessions_mb", "RSS after 200 sessions (MB)", 150.0, True),
]


def _load() -> list[dict[str, Any]]:
    if not HISTORY.exists():
        return []
    entries: list[dict[str, Any]] = orjson.loads(HISTORY.read_bytes())
    return entries


def summarize(label: str, runs: list[dict[str, Any]], note: str | None) -> dict[str, Any]:
    """Median and spread of every numeric figure the runs share."""
    numeric = {key for run in runs for key, value in run.items() if isinstance(value, int | float)}
    median: dict[str, float] = {}
    spread: dict[str, list[float]] = {}
    for key in sorted(numeric):
        values = [run[key] for run in runs if isinstance(run.get(key), int | float)]
        median[key] = round(statistics.median(values), 3)
        spread[key] = [min(values), max(values)]
    entry: dict[str, Any] = {"label": label, "runs": len(runs), "median": median, "spread": spread}
    if note:
        entry["note"] = note
    return entry


def add(label: str, paths: list[Path], note: str | None) -> None:
    runs = [orjson.loads(path.read_bytes()) for path in paths if path.stat().st_size]
    if not runs:
        sys.exit("no runs with results")
    entries = [entry for entry in _load() if entry["label"] != label]
    entries.append(summarize(label, runs, note))
    HISTORY.parent.mkdir(parents=True, exist_ok=True)
    HISTORY.write_bytes(orjson.dumps(entries, option=orjson.OPT_INDENT_2) + b"\n")


def plot() -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    entries = _load()
    labels = [entry["label"] for entry in entries]
    columns = 2
    rows = (len(FIGURES) + columns - 1) // columns
    figure, axes = plt.subplots(rows, columns, figsize=(12, 3.2 * rows), squeeze=False)
    for index, (key, title, goal, _lower) in enumerate(FIGURES):
        axis = axes[index // columns][index % columns]
        for database, color in (("sqlite", "tab:blue"), ("pg", "tab:orange")):
            xs = [
                i
                for i, entry in enumerate(entries)
                if key in entry["median"] and entry["label"].endswith("(pg)") == (database == "pg")
            ]
            medians = [entries[i]["median"][key] for i in xs]
            low = [medians[n] - entries[i]["spread"][key][0] for n, i in enumerate(xs)]
            high = [entries[i]["spread"][key][1] - medians[n] for n, i in enumerate(xs)]
            axis.errorbar(xs, medians, yerr=[low, high], fmt="o-", capsize=3, color=color, label=database)
        if goal is not None:
            axis.axhline(goal, color="green", linestyle="--", linewidth=1, label="goal")
        axis.legend(loc="best", fontsize=7)
        axis.set_title(title, fontsize=9)
        axis.set_xticks(range(len(labels)), labels, rotation=30, ha="right", fontsize=7)
        axis.set_ylim(bottom=0)
        axis.grid(alpha=0.3)
    for index in range(len(FIGURES), rows * columns):
        axes[index // columns][index % columns].axis("off")
    figure.suptitle("bench/turns.py: medians (bars: min-max of the runs); SQLite unless (pg); 2 shared cores")
    figure.tight_layout()
    figure.savefig(CHART, dpi=90)


def _short(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.1f}"


def table(labels: list[str]) -> str:
    entries = [entry for entry in _load() if not labels or entry["label"] in labels]
    lines = [
        "| figure | " + " | ".join(f"{e['label']} ({e['runs']} runs)" for e in entries) + " |",
        "|---|" + "---|" * len(entries),
    ]
    for key, title, goal, lower in FIGURES:
        if not any(key in entry["median"] for entry in entries):
            continue
        cells = []
        for entry in entries:
            if key not in entry["median"]:
                cells.append("-")
                continue
            low, high = entry["spread"][key]
            cells.append(f"{_short(entry['median'][key])} ({_short(low)}-{_short(high)})")
        wanted = "" if goal is None else f" (goal {'<=' if lower else '>='} {_short(goal)})"
        lines.append(f"| {title}{wanted} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    commands = parser.add_subparsers(dest="command", required=True)
    adding = commands.add_parser("add")
    adding.add_argument("label")
    adding.add_argument("runs", nargs="+", type=Path)
    adding.add_argument("--note")
    commands.add_parser("plot")
    tabling = commands.add_parser("table")
    tabling.add_argument("labels", nargs="*")
    args = parser.parse_args()
    if args.command == "add":
        add(args.label, args.runs, args.note)
    elif args.command == "table":
        print(table(args.labels))
    else:
        plot()


if __name__ == "__main__":
    main()
