"""How the servers run under uvicorn and behind proxies: which forwarded addresses to believe.

A per-address limit (:mod:`mcp_approval.web.throttle`) is only as good as the address it counts
under. uvicorn replaces the peer with the ``X-Forwarded-For`` address only for the proxies
:func:`proxy_header_settings` names; an app served by some other runner is guarded by
:class:`UntrustedForwardedFor`. :func:`http_server_settings` is what every server of the package
runs with.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = [
    "KEEP_ALIVE_S",
    "UNTRUSTED_FORWARDED_PEER",
    "UntrustedForwardedFor",
    "http_server_settings",
    "proxy_header_settings",
]


def proxy_header_settings(trusted_proxies: Sequence[str]) -> dict[str, Any]:
    """uvicorn settings that honour ``X-Forwarded-*`` headers only from ``trusted_proxies``.

    uvicorn's own default trusts them from loopback, so any local client could name any address
    (and escape a per-address limit); with no trusted proxies the headers are ignored.
    """
    if not trusted_proxies:
        return {"proxy_headers": False}
    return {"proxy_headers": True, "forwarded_allow_ips": list(trusted_proxies)}


#: Seconds an idle HTTP connection stays open on the server's side. Longer than clients keep theirs
#: (httpx: 5 s, the same as uvicorn's default): a server closing an idle connection at the moment a
#: client reuses it makes that request fail ("server disconnected without sending a response"), and
#: a client that closes first never meets that race.
KEEP_ALIVE_S: Final = 30


def http_server_settings(trusted_proxies: Sequence[str]) -> dict[str, Any]:
    """The uvicorn settings every server of this package runs with: proxy headers, :data:`KEEP_ALIVE_S`,
    and no WebSocket protocol (nothing here speaks it, and loading one costs every start)."""
    return {**proxy_header_settings(trusted_proxies), "timeout_keep_alive": KEEP_ALIVE_S, "ws": "none"}


#: The client address of every request that carries an ``X-Forwarded-For`` the app does not trust.
UNTRUSTED_FORWARDED_PEER: Final = "untrusted-forwarded"


class UntrustedForwardedFor:
    """ASGI middleware: with no trusted proxies, a request naming its own client is not believed.

    An app may be served by a runner that honours ``X-Forwarded-For`` on its own (uvicorn's
    default trusts it from loopback), by which time the peer address is gone. So every request
    carrying the header is counted under one address, :data:`UNTRUSTED_FORWARDED_PEER`: a client
    cannot pick a fresh address per failed attempt, nor lock out an address it names. Behind a
    proxy that is not configured, its clients share one limit, as they share the proxy's address.
    With ``trusted_proxies`` the runner is trusted to have applied them (:func:`proxy_header_settings`).
    """

    def __init__(self, app: ASGIApp, *, trusted_proxies: Sequence[str]) -> None:
        self.app = app
        self.trusting = bool(trusted_proxies)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass the request on, its client replaced when it names one the app does not trust."""
        if not self.trusting and scope["type"] in ("http", "websocket") and _forwarded(scope):
            scope = {**scope, "client": (UNTRUSTED_FORWARDED_PEER, 0)}
        await self.app(scope, receive, send)


def _forwarded(scope: Scope) -> bool:
    return any(name.lower() in (b"x-forwarded-for", b"forwarded") for name, _ in scope.get("headers") or ())
