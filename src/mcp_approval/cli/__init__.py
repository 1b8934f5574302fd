"""The ``mcp-approval`` command line (:mod:`mcp_approval.cli.main`)."""

__all__: list[str] = []
