"""The `agentforge` command line: serve, run, session."""
