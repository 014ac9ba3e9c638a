"""Agent Forge: a server that runs LLM agents as durable multi-turn sessions."""

__version__ = "0.1.0"
