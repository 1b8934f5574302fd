"""Servers that exercise the protocol for tests, the conformance suite and the tasks demo.

Not part of the library's surface: ``conformance`` is the fixture server the official MCP
conformance suite runs against (``mcp-approval conformance-server``), ``tasks_demo`` a small server
whose tools exercise every path of the tasks runtime (``mcp-approval tasks-demo``, ``python -m
mcp_approval.testing.tasks_demo``). They sit above the layers they exercise and nothing in the
library imports them.
"""

__all__: list[str] = []
