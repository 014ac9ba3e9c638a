"""The composition root: the Runtime that wires the services, tenant scopes, start-up recovery."""
