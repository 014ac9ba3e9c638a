"""In-process publish/subscribe for live events."""

from agentforge.bus.bus import Bus, Subscription

__all__ = ["Bus", "Subscription"]
