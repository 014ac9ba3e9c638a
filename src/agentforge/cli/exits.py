"""The CLI's exit codes, documented in README ("Exit codes") and `agentforge run --help`."""

from __future__ import annotations

from typing import Final

OK: Final = 0
# The server could not be reached, failed, or the turn ended with an error.
ERROR: Final = 1
# Bad options, arguments or config.
USAGE: Final = 2
# The turn stopped because a permission request was refused (by you, `--approve none`, another
# operator or the deadline) or a question was dismissed or went unanswered.
REFUSED: Final = 3
# Ctrl-C (the turn is aborted on the server too).
INTERRUPTED: Final = 130
# Whoever read the output stopped reading (`| head -1`): the turn is aborted too, nothing is printed.
OUTPUT_CLOSED: Final = 141
