"""A fixture server for the official MCP conformance suite (``@modelcontextprotocol/conformance``).

The suite's server scenarios call fixed tool, resource and prompt names; this package provides
them, one module per fixture area, and mounts this project's tasks extension for the
``tasks-*`` scenarios.
"""

from mcp_approval.testing.conformance.app import build_conformance_server, run_conformance_server

__all__ = ["build_conformance_server", "run_conformance_server"]
