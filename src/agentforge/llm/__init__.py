"""Model adapters: our own stream-event types, provider adapters, model catalogue, retry and error mapping."""
