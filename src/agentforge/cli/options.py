"""Options several commands share, declared once."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Final

import typer

# Help texts are Markdown, not rich markup: "[default: 127.0.0.1]" in a help text must stay visible.
HELP_MARKUP: Final = "markdown"

Url = Annotated[
    str | None,
    typer.Option(
        "--url",
        envvar="AGENTFORGE_URL",
        help="Server to talk to, e.g. http://127.0.0.1:4096. Without it the server runs in-process.",
    ),
]
ConfigPath = Annotated[
    Path | None,
    typer.Option("--config", help="Config file to merge over the discovered ones.", dir_okay=False),
]
DataDir = Annotated[
    Path | None,
    typer.Option(
        "--data-dir", envvar="AGENTFORGE_DATA_DIR", help="Where the local database lives.", file_okay=False
    ),
]
DatabaseUrl = Annotated[
    str | None,
    typer.Option(
        "--db", envvar="AGENTFORGE_DATABASE_URL", help="Database URL (sqlite:///... or postgresql://...)."
    ),
]
Json = Annotated[bool, typer.Option("--json", help="Print JSON instead of a readable view.")]
Verbose = Annotated[
    bool,
    typer.Option(
        "--verbose", "-v", help="Show the server's log (in-process) on stderr as well as in its file."
    ),
]
# Commands that act on what a running server holds in memory (waiting requests) need a server.
DEFAULT_SERVER_URL = "http://127.0.0.1:4096"
ServerUrl = Annotated[
    str, typer.Option("--url", envvar="AGENTFORGE_URL", help="The server holding the requests.")
]
