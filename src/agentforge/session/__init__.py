"""The session path: prompt, runner, loop, processor, history."""
