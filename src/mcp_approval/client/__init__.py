"""The agent side: tasks-aware tool calls."""
