"""`python -m agentforge.cli`: the same as the `agentforge` console script."""

from agentforge.cli import gcpause

gcpause.pause()  # before the CLI's own imports too

from agentforge.cli.main import entry  # noqa: E402

entry()
