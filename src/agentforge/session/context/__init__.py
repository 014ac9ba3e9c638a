"""What a model call sees: history, compaction, pruning, the system prompt, instructions, reminders."""
