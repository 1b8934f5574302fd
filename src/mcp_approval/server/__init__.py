"""Approval-gated MCP servers: :class:`Approvals` for your own ``MCPServer``, and the deployment
file mapping ``mcp-approval serve`` uses (:mod:`mcp_approval.server.deployment`).

:class:`JwtTokenVerifier` is the SDK ``TokenVerifier`` for bearer JWT access tokens from one
authorization server; :class:`StaticTokenVerifier` maps fixed tokens to principals (development).
"""

from mcp_approval.server.approvals import Approvals, ReviewerAuthenticator, ServerOptions
from mcp_approval.server.auth import StaticTokenVerifier, local_auth_settings
from mcp_approval.server.jwt_auth import JwksError, JwtTokenVerifier

__all__ = [
    "Approvals",
    "JwksError",
    "JwtTokenVerifier",
    "ReviewerAuthenticator",
    "ServerOptions",
    "StaticTokenVerifier",
    "local_auth_settings",
]
