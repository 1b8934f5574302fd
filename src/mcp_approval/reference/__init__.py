"""Reference AuthZEN services for local end-to-end runs (issue 5, in progress).

:func:`pdp_app` serves any :class:`~mcp_approval.policy.PolicyDecisionPoint` as an AuthZEN
Authorization API 1.0 PDP over HTTP (metadata, single and batch evaluation)::

    import uvicorn
    from mcp_approval.policy import CedarPDP
    from mcp_approval.reference import pdp_app

    pdp = CedarPDP.from_files("todo.cedar", "entities.json", "todo.cedarschema")
    uvicorn.run(pdp_app(pdp, base_url="http://127.0.0.1:8080"), host="127.0.0.1", port=8080)

The ARAP Access Request Service is not built yet.
"""

from mcp_approval.reference.pdp_api import (
    ACCESS_REQUEST_CAPABILITY,
    EchoRequestIdMiddleware,
    pdp_app,
    pdp_metadata,
    pdp_routes,
)

__all__ = ["ACCESS_REQUEST_CAPABILITY", "EchoRequestIdMiddleware", "pdp_app", "pdp_metadata", "pdp_routes"]
