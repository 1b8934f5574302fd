"""The ``mcp-approval`` command line."""
