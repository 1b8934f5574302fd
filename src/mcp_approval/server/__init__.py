"""Approval-gated MCP servers: :class:`Approvals` for your own ``MCPServer``, and the deployment
file mapping ``mcp-approval serve`` uses (:mod:`mcp_approval.server.deployment`)."""

from mcp_approval.server.approvals import Approvals, ReviewerAuthenticator, ServerOptions
from mcp_approval.server.auth import StaticTokenVerifier, local_auth_settings

__all__ = ["Approvals", "ReviewerAuthenticator", "ServerOptions", "StaticTokenVerifier", "local_auth_settings"]
