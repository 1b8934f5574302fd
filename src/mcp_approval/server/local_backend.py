"""Building the local approval backend from a deployment config."""

from __future__ import annotations

from collections.abc import Callable

from mcp_approval.backends import LocalApprovalBackend, RequestSeal, resolvers_from_config
from mcp_approval.clock import Clock
from mcp_approval.config import DeploymentConfig
from mcp_approval.keyring import BindingCipher, binding_cipher
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
    claimed_roles: Callable[[str], frozenset[str]] | None = None,
) -> LocalApprovalBackend:
    """The local backend ``config`` describes, on an already migrated ``database``.

    ``claimed_roles``: roles reviewers hold beyond ``[[principals]]`` (those their identity
    provider's ID token granted, :class:`~mcp_approval.reviewers.oidc.ClaimedRoles`).
    ``with_resolvers=False`` skips loading ``[[resolvers]]`` (the review CLI never runs them). The
    backend seals its requests under the configured binding key; without one (development) a
    serving backend seals under a key of its own process, and the review CLI checks nothing.

    Raises:
        ValueError: a callable resolver cannot be loaded, or the binding keys cannot be read.
    """
    return LocalApprovalBackend(
        database,
        templates=config.templates,
        roles=config.roles_of if claimed_roles is None else _both(config.roles_of, claimed_roles),
        resolvers=resolvers_from_config(config.resolvers) if with_resolvers else (),
        redact=config.approval.redact_arguments,
        audit=audit,
        clock=clock,
        seal=_request_seal(config, serving=with_resolvers),
    )


def _both(
    configured: Callable[[str], frozenset[str]], claimed: Callable[[str], frozenset[str]]
) -> Callable[[str], frozenset[str]]:
    return lambda principal: configured(principal) | claimed(principal)


def _request_seal(config: DeploymentConfig, *, serving: bool) -> RequestSeal | None:
    """The configured binding keys, else a process key for a server (a restart re-seals what is pending)."""
    options = config.approval
    if options.binding_keys or options.binding_key_file is not None:
        key_file = config.resolve(options.binding_key_file) if options.binding_key_file is not None else None
        return binding_cipher(options.binding_keys, key_file=key_file)  # the file relative to the config's
    return BindingCipher.ephemeral() if serving else None
