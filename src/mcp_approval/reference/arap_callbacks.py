"""ARAP callback notifications from the reference ARS (ARAP Callback profile).

A submission may name ``callback.endpoint``; it is accepted only when it is a well-formed URL (no
user info, a valid port, no fragment), its origin is on the
configured allowlist, it is ``https`` (``http`` only on loopback in dev mode), and it does not
target a loopback, link-local or private address unless dev mode is on (SSRF). Host names are
not resolved: an allowlisted name is trusted to be what the operator meant.

When a task ends (approved, denied, cancelled or expired), the ARS POSTs
``{state, task: {id, status, status_endpoint}}`` (no ``result``: a notification only, the PEP
fetches the status) signed with ``X-Approval-Signature: t=<unix s>,v1=<hex HMAC-SHA256 over
"<t>.<body>">`` (the scheme of :func:`mcp_approval.backends.callbacks.sign_callback`). The
callback is owed durably, in the transaction that ends the task, and delivered with backoff by
:mod:`mcp_approval.reference.ars_outbox`, also after a restart; a PEP still polls as a backstop.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

from mcp_approval.hosts import callback_url_problem, is_loopback_host

__all__ = ["callback_problem", "origin"]


def origin(url: str) -> str:
    """``scheme://host[:port]`` of ``url``, lower-cased, default ports dropped."""
    parts = urlsplit(url)
    scheme, host = parts.scheme.lower(), (parts.hostname or "").lower()
    port = parts.port
    default = {"https": 443, "http": 80}.get(scheme)
    netloc = f"[{host}]" if ":" in host else host
    return f"{scheme}://{netloc}" + (f":{port}" if port is not None and port != default else "")


def _internal(host: str) -> bool:
    if is_loopback_host(host):
        return True
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return address.is_private or address.is_link_local or address.is_reserved or address.is_unspecified


def callback_problem(endpoint: Any, allowlist: Sequence[str], *, dev_mode: bool) -> str | None:
    """Why ``endpoint`` may not receive callbacks, or ``None`` when it may."""
    if not isinstance(endpoint, str):
        return "callback.endpoint must be a URL string"
    malformed = callback_url_problem(endpoint)
    if malformed is not None:
        return f"callback.endpoint {malformed}"
    parts = urlsplit(endpoint)
    host = parts.hostname or ""
    if parts.scheme == "http" and not (dev_mode and is_loopback_host(host)):
        return "callback.endpoint must use https (http only to loopback in dev mode)"
    if _internal(host) and not dev_mode:
        return "callback.endpoint targets a loopback, link-local or private address"
    if origin(endpoint) not in {origin(entry) for entry in allowlist}:
        return "callback.endpoint is not on this service's callback allowlist"
    return None
