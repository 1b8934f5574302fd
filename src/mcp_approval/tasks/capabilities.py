"""Holding input requests to what the creating request declared (the MRTR capability rule)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import mcp_types as types
from mcp.shared.exceptions import MCPError

from mcp_approval.protocol import INVALID_PARAMS, METHOD_ELICITATION_CREATE, MISSING_REQUIRED_CLIENT_CAPABILITY

__all__ = ["check_declared"]


def check_declared(request: Mapping[str, Any], capabilities: types.ClientCapabilities | None) -> None:
    """Refuse an input request the client did not declare support for (the MRTR rule).

    The declaration that counts is the one on the ``tools/call`` that created the task.

    Raises:
        MCPError: ``-32021`` with ``data.requiredCapabilities`` naming what is missing, or
            ``-32602`` for a method that input requests cannot use.
    """
    method = request.get("method")
    params = request.get("params") or {}
    required: dict[str, Any]
    if method == METHOD_ELICITATION_CREATE:
        mode = params.get("mode", "form") if isinstance(params, Mapping) else "form"
        elicitation = capabilities.elicitation if capabilities else None
        declared = elicitation is not None and (
            getattr(elicitation, mode, None) is not None or (mode == "form" and elicitation.url is None)
        )
        required = {"elicitation": {mode: {}}}
    elif method == "sampling/createMessage":
        declared = capabilities is not None and capabilities.sampling is not None
        required = {"sampling": {}}
    elif method == "roots/list":
        declared = capabilities is not None and capabilities.roots is not None
        required = {"roots": {}}
    else:
        raise MCPError(code=INVALID_PARAMS, message=f"{method!r} cannot be an input request")
    if not declared:
        raise MCPError(
            code=MISSING_REQUIRED_CLIENT_CAPABILITY,
            message=f"The client did not declare the capability {method} needs",
            data={"requiredCapabilities": required},
        )
