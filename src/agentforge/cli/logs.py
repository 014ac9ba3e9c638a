"""Where an in-process server's log goes: a file in the data directory, not the user's terminal.

Without a handler Python prints warnings and tracebacks (a failed title task, a provider retry) to
stderr, in the middle of the answer. The CLI sends every record to `<data dir>/log/agentforge.log`
instead, through a queue so the event loop never waits on the disk; `--verbose` also shows them on
stderr.
"""

from __future__ import annotations

import logging
import logging.handlers
import queue
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def log_file(data_dir: Path) -> Path:
    return data_dir / "log" / "agentforge.log"


@contextmanager
def logging_to_file(path: Path, *, verbose: bool) -> Iterator[Path]:
    """Routes every log record to `path` (and stderr when `verbose`) while the block runs. The
    directory must exist; the file is opened by the first record, in the listener's thread."""
    formatter = logging.Formatter(LOG_FORMAT)
    handlers: list[logging.Handler] = [logging.FileHandler(path, encoding="utf-8", delay=True)]
    if verbose:
        handlers.append(logging.StreamHandler(sys.stderr))
    for handler in handlers:
        handler.setFormatter(formatter)
    records: queue.SimpleQueue[logging.LogRecord] = queue.SimpleQueue()
    front = logging.handlers.QueueHandler(records)
    listener = logging.handlers.QueueListener(records, *handlers, respect_handler_level=True)
    root = logging.getLogger()
    previous_level = root.level
    root.addHandler(front)
    root.setLevel(logging.DEBUG if verbose else logging.INFO)
    listener.start()
    try:
        yield path
    finally:
        root.removeHandler(front)
        root.setLevel(previous_level)
        listener.stop()
        for handler in handlers:
            handler.close()
