"""The reviewer surface: the HTTP API and the web console over the local approval backend.

Reviewers decide requests of a :class:`~mcp_approval.backends.LocalApprovalBackend` where they
work: through the JSON API (:func:`reviewer_routes`, ``/approvals``), the console pages
(:func:`console_routes`, ``/console``) or ``mcp-approval review``. A composition mounts both with
:func:`reviewer_surface`, which gives them one limit on failed sign-ins and console sessions kept
in the store, so every worker on it shares both.

Modules: ``api`` (the reviewer API), ``console`` (the pages; ``_console_texts`` their wording;
their form guards are :mod:`mcp_approval.web.forms`, shared with e-mail links), ``views`` (what
the pages show), ``sessions`` and ``session_table`` (console sessions in memory or in the store),
``lookup`` (a request by its id or its requester's reference), ``oidc``, ``oidc_options`` and
``oidc_routes`` (sign-in with an OpenID Connect provider: the client, ``[console.oidc]``, the
routes), ``passkeys``, ``passkey_store``, ``passkey_routes`` and ``passkey_openapi`` (passkey
step-up: verification, its tables, its pages and API, their OpenAPI paths), ``limits`` (page and
body sizes, for the API and the command line alike), ``openapi_paths`` (the OpenAPI path items of
both). The limit on failed sign-ins is :class:`mcp_approval.web.FailedLoginThrottle`, shared with
``/mcp`` and ``/metrics``.

This package sits beside :mod:`mcp_approval.backends`, above it: it imports the backend
contract, the local backend and storage, never the approval engine or the composition.
"""

from typing import TYPE_CHECKING

from mcp_approval._lazy import lazy_getattr

if TYPE_CHECKING:
    from mcp_approval.reviewers.api import Authenticator, reviewer_routes
    from mcp_approval.reviewers.console import console_routes
    from mcp_approval.reviewers.openapi_paths import console_paths, reviewer_paths
    from mcp_approval.reviewers.passkeys import PasskeyRefusedError, PasskeyStepUp
    from mcp_approval.reviewers.surface import reviewer_surface

# Name -> the module that defines it, imported on first access.
_LAZY = {
    "Authenticator": "mcp_approval.reviewers.api",
    "console_paths": "mcp_approval.reviewers.openapi_paths",
    "PasskeyRefusedError": "mcp_approval.reviewers.passkeys",
    "PasskeyStepUp": "mcp_approval.reviewers.passkeys",
    "console_routes": "mcp_approval.reviewers.console",
    "reviewer_paths": "mcp_approval.reviewers.openapi_paths",
    "reviewer_routes": "mcp_approval.reviewers.api",
    "reviewer_surface": "mcp_approval.reviewers.surface",
}

__all__ = [
    "Authenticator",
    "PasskeyRefusedError",
    "PasskeyStepUp",
    "console_paths",
    "console_routes",
    "reviewer_paths",
    "reviewer_routes",
    "reviewer_surface",
]

__getattr__ = lazy_getattr(__name__, _LAZY)
