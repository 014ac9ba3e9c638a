"""Wire-level fakes of external services (model providers) for tests."""
