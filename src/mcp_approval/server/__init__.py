"""Approval-gated MCP servers: :class:`Approvals` for your own ``MCPServer``, and the deployment
file mapping ``mcp-approval serve`` uses (:mod:`mcp_approval.server.deployment`).

:class:`JwtTokenVerifier` is the SDK ``TokenVerifier`` for bearer JWT access tokens from one
authorization server; :class:`StaticTokenVerifier` maps fixed tokens to principals (development).
The names are imported on first access, so a light module of this package (the local backend's
construction from a deployment file, say) does not load the server composition and the MCP SDK.
"""

from typing import TYPE_CHECKING

from mcp_approval._lazy import lazy_getattr

if TYPE_CHECKING:
    from mcp_approval.server.approvals import Approvals, ReviewerAuthenticator, ServerOptions
    from mcp_approval.server.auth import StaticTokenVerifier, local_auth_settings
    from mcp_approval.server.jwt_auth import JwksError, JwtTokenVerifier

_LAZY = {
    "Approvals": "mcp_approval.server.approvals",
    "JwksError": "mcp_approval.server.jwt_auth",
    "JwtTokenVerifier": "mcp_approval.server.jwt_auth",
    "ReviewerAuthenticator": "mcp_approval.server.approvals",
    "ServerOptions": "mcp_approval.server.approvals",
    "StaticTokenVerifier": "mcp_approval.server.auth",
    "local_auth_settings": "mcp_approval.server.auth",
}

__all__ = [
    "Approvals",
    "JwksError",
    "JwtTokenVerifier",
    "ReviewerAuthenticator",
    "ServerOptions",
    "StaticTokenVerifier",
    "local_auth_settings",
]

__getattr__ = lazy_getattr(__name__, _LAZY)
