"""Agent records and the registry of built-in and configured agents."""
