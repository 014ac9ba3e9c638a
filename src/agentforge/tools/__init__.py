"""Tools: the contract, the registry, argument validation, output truncation, and the built-ins."""
