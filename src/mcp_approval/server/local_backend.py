"""Building the local approval backend and its reviewer authentication from a deployment config."""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable

from mcp_approval.backends.local import LocalApprovalBackend
from mcp_approval.backends.resolvers import resolvers_from_config
from mcp_approval.clock import Clock
from mcp_approval.config import DeploymentConfig
from mcp_approval.storage.audit import AuditLog
from mcp_approval.storage.database import Database


def local_backend_from_config(
    config: DeploymentConfig,
    database: Database,
    *,
    clock: Clock | None = None,
    audit: AuditLog | None = None,
    with_resolvers: bool = True,
) -> LocalApprovalBackend:
    """The local backend ``config`` describes, on an already migrated ``database``.

    ``with_resolvers=False`` skips loading ``[[resolvers]]`` (the review CLI never runs them).

    Raises:
        ValueError: a callable resolver cannot be loaded.
    """
    return LocalApprovalBackend(
        database,
        templates=config.templates,
        roles=config.roles_of,
        resolvers=resolvers_from_config(config.resolvers) if with_resolvers else (),
        redact=config.approval.redact_arguments,
        audit=audit,
        clock=clock,
    )


def reviewer_authenticator(config: DeploymentConfig) -> Callable[[str], Awaitable[str | None]]:
    """Maps a bearer token to its principal through the config's static ``[[principals]]`` tokens."""
    tokens = config.tokens()

    async def authenticate(token: str) -> str | None:
        # Compare every token in constant time, so timing reveals nothing about which one matched.
        found = None
        for known, principal in tokens.items():
            if hmac.compare_digest(known.encode(), token.encode()):
                found = principal
        return found

    return authenticate
