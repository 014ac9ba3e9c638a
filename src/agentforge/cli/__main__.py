"""`python -m agentforge.cli`: the same as the `agentforge` console script."""

from agentforge.cli.main import app

app(prog_name="agentforge")
