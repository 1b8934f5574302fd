"""mcp-approval: durable MCP tasks, structured authorization denials and approval-gated tool calls.

The package is layered; each subpackage depends only on the ones below it:

- :mod:`mcp_approval.storage` - database engines, schema and migrations.
- :mod:`mcp_approval.tasks` - the SEP-2663 tasks runtime (server extension, store contract).
- :mod:`mcp_approval.client` - the agent side (tasks-aware tool calls).
- :mod:`mcp_approval.server` - the composition root that builds servers from configuration.
- :mod:`mcp_approval.cli` - the ``mcp-approval`` command.
"""

__version__ = "0.1.0"
