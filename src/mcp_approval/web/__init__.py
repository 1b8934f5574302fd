"""HTTP guards every server of the package shares: failed sign-ins, forwarded addresses, request bodies.

Modules: ``throttle`` (a limit on failed authentications per client address, the
:class:`FailedLoginThrottle` the reviewer API, the console, ``/mcp``, ``/metrics`` and the
reference services count against), ``proxies`` (which ``X-Forwarded-For`` to believe, and the
uvicorn settings every server runs with), ``bodies`` (request bodies read with a length limit and
parsed as strict JSON with bounded nesting), ``forms`` (the HTML forms reviewers post: same-site
only, urlencoded, bounded, each field once), ``problems`` (the JSON APIs' refusals as RFC 9457
problem details).

This package sits on storage (the throttle counts in its shared event window) and beside the tasks
runtime; every layer above may import it.
"""

from typing import TYPE_CHECKING

from mcp_approval._lazy import lazy_getattr

if TYPE_CHECKING:
    from mcp_approval.web.bodies import BodyTooLargeError, JsonBodyError, parse_json_body, read_body
    from mcp_approval.web.forms import MAX_FORM_BYTES, Refused, check_origin, path_request_id, read_form
    from mcp_approval.web.problems import Problem, answering_problems, json_object_body, problem
    from mcp_approval.web.proxies import KEEP_ALIVE_S, UntrustedForwardedFor, http_server_settings
    from mcp_approval.web.throttle import (
        FailedAuthenticationLimit,
        FailedLoginThrottle,
        TooManyFailuresError,
        bearer_caller,
        client_key,
    )

# Name -> the module that defines it, imported on first access (reading a body loads no store).
_LAZY = {
    "KEEP_ALIVE_S": "mcp_approval.web.proxies",
    "MAX_FORM_BYTES": "mcp_approval.web.forms",
    "Problem": "mcp_approval.web.problems",
    "answering_problems": "mcp_approval.web.problems",
    "json_object_body": "mcp_approval.web.problems",
    "problem": "mcp_approval.web.problems",
    "Refused": "mcp_approval.web.forms",
    "check_origin": "mcp_approval.web.forms",
    "path_request_id": "mcp_approval.web.forms",
    "read_form": "mcp_approval.web.forms",
    "BodyTooLargeError": "mcp_approval.web.bodies",
    "FailedAuthenticationLimit": "mcp_approval.web.throttle",
    "FailedLoginThrottle": "mcp_approval.web.throttle",
    "JsonBodyError": "mcp_approval.web.bodies",
    "TooManyFailuresError": "mcp_approval.web.throttle",
    "UntrustedForwardedFor": "mcp_approval.web.proxies",
    "bearer_caller": "mcp_approval.web.throttle",
    "client_key": "mcp_approval.web.throttle",
    "http_server_settings": "mcp_approval.web.proxies",
    "parse_json_body": "mcp_approval.web.bodies",
    "read_body": "mcp_approval.web.bodies",
}

__all__ = [
    "KEEP_ALIVE_S",
    "MAX_FORM_BYTES",
    "BodyTooLargeError",
    "FailedAuthenticationLimit",
    "FailedLoginThrottle",
    "JsonBodyError",
    "Problem",
    "Refused",
    "TooManyFailuresError",
    "UntrustedForwardedFor",
    "answering_problems",
    "bearer_caller",
    "check_origin",
    "client_key",
    "http_server_settings",
    "json_object_body",
    "parse_json_body",
    "path_request_id",
    "problem",
    "read_body",
    "read_form",
]

__getattr__ = lazy_getattr(__name__, _LAZY)
