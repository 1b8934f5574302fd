"""Why a client could not reach or use a server: typed errors naming the URL, not nested exception groups.

The SDK reports a refused credential as ``MCPError: Server returned an error response`` and a dead
server as an ``httpx`` error, each inside the task groups of the transport. :func:`mcp_client`
watches the HTTP answers of its own connection (:class:`ResponseWatch`) and turns those failures
into one exception of this hierarchy, the original one chained as ``__cause__``:

==============================  =====================================================
:class:`ServerAuthenticationError`  ``401``: no credential, or a wrong or expired one
:class:`ServerAuthorizationError`   ``403``: the credential is valid but not enough (e.g. scopes)
:class:`ServerConnectionError`      the server could not be reached, or stopped answering
==============================  =====================================================

All are :class:`ServerAccessError`, which carries ``url`` and the HTTP ``status`` (``None`` when
no answer came back).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import httpx2
from mcp.shared.exceptions import MCPError

from mcp_approval.errors import MCPApprovalError

__all__ = [
    "ResponseWatch",
    "ServerAccessError",
    "ServerAuthenticationError",
    "ServerAuthorizationError",
    "ServerConnectionError",
    "access_error",
]

_UNAUTHORIZED = 401
_FORBIDDEN = 403


class ServerAccessError(MCPApprovalError):
    """The server at ``url`` could not be reached or refused this client; ``status`` is the HTTP status, if any."""

    def __init__(self, url: str, message: str, *, status: int | None = None) -> None:
        super().__init__(f"{url}: {message}")
        self.url = url
        self.status = status


class ServerAuthenticationError(ServerAccessError):
    """The server answered ``401``: the credential is missing, wrong or expired.

    ``challenge`` is the server's ``WWW-Authenticate`` header, when it sent one.
    """

    def __init__(self, url: str, challenge: str | None) -> None:
        detail = f" ({challenge})" if challenge else ""
        super().__init__(url, f"the server refused the credential (HTTP 401){detail}", status=_UNAUTHORIZED)
        self.challenge = challenge


class ServerAuthorizationError(ServerAccessError):
    """The server answered ``403``: the credential is valid but does not allow this (e.g. missing scopes).

    ``challenge`` is the server's ``WWW-Authenticate`` header, when it sent one.
    """

    def __init__(self, url: str, challenge: str | None) -> None:
        detail = f" ({challenge})" if challenge else ""
        super().__init__(url, f"the credential does not allow this (HTTP 403){detail}", status=_FORBIDDEN)
        self.challenge = challenge


class ServerConnectionError(ServerAccessError):
    """The server could not be reached (refused, unknown host, TLS, timeout) or the connection broke."""

    def __init__(self, url: str, cause: BaseException) -> None:
        super().__init__(url, f"could not reach the server ({type(cause).__name__}: {cause})")


@dataclass(frozen=True)
class _Refusal:
    status: int
    challenge: str | None


class ResponseWatch:
    """An ``httpx`` response hook remembering the last ``401`` or ``403`` the connection received."""

    def __init__(self) -> None:
        self._refusal: _Refusal | None = None

    async def __call__(self, response: httpx2.Response) -> None:
        """Note ``response`` (install as ``event_hooks={"response": [watch]}``)."""
        if response.status_code in (_UNAUTHORIZED, _FORBIDDEN):
            self._refusal = _Refusal(response.status_code, response.headers.get("www-authenticate"))
        elif response.is_success:
            self._refusal = None  # a later success (a refreshed token, say) settles an earlier refusal

    def take(self) -> _Refusal | None:
        """The refusal seen since the last success, forgetting it."""
        refusal, self._refusal = self._refusal, None
        return refusal


def access_error(url: str, error: BaseException, watch: ResponseWatch | None) -> ServerAccessError | None:
    """The typed error for ``error`` (an exception group is searched), or ``None`` if it is none of them.

    Only the SDK's generic failures are translated (``MCPError`` and ``httpx`` transport errors):
    anything more telling inside the group (an OAuth flow's own error, say) is left as it is.
    """
    refusal = watch.take() if watch is not None else None
    leaves = list(_leaves(error))
    if not all(isinstance(leaf, (MCPError, httpx2.TransportError)) for leaf in leaves):
        return None
    if refusal is not None:
        if refusal.status == _UNAUTHORIZED:
            return ServerAuthenticationError(url, refusal.challenge)
        return ServerAuthorizationError(url, refusal.challenge)
    for leaf in leaves:
        if isinstance(leaf, httpx2.TransportError):
            return ServerConnectionError(url, leaf)
    return None


def _leaves(error: BaseException) -> Iterator[BaseException]:
    """The exceptions inside ``error``'s (nested) groups, or ``error`` itself."""
    if isinstance(error, BaseExceptionGroup):
        for inner in error.exceptions:
            yield from _leaves(inner)
    else:
        yield error
