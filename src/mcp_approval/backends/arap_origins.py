"""Which URLs the ARAP backend may send its credentials to (ARAP §2.12 "URL trust", checklist item 4).

A URL is trusted when it is same-origin with the PDP metadata's ``access_request_endpoint`` or
with an explicitly allowlisted origin, and its scheme is ``https``. Plain ``http`` is accepted
only for loopback hosts and only when the deployment turned on the development switch (which
logs a WARNING once). Nothing else ever receives the bearer token.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from urllib.parse import urlsplit

from mcp_approval.errors import MCPApprovalError
from mcp_approval.hosts import is_loopback_host

__all__ = ["Origin", "OriginPolicy", "UntrustedURLError", "origin_of"]

logger = logging.getLogger("mcp_approval.backends")

Origin = tuple[str, str, int]
_DEFAULT_PORTS = {"https": 443, "http": 80}


class UntrustedURLError(MCPApprovalError, ValueError):
    """A URL the backend must not contact (wrong scheme, or an origin neither trusted nor allowlisted)."""


def origin_of(url: str) -> Origin | None:
    """``(scheme, host, port)`` of an absolute http(s) URL, or ``None``."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS or not parts.hostname:
        return None
    return scheme, parts.hostname.lower(), port or _DEFAULT_PORTS[scheme]


class OriginPolicy:
    """The trusted origins: the metadata's Access Request endpoint plus an allowlist.

    Args:
        allowed: allowlisted origins or URLs (only their origin counts).
        insecure_loopback: accept ``http`` on loopback hosts (development only; logs a WARNING).
    """

    def __init__(self, allowed: Iterable[str] = (), *, insecure_loopback: bool = False) -> None:
        self.insecure_loopback = insecure_loopback
        self._allowed: set[Origin] = set()
        for url in allowed:
            found = origin_of(url)
            if found is None:
                raise ValueError(f"not an http(s) origin: {url!r}")
            self._check_scheme(found, url)
            self._allowed.add(found)
        if insecure_loopback:
            logger.warning("ARAP dev mode: plain http is accepted for loopback Access Request Services")

    def _check_scheme(self, origin: Origin, url: str) -> None:
        scheme, host, _ = origin
        if scheme == "https":
            return
        if not (self.insecure_loopback and is_loopback_host(host)):
            raise UntrustedURLError(f"{url!r} is not https (plain http only on loopback with the dev switch)")

    def check(self, url: str, *, anchor: str | None = None) -> str:
        """``url`` if it may receive credentials: same origin as ``anchor`` or allowlisted.

        Raises:
            UntrustedURLError: it may not.
        """
        found = origin_of(url)
        if found is None:
            raise UntrustedURLError(f"{url!r} is not an absolute http(s) URL")
        self._check_scheme(found, url)
        trusted = set(self._allowed)
        anchored = origin_of(anchor) if anchor else None
        if anchored is not None:
            trusted.add(anchored)
        if found not in trusted:
            raise UntrustedURLError(f"{url!r} is neither same-origin with the Access Request endpoint nor allowlisted")
        return url

    def trusted(self, url: str, *, anchor: str | None = None) -> bool:
        """Whether :meth:`check` accepts ``url``."""
        try:
            self.check(url, anchor=anchor)
        except UntrustedURLError:
            return False
        return True
