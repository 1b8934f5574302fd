"""``python -m mcp_approval``: the ``mcp-approval`` command."""

from mcp_approval.cli.main import main

main()
