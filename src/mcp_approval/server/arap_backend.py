"""Building the policy decision point and the ARAP backend from a deployment config.

``[policy] cedar`` gives the in-process Cedar PDP; ``[policy] pdp_url`` a remote AuthZEN PDP over
HTTP (:class:`~mcp_approval.policy.http.HttpPDP`). ``[approval] backend = "arap"`` sends approval
requests to the Access Request Service the PDP metadata names, as ``[arap]`` configures.
"""

from __future__ import annotations

import logging

from mcp_approval.backends.arap import ArapBackend
from mcp_approval.backends.arap_origins import UntrustedURLError
from mcp_approval.clock import Clock
from mcp_approval.config import ConfigError, DeploymentConfig
from mcp_approval.policy import CedarPDP, EntityMapping, PolicyDecisionPoint
from mcp_approval.policy.http import HttpPDP

__all__ = ["arap_backend_from_config", "pdp_from_config"]

logger = logging.getLogger("mcp_approval.server")


def pdp_from_config(config: DeploymentConfig, *, clock: Clock | None = None) -> PolicyDecisionPoint:
    """The deployment's PDP: Cedar files, or a remote AuthZEN PDP.

    Raises:
        ConfigError: ``pdp_url`` is not a usable PDP identifier (naming file and field).
        PolicyLoadError: the Cedar files do not load.
    """
    policy = config.policy
    if policy.pdp_url is not None:
        headers = {"Authorization": f"Bearer {policy.pdp_token.get_secret_value()}"} if policy.pdp_token else None
        try:
            return HttpPDP(policy.pdp_url, timeout_s=policy.pdp_timeout_s, headers=headers)
        except ValueError as exc:
            raise ConfigError(f"{config.path}: policy.pdp_url: {exc}") from None
    assert policy.cedar is not None  # the config validator guarantees one of the two
    return CedarPDP.from_files(
        config.resolve(policy.cedar),
        config.resolve(policy.entities) if policy.entities else None,
        config.resolve(policy.schema_file) if policy.schema_file else None,
        clock=clock,
        mapping=EntityMapping(decimals=tuple(policy.decimals)),
    )


def arap_backend_from_config(config: DeploymentConfig, pdp: PolicyDecisionPoint) -> ArapBackend:
    """The ARAP backend ``[arap]`` describes; the ARS is found through ``pdp``'s metadata.

    Raises:
        ConfigError: no ``[arap]`` section or remote PDP, or an origin that is not https (naming
            file and field).
    """
    section = config.arap
    if section is None or not isinstance(pdp, HttpPDP):
        raise ConfigError(f'{config.path}: approval.backend: "arap" needs an [arap] section and policy.pdp_url')

    async def access_request_endpoint() -> str | None:
        return (await pdp.metadata()).access_request_endpoint

    # The section is the settings; only the two values other sections own are composed in.
    settings = section.model_copy(
        update={"callback_secret": config.approval.callback_secret, "client_name": config.server.name}
    )
    try:
        return ArapBackend(settings, access_request_endpoint=access_request_endpoint)
    except UntrustedURLError as exc:
        field = "arap.callback_url" if section.callback_url and section.callback_url in str(exc) else "arap"
        raise ConfigError(f"{config.path}: {field}: {exc}") from None
    except ValueError as exc:
        raise ConfigError(f"{config.path}: arap.allowed_origins: {exc}") from None
