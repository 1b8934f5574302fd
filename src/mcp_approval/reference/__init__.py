"""Reference AuthZEN services for local end-to-end runs.

:func:`pdp_app` serves any :class:`~mcp_approval.policy.PolicyDecisionPoint` as an AuthZEN
Authorization API 1.0 PDP over HTTP (metadata, single and batch evaluation)::

    import uvicorn
    from mcp_approval.policy import CedarPDP
    from mcp_approval.reference import pdp_app

    pdp = CedarPDP.from_files("todo.cedar", "entities.json", "todo.cedarschema")
    uvicorn.run(pdp_app(pdp, base_url="http://127.0.0.1:8080"), host="127.0.0.1", port=8080)

:func:`build_arap_server` wires the whole reference PDP + ARAP Access Request Service from an
``arap-server`` configuration (what ``mcp-approval arap-server`` runs)::

    from mcp_approval.reference import build_arap_server, load_arap_config

    server = build_arap_server(load_arap_config("arap-server.toml"), base_url="https://pdp.example.com")
    # server.app is a Starlette app whose lifespan starts and stops the service.
"""

from mcp_approval.reference.config import ArapServerConfig, load_arap_config
from mcp_approval.reference.pdp_api import (
    ACCESS_REQUEST_CAPABILITY,
    EchoRequestIdMiddleware,
    pdp_app,
    pdp_metadata,
    pdp_routes,
)
from mcp_approval.reference.server import ArapServer, build_arap_server, check_base_url

__all__ = [
    "ACCESS_REQUEST_CAPABILITY",
    "ArapServer",
    "ArapServerConfig",
    "EchoRequestIdMiddleware",
    "build_arap_server",
    "check_base_url",
    "load_arap_config",
    "pdp_app",
    "pdp_metadata",
    "pdp_routes",
]
