"""A limit on failed reviewer sign-ins, per client address.

The reviewer console (``POST /console/login``) and the reviewer API (every ``/approvals`` request)
take a bearer token. Without a limit one client could try tokens as fast as the server answers.
:class:`FailedLoginThrottle` remembers each client's recent failures in a sliding window; once a
client has ``max_failures`` of them within ``window_s`` seconds it is refused, without its token
being checked, until the oldest of those failures leaves the window.

The failures are kept in an :class:`~mcp_approval.storage.EventWindow`: in memory by default, in
the store's ``rate_events`` table for ``serve`` and ``arap-server``, so that every worker on one
store counts against the same limit (N workers do not give N times the limit). While that store
cannot be reached, the throttle counts in this process's memory instead (the failures counted
there still count once the store is back): an outage must not make every authenticated endpoint,
``/mcp`` included, fail with it, nor lift the limit.

A client that has not failed costs no store access: every authenticated request asks the throttle
first, and answering each from the store would put a query on every ``/mcp`` call. The throttle
keeps in memory the keys known to have failed within the window: those that failed in this
process, and those a refresh found in the store. Only for those is the store read; any other key
may try at once. A refresh (one query listing the keys with failures in the window) runs on the
first check at least ``refresh_s`` seconds after the previous one, so a client that failed only on
other workers stays unknown here for at most ``refresh_s`` (1 s by default) after its failures
were recorded. Within that bound such a client may get one attempt per worker past the limit (more
only if sent concurrently); that attempt, if it fails, is recorded and makes the key known here. An
event window that cannot list its keys (no ``active_keys``) is read on every check instead.

One instance is meant to be shared by the console and the reviewer API of one app, so failures on
either count against both::

    throttle = FailedLoginThrottle(clock)
    routes = [*reviewer_routes(backend, authenticate, throttle=throttle),
              *console_routes(backend, authenticate, audit, clock=clock, throttle=throttle)]

Endpoints whose tokens another layer checks (the MCP endpoint, where the SDK answers 401) get the
same limit from the ASGI middleware :class:`FailedAuthenticationLimit`, which counts their 401s.

The client is the peer address of the connection (:func:`client_key`). ``X-Forwarded-For`` is not
trusted: anyone can send it, so honouring it would let a client pick a fresh key per attempt. The
servers let uvicorn replace the peer with the forwarded address only for the proxies configured in
``trusted_proxies``; behind any other proxy every client shares the proxy's address, and its limit.
"""

from __future__ import annotations

import json
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable

from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mcp_approval.clock import Clock, SystemClock
from mcp_approval.errors import MCPApprovalError
from mcp_approval.storage.database import StoreUnavailableError
from mcp_approval.storage.worker_guards import EventWindow, KeyListing, MemoryEventWindow

__all__ = [
    "DEFAULT_MAX_CLIENTS",
    "DEFAULT_MAX_FAILURES",
    "DEFAULT_REFRESH_S",
    "DEFAULT_WINDOW_S",
    "FailedAuthenticationLimit",
    "FailedLoginThrottle",
    "TooManyFailuresError",
    "bearer_caller",
    "client_key",
]

#: Failed authentications a client may make within the window before it is refused.
DEFAULT_MAX_FAILURES = 10
#: The length of the sliding window, in seconds.
DEFAULT_WINDOW_S = 300
#: The most clients tracked at once; beyond it the client whose last failure is oldest is forgotten.
DEFAULT_MAX_CLIENTS = 10_000
#: How stale this process's view of the clients that failed on other workers may get, in seconds.
DEFAULT_REFRESH_S = 1.0

logger = logging.getLogger("mcp_approval.web")


def client_key(request: Request) -> str:
    """The key a request's failures are counted under: its peer address.

    A request without a peer (some test or embedded transports) counts under ``""``, so such
    clients share one limit rather than escaping it.
    """
    return request.client.host if request.client is not None else ""


class FailedLoginThrottle:
    """Counts failed authentications per client key and says when a client must wait.

    Successes are not recorded and do not clear a client's failures: a client holding one valid
    token could otherwise interleave it with guesses to keep guessing for ever. Nor does one
    client's success or failure affect any other client.

    The failures live in ``events``: by default this process's memory; a
    :class:`~mcp_approval.storage.SqlEventWindow` on the deployment's store makes every worker
    count against one limit (``serve`` and ``arap-server`` use it). A shared window is read only
    for keys known to have failed (see the module docstring for how long another worker's
    failures may go unseen: ``refresh_s``).
    """

    def __init__(
        self,
        clock: Clock | None = None,
        *,
        max_failures: int = DEFAULT_MAX_FAILURES,
        window_s: int = DEFAULT_WINDOW_S,
        max_clients: int = DEFAULT_MAX_CLIENTS,
        events: EventWindow | None = None,
        scope: str = "auth",
        refresh_s: float = DEFAULT_REFRESH_S,
    ) -> None:
        """A throttle allowing ``max_failures`` failures per ``window_s`` seconds to each client.

        ``max_clients`` bounds the in-memory tables; ``scope`` prefixes the keys in ``events``, so
        unrelated limits can share one table; ``refresh_s`` bounds how long failures recorded in a
        shared ``events`` by other processes may go unseen here.

        Raises:
            ValueError: a limit that is not positive.
        """
        if max_failures < 1 or window_s < 1 or max_clients < 1 or refresh_s <= 0:
            raise ValueError("max_failures, window_s and max_clients must all be at least 1, and refresh_s positive")
        self._clock = clock or SystemClock()
        self._max_failures = max_failures
        self._window_ms = window_s * 1000
        self._max_clients = max_clients
        self._refresh_ms = max(1, round(refresh_s * 1000))
        self._memory = MemoryEventWindow(max_keys=max_clients, per_key=max_failures)
        self._events: EventWindow = events or self._memory
        # A shared window that lists its keys is read only for keys known to have failed.
        self._listing = events if isinstance(events, KeyListing) else None
        self._scope = scope
        # Keys with failures in the window that this process knows of -> the latest one's time.
        self._failed: OrderedDict[str, int] = OrderedDict()
        self._refreshed_at: int | None = None

    async def retry_after_s(self, key: str) -> int | None:
        """Whole seconds (at least 1) until ``key`` may try again, or ``None`` if it may try now."""
        now = self._clock.now_ms()
        since = now - self._window_ms
        scoped = self._key(key)
        if not await self._may_have_failed(scoped, now, since):
            return None
        failures = await self._recent(scoped, since)
        if len(failures) < self._max_failures:
            return None
        wait_ms = failures[-self._max_failures] + self._window_ms - now
        return max(1, -(-wait_ms // 1000))  # round up: retrying at the advertised time must succeed

    async def record_failure(self, key: str) -> None:
        """Count one failed authentication by ``key`` now (in memory while the shared store is unreachable)."""
        now = self._clock.now_ms()
        scoped = self._key(key)
        self._remember(scoped, now)
        try:
            await self._events.add(scoped, now, forget_before_ms=now - self._window_ms)
        except StoreUnavailableError:
            await self._memory.add(scoped, now, forget_before_ms=now - self._window_ms)

    async def _may_have_failed(self, key: str, now: int, since: int) -> bool:
        """Whether ``key`` has failures this process knows of (answered from memory), so the store
        must be asked how many; ``True`` always for a shared window that cannot list its keys."""
        listing = self._listing
        if listing is None:  # the memory window (as cheap to count as to ask), or one that cannot list
            return True
        if self._refreshed_at is None or now - self._refreshed_at >= self._refresh_ms:
            await self._refresh(listing, now, since)
        latest = self._failed.get(key)
        if latest is not None and latest > since:
            return True
        if latest is not None:
            del self._failed[key]  # its failures left the window
        return bool(await self._memory.recent(key, since, 1))  # counted here during an outage

    async def _refresh(self, events: KeyListing, now: int, since: int) -> None:
        """Learn the keys that failed on any worker within the window (one query)."""
        self._refreshed_at = now
        try:
            active = await events.active_keys(f"{self._scope}:", since, self._max_clients)
        except StoreUnavailableError as exc:  # keep the known keys; the next refresh tries again
            logger.debug("failed-login throttle could not refresh from the store: %s", exc)
            return
        for key, latest in active.items():
            self._remember(key, latest)

    def _remember(self, key: str, at_ms: int) -> None:
        """Note that ``key`` failed at ``at_ms`` (the least recently failing key goes when full)."""
        known = self._failed.get(key)
        if known is not None and known >= at_ms:
            return
        self._failed[key] = at_ms
        self._failed.move_to_end(key)
        if len(self._failed) > self._max_clients:
            self._failed.popitem(last=False)

    async def _recent(self, key: str, since_ms: int) -> list[int]:
        """The failures of ``key`` since ``since_ms``, oldest first: the shared ones (when reachable) and
        those counted in memory."""
        limit = self._max_failures
        remembered = await self._memory.recent(key, since_ms, limit)
        if self._events is self._memory:
            return remembered
        try:
            shared = await self._events.recent(key, since_ms, limit)
        except StoreUnavailableError:
            shared = []
        return sorted([*shared, *remembered])

    def tracked_clients(self) -> int:
        """How many client keys the in-memory table holds (never more than ``max_clients``; 0 for a shared table)."""
        events = self._events
        return events.tracked_keys() if isinstance(events, MemoryEventWindow) else 0

    def _key(self, key: str) -> str:
        return f"{self._scope}:{key}"


class TooManyFailuresError(MCPApprovalError):
    """The client is over its limit of failed authentications: its token was not checked."""

    def __init__(self, retry_after_s: int) -> None:
        super().__init__(f"too many failed authentications; retry after {retry_after_s} s")
        #: Whole seconds until the client may try again (the ``Retry-After`` to answer).
        self.retry_after_s = retry_after_s


async def bearer_caller(
    request: Request, throttle: FailedLoginThrottle, authenticate: Callable[[str], Awaitable[str | None]]
) -> str | None:
    """Who the request's bearer token names, or ``None``: a missing or wrong token, counted as a failure.

    The limit is checked before the token, so a throttled client learns nothing about the tokens it
    sends. Endpoints that read their own ``Authorization`` header share this one order of checks.

    Raises:
        TooManyFailuresError: the client's address is over its limit.
    """
    client = client_key(request)
    wait_s = await throttle.retry_after_s(client)
    if wait_s is not None:
        raise TooManyFailuresError(wait_s)
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    token = token.strip()
    caller = await authenticate(token) if scheme.lower() == "bearer" and token else None
    if caller is None:
        await throttle.record_failure(client)
    return caller


class FailedAuthenticationLimit:
    """ASGI middleware: ``throttle`` applied to the requests under ``path`` whose token ``app`` checks.

    Every ``401`` answered under ``path`` counts as a failure of the client's address; a client over
    the limit is answered ``429`` with ``Retry-After`` before ``app`` (and its token check) runs.
    Other paths pass through untouched.
    """

    def __init__(self, app: ASGIApp, *, throttle: FailedLoginThrottle, path: str = "/mcp") -> None:
        self.app = app
        self.throttle = throttle
        self.path = path

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Refuse a throttled client, else pass the request on and count a 401 answer."""
        if scope["type"] != "http" or not _under(scope["path"], self.path):
            await self.app(scope, receive, send)
            return
        client = client_key(Request(scope))
        wait_s = await self.throttle.retry_after_s(client)
        if wait_s is not None:
            await _too_many(send, wait_s)
            return

        async def counting(message: Message) -> None:
            if message["type"] == "http.response.start" and message["status"] == 401:
                await self.throttle.record_failure(client)
            await send(message)

        await self.app(scope, receive, counting)


def _under(path: str, prefix: str) -> bool:
    return path == prefix or path.startswith(prefix.rstrip("/") + "/")


async def _too_many(send: Send, wait_s: int) -> None:
    body = json.dumps(
        {"error": "too_many_requests", "error_description": "too many failed authentications from this address"}
    ).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"retry-after", str(wait_s).encode()),
    ]
    await send({"type": "http.response.start", "status": 429, "headers": headers})
    await send({"type": "http.response.body", "body": body})
