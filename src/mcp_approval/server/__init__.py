"""The composition root: builds servers from configuration.

:class:`JwtTokenVerifier` is the SDK ``TokenVerifier`` for bearer JWT access tokens from one
authorization server; pass it to ``MCPServer(token_verifier=...)``.
"""

from mcp_approval.server.jwt_auth import JwksError, JwtTokenVerifier

__all__ = ["JwksError", "JwtTokenVerifier"]
