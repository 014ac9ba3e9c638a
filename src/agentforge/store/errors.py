"""Store errors the HTTP layer maps to a status, in a module light enough to import anywhere."""

from __future__ import annotations


class ClusterUnavailableError(ConnectionError):
    """The lease connection is lost and did not come back in time: nothing may be run here."""
