"""Building the local approval backend from a deployment config."""

from __future__ import annotations

from mcp_approval.backends.local import LocalApprovalBackend
from mcp_approval.backends.resolvers import resolvers_from_config
from mcp_approval.clock import Clock
from mcp_approval.config import DeploymentConfig
from mcp_approval.storage.audit import AuditLog
from mcp_approval.storage.database import Database

__all__ = ["local_backend_from_config"]


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
