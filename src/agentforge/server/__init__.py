"""The HTTP API (FastAPI): app factory, one routes module per resource, SSE, error handlers."""
